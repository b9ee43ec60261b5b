
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target of src/pa_prom.c (make fuzz-prom): any bytes as an
 * engine's /metrics page.  The page read whole and read in cuts of the
 * size its first byte gives must say the same; every value taken must be
 * in its range; the parse's steps must be its bytes and at most
 * PA_PROM_SCALE_MAX a byte more (a number costs its bytes, not what its
 * exponent says: "0e-9999" once took 9999 steps); and (ASan) nothing is
 * read past the input.  fuzz.mk gives each input a second at most, and
 * inputs of up to 1 MB.
 */


#include <stdlib.h>
#include <string.h>

#include "pa_prom.h"


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);


int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    size_t          cut, at, n;
    unsigned        seen, i;
    pa_prom_t      *whole, *cuts;
    unsigned char  *copy;

    if (size == 0) {
        return 0;
    }

    cut = data[0] + 1;
    data++;
    size--;

    /* a copy of the exact size, so that ASan sees a read past its end */

    copy = malloc(size ? size : 1);
    whole = malloc(sizeof(pa_prom_t));
    cuts = malloc(sizeof(pa_prom_t));

    if (copy == NULL || whole == NULL || cuts == NULL) {
        abort();
    }

    memcpy(copy, data, size);

    pa_prom_init(whole);
    pa_prom_feed(whole, copy, size);
    seen = pa_prom_finish(whole);

    pa_prom_init(cuts);

    for (at = 0; at < size; at += n) {
        n = size - at < cut ? size - at : cut;
        pa_prom_feed(cuts, copy + at, n);
    }

    if (pa_prom_finish(cuts) != seen
        || cuts->lines != whole->lines
        || cuts->rejected != whole->rejected
        || cuts->longs != whole->longs
        || cuts->clamped != whole->clamped
        || cuts->work != whole->work)
    {
        abort();
    }

    if (whole->work > (uint64_t) size * (1 + PA_PROM_SCALE_MAX)) {
        abort();
    }

    for (i = 0; i < PA_PROM_NFIELDS; i++) {
        if (!(seen & (1u << i))) {
            continue;
        }

        if (cuts->value[i] != whole->value[i] || !(whole->value[i] >= 0)) {
            abort();
        }
    }

    if ((seen & (1u << PA_PROM_USAGE)) && whole->value[PA_PROM_USAGE] > 1) {
        abort();
    }

    /* sums over series within one series' bounds */

    if (whole->value[PA_PROM_WAITING] > PA_PROM_COUNT_MAX
        || whole->value[PA_PROM_RUNNING] > PA_PROM_COUNT_MAX
        || whole->value[PA_PROM_CAPACITY] > PA_PROM_CAPACITY_MAX)
    {
        abort();
    }

    if ((seen & (1u << PA_PROM_CAPACITY))
        && whole->value[PA_PROM_CAPACITY] < PA_PROM_CAPACITY_MIN)
    {
        abort();
    }

    free(copy);
    free(whole);
    free(cuts);

    return 0;
}
