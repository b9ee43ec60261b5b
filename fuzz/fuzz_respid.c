
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target of src/pa_respid.c and src/pa_store.c (make
 * fuzz-respid): any bytes as an engine's answer to POST /v1/responses.
 * The answer read whole and read in cuts of the size its first byte
 * gives must say the same; an id taken is 1 to PA_RESPID_MAX printable
 * ASCII bytes; (ASan) nothing is read past the input.  The id, and every
 * 8 bytes of the input as ids, go into a small table that must find the
 * last ones put and hold no more than its places.
 */


#include <stdlib.h>
#include <string.h>

#include "pa_respid.h"
#include "pa_store.h"


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);


int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    size_t          cut, at, n, i;
    uint64_t        id, last;
    pa_store_t     *t;
    pa_respid_t     whole, cuts;
    unsigned char  *copy;
    pa_respid_rc_e  rc1, rc2;
    uint64_t        mem[(sizeof(pa_store_t) + 32 * 24 + 32 * 4) / 8 + 2];

    if (size == 0) {
        return 0;
    }

    cut = data[0] + 1;
    data++;
    size--;

    /* a copy of the exact size, so that ASan sees a read past its end */

    copy = malloc(size ? size : 1);
    if (copy == NULL) {
        return 0;
    }

    memcpy(copy, data, size);

    pa_respid_init(&whole);
    (void) pa_respid_feed(&whole, copy, size);
    rc1 = pa_respid_finish(&whole);

    pa_respid_init(&cuts);

    for (at = 0; at < size; at += n) {
        n = (size - at < cut) ? size - at : cut;
        (void) pa_respid_feed(&cuts, copy + at, n);
    }

    rc2 = pa_respid_finish(&cuts);

    if (rc1 != rc2) {
        abort();
    }

    if (rc1 == PA_RESPID_FOUND) {
        if (whole.len == 0 || whole.len > PA_RESPID_MAX
            || whole.len != cuts.len
            || memcmp(whole.id, cuts.id, whole.len) != 0)
        {
            abort();
        }

        for (i = 0; i < whole.len; i++) {
            if (whole.id[i] < 0x21 || whole.id[i] > 0x7e) {
                abort();
            }
        }
    }

    if (sizeof(mem) < pa_store_size(32)) {
        abort();
    }

    t = pa_store_init(mem, 32);

    if (t == NULL) {
        abort();
    }

    last = 0;

    for (at = 0; at + 8 <= size; at += 8) {
        memcpy(&id, copy + at, 8);
        (void) pa_store_put(t, id, at + 1);

        if (id && pa_store_get(t, id) != at + 1) {
            abort();
        }

        last = id;
    }

    if (rc1 == PA_RESPID_FOUND) {
        id = pa_store_hash(whole.id, whole.len);
        (void) pa_store_put(t, id, 1);

        if (pa_store_get(t, id) != 1) {
            abort();
        }
    }

    if (t->size > 32 || (last && rc1 != PA_RESPID_FOUND
                         && pa_store_get(t, last) == 0))
    {
        abort();
    }

    free(copy);

    return 0;
}
