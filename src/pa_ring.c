
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 */


#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pa_xxhash.h"

#include "pa_ring.h"


static int pa_ring_point_cmp(const void *one, const void *two);
static void pa_ring_sort_ties(pa_ring_point_t *points, size_t npoints,
    const pa_ring_server_t *servers);
static int pa_ring_tie_less(const pa_ring_point_t *a,
    const pa_ring_point_t *b, const pa_ring_server_t *servers);
static pa_route_e pa_ring_route(uint32_t server, uint32_t first,
    uint32_t first_usable);
static uint64_t pa_weight(const uint32_t *weights, uint32_t s);


size_t
pa_ring_points(const pa_ring_server_t *servers, uint32_t n)
{
    uint32_t  i;
    uint64_t  total;

    total = 0;

    for (i = 0; i < n; i++) {
        total += (uint64_t) servers[i].weight * PA_RING_POINTS_PER_WEIGHT;
    }

    /* the ring indexes its points with uint32_t */
    if (total > UINT32_MAX) {
        return 0;
    }

    return (size_t) total;
}


int
pa_ring_build(pa_ring_t *ring, pa_ring_point_t *points,
    const pa_ring_server_t *servers, uint32_t n)
{
    size_t    total, k;
    uint32_t  i, j, npoints;

    if (n == 0) {
        return -1;
    }

    for (i = 0; i < n; i++) {
        if (servers[i].weight == 0) {
            return -1;
        }
    }

    total = pa_ring_points(servers, n);
    if (total == 0) {
        return -1;
    }

    k = 0;

    for (i = 0; i < n; i++) {
        npoints = servers[i].weight * PA_RING_POINTS_PER_WEIGHT;

        /*
         * the points depend on the name alone, so every process on every
         * host places a server at the same points whatever the config order
         */

        for (j = 0; j < npoints; j++) {
            points[k].hash = XXH3_64bits_withSeed(servers[i].name,
                                                  servers[i].len, j);
            points[k].server = i;
            k++;
        }
    }

    qsort(points, total, sizeof(pa_ring_point_t), pa_ring_point_cmp);

    pa_ring_sort_ties(points, total, servers);

    ring->points = points;
    ring->npoints = (uint32_t) total;
    ring->nservers = n;

    return 0;
}


uint32_t
pa_ring_find(const pa_ring_t *ring, uint64_t hash)
{
    uint32_t  lo, hi, mid;

    lo = 0;
    hi = ring->npoints;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;

        if (ring->points[mid].hash < hash) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    /* past the last point the ring wraps to the first */
    return (lo == ring->npoints) ? 0 : lo;
}


int
pa_ring_pick(const pa_ring_t *ring, uint64_t hash, uint64_t threshold,
    pa_server_probe_pt probe, void *ctx, unsigned char *seen,
    pa_pick_t *pick)
{
    int        rc;
    uint32_t   i, k, s, nseen, nmet, first, best, have_best;
    uint64_t   inflight, best_inflight;

    pick->server = 0;
    pick->route = PA_ROUTE_NONE;
    pick->inflight = 0;
    pick->first_inflight = 0;
    pick->first_usable = 0;

    if (ring->npoints == 0 || ring->nservers == 0) {
        return -1;
    }

    memset(seen, 0, (ring->nservers + 7) / 8);

    nseen = 0;
    nmet = 0;
    first = 0;
    best = 0;
    best_inflight = 0;
    have_best = 0;

    i = pa_ring_find(ring, hash);

    /* one lap at most, though every server is met long before */

    for (k = 0; k < ring->npoints && nseen < ring->nservers; k++) {
        s = ring->points[i].server;

        if (++i == ring->npoints) {
            i = 0;
        }

        if (seen[s >> 3] & (1u << (s & 7))) {
            continue;
        }

        seen[s >> 3] |= (unsigned char) (1u << (s & 7));
        nseen++;

        inflight = 0;
        rc = probe(ctx, s, &inflight);

        if (rc == PA_SERVER_ABSENT) {
            continue;
        }

        if (++nmet == 1) {
            first = s;
            pick->first_usable = (rc == PA_SERVER_USABLE);
            pick->first_inflight = inflight;
        }

        if (rc != PA_SERVER_USABLE) {
            continue;
        }

        if (inflight < threshold) {
            pick->server = s;
            pick->inflight = inflight;
            pick->route = pa_ring_route(s, first, pick->first_usable);
            return 0;
        }

        /* strictly fewer, so that ties go to the first met on the ring */

        if (!have_best || inflight < best_inflight) {
            best = s;
            best_inflight = inflight;
            have_best = 1;
        }
    }

    if (!have_best) {
        return -1;
    }

    pick->server = best;
    pick->inflight = best_inflight;
    pick->route = pa_ring_route(best, first, pick->first_usable);

    return 0;
}


int
pa_least_loaded(uint32_t nservers, uint32_t start,
    const uint32_t *weights, int64_t *current, pa_server_probe_pt probe,
    void *ctx, pa_pick_t *pick)
{
    int        rc;
    int64_t    total;
    uint32_t   k, s, best, best_tie, have_best, tied;
    uint64_t   inflight, best_inflight, w, best_w;

    pick->server = 0;
    pick->route = PA_ROUTE_NONE;
    pick->inflight = 0;
    pick->first_inflight = 0;
    pick->first_usable = 0;

    if (nservers == 0) {
        return -1;
    }

    best = 0;
    best_inflight = 0;
    best_w = 1;
    have_best = 0;
    tied = 0;

    s = start % nservers;

    for (k = 0; k < nservers; k++) {

        inflight = 0;
        rc = probe(ctx, s, &inflight);

        if (rc == PA_SERVER_USABLE) {
            w = pa_weight(weights, s);

            /* inflight / w < best_inflight / best_w, as least_conn does */

            if (!have_best || inflight * best_w < best_inflight * w) {
                best = s;
                best_inflight = inflight;
                best_w = w;
                have_best = 1;
                tied = 1;

            } else if (inflight * best_w == best_inflight * w) {
                tied++;
            }
        }

        if (++s == nservers) {
            s = 0;
        }
    }

    if (!have_best) {
        return -1;
    }

    if (current != NULL && tied > 1) {

        /* smooth weighted round robin among the ties */

        total = 0;
        best_tie = best;
        s = start % nservers;

        for (k = 0; k < nservers; k++) {
            inflight = 0;
            rc = probe(ctx, s, &inflight);
            w = pa_weight(weights, s);

            if (rc == PA_SERVER_USABLE
                && inflight * best_w == best_inflight * w)
            {
                current[s] += (int64_t) w;
                total += (int64_t) w;

                /* "best" is the first tie from "start": ties go first */

                if (current[s] > current[best_tie]) {
                    best_tie = s;
                }
            }

            if (++s == nservers) {
                s = 0;
            }
        }

        if (total) {
            current[best_tie] -= total;
            best = best_tie;
        }
    }

    pick->server = best;
    pick->inflight = best_inflight;
    pick->route = PA_ROUTE_NO_KEY;

    return 0;
}


const char *
pa_route_name(pa_route_e route)
{
    switch (route) {

    case PA_ROUTE_NONE:
        return "none";

    case PA_ROUTE_AFFINITY:
        return "affinity";

    case PA_ROUTE_SPILL:
        return "spill";

    case PA_ROUTE_FAILOVER:
        return "failover";

    case PA_ROUTE_NO_KEY:
        return "no_key";

    case PA_ROUTE_STATE:
        return "state";
    }

    return "unknown";
}


static int
pa_ring_point_cmp(const void *one, const void *two)
{
    const pa_ring_point_t  *a, *b;

    a = one;
    b = two;

    if (a->hash != b->hash) {
        return (a->hash < b->hash) ? -1 : 1;
    }

    if (a->server != b->server) {
        return (a->server < b->server) ? -1 : 1;
    }

    return 0;
}


/*
 * qsort() has no context for the names, so equal hashes, which are rare,
 * are put in name order afterwards; the server index stays the last key
 */

static void
pa_ring_sort_ties(pa_ring_point_t *points, size_t npoints,
    const pa_ring_server_t *servers)
{
    size_t           i, j;
    pa_ring_point_t  p;

    for (i = 1; i < npoints; i++) {

        if (points[i].hash != points[i - 1].hash) {
            continue;
        }

        p = points[i];

        for (j = i;
             j > 0 && points[j - 1].hash == p.hash
             && pa_ring_tie_less(&p, &points[j - 1], servers);
             j--)
        {
            points[j] = points[j - 1];
        }

        points[j] = p;
    }
}


static int
pa_ring_tie_less(const pa_ring_point_t *a, const pa_ring_point_t *b,
    const pa_ring_server_t *servers)
{
    int                      rc;
    size_t                   len;
    const pa_ring_server_t  *sa, *sb;

    sa = &servers[a->server];
    sb = &servers[b->server];

    len = (sa->len < sb->len) ? sa->len : sb->len;

    rc = (len == 0) ? 0 : memcmp(sa->name, sb->name, len);

    if (rc != 0) {
        return rc < 0;
    }

    if (sa->len != sb->len) {
        return sa->len < sb->len;
    }

    return a->server < b->server;
}


static pa_route_e
pa_ring_route(uint32_t server, uint32_t first, uint32_t first_usable)
{
    if (server == first) {
        return PA_ROUTE_AFFINITY;
    }

    return first_usable ? PA_ROUTE_SPILL : PA_ROUTE_FAILOVER;
}


static uint64_t
pa_weight(const uint32_t *weights, uint32_t s)
{
    return (weights == NULL || weights[s] == 0) ? 1 : weights[s];
}
