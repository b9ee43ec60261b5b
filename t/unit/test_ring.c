
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of src/pa_ring.c: the ring's layout and balance, how keys
 * move when servers come and go, the bounded-load walk and least loaded.
 */


#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pa_xxhash.h"

#include "pa_ring.h"
#include "unit.h"


#define MAX_SERVERS  16
#define MAX_POINTS   (MAX_SERVERS * 4 * PA_RING_POINTS_PER_WEIGHT)
#define NKEYS        100000

/* measured once; a change here reshuffles every deployed ring */
#define GOLDEN_NAME_HASH  0xb11bd3b37e703127ULL
#define GOLDEN_POINT0     0x00c59a5fc925d255ULL
#define GOLDEN_SUM        0x7b8162dffc5bcb6fULL


typedef struct {
    pa_ring_t          ring;
    pa_ring_point_t    points[MAX_POINTS];
    pa_ring_server_t   servers[MAX_SERVERS];
    char               names[MAX_SERVERS][32];
} test_ring_t;


typedef struct {
    int                usable;
    uint64_t           inflight;
    unsigned           calls;
} test_server_t;


typedef struct {
    test_server_t      s[MAX_SERVERS];
    unsigned           calls;
} test_probe_t;


static uint64_t rnd_next(uint64_t *state);
static int ring_make(test_ring_t *t, const uint32_t *ids,
    const uint32_t *weights, uint32_t n);
static uint32_t ref_find(const pa_ring_t *ring, uint64_t hash);
static uint32_t ref_walk(const pa_ring_t *ring, uint64_t hash,
    uint32_t *order);
static uint32_t first_choice(const test_ring_t *t, uint64_t key);
static uint32_t first_id(const test_ring_t *t, uint64_t key);
static int probe(void *ctx, uint32_t server, uint64_t *inflight);
static void probe_reset(test_probe_t *p, uint32_t n);
static void test_build(void);
static void test_find(void);
static void test_shares(void);
static void test_order(void);
static void test_add_remove(void);
static void test_duplicates(void);
static void test_golden(void);
static void test_pick(void);
static void test_pick_random(void);
static void test_least_loaded(void);
static void test_least_loaded_ties(void);
static void test_route_name(void);
static void test_pick_absent(void);


static test_ring_t  ta, tb;


static uint64_t
rnd_next(uint64_t *state)
{
    uint64_t  z;

    z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}


/* server i of the ring is "10.0.0.<ids[i]>:8000" */

static int
ring_make(test_ring_t *t, const uint32_t *ids, const uint32_t *weights,
    uint32_t n)
{
    uint32_t  i;

    for (i = 0; i < n; i++) {
        snprintf(t->names[i], sizeof(t->names[i]), "10.0.0.%u:8000",
                 (unsigned) ids[i]);
        t->servers[i].name = (const unsigned char *) t->names[i];
        t->servers[i].len = strlen(t->names[i]);
        t->servers[i].weight = weights ? weights[i] : 1;
    }

    if (pa_ring_points(t->servers, n) > MAX_POINTS) {
        return -1;
    }

    return pa_ring_build(&t->ring, t->points, t->servers, n);
}


static uint32_t
ref_find(const pa_ring_t *ring, uint64_t hash)
{
    uint32_t  i;

    for (i = 0; i < ring->npoints; i++) {
        if (ring->points[i].hash >= hash) {
            return i;
        }
    }

    return 0;
}


/* the distinct servers in ring order from the key; returns how many */

static uint32_t
ref_walk(const pa_ring_t *ring, uint64_t hash, uint32_t *order)
{
    uint32_t  i, k, j, n, s;

    n = 0;
    i = ref_find(ring, hash);

    for (k = 0; k < ring->npoints; k++) {
        s = ring->points[(i + k) % ring->npoints].server;

        for (j = 0; j < n; j++) {
            if (order[j] == s) {
                break;
            }
        }

        if (j == n) {
            order[n++] = s;
        }
    }

    return n;
}


static uint32_t
first_choice(const test_ring_t *t, uint64_t key)
{
    return t->ring.points[pa_ring_find(&t->ring, key)].server;
}


/* the first choice as a name, independent of the order of the servers */

static uint32_t
first_id(const test_ring_t *t, uint64_t key)
{
    unsigned  id;

    if (sscanf(t->names[first_choice(t, key)], "10.0.0.%u", &id) != 1) {
        return UINT32_MAX;
    }

    return id;
}


static int
probe(void *ctx, uint32_t server, uint64_t *inflight)
{
    test_probe_t  *p;

    p = ctx;

    p->calls++;
    p->s[server].calls++;

    *inflight = p->s[server].inflight;

    if (p->s[server].usable == 2) {
        return PA_SERVER_ABSENT;
    }

    return p->s[server].usable ? PA_SERVER_USABLE : PA_SERVER_UNUSABLE;
}


static void
probe_reset(test_probe_t *p, uint32_t n)
{
    uint32_t  i;

    memset(p, 0, sizeof(test_probe_t));

    for (i = 0; i < n; i++) {
        p->s[i].usable = 1;
    }
}


static void
test_build(void)
{
    uint32_t  i, bad, count[3];

    static const uint32_t  ids[3] = { 1, 2, 3 };
    static const uint32_t  weights[3] = { 1, 2, 1 };
    static const uint32_t  zero[3] = { 1, 0, 1 };

    CHECK(ring_make(&ta, ids, weights, 0) == -1);
    CHECK(ring_make(&ta, ids, zero, 3) == -1);

    CHECK(ring_make(&ta, ids, weights, 3) == 0);
    CHECK(pa_ring_points(ta.servers, 3) == 4 * PA_RING_POINTS_PER_WEIGHT);
    CHECK(ta.ring.npoints == 640);
    CHECK(ta.ring.nservers == 3);
    CHECK(ta.ring.points == ta.points);

    bad = 0;
    memset(count, 0, sizeof(count));

    for (i = 0; i < ta.ring.npoints; i++) {
        if (i > 0 && ta.points[i - 1].hash > ta.points[i].hash) {
            bad++;
        }

        if (ta.points[i].server < 3) {
            count[ta.points[i].server]++;
        }
    }

    CHECK_MSG(bad == 0, "%u points out of order", bad);
    CHECK(count[0] == 160 && count[1] == 320 && count[2] == 160);

    /* the points are the name hashed with seeds 0..weight*160-1 */
    bad = 0;

    for (i = 0; i < 320; i++) {
        uint32_t  k;
        uint64_t  h;

        h = XXH3_64bits_withSeed("10.0.0.2:8000", 13, i);
        k = pa_ring_find(&ta.ring, h);

        if (ta.points[k].hash != h || ta.points[k].server != 1) {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%u points of server 1 missing", bad);
}


static void
test_find(void)
{
    uint32_t  i, bad, last;
    uint64_t  rnd, key, h;

    static const uint32_t  ids[4] = { 1, 2, 3, 4 };

    CHECK(ring_make(&ta, ids, NULL, 4) == 0);

    bad = 0;
    rnd = 7;

    for (i = 0; i < 20000; i++) {
        key = rnd_next(&rnd);

        if (pa_ring_find(&ta.ring, key) != ref_find(&ta.ring, key)) {
            bad++;
        }
    }

    /* on, just before and just after every point */
    for (i = 0; i < ta.ring.npoints; i++) {
        h = ta.points[i].hash;

        if (pa_ring_find(&ta.ring, h) != ref_find(&ta.ring, h)
            || pa_ring_find(&ta.ring, h - 1) != ref_find(&ta.ring, h - 1)
            || pa_ring_find(&ta.ring, h + 1) != ref_find(&ta.ring, h + 1))
        {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%u finds differ from a linear scan", bad);

    last = ta.ring.npoints - 1;

    CHECK(pa_ring_find(&ta.ring, 0) == 0);
    CHECK(pa_ring_find(&ta.ring, ta.points[0].hash) == 0);
    CHECK(pa_ring_find(&ta.ring, ta.points[last].hash) == last);
    CHECK(pa_ring_find(&ta.ring, ta.points[last].hash + 1) == 0);
    CHECK(pa_ring_find(&ta.ring, UINT64_MAX) == 0
          || ta.points[last].hash == UINT64_MAX);
}


static void
test_shares(void)
{
    uint32_t  i, ids[10], count[10];
    uint64_t  rnd;
    double    share;

    static const uint32_t  weights[3] = { 1, 2, 1 };
    static const double    expect[3] = { 25.0, 50.0, 25.0 };

    for (i = 0; i < 10; i++) {
        ids[i] = i + 1;
    }

    CHECK(ring_make(&ta, ids, weights, 3) == 0);

    memset(count, 0, sizeof(count));
    rnd = 1;

    for (i = 0; i < NKEYS; i++) {
        count[first_choice(&ta, rnd_next(&rnd))]++;
    }

    for (i = 0; i < 3; i++) {
        share = 100.0 * count[i] / NKEYS;
        printf("weights 1,2,1: server %u share %.2f%% (expect %.0f%%)\n",
               (unsigned) i, share, expect[i]);
        CHECK_MSG(share >= expect[i] - 3.0 && share <= expect[i] + 3.0,
                  "server %u: %.2f%%", (unsigned) i, share);
    }

    CHECK(ring_make(&ta, ids, NULL, 10) == 0);

    memset(count, 0, sizeof(count));
    rnd = 2;

    for (i = 0; i < NKEYS; i++) {
        count[first_choice(&ta, rnd_next(&rnd))]++;
    }

    printf("10 equal:");

    for (i = 0; i < 10; i++) {
        share = 100.0 * count[i] / NKEYS;
        printf(" %.2f", share);
        CHECK_MSG(share >= 7.5 && share <= 12.5,
                  "server %u: %.2f%%", (unsigned) i, share);
    }

    printf(" %%\n");
}


static void
test_order(void)
{
    uint32_t  i, bad;
    uint64_t  rnd, key;

    static const uint32_t  ids[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
    static const uint32_t  w[10] = { 1, 2, 1, 3, 1, 1, 2, 1, 1, 4 };
    static const uint32_t  shuffled[10] = { 7, 3, 10, 1, 9, 2, 5, 8, 4, 6 };
    uint32_t               ws[10];

    /* the same weights, following their servers */
    for (i = 0; i < 10; i++) {
        ws[i] = w[shuffled[i] - 1];
    }

    CHECK(ring_make(&ta, ids, w, 10) == 0);
    CHECK(ring_make(&tb, shuffled, ws, 10) == 0);
    CHECK(ta.ring.npoints == tb.ring.npoints);

    bad = 0;

    for (i = 0; i < ta.ring.npoints; i++) {
        if (ta.points[i].hash != tb.points[i].hash
            || strcmp(ta.names[ta.points[i].server],
                      tb.names[tb.points[i].server]) != 0)
        {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%u points differ with the servers shuffled", bad);

    bad = 0;
    rnd = 3;

    for (i = 0; i < NKEYS; i++) {
        key = rnd_next(&rnd);

        if (first_id(&ta, key) != first_id(&tb, key)) {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%u keys differ with the servers shuffled", bad);
}


static void
test_add_remove(void)
{
    uint32_t  i, moved, wrong, was, gone;
    uint64_t  rnd, key;
    double    frac;

    static const uint32_t  ids10[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
    static const uint32_t  ids11[11] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 };
    static const uint32_t  ids9[9] = { 1, 2, 3, 5, 6, 7, 8, 9, 10 };

    CHECK(ring_make(&ta, ids10, NULL, 10) == 0);
    CHECK(ring_make(&tb, ids11, NULL, 11) == 0);

    moved = 0;
    wrong = 0;
    rnd = 4;

    for (i = 0; i < NKEYS; i++) {
        key = rnd_next(&rnd);

        if (first_id(&ta, key) != first_id(&tb, key)) {
            moved++;

            if (first_id(&tb, key) != 11) {
                wrong++;
            }
        }
    }

    frac = 100.0 * moved / NKEYS;
    printf("adding an 11th server moves %.2f%% of keys (ideal 9.09%%)\n",
           frac);

    CHECK_MSG(frac >= 5.0 && frac <= 13.0, "%.2f%% moved", frac);
    CHECK_MSG(wrong == 0, "%u keys moved to an old server", wrong);

    /* remove 10.0.0.4 */
    CHECK(ring_make(&tb, ids9, NULL, 9) == 0);

    moved = 0;
    wrong = 0;
    gone = 0;
    rnd = 5;

    for (i = 0; i < NKEYS; i++) {
        key = rnd_next(&rnd);
        was = first_id(&ta, key);

        if (was == 4) {
            gone++;

            if (first_id(&tb, key) == 4) {
                wrong++;
            }

        } else if (first_id(&tb, key) != was) {
            moved++;
        }
    }

    printf("removing one of 10 servers moves %.2f%% of keys, "
           "all of them its own\n", 100.0 * gone / NKEYS);

    CHECK_MSG(moved == 0, "%u keys of other servers moved", moved);
    CHECK(wrong == 0);
    CHECK(gone > NKEYS / 20 && gone < NKEYS / 6);
}


/* two servers of the same name share their points; the index decides */

static void
test_duplicates(void)
{
    uint32_t  i, bad;
    uint64_t  rnd;

    static const uint32_t  ids[3] = { 5, 5, 6 };

    CHECK(ring_make(&ta, ids, NULL, 3) == 0);

    bad = 0;

    for (i = 0; i + 1 < ta.ring.npoints; i++) {
        if (ta.points[i].hash == ta.points[i + 1].hash
            && ta.points[i].server >= ta.points[i + 1].server)
        {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%u ties not in index order", bad);

    bad = 0;
    rnd = 6;

    for (i = 0; i < 10000; i++) {
        if (first_choice(&ta, rnd_next(&rnd)) == 1) {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "the second duplicate was chosen %u times", bad);
}


/*
 * the layout must not change between releases or across hosts: every
 * nginx in front of the same servers has to send a key to the same one
 */

static void
test_golden(void)
{
    uint32_t  i;
    uint64_t  rnd, sum;

    static const uint32_t  ids[3] = { 1, 2, 3 };
    static const uint32_t  weights[3] = { 1, 2, 1 };

    CHECK(ring_make(&ta, ids, weights, 3) == 0);

    sum = 0;
    rnd = 99;

    for (i = 0; i < 1000; i++) {
        sum = sum * 31 + first_choice(&ta, rnd_next(&rnd));
    }

    printf("golden: point 0 %016llx server %u, sum %016llx\n",
           (unsigned long long) ta.points[0].hash,
           (unsigned) ta.points[0].server, (unsigned long long) sum);

    CHECK(XXH3_64bits_withSeed("10.0.0.1:8000", 13, 0)
          == GOLDEN_NAME_HASH);
    CHECK(ta.points[0].hash == GOLDEN_POINT0);
    CHECK(ta.points[0].server == 2);
    CHECK(sum == GOLDEN_SUM);
}


static void
test_pick(void)
{
    uint32_t       i, n, order[MAX_SERVERS];
    uint64_t       key;
    pa_pick_t      pick;
    test_probe_t   p;
    unsigned char  seen[(MAX_SERVERS + 7) / 8];

    static const uint32_t  ids[5] = { 1, 2, 3, 4, 5 };

    CHECK(ring_make(&ta, ids, NULL, 5) == 0);

    key = 0x5eed5eed5eed5eedULL;
    n = ref_walk(&ta.ring, key, order);
    CHECK(n == 5);
    CHECK(order[0] == first_choice(&ta, key));

    /* the first choice under the threshold */
    probe_reset(&p, 5);
    p.s[order[0]].inflight = 3;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[0]);
    CHECK(pick.route == PA_ROUTE_AFFINITY);
    CHECK(pick.first_usable == 1);
    CHECK(pick.first_inflight == 3);
    CHECK(pick.inflight == 3);
    CHECK(p.calls == 1);

    /* at the threshold: the second distinct server of the walk */
    probe_reset(&p, 5);
    p.s[order[0]].inflight = 4;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[1]);
    CHECK(pick.route == PA_ROUTE_SPILL);
    CHECK(pick.first_usable == 1);
    CHECK(pick.first_inflight == 4);
    CHECK(p.calls == 2);

    /* over it, and the second at it: the third */
    probe_reset(&p, 5);
    p.s[order[0]].inflight = 9;
    p.s[order[1]].inflight = 4;
    p.s[order[2]].inflight = 3;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[2]);
    CHECK(pick.route == PA_ROUTE_SPILL);
    CHECK(pick.inflight == 3);
    CHECK(p.calls == 3);

    /* the first choice unusable */
    probe_reset(&p, 5);
    p.s[order[0]].usable = 0;
    p.s[order[0]].inflight = 1;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[1]);
    CHECK(pick.route == PA_ROUTE_FAILOVER);
    CHECK(pick.first_usable == 0);
    CHECK(pick.first_inflight == 1);

    /* unusable, then busy: still a failover */
    probe_reset(&p, 5);
    p.s[order[0]].usable = 0;
    p.s[order[1]].inflight = 4;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[2]);
    CHECK(pick.route == PA_ROUTE_FAILOVER);

    /* busy, then unusable: a spill */
    probe_reset(&p, 5);
    p.s[order[0]].inflight = 4;
    p.s[order[1]].usable = 0;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[2]);
    CHECK(pick.route == PA_ROUTE_SPILL);

    /* all busy: the fewest in flight, ties in ring order */
    probe_reset(&p, 5);
    p.s[order[0]].inflight = 6;
    p.s[order[1]].inflight = 5;
    p.s[order[2]].inflight = 7;
    p.s[order[3]].inflight = 5;
    p.s[order[4]].inflight = 8;
    CHECK(pa_ring_pick(&ta.ring, key, 2, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[1]);
    CHECK(pick.route == PA_ROUTE_SPILL);
    CHECK(pick.first_inflight == 6);

    /* the fallback: the caller sees it is at or above the threshold */
    CHECK(pick.inflight == 5);
    CHECK(p.calls == 5);

    for (i = 0; i < 5; i++) {
        CHECK(p.s[i].calls == 1);
    }

    /* all busy, the later one of a tie unusable, the least last */
    probe_reset(&p, 5);
    p.s[order[0]].inflight = 6;
    p.s[order[1]].inflight = 5;
    p.s[order[2]].inflight = 7;
    p.s[order[3]].usable = 0;
    p.s[order[4]].inflight = 2;
    CHECK(pa_ring_pick(&ta.ring, key, 2, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[4]);
    CHECK(pick.route == PA_ROUTE_SPILL);

    /* all busy and the first choice the least: it stays on it */
    probe_reset(&p, 5);

    for (i = 0; i < 5; i++) {
        p.s[i].inflight = 10;
    }

    p.s[order[0]].inflight = 3;
    CHECK(pa_ring_pick(&ta.ring, key, 3, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[0]);
    CHECK(pick.route == PA_ROUTE_AFFINITY);
    CHECK(p.calls == 5);

    /* all equally busy: the first choice, by ring order */
    probe_reset(&p, 5);

    for (i = 0; i < 5; i++) {
        p.s[i].inflight = 10;
    }

    CHECK(pa_ring_pick(&ta.ring, key, 3, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[0]);

    /* all busy, the first choice unusable */
    p.s[order[0]].usable = 0;
    p.s[order[3]].inflight = 9;
    CHECK(pa_ring_pick(&ta.ring, key, 3, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[3]);
    CHECK(pick.route == PA_ROUTE_FAILOVER);

    /* a threshold of 0 makes every server busy */
    probe_reset(&p, 5);
    CHECK(pa_ring_pick(&ta.ring, key, 0, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[0]);
    CHECK(p.calls == 5);

    /* only the last of the walk usable */
    probe_reset(&p, 5);

    for (i = 0; i < 4; i++) {
        p.s[order[i]].usable = 0;
    }

    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[4]);
    CHECK(pick.route == PA_ROUTE_FAILOVER);
    CHECK(p.calls == 5);

    /* none usable */
    for (i = 0; i < 5; i++) {
        p.s[i].usable = 0;
        p.s[i].calls = 0;
    }

    p.calls = 0;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == -1);
    CHECK(pick.route == PA_ROUTE_NONE);
    CHECK(pick.first_usable == 0);
    CHECK(p.calls == 5);

    for (i = 0; i < 5; i++) {
        CHECK(p.s[i].calls == 1);
    }

    /* "seen" is cleared by the pick, not by the caller */
    probe_reset(&p, 5);
    p.s[order[0]].inflight = 4;
    memset(seen, 0xff, sizeof(seen));
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[1]);
    CHECK(pick.route == PA_ROUTE_SPILL);

    /* a single server */
    CHECK(ring_make(&ta, ids, NULL, 1) == 0);
    probe_reset(&p, 1);
    p.s[0].inflight = 100;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == 0);
    CHECK(pick.route == PA_ROUTE_AFFINITY);
    CHECK(p.calls == 1);
    p.s[0].usable = 0;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == -1);
}


/* the pick against a plain statement of the rules, on random states */

static void
test_pick_random(void)
{
    int            rc, want_rc;
    uint32_t       i, j, n, nserv, want, order[MAX_SERVERS];
    uint32_t       bad, twice, have;
    uint64_t       rnd, key, threshold, least;
    pa_route_e     want_route;
    pa_pick_t      pick;
    test_probe_t   p;
    unsigned char  seen[(MAX_SERVERS + 7) / 8];

    static const uint32_t  ids[MAX_SERVERS] = {
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16
    };
    static const uint32_t  w[MAX_SERVERS] = {
        1, 2, 1, 3, 1, 1, 2, 1, 4, 1, 1, 1, 2, 1, 1, 3
    };

    bad = 0;
    twice = 0;
    rnd = 8;

    for (nserv = 1; nserv <= MAX_SERVERS; nserv += 3) {
        CHECK(ring_make(&ta, ids, w, nserv) == 0);

        for (i = 0; i < 5000; i++) {
            key = rnd_next(&rnd);
            threshold = rnd_next(&rnd) % 5;

            probe_reset(&p, nserv);

            for (j = 0; j < nserv; j++) {
                p.s[j].usable = (rnd_next(&rnd) % 4) != 0;
                p.s[j].inflight = rnd_next(&rnd) % 6;
            }

            n = ref_walk(&ta.ring, key, order);

            want = 0;
            want_rc = -1;
            want_route = PA_ROUTE_NONE;
            have = 0;
            least = 0;

            for (j = 0; j < n; j++) {
                if (!p.s[order[j]].usable) {
                    continue;
                }

                if (p.s[order[j]].inflight < threshold) {
                    want = order[j];
                    have = 2;
                    break;
                }

                if (!have || p.s[order[j]].inflight < least) {
                    want = order[j];
                    least = p.s[order[j]].inflight;
                    have = 1;
                }
            }

            if (have) {
                want_rc = 0;

                if (want == order[0]) {
                    want_route = PA_ROUTE_AFFINITY;

                } else if (p.s[order[0]].usable) {
                    want_route = PA_ROUTE_SPILL;

                } else {
                    want_route = PA_ROUTE_FAILOVER;
                }
            }

            rc = pa_ring_pick(&ta.ring, key, threshold, probe, &p, seen,
                              &pick);

            if (rc != want_rc || pick.route != want_route
                || (rc == 0 && pick.server != want)
                || pick.first_usable != (uint32_t) p.s[order[0]].usable
                || pick.first_inflight != p.s[order[0]].inflight)
            {
                bad++;
            }

            for (j = 0; j < nserv; j++) {
                if (p.s[j].calls > 1) {
                    twice++;
                }
            }
        }
    }

    CHECK_MSG(bad == 0, "%u picks differ from the rules", bad);
    CHECK_MSG(twice == 0, "%u servers probed twice in a pick", twice);
}


static void
test_least_loaded(void)
{
    uint32_t      i;
    pa_pick_t     pick;
    test_probe_t  p;

    static const uint32_t  w[4] = { 1, 3, 1, 1 };
    static const uint32_t  w2[2] = { 2, 1 };
    static const uint32_t  w0[2] = { 0, 1 };

    /* unweighted: the fewest, ties from "start" on */
    probe_reset(&p, 4);
    p.s[0].inflight = 3;
    p.s[1].inflight = 1;
    p.s[2].inflight = 1;
    p.s[3].inflight = 2;

    CHECK(pa_least_loaded(4, 0, NULL, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    CHECK(pick.route == PA_ROUTE_NO_KEY);
    CHECK(pick.inflight == 1);
    CHECK(p.calls == 4);

    for (i = 0; i < 4; i++) {
        CHECK(p.s[i].calls == 1);
    }

    CHECK(pa_least_loaded(4, 1, NULL, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    CHECK(pa_least_loaded(4, 2, NULL, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 2);
    CHECK(pa_least_loaded(4, 3, NULL, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    CHECK(pa_least_loaded(4, 6, NULL, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 2);
    CHECK(pa_least_loaded(4, UINT32_MAX, NULL, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);

    /* weighted: 1/1, 2/3, 1/1, 5/1 */
    p.s[0].inflight = 1;
    p.s[1].inflight = 2;
    p.s[2].inflight = 1;
    p.s[3].inflight = 5;
    CHECK(pa_least_loaded(4, 0, w, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    CHECK(pa_least_loaded(4, 2, w, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);

    /* 3/3 ties 1/1: "start" decides */
    p.s[1].inflight = 3;
    CHECK(pa_least_loaded(4, 1, w, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    CHECK(pa_least_loaded(4, 2, w, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 2);
    CHECK(pa_least_loaded(4, 3, w, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 0);

    /* 4/3 loses to 1/1; unweighted it would lose too */
    p.s[1].inflight = 4;
    CHECK(pa_least_loaded(4, 1, w, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 2);

    /* idle beats everything whatever the weight */
    p.s[3].inflight = 0;
    CHECK(pa_least_loaded(4, 0, w, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 3);

    /* 2/2 ties 1/1, 3/2 loses to 1/1, 2/2 beats 2/1 */
    probe_reset(&p, 2);
    p.s[0].inflight = 2;
    p.s[1].inflight = 1;
    CHECK(pa_least_loaded(2, 0, w2, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 0);
    CHECK(pa_least_loaded(2, 1, w2, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    p.s[0].inflight = 3;
    CHECK(pa_least_loaded(2, 0, w2, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    p.s[0].inflight = 2;
    p.s[1].inflight = 2;
    CHECK(pa_least_loaded(2, 1, w2, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 0);

    /* a weight of 0 counts as 1 */
    p.s[0].inflight = 1;
    p.s[1].inflight = 1;
    CHECK(pa_least_loaded(2, 1, w0, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    p.s[1].inflight = 2;
    CHECK(pa_least_loaded(2, 1, w0, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 0);

    /* unusable ones are skipped, however idle */
    probe_reset(&p, 4);
    p.s[0].usable = 0;
    p.s[1].inflight = 7;
    p.s[2].usable = 0;
    p.s[3].inflight = 9;
    CHECK(pa_least_loaded(4, 0, NULL, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);
    CHECK(pa_least_loaded(4, 0, w, NULL, probe, &p, &pick) == 0);
    CHECK(pick.server == 1);

    /* none usable, or none at all */
    p.s[1].usable = 0;
    p.s[3].usable = 0;
    p.calls = 0;
    CHECK(pa_least_loaded(4, 0, NULL, NULL, probe, &p, &pick) == -1);
    CHECK(pick.route == PA_ROUTE_NONE);
    CHECK(p.calls == 4);
    CHECK(pa_least_loaded(0, 0, NULL, NULL, probe, &p, &pick) == -1);
    CHECK(pick.route == PA_ROUTE_NONE);
}


/* ties share requests by weight: nginx's smooth weighted round robin */

static void
test_least_loaded_ties(void)
{
    int64_t       cur[4];
    uint32_t      i, n[4];
    pa_pick_t     pick;
    test_probe_t  p;

    static const uint32_t  w[3] = { 100, 1, 1 };
    static const uint32_t  w4[4] = { 1, 3, 1, 1 };

    /* three idle servers, weights 100, 1, 1: 102 picks go 100, 1, 1 */
    probe_reset(&p, 3);
    memset(cur, 0, sizeof(cur));
    memset(n, 0, sizeof(n));

    for (i = 0; i < 102; i++) {
        CHECK(pa_least_loaded(3, i, w, cur, probe, &p, &pick) == 0);
        CHECK(pick.route == PA_ROUTE_NO_KEY);
        n[pick.server]++;
    }

    CHECK_MSG(n[0] == 100 && n[1] == 1 && n[2] == 1,
              "weights 100 1 1 idle: %u %u %u", n[0], n[1], n[2]);

    /* the first 30 of them: the heavy server takes at least 28 */
    memset(cur, 0, sizeof(cur));
    memset(n, 0, sizeof(n));

    for (i = 0; i < 30; i++) {
        CHECK(pa_least_loaded(3, i, w, cur, probe, &p, &pick) == 0);
        n[pick.server]++;
    }

    CHECK_MSG(n[0] >= 28, "weights 100 1 1, 30 picks: %u %u %u",
              n[0], n[1], n[2]);

    /* equal weights: ties rotate evenly whatever "start" is */
    memset(cur, 0, sizeof(cur));
    memset(n, 0, sizeof(n));

    for (i = 0; i < 30; i++) {
        CHECK(pa_least_loaded(3, 0, NULL, cur, probe, &p, &pick) == 0);
        n[pick.server]++;
    }

    CHECK_MSG(n[0] == 10 && n[1] == 10 && n[2] == 10,
              "equal idle: %u %u %u", n[0], n[1], n[2]);

    /* only the servers tied at the least load share: 3/3 and 1/1 tie */
    probe_reset(&p, 4);
    p.s[0].inflight = 1;
    p.s[1].inflight = 3;
    p.s[2].inflight = 2;
    p.s[3].inflight = 1;
    memset(cur, 0, sizeof(cur));
    memset(n, 0, sizeof(n));

    for (i = 0; i < 50; i++) {
        CHECK(pa_least_loaded(4, 0, w4, cur, probe, &p, &pick) == 0);
        n[pick.server]++;
    }

    CHECK_MSG(n[2] == 0, "a busier server was picked %u times", n[2]);
    CHECK_MSG(n[1] == 30 && n[0] == 10 && n[3] == 10,
              "ties 1:3:1 went %u %u %u", n[0], n[1], n[3]);

    /* an unusable tie is skipped */
    p.s[1].usable = 0;
    memset(n, 0, sizeof(n));

    for (i = 0; i < 20; i++) {
        CHECK(pa_least_loaded(4, 0, w4, cur, probe, &p, &pick) == 0);
        n[pick.server]++;
    }

    CHECK_MSG(n[1] == 0 && n[0] == 10 && n[3] == 10,
              "unusable tie: %u %u %u", n[0], n[1], n[3]);
}


static void
test_route_name(void)
{
    CHECK(strcmp(pa_route_name(PA_ROUTE_AFFINITY), "affinity") == 0);
    CHECK(strcmp(pa_route_name(PA_ROUTE_SPILL), "spill") == 0);
    CHECK(strcmp(pa_route_name(PA_ROUTE_FAILOVER), "failover") == 0);
    CHECK(strcmp(pa_route_name(PA_ROUTE_NO_KEY), "no_key") == 0);
    CHECK(strcmp(pa_route_name(PA_ROUTE_NONE), "none") == 0);
    CHECK(pa_route_name((pa_route_e) 99) != NULL);
}


/*
 * servers outside a model's set are absent: the walk passes them over as
 * if they were not on the ring, so the first member met is an affinity
 * choice, and a key goes where a ring of the members alone sends it
 */

static void
test_pick_absent(void)
{
    uint32_t       i, n, k, order[MAX_SERVERS];
    uint64_t       key, state;
    pa_pick_t      pick, ref;
    test_probe_t   p, q;
    unsigned char  seen[(MAX_SERVERS + 7) / 8];

    static const uint32_t  ids[5] = { 1, 2, 3, 4, 5 };
    static const uint32_t  members[3] = { 1, 3, 4 };

    CHECK(ring_make(&ta, ids, NULL, 5) == 0);
    CHECK(ring_make(&tb, members, NULL, 3) == 0);

    key = 0x5eed5eed5eed5eedULL;
    n = ref_walk(&ta.ring, key, order);
    CHECK(n == 5);

    /* the first choice absent: the next is an affinity choice */

    probe_reset(&p, 5);
    p.s[order[0]].usable = 2;
    p.s[order[1]].inflight = 2;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[1]);
    CHECK(pick.route == PA_ROUTE_AFFINITY);
    CHECK(pick.first_usable == 1);
    CHECK(pick.first_inflight == 2);

    /* absent, then at the threshold: a spill to the third */

    probe_reset(&p, 5);
    p.s[order[0]].usable = 2;
    p.s[order[1]].inflight = 4;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[2]);
    CHECK(pick.route == PA_ROUTE_SPILL);

    /* absent, then unusable: a failover */

    probe_reset(&p, 5);
    p.s[order[0]].usable = 2;
    p.s[order[1]].usable = 0;
    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == 0);
    CHECK(pick.server == order[2]);
    CHECK(pick.route == PA_ROUTE_FAILOVER);

    /* all absent: nothing */

    probe_reset(&p, 5);

    for (i = 0; i < 5; i++) {
        p.s[i].usable = 2;
    }

    CHECK(pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) == -1);

    /* the members' ring and the full ring with the others absent agree */

    state = 12345;
    k = 0;

    for (i = 0; i < 20000; i++) {
        key = rnd_next(&state);

        probe_reset(&p, 5);
        p.s[1].usable = 2;                        /* 10.0.0.2 */
        p.s[4].usable = 2;                        /* 10.0.0.5 */
        probe_reset(&q, 3);

        if (pa_ring_pick(&ta.ring, key, 4, probe, &p, seen, &pick) != 0
            || pa_ring_pick(&tb.ring, key, 4, probe, &q, seen, &ref) != 0
            || strcmp(ta.names[pick.server], tb.names[ref.server]) != 0
            || pick.route != PA_ROUTE_AFFINITY)
        {
            k++;
        }
    }

    CHECK_MSG(k == 0, "%u keys differ", (unsigned) k);
}


int
main(void)
{
    test_build();
    test_find();
    test_shares();
    test_order();
    test_add_remove();
    test_duplicates();
    test_golden();
    test_pick();
    test_pick_random();
    test_least_loaded();
    test_least_loaded_ties();
    test_route_name();
    test_pick_absent();

    return UNIT_DONE();
}
