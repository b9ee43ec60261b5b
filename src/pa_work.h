
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The work in flight on a server with what its engine reports
 * (load=engine): the requests the engine runs and queues beyond those
 * the hosts know of, each at the mean work of the known ones ("unit"
 * where none is known), added to the hosts' own work.  The engine's
 * share saturates: a report of 10^7 requests (PA_PROM_COUNT_MAX) on a
 * server whose mean request is large wraps no 64-bit product, and the
 * sum never passes PA_WORK_MAX (2^40 units, far above any real load),
 * so that the sums over up to 2^16 servers (pa_choose.c) cannot wrap
 * either.  The report counts while it is at most two intervals old, an
 * age taken without wrapping (pa_time.h).  Plain C, no nginx headers.
 */


#ifndef _PA_WORK_H_INCLUDED_
#define _PA_WORK_H_INCLUDED_


#include <stdint.h>

#include "pa_time.h"


#define PA_WORK_MAX  ((uint64_t) 1 << 40)


/* a x b, UINT64_MAX where it would wrap */

static inline uint64_t
pa_mul_sat(uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a) {
        return UINT64_MAX;
    }

    return a * b;
}


/*
 * whether an engine's report stored at "reported" (0: never) still
 * counts at "now": at most two intervals old, and never wrapped into an
 * age of 2^64 - 3 when another worker's cached clock stored it a few
 * milliseconds ahead of this one's
 */

static inline int
pa_work_fresh(uint64_t now, uint64_t reported, uint64_t interval)
{
    return reported != 0 && !pa_older(now, reported, 2 * interval);
}


/*
 * "work" of "known" requests in flight, and an engine that reports "n":
 * the n - known others at the mean work of the known, "unit" each where
 * none is known; the engine's share at most up to PA_WORK_MAX
 */

static inline uint64_t
pa_work_engine(uint64_t work, uint64_t known, uint64_t n, uint64_t unit)
{
    uint64_t  more, room;

    if (n <= known) {
        return work;
    }

    more = pa_mul_sat(n - known, known ? work / known : unit);
    room = (work < PA_WORK_MAX) ? PA_WORK_MAX - work : 0;

    return work + (more < room ? more : room);
}


#endif /* _PA_WORK_H_INCLUDED_ */
