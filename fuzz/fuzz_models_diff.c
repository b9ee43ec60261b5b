
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target (make fuzz-models-diff): the streaming /v1/models
 * scanner of src/pa_models.c, fed in pieces of 1 to 16 bytes, against the
 * recursive-descent reader of whole answers it replaced (from git,
 * FUZZ_MODELS_REF, its functions renamed ref_*): both must accept the
 * same answers and give the same ids in the same order, and the same
 * count of skipped elements.
 */


#include <stdlib.h>
#include <string.h>

#include "pa_models.h"


int ref_models_parse(const unsigned char *p, size_t n, pa_models_id_pt id,
    void *ctx, size_t *skipped);


typedef struct {
    int       n;
    uint64_t  sum;
} fuzz_ctx_t;


static void
fuzz_id(void *ctx, const unsigned char *id, size_t len)
{
    fuzz_ctx_t  *f = ctx;

    f->sum = f->sum * 31 + pa_models_hash(id, len);
    f->n++;
}


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);


int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    int               rc, ref;
    size_t            skipped, ref_skipped, off, n;
    fuzz_ctx_t        f, r;
    pa_models_scan_t  s;

    memset(&r, 0, sizeof(fuzz_ctx_t));
    ref = ref_models_parse(data, size, fuzz_id, &r, &ref_skipped);

    memset(&f, 0, sizeof(fuzz_ctx_t));
    pa_models_init(&s, fuzz_id, &f);

    for (off = 0; off < size; off += n) {
        n = 1 + (data[off] + off) % 16;

        if (n > size - off) {
            n = size - off;
        }

        if (pa_models_feed(&s, data + off, n) != 0) {
            break;
        }
    }

    rc = pa_models_finish(&s, &skipped);

    if (rc != ref) {
        abort();
    }

    if (rc >= 0 && (f.n != r.n || f.sum != r.sum || skipped != ref_skipped))
    {
        abort();
    }

    return 0;
}
