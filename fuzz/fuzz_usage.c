
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target of src/pa_usage.c (make fuzz-usage): any bytes as an
 * engine's answer.  The answer read whole and read in cuts of the size
 * its first byte gives must say the same; a value taken is at most
 * PA_USAGE_MAX; and (ASan) nothing is read past the input.
 */


#include <stdlib.h>
#include <string.h>

#include "pa_usage.h"


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);


int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    int             rc1, rc2;
    size_t          cut, at, n;
    uint64_t        t1, t2;
    pa_usage_t      whole, cuts;
    unsigned char  *copy;

    if (size == 0) {
        return 0;
    }

    cut = data[0] + 1;
    data++;
    size--;

    /* a copy of the exact size, so that ASan sees a read past its end */

    copy = malloc(size ? size : 1);
    if (copy == NULL) {
        abort();
    }

    memcpy(copy, data, size);

    pa_usage_init(&whole);
    pa_usage_feed(&whole, copy, size);

    pa_usage_init(&cuts);

    for (at = 0; at < size; at += n) {
        n = size - at < cut ? size - at : cut;
        pa_usage_feed(&cuts, copy + at, n);
    }

    t1 = 0;
    t2 = 0;
    rc1 = pa_usage_finish(&whole, &t1);
    rc2 = pa_usage_finish(&cuts, &t2);

    if (rc1 != rc2 || t1 != t2 || whole.seen != cuts.seen
        || whole.rejected != cuts.rejected || t1 > PA_USAGE_MAX)
    {
        abort();
    }

    free(copy);

    return 0;
}
