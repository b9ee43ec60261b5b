
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The consistent-hash ring with bounded loads.  Plain C, no nginx headers.
 */


#ifndef _PA_RING_H_INCLUDED_
#define _PA_RING_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define PA_RING_POINTS_PER_WEIGHT  160


typedef struct {
    uint64_t        hash;
    uint32_t        server;
} pa_ring_point_t;


typedef struct {
    pa_ring_point_t *points;
    uint32_t         npoints;
    uint32_t         nservers;
} pa_ring_t;


typedef struct {
    const unsigned char *name;    /* stable identity, e.g. "10.0.0.1:8000" */
    size_t               len;
    uint32_t             weight;
} pa_ring_server_t;


/* per-server state the walk needs, filled by the caller */
typedef enum {
    PA_SERVER_USABLE = 0,
    PA_SERVER_UNUSABLE,           /* down, failed, tried or at max_conns */
    PA_SERVER_ABSENT              /* not a candidate for this request (not
                                     in its model's set): passed over as if
                                     it were not on the ring */
} pa_server_state_e;


typedef int (*pa_server_probe_pt)(void *ctx, uint32_t server,
    uint64_t *inflight);


typedef enum {
    PA_ROUTE_NONE = 0,            /* nothing usable */
    PA_ROUTE_AFFINITY,            /* first server on the ring from the key */
    PA_ROUTE_SPILL,               /* a busier one was passed over */
    PA_ROUTE_FAILOVER,            /* an unusable one was passed over */
    PA_ROUTE_NO_KEY,              /* least loaded, there was no key */
    PA_ROUTE_STATE                /* the server of a stored response */
} pa_route_e;

#define PA_ROUTE_N  (PA_ROUTE_STATE + 1)


typedef struct {
    uint32_t        server;
    pa_route_e      route;
    uint64_t        inflight;         /* in flight on it when probed */
    uint64_t        first_inflight;   /* in flight on the first choice */
    uint32_t        first_usable;     /* 1 if the first choice was usable */
} pa_pick_t;


/* number of points pa_ring_build() needs */
size_t pa_ring_points(const pa_ring_server_t *servers, uint32_t n);

/*
 * fills "points" (pa_ring_points() of them), sorts them; returns 0, or -1
 * if there are no servers, a weight is 0 or the points overflow uint32_t
 */
int pa_ring_build(pa_ring_t *ring, pa_ring_point_t *points,
    const pa_ring_server_t *servers, uint32_t n);

/* index of the first point whose hash is >= "hash", wrapping around */
uint32_t pa_ring_find(const pa_ring_t *ring, uint64_t hash);

/*
 * the bounded-load walk: from the key's point, the first distinct usable
 * server with fewer than "threshold" requests in flight; if none, the
 * usable server with the fewest in flight, ties broken by ring order.
 * "seen" is scratch of (nservers + 7) / 8 bytes.  "probe" returns
 * PA_SERVER_USABLE or PA_SERVER_UNUSABLE and the server's in-flight count.
 */
int pa_ring_pick(const pa_ring_t *ring, uint64_t hash, uint64_t threshold,
    pa_server_probe_pt probe, void *ctx, unsigned char *seen,
    pa_pick_t *pick);

/*
 * no key: the usable server with the fewest in flight per weight, compared
 * as in least_conn without division; "weights" may be NULL (all equal),
 * a weight of 0 counts as 1.  the walk starts at "start" (mod nservers).
 * ties: with "current" NULL the first met from "start" wins, so a caller
 * that rotates "start" rotates them; else "current" (nservers entries,
 * zeroed once, kept by the caller) is nginx's smooth weighted round robin
 * among the tied servers, as least_conn breaks its ties, so idle servers
 * share requests by weight.  with "current", servers tied at the first
 * pass are probed a second time.
 */
int pa_least_loaded(uint32_t nservers, uint32_t start,
    const uint32_t *weights, int64_t *current, pa_server_probe_pt probe,
    void *ctx, pa_pick_t *pick);

const char *pa_route_name(pa_route_e route);


#endif /* _PA_RING_H_INCLUDED_ */
