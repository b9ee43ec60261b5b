
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The choice of routing v2: the server that holds the longest part of
 * the request's prefix (src/pa_index.h), under two bounds: an absolute
 * cap on requests in flight and a relative bound on work in flight, as
 * in consistent hashing with bounded loads but counting work.  A cold
 * prefix goes to its ring home (or the next within bounds) or to the
 * server with the least work.  Plain C, no nginx headers.
 *
 * Work is an estimate in units (bytes or characters): a request counts
 * its uncached prefill, the prompt's units past the blocks matched on the
 * server (none past the key where the match reaches the key's end: the
 * rest of the prompt is held with it), plus a share for its decode.
 */


#ifndef _PA_CHOOSE_H_INCLUDED_
#define _PA_CHOOSE_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "pa_ring.h"


typedef enum {
    PA_CHOICE_NONE = 0,           /* nothing usable */
    PA_CHOICE_MATCH,              /* the deepest match within the bounds */
    PA_CHOICE_COLD,               /* no match anywhere, placed cold */
    PA_CHOICE_SPILL,              /* matches all over a bound, placed cold */
    PA_CHOICE_LEAST               /* every server over a bound */
} pa_choice_e;


typedef enum {
    PA_COLD_RING = 0,             /* the ring walk within the bounds */
    PA_COLD_LEAST,                /* the least work within the bounds */
    PA_COLD_AUTO,                 /* the ring if nobody holds a block of
                                     the prefix, else the least work */
    PA_COLD_TWO                   /* of the first two servers within the
                                     bounds on the ring, the least work */
} pa_cold_e;


typedef enum {
    PA_PLACE_DEEPEST = 0,         /* the deepest match within the bounds */
    PA_PLACE_COST                 /* the least work after the request */
} pa_place_e;


typedef enum {
    PA_CAP_HARD = 0,              /* never over "threshold" */
    PA_CAP_SAVED,                 /* a match saving over "slack" may go
                                     over it (up to twice) */
    PA_CAP_COST                   /* a match: once over it for each time
                                     it saves its own prefill */
} pa_cap_e;


/* a server's load, as the probe reads it */
typedef struct {
    uint64_t            work;         /* work in flight, units */
    uint64_t            inflight;     /* requests in flight */
    uint64_t            id_hash;      /* same on every host: breaks ties */
    uint32_t            weight;       /* 0 counts as 1 */
} pa_load_t;


/* returns PA_SERVER_USABLE or PA_SERVER_UNUSABLE, fills "load" */
typedef int (*pa_load_probe_pt)(void *ctx, uint32_t server,
    pa_load_t *load);


typedef struct {
    /* the request */
    uint64_t            key;          /* ring key of its prefix */
    uint64_t            units;        /* its prefix length in units */
    uint64_t            total_units;  /* its prompt's, 0: "units"; more
                                         than "units" where "length" cut
                                         the key */
    uint64_t            decode;       /* work counted past the prefill */
    uint32_t            block_units;
    uint32_t            nfound;       /* servers in "found" */
    const uint32_t     *depth;        /* per server, pa_index_match() */
    const uint32_t     *found;        /* the servers of depth > 0 */

    /* the servers */
    uint32_t            nservers;
    uint32_t            balance;      /* F x 100, 0: no relative bound */
    uint32_t            match;        /* % of units a match must cover */
    uint64_t            slack;        /* work over the bound, a match;
                                         or the prefill it saves, if more */
    uint64_t            threshold;    /* requests in flight, 0: no cap */
    pa_cap_e            cap;          /* past "threshold", a match */
    pa_cold_e           cold;
    pa_place_e          place;
    unsigned            holder:1;     /* overload=holder */
    const pa_ring_t    *ring;         /* PA_COLD_RING; NULL: least work */

    /*
     * work in flight, weight and requests in flight summed over the usable
     * servers, if the caller keeps them ("totals" set); else they are
     * summed here, a probe of every server
     */
    unsigned            totals:1;
    uint64_t            total_work;
    uint64_t            total_weight;
    uint64_t            total_inflight;

    pa_load_probe_pt    probe;
    void               *ctx;
    unsigned char      *seen;         /* (nservers + 7) / 8 bytes */
} pa_choose_in_t;


typedef struct {
    uint32_t            server;
    uint32_t            depth;        /* blocks matched on it */
    uint64_t            cost;         /* the request's work on it */
    pa_choice_e         kind;
} pa_choice_t;


/* returns 0, or -1 if no server is usable (kind PA_CHOICE_NONE) */
int pa_choose(const pa_choose_in_t *in, pa_choice_t *out);

/* the work of a request of "units" with "depth" blocks already cached */
uint64_t pa_choose_cost(uint64_t units, uint32_t depth,
    uint32_t block_units, uint64_t decode);

/*
 * 1 if a server holding "depth" blocks of a key of "units" holds the
 * prompt's text past the key too (its "total" units): the key was cut
 * short of the prompt and the match reaches its last whole block
 */
int pa_choose_holds_past(uint64_t units, uint64_t total, uint32_t depth,
    uint32_t block_units);

const char *pa_choice_name(pa_choice_e kind);


#endif /* _PA_CHOOSE_H_INCLUDED_ */
