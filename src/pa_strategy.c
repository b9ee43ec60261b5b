
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Weighted random choice among usable servers.  Plain C, no nginx headers.
 */


#include <stddef.h>
#include <stdint.h>

#include "pa_strategy.h"


uint64_t
pa_random_next(uint64_t *state)
{
    uint64_t  z;

    /* splitmix64 (Steele, Lea, Flood 2014) */

    *state += 0x9e3779b97f4a7c15ULL;

    z = *state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}


int
pa_random_pick(uint32_t nservers, const uint32_t *weights,
    uint64_t threshold, uint64_t *state, pa_server_probe_pt probe,
    void *ctx, pa_pick_t *pick)
{
    int        rc, usable;
    uint32_t   s;
    uint64_t   inflight, w, total;

    pick->server = 0;
    pick->route = PA_ROUTE_NONE;
    pick->inflight = 0;
    pick->first_inflight = 0;
    pick->first_usable = 0;

    usable = 0;
    total = 0;

    /*
     * the k-th eligible server replaces the one kept so far with the
     * probability of its weight over the weights met so far: each ends
     * chosen with the probability of its weight over all of them
     */

    for (s = 0; s < nservers; s++) {

        inflight = 0;
        rc = probe(ctx, s, &inflight);

        if (rc != PA_SERVER_USABLE) {
            continue;
        }

        usable = 1;

        if (inflight >= threshold) {
            continue;
        }

        w = (weights == NULL || weights[s] == 0) ? 1 : weights[s];
        total += w;

        if (pa_random_next(state) % total < w) {
            pick->server = s;
            pick->inflight = inflight;
        }
    }

    if (total) {
        pick->route = PA_ROUTE_NO_KEY;
        return 0;
    }

    return usable ? 1 : -1;
}
