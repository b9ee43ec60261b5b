
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target of src/pa_models.c (make fuzz-models): any bytes as a
 * /v1/models answer.  Checks that every id given is 1 to
 * PA_MODELS_ID_MAX bytes, that the count returned is the number given,
 * and (ASan) that nothing is read past the input.
 */


#include <stdlib.h>
#include <string.h>

#include "pa_models.h"


typedef struct {
    int  n;
} fuzz_ctx_t;


static void
fuzz_id(void *ctx, const unsigned char *id, size_t len)
{
    fuzz_ctx_t  *f = ctx;

    if (len == 0 || len > PA_MODELS_ID_MAX) {
        abort();
    }

    (void) pa_models_hash(id, len);
    f->n++;
}


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);


int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    int             rc;
    size_t          skipped;
    fuzz_ctx_t      f;
    unsigned char  *copy;

    /* a copy of the exact size, so that ASan sees a read past its end */

    copy = malloc(size ? size : 1);
    if (copy == NULL) {
        return 0;
    }

    memcpy(copy, data, size);

    f.n = 0;
    rc = pa_models_parse(copy, size, fuzz_id, &f, &skipped);

    if (rc >= 0 && rc != f.n) {
        abort();
    }

    free(copy);

    return 0;
}
