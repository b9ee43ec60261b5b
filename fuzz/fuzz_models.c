
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target of src/pa_models.c (make fuzz-models): any bytes as a
 * /v1/models answer, read whole and again in pieces of 1 to 16 bytes (cut
 * where the input's own bytes say), as the poller reads an answer that
 * arrives in packets.  Checks that both give the same result, the same
 * ids in the same order and the same count of skipped elements; that
 * every id given is 1 to PA_MODELS_ID_MAX bytes; that the count returned
 * is the number given; and (ASan) that nothing is read past the input or
 * past a piece.
 */


#include <stdlib.h>
#include <string.h>

#include "pa_models.h"


typedef struct {
    int       n;
    uint64_t  sum;
} fuzz_ctx_t;


static void
fuzz_id(void *ctx, const unsigned char *id, size_t len)
{
    fuzz_ctx_t  *f = ctx;

    if (len == 0 || len > PA_MODELS_ID_MAX) {
        abort();
    }

    /* the ids and their order */
    f->sum = f->sum * 31 + pa_models_hash(id, len);
    f->n++;
}


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);


int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    int               rc, rc2;
    size_t            skipped, skipped2, off, n;
    fuzz_ctx_t        f, f2;
    unsigned char    *copy, *piece;
    pa_models_scan_t  s;

    /* a copy of the exact size, so that ASan sees a read past its end */

    copy = malloc(size ? size : 1);
    if (copy == NULL) {
        return 0;
    }

    memcpy(copy, data, size);

    memset(&f, 0, sizeof(fuzz_ctx_t));
    rc = pa_models_parse(copy, size, fuzz_id, &f, &skipped);

    if (rc >= 0 && rc != f.n) {
        abort();
    }

    /* in pieces, each in its own allocation */

    memset(&f2, 0, sizeof(fuzz_ctx_t));
    pa_models_init(&s, fuzz_id, &f2);

    for (off = 0; off < size; off += n) {
        n = 1 + (data[off] + off) % 16;

        if (n > size - off) {
            n = size - off;
        }

        piece = malloc(n);
        if (piece == NULL) {
            abort();
        }

        memcpy(piece, data + off, n);

        if (pa_models_feed(&s, piece, n) != 0) {
            free(piece);
            break;
        }

        free(piece);
    }

    rc2 = pa_models_finish(&s, &skipped2);

    if (rc2 != rc || (rc >= 0 && (f2.n != f.n || f2.sum != f.sum
                                  || skipped2 != skipped)))
    {
        abort();
    }

    free(copy);

    return 0;
}
