
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Strategies other than prefix routing: weighted random among usable
 * servers below threshold.  Plain C, no nginx headers.
 */


#ifndef _PA_STRATEGY_H_INCLUDED_
#define _PA_STRATEGY_H_INCLUDED_


#include <stdint.h>

#include "pa_ring.h"


/* the next number of a splitmix64 generator; any state is a valid one */
uint64_t pa_random_next(uint64_t *state);

/*
 * a usable server with fewer than "threshold" in flight, chosen at random
 * with a probability proportional to its weight ("weights" may be NULL:
 * all equal; a weight of 0 counts as 1), in one pass that probes each
 * server once (weighted reservoir sampling).  Returns 0 with the pick,
 * 1 if there are usable servers but every one has "threshold" or more in
 * flight (the caller falls back to the least loaded), -1 if none is
 * usable.  pick->route is PA_ROUTE_NO_KEY: the caller sets it.
 */
int pa_random_pick(uint32_t nservers, const uint32_t *weights,
    uint64_t threshold, uint64_t *state, pa_server_probe_pt probe,
    void *ctx, pa_pick_t *pick);


#endif /* _PA_STRATEGY_H_INCLUDED_ */
