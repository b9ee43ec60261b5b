
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Ages of times in milliseconds that two processes took from their own
 * cached clocks (nginx's ngx_current_msec is per worker, updated once an
 * event loop turn): a time stored by a worker a few milliseconds ahead
 * of the reader is in the reader's future, and "now - then" computed
 * unsigned wraps to an age of 584 million years.  An age is never less
 * than 0.  Plain C, no nginx headers.
 */


#ifndef _PA_TIME_H_INCLUDED_
#define _PA_TIME_H_INCLUDED_


#include <stdint.h>


/* now - then, 0 when "then" is in the future (by less than 2^63 ms) */

static inline uint64_t
pa_age(uint64_t now, uint64_t then)
{
    return ((int64_t) (now - then) > 0) ? now - then : 0;
}


/* whether "then" is more than "hold" before "now" */

static inline int
pa_older(uint64_t now, uint64_t then, uint64_t hold)
{
    return pa_age(now, then) > hold;
}


#endif /* _PA_TIME_H_INCLUDED_ */
