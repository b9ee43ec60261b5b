
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of src/pa_choose.c: the work estimate, the deepest match,
 * its ties, the absolute and the relative bound, cold placement on the
 * ring (option A) and by least work (option B), spill, least loaded,
 * weights and nothing usable.
 */


#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pa_choose.h"
#include "unit.h"


#define NSRV  8


typedef struct {
    uint64_t        work[NSRV];
    uint64_t        inflight[NSRV];
    uint32_t        weight[NSRV];
    int             down[NSRV];
} cluster_t;


static int probe(void *ctx, uint32_t server, pa_load_t *load);
static int ring_probe(void *ctx, uint32_t server, uint64_t *inflight);
static void setup(pa_choose_in_t *in, cluster_t *cl, uint32_t *depth,
    uint32_t *found);
static void set_found(pa_choose_in_t *in, uint32_t *depth, uint32_t *found);
static void test_cost(void);
static void test_match(void);
static void test_bounds(void);
static void test_cold_ring(void);
static void test_cold_least(void);
static void test_cold_two(void);
static int at_cap(pa_choose_in_t *in, cluster_t *cl, uint64_t inflight);
static int cold_at_cap(pa_choose_in_t *in, cluster_t *cl, uint32_t *depth,
    uint32_t *found);
static void test_cap_saved(void);
static void test_cap_cost(void);
static void test_past_key(void);
static uint32_t cold_home(pa_choose_in_t *in, cluster_t *cl,
    uint32_t *depth, uint32_t *found);
static void test_cold_ceiling(void);
static void test_cold_strict(void);
static void test_least(void);
static void test_weights(void);
static pa_ring_point_t *ring_new(pa_ring_t *r, pa_ring_server_t *srv,
    char (*names)[32], uint32_t n, unsigned net);
static int walk_probe(void *ctx, uint32_t server, pa_load_t *load);
static void test_walk_bound(void);


static pa_ring_t        ring;
static pa_ring_point_t *points;
static unsigned char    seen[(NSRV + 7) / 8];


static int
probe(void *ctx, uint32_t server, pa_load_t *load)
{
    cluster_t  *cl = ctx;

    load->work = cl->work[server];
    load->inflight = cl->inflight[server];
    load->weight = cl->weight[server];
    load->id_hash = 0x1000 + server * 0x9e3779b97f4a7c15ULL;

    return cl->down[server] ? PA_SERVER_UNUSABLE : PA_SERVER_USABLE;
}


static int
ring_probe(void *ctx, uint32_t server, uint64_t *inflight)
{
    cluster_t  *cl = ctx;

    *inflight = cl->inflight[server];

    return cl->down[server] ? PA_SERVER_UNUSABLE : PA_SERVER_USABLE;
}


static void
setup(pa_choose_in_t *in, cluster_t *cl, uint32_t *depth, uint32_t *found)
{
    uint32_t  i;

    memset(cl, 0, sizeof(cluster_t));
    memset(depth, 0, NSRV * sizeof(uint32_t));
    memset(in, 0, sizeof(pa_choose_in_t));

    for (i = 0; i < NSRV; i++) {
        cl->weight[i] = 1;
    }

    in->key = 0x123456789abcdefULL;
    in->units = 1000;
    in->decode = 0;
    in->block_units = 100;
    in->depth = depth;
    in->found = found;
    in->nfound = 0;
    in->nservers = NSRV;
    in->balance = 0;
    in->threshold = 0;
    in->cold = PA_COLD_RING;
    in->ring = &ring;
    in->probe = probe;
    in->ctx = cl;
    in->seen = seen;
}


/* the found list from the depths, as pa_index_match() gives it */

static void
set_found(pa_choose_in_t *in, uint32_t *depth, uint32_t *found)
{
    uint32_t  i;

    in->nfound = 0;

    for (i = 0; i < NSRV; i++) {
        if (depth[i] > 0) {
            found[in->nfound++] = i;
        }
    }
}


static void
test_cost(void)
{
    CHECK(pa_choose_cost(1000, 3, 128, 50) == 1000 - 384 + 50);
    CHECK(pa_choose_cost(1000, 0, 128, 0) == 1000);
    CHECK(pa_choose_cost(1000, 8, 128, 7) == 7);
    CHECK(pa_choose_cost(1000, 100, 128, 7) == 7);
}


static void
test_match(void)
{
    int             a, b;
    uint32_t        i, depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);

    /* the deepest wins on an idle cluster */
    depth[1] = 3;
    depth[2] = 5;
    set_found(&in, depth, found);

    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 2 && ch.depth == 5);
    CHECK(ch.cost == 500);

    /* equal depths: the least work */
    depth[1] = 5;
    cl.work[1] = 100;
    cl.work[2] = 50;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 2);

    /* equal depths and work: the same winner in any order */
    cl.work[1] = 50;
    CHECK(pa_choose(&in, &ch) == 0);
    a = ch.server;
    found[0] = 2;
    found[1] = 1;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK((int) ch.server == a);

    /* and each key picks its own, so ties spread */
    a = 0;
    b = 0;

    for (i = 0; i < 1000; i++) {
        in.key = i * 0x9e3779b97f4a7c15ULL;
        (void) pa_choose(&in, &ch);
        a += (ch.server == 1);
        b += (ch.server == 2);
    }

    CHECK(a + b == 1000);
    CHECK_MSG(a > 400 && b > 400, "ties %d and %d", a, b);

    /*
     * match=60: a holder of under 60 % of the prefix is no match, the
     * key's ring home takes it (cold); 600 of 1000 units is one
     */
    setup(&in, &cl, depth, found);
    in.match = 60;
    depth[3] = 5;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD);
    a = ch.server;
    depth[3] = 0;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && (int) ch.server == a);
    depth[3] = 6;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 3);

    /* the cost counts the whole prompt, the match only its prefix */
    in.total_units = 5000;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 3);
    CHECK(ch.cost == 5000 - 600);

    /* a holder that is down is passed over: cold, not spill */
    setup(&in, &cl, depth, found);
    depth[4] = 9;
    cl.down[4] = 1;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server != 4 && ch.depth == 0);
}


static void
test_bounds(void)
{
    uint32_t        depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);

    depth[1] = 3;
    depth[2] = 5;
    set_found(&in, depth, found);

    /* the absolute cap: the deepest is full, the next deepest takes it */
    in.threshold = 4;
    cl.inflight[2] = 4;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 1 && ch.depth == 3);
    CHECK(ch.cost == 700);

    cl.inflight[2] = 3;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.server == 2);

    /*
     * the relative bound, F = 1.5: server 2 has 1000 units in flight,
     * the request costs it 500; the mean with the request is
     * (1000 + 500) / 8 = 187.5, the bound 281.25 < 1500: over.
     * server 1 is idle: an idle server always has room.
     */
    in.threshold = 0;
    in.balance = 150;
    cl.work[2] = 1000;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 1);

    /*
     * exactly at the bound is within: the server's work before the
     * request, per weight, against F times the mean with it, plus the
     * prefill its match saves (5 blocks, 500 units: sent elsewhere, the
     * request would cost that much more there),
     * 2000 * 8 <= 4 * (2000 + x + 500) + 8 * 500
     */
    setup(&in, &cl, depth, found);
    depth[2] = 5;
    set_found(&in, depth, found);
    in.balance = 400;
    cl.work[2] = 2000;
    cl.work[0] = 500;                   /* 4 * 3000 + 4000 = 16000 */
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 2);

    cl.work[0] = 499;                   /* 4 * 2999 + 4000 < 16000: over */
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_SPILL && ch.server != 2);

    /* the caller's totals are used as given */
    in.totals = 1;
    in.total_work = 2500;
    in.total_weight = 8;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 2);

    /*
     * "slack" more work is within where it is more than the match
     * saves: 2000 <= 4 * 2999 / 8 + 501
     */
    in.totals = 0;
    in.slack = 501;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 2);

    in.slack = 499;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_SPILL && ch.server != 2);

    /* what a match saves is at most the prompt: 5 blocks of 300 units */
    in.slack = 0;
    in.units = 300;
    cl.work[0] = 1200;      /* 4 * 3200 + 8 * 300 < 16000 (500: over) */
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_SPILL && ch.server != 2);
    in.units = 1000;

    /* an idle cluster accepts, whatever F */
    setup(&in, &cl, depth, found);
    in.balance = 100;
    depth[6] = 1;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 6);
}


static void
test_cold_ring(void)
{
    uint32_t        i, same, depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_pick_t       pick;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);

    /* idle: the key's ring home, as pa_ring_pick() finds it */
    same = 0;

    for (i = 0; i < 200; i++) {
        in.key = i * 0x9e3779b97f4a7c15ULL + 1;

        (void) pa_choose(&in, &ch);
        (void) pa_ring_pick(&ring, in.key, 1, ring_probe, &cl, seen, &pick);

        same += (ch.kind == PA_CHOICE_COLD && ch.server == pick.server
                 && pick.route == PA_ROUTE_AFFINITY);
    }

    CHECK(same == 200);

    /* the home over the cap: the next on the ring, as the ring walk */
    in.threshold = 2;

    for (i = 0; i < NSRV; i += 2) {
        cl.inflight[i] = 2;
    }

    same = 0;

    for (i = 0; i < 200; i++) {
        in.key = i * 0x9e3779b97f4a7c15ULL + 1;

        (void) pa_choose(&in, &ch);
        (void) pa_ring_pick(&ring, in.key, 2, ring_probe, &cl, seen, &pick);

        same += (ch.kind == PA_CHOICE_COLD && ch.server == pick.server
                 && ch.server % 2 == 1);
    }

    CHECK(same == 200);

    /* the holders are over the cap: spill along the ring */
    depth[0] = 4;
    depth[2] = 2;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_SPILL && ch.server % 2 == 1);
    CHECK(ch.depth == 0 && ch.cost == 1000);

    /* no ring: option B */
    in.ring = NULL;
    cl.work[5] = 0;
    cl.work[1] = cl.work[3] = cl.work[7] = 10;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_SPILL && ch.server == 5);
}


static void
test_cold_least(void)
{
    uint32_t        depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);
    in.cold = PA_COLD_LEAST;

    cl.work[0] = 50;
    cl.work[1] = 10;
    cl.work[2] = 30;
    cl.work[3] = 20;
    cl.work[4] = cl.work[5] = cl.work[6] = cl.work[7] = 40;

    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == 1);

    /* the least within the cap */
    in.threshold = 1;
    cl.inflight[1] = 1;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == 3);

    /* a holder over the relative bound: spill to the least work */
    in.threshold = 0;
    in.balance = 120;
    cl.inflight[1] = 0;
    depth[0] = 10;
    cl.work[0] = 5000;
    cl.work[1] = 0;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_SPILL && ch.server == 1);
}


/*
 * cold=two: of the first two servers within the bounds on the key's ring
 * walk, the one with less work after the request; the home on a tie
 */

static void
test_cold_two(void)
{
    uint32_t        i, same, home, second, depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_pick_t       pick;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);
    in.cold = PA_COLD_TWO;

    /* idle: the home, as the ring walk */
    same = 0;

    for (i = 0; i < 200; i++) {
        in.key = i * 0x9e3779b97f4a7c15ULL + 1;

        (void) pa_choose(&in, &ch);
        (void) pa_ring_pick(&ring, in.key, 1, ring_probe, &cl, seen, &pick);

        same += (ch.kind == PA_CHOICE_COLD && ch.server == pick.server);
    }

    CHECK(same == 200);

    /* the second server on the walk: the home over a cap of 1 */
    in.key = 77;
    CHECK(pa_choose(&in, &ch) == 0);
    home = ch.server;

    in.threshold = 1;
    cl.inflight[home] = 1;
    CHECK(pa_choose(&in, &ch) == 0);
    second = ch.server;
    CHECK(second != home);
    in.threshold = 0;
    cl.inflight[home] = 0;

    /* the home busier than the second: the second */
    cl.work[home] = 500;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == second);

    /* every other server idler still: only the two are weighed */
    for (i = 0; i < NSRV; i++) {
        if (i != home && i != second) {
            cl.work[i] = 0;
        }
    }

    cl.work[second] = 400;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.server == second);

    /* a tie: the home */
    cl.work[second] = 500;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.server == home);

    /*
     * the home holds a part of the prefix, too little for a match: its
     * prefill there is shorter by that part (300 of 1000 units), which
     * outweighs 200 units more work
     */
    in.match = 50;
    depth[home] = 3;
    set_found(&in, depth, found);
    cl.work[home] = 700;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == home);

    cl.work[home] = 900;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.server == second);

    /* only the home within the cap: the home */
    depth[home] = 0;
    set_found(&in, depth, found);
    cl.work[home] = 900;
    in.threshold = 1;

    for (i = 0; i < NSRV; i++) {
        cl.inflight[i] = (i == home) ? 0 : 1;
    }

    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == home);
}


/*
 * server 3 with "inflight" requests: 1 if the request matched there, 0
 * if it spilled to another server, -1 for anything else
 */

static int
at_cap(pa_choose_in_t *in, cluster_t *cl, uint64_t inflight)
{
    pa_choice_t  ch;

    cl->inflight[3] = inflight;

    if (pa_choose(in, &ch) != 0) {
        return -1;
    }

    if (ch.kind == PA_CHOICE_MATCH && ch.server == 3) {
        return 1;
    }

    return (ch.kind == PA_CHOICE_SPILL && ch.server != 3) ? 0 : -1;
}


/* every server at the cap, a request placed cold: the least work */

static int
cold_at_cap(pa_choose_in_t *in, cluster_t *cl, uint32_t *depth,
    uint32_t *found)
{
    uint32_t     i;
    pa_choice_t  ch;

    depth[3] = 0;
    set_found(in, depth, found);
    in->cold = PA_COLD_LEAST;

    for (i = 0; i < NSRV; i++) {
        cl->inflight[i] = in->threshold;
    }

    return pa_choose(in, &ch) == 0 && ch.kind == PA_CHOICE_LEAST;
}


/*
 * cap=saved: a holder at the cap on requests takes a match that saves
 * more than "slack", one request over the cap per "slack" it saves, up
 * to twice the cap; nothing else goes over it
 */

static void
test_cap_saved(void)
{
    uint32_t        depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);
    in.threshold = 4;
    in.slack = 1000;
    in.units = 10000;
    depth[3] = 35;                        /* saves 3,500 units */
    set_found(&in, depth, found);

    /* the cap is hard by default: spilled */
    CHECK(at_cap(&in, &cl, 4) == 0);

    /* 3 slacks saved: up to 3 over the cap */
    in.cap = PA_CAP_SAVED;
    CHECK(at_cap(&in, &cl, 4) == 1);
    CHECK(at_cap(&in, &cl, 6) == 1);
    CHECK(at_cap(&in, &cl, 7) == 0);

    /* never twice the cap */
    depth[3] = 100;
    CHECK(at_cap(&in, &cl, 7) == 1);
    CHECK(at_cap(&in, &cl, 8) == 0);

    /* a match saving no more than a cold request's prefill: spilled */
    depth[3] = 10;
    CHECK(at_cap(&in, &cl, 4) == 0);

    /* a request placed cold never goes over it */
    CHECK(cold_at_cap(&in, &cl, depth, found));
}


/*
 * cap=cost: a holder at the cap takes a match one request over it for
 * each time the match saves the prefill the request still has there (at
 * least a block), the decode share not counted, below twice the cap;
 * nothing placed cold goes over it
 */

static void
test_cap_cost(void)
{
    uint32_t        depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);
    in.threshold = 4;
    in.slack = 100000;                    /* cap=saved alone: no room */
    in.units = 10000;
    in.decode = 3000;
    in.cap = PA_CAP_COST;
    depth[3] = 50;                        /* saves 5,000, computes 5,000 */
    set_found(&in, depth, found);

    CHECK(at_cap(&in, &cl, 4) == 1);
    CHECK(at_cap(&in, &cl, 5) == 0);

    /* a template and a short message: 9,500 saved, 500 computed */
    depth[3] = 95;
    CHECK(at_cap(&in, &cl, 7) == 1);

    /* never twice the cap */
    CHECK(at_cap(&in, &cl, 8) == 0);

    /* the whole prompt cached: a block's prefill counted */
    depth[3] = 100;
    CHECK(at_cap(&in, &cl, 7) == 1);

    /* saving less than it computes: the hard cap */
    depth[3] = 40;
    CHECK(at_cap(&in, &cl, 4) == 0);

    /* what cap=saved lets over, cap=cost does too: 3 slacks saved */
    in.slack = 1000;
    depth[3] = 35;
    CHECK(at_cap(&in, &cl, 6) == 1);
    CHECK(at_cap(&in, &cl, 7) == 0);

    in.slack = 100000;

    /* the hard cap: nothing over it */
    depth[3] = 95;
    in.cap = PA_CAP_HARD;
    CHECK(at_cap(&in, &cl, 4) == 0);

    /* a request placed cold never goes over it */
    in.cap = PA_CAP_COST;
    CHECK(cold_at_cap(&in, &cl, depth, found));
}


/*
 * "length" cut the key short of the prompt (issue 43): 1,000 units of
 * key, 8,000 of prompt.  A match that reaches the key's last whole block
 * holds the rest of the prompt too (the same document); one short of it,
 * only its blocks
 */

static void
test_past_key(void)
{
    uint32_t        depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);
    in.total_units = 8000;
    in.decode = 50;

    CHECK(pa_choose_holds_past(1000, 8000, 10, 100) == 1);
    CHECK(pa_choose_holds_past(1050, 8000, 10, 100) == 1);
    CHECK(pa_choose_holds_past(1000, 8000, 9, 100) == 0);
    CHECK(pa_choose_holds_past(1000, 1000, 10, 100) == 0);
    CHECK(pa_choose_holds_past(1000, 8000, 0, 100) == 0);

    /* the costs: the key's end held, nothing to prefill but the decode */
    depth[3] = 10;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 3);
    CHECK(ch.cost == 50);

    /* a block short of the key's end: the rest of the prompt is cold */
    depth[3] = 9;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 3);
    CHECK(ch.cost == 8000 - 900 + 50);

    /* a key that ends inside a block: its last whole block is its end */
    in.units = 1050;
    depth[3] = 10;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.cost == 50);

    /* no text past the key: the whole prompt is the key, as before */
    in.units = 1000;
    in.total_units = 1000;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.cost == 50);

    in.total_units = 1050;
    in.units = 1050;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.cost == 50 + 50);

    /*
     * the work bound: the holder of the key's end has 6,000 units in
     * flight, the others none; what it saves (the prompt, 8,000) is its
     * slack: it keeps the document.  Counted as a 7,000-unit cold prefill
     * with a slack of the key (1,000), it spilled
     */
    setup(&in, &cl, depth, found);
    in.total_units = 8000;
    in.balance = 125;
    in.slack = 1100;
    cl.work[3] = 6000;
    depth[3] = 10;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 3 && ch.cost == 0);

    depth[3] = 9;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_SPILL && ch.server != 3);

    /*
     * cap=cost: 8,000 saved against a block computed, over the cap up to
     * twice it; a block short of the key's end saves 900 against 7,100
     * computed: the hard cap
     */
    setup(&in, &cl, depth, found);
    in.total_units = 8000;
    in.threshold = 4;
    in.slack = 1100;
    in.cap = PA_CAP_COST;
    depth[3] = 10;
    set_found(&in, depth, found);
    CHECK(at_cap(&in, &cl, 5) == 1);
    CHECK(at_cap(&in, &cl, 7) == 1);
    CHECK(at_cap(&in, &cl, 8) == 0);
    depth[3] = 9;
    CHECK(at_cap(&in, &cl, 4) == 0);

    /* place=cost: the holder while its work is under the prompt's */
    setup(&in, &cl, depth, found);
    in.total_units = 8000;
    in.place = PA_PLACE_COST;
    depth[3] = 10;
    set_found(&in, depth, found);
    cl.work[3] = 7900;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 3);
    cl.work[3] = 8100;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.server != 3 && ch.depth == 0);
}


/*
 * an idle cluster with balance=1.25 and a work bound's slack too wide to
 * bind a match; returns the ring home of the request's key, placed cold
 */

static uint32_t
cold_home(pa_choose_in_t *in, cluster_t *cl, uint32_t *depth,
    uint32_t *found)
{
    pa_choice_t  ch;

    setup(in, cl, depth, found);
    in->balance = 125;
    in->slack = 1000000;

    CHECK(pa_choose(in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD);

    return ch.server;
}


/*
 * the work bound's slack is for matches: a request placed cold is held
 * to F x the mean work itself
 */

static void
test_cold_strict(void)
{
    uint32_t        i, home, depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    home = cold_home(&in, &cl, depth, found);

    /* 3000 on the home: 3000 > 1.25 x (3000 + 1000) / 8, passed over */
    cl.work[home] = 3000;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server != home);
    CHECK(cl.work[ch.server] == 0);

    /* 3000 on every server: 3000 <= 1.25 x 25000 / 8, home again */
    for (i = 0; i < NSRV; i++) {
        cl.work[i] = 3000;
    }
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == home);

    /* the home alone busy but holding the prefix: a match, in the slack */
    for (i = 0; i < NSRV; i++) {
        cl.work[i] = 0;
    }

    cl.work[home] = 3000;
    depth[home] = 10;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == home);

    /* cold=least: the least work, the same bound */
    depth[home] = 0;
    set_found(&in, depth, found);
    in.cold = PA_COLD_LEAST;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server != home);
}


/*
 * cold placement counts requests too: a home with more than the ceiling
 * of F x the mean requests in flight is passed over on the ring, while
 * a match stays under the loose work bound only
 */

static void
test_cold_ceiling(void)
{
    uint32_t        i, home, depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    home = cold_home(&in, &cl, depth, found);

    /* 7 in flight on the home alone: 7 >= 1.25 x 8 / 8 + 1, passed over */
    cl.inflight[home] = 7;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server != home);
    CHECK(cl.inflight[ch.server] == 0);

    /* one in flight on the home: 1 < 1.25 x 2 / 8 + 1, it stays home */
    cl.inflight[home] = 1;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == home);

    /* two on the home and one elsewhere: 2 >= 1.25 x 4 / 8 + 1 */
    cl.inflight[home] = 2;
    cl.inflight[(home + 1) % NSRV] = 1;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server != home);

    /* 2 in flight on every server: 2 < 1.25 x 17 / 8 + 1, home again */
    for (i = 0; i < NSRV; i++) {
        cl.inflight[i] = 2;
    }
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == home);

    /* the same home holding the prefix takes it as a match, though busy */
    for (i = 0; i < NSRV; i++) {
        cl.inflight[i] = 0;
    }

    cl.inflight[home] = 7;
    depth[home] = 10;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == home);

    /* balance=off: no ceiling either */
    depth[home] = 0;
    set_found(&in, depth, found);
    in.balance = 0;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == home);
}


static void
test_least(void)
{
    uint32_t        i, k, depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);

    /* every server at the cap: the least work, with either option */
    in.threshold = 3;

    for (i = 0; i < NSRV; i++) {
        cl.inflight[i] = 3;
        cl.work[i] = 100 + i;
    }

    cl.work[6] = 20;

    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == 6);

    in.cold = PA_COLD_LEAST;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == 6);

    /* the work counted is the work after the request: a holder's is less */
    depth[3] = 9;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == 3 && ch.depth == 9);
    CHECK(ch.cost == 100);

    /*
     * overload=holder: a holder with far more work, while it has fewer
     * than "threshold" (3) more in flight than the least busy (3): kept;
     * at 6 in flight, the least work again; without it, the least work
     */
    cl.work[3] = 5000;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == 6);

    in.holder = 1;
    cl.inflight[3] = 5;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == 3 && ch.depth == 9);

    cl.inflight[3] = 6;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == 6);

    in.cold = PA_COLD_RING;
    cl.inflight[3] = 4;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == 3);

    in.cold = PA_COLD_LEAST;
    in.holder = 0;
    cl.inflight[3] = 3;
    cl.work[3] = 100 + 3;

    /*
     * cold=auto: nobody holds a block, the ring's home (server 6, the
     * least work, is not it); a holder of too small a part, the least
     * work after the request
     */
    in.threshold = 0;

    for (i = 0; i < NSRV; i++) {
        cl.inflight[i] = 0;
        cl.work[i] = 100;
        depth[i] = 0;
    }

    cl.work[6] = 20;
    set_found(&in, depth, found);

    in.cold = PA_COLD_RING;
    CHECK(pa_choose(&in, &ch) == 0);
    k = ch.server;
    CHECK(ch.kind == PA_CHOICE_COLD && k != 6);

    in.cold = PA_COLD_AUTO;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == k);

    /* 300 + 900 after it on the holder, 20 + 1000 on server 6 */
    in.match = 60;
    depth[(k + 1) % NSRV] = 1;
    cl.work[(k + 1) % NSRV] = 300;
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == 6);

    /* 100 + 900 < 20 + 1000 */
    cl.work[(k + 1) % NSRV] = 100;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == (k + 1) % NSRV
          && ch.depth == 1);

    in.cold = PA_COLD_RING;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == k);

    /*
     * place=cost: the holder of 9 blocks of 10 while it saves more than
     * the work it has over the others; then the least work, the deepest
     * on a tie; over the cap, not chosen unless all are
     */
    in.cold = PA_COLD_RING;
    in.place = PA_PLACE_COST;

    for (i = 0; i < NSRV; i++) {
        cl.work[i] = 100;
        depth[i] = 0;
    }

    depth[4] = 9;
    cl.work[4] = 950;             /* 950 + 100 < 100 + 1000 */
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 4 && ch.depth == 9);

    cl.work[4] = 1050;            /* 1050 + 100 > 100 + 1000 */
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server != 4 && ch.depth == 0);

    depth[2] = 1;                 /* 100 + 900 */
    set_found(&in, depth, found);
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == 2 && ch.depth == 1);

    in.threshold = 2;
    cl.inflight[2] = 2;
    cl.work[4] = 950;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 4);

    for (i = 0; i < NSRV; i++) {
        cl.inflight[i] = 2;
    }

    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == 2);

    in.place = PA_PLACE_DEEPEST;
    in.threshold = 0;
    in.cold = PA_COLD_LEAST;
    in.match = 0;

    /* nothing usable */
    for (i = 0; i < NSRV; i++) {
        cl.down[i] = 1;
    }

    CHECK(pa_choose(&in, &ch) == -1);
    CHECK(ch.kind == PA_CHOICE_NONE);

    in.cold = PA_COLD_RING;
    CHECK(pa_choose(&in, &ch) == -1);

    in.nservers = 0;
    CHECK(pa_choose(&in, &ch) == -1);

    CHECK(strcmp(pa_choice_name(PA_CHOICE_SPILL), "spill") == 0);
    CHECK(strcmp(pa_choice_name(PA_CHOICE_MATCH), "match") == 0);
}


static void
test_weights(void)
{
    uint32_t        i, depth[NSRV], found[NSRV];
    cluster_t       cl;
    pa_choice_t     ch;
    pa_choose_in_t  in;

    setup(&in, &cl, depth, found);
    in.cold = PA_COLD_LEAST;

    for (i = 0; i < NSRV; i++) {
        cl.work[i] = 1000;
    }

    /* 1150 / 2 < 1100 / 1 */
    cl.work[2] = 100;
    cl.work[5] = 150;
    cl.weight[5] = 2;
    in.units = 1000;

    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.server == 5);

    /*
     * the relative bound per weight: server 2 holds a block (100 units
     * saved), has 1100 in flight and the request costs it 900; the mean
     * with the request is (7250 + 900) / 9 = 905.6 per weight, F = 1.11
     * gives 1005.2 + 100 >= 1100: within
     */
    in.balance = 111;
    depth[2] = 1;
    set_found(&in, depth, found);
    cl.work[2] = 1100;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_MATCH && ch.server == 2 && ch.cost == 900);

    /* F = 1.10 gives 996.1 + 100 < 1100: over, server 5 has room */
    in.balance = 110;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_SPILL && ch.server == 5);
}


#define NWALK  64


typedef struct {
    uint64_t        work[NWALK];
    uint64_t        inflight[NWALK];
} walk_cluster_t;


static int
walk_probe(void *ctx, uint32_t server, pa_load_t *load)
{
    walk_cluster_t  *cl = ctx;

    load->work = cl->work[server];
    load->inflight = cl->inflight[server];
    load->weight = 1;
    load->id_hash = 0x1000 + server * 0x9e3779b97f4a7c15ULL;

    return PA_SERVER_USABLE;
}


/*
 * option A meets at most 20 servers on the ring, in ring order; then it
 * takes the least work within the bounds over all servers, and the least
 * work if none is within them
 */

static void
test_walk_bound(void)
{
    uint32_t           i, k, s, n, order[NWALK];
    pa_choice_t        ch;
    pa_choose_in_t     in;
    walk_cluster_t     cl;
    pa_ring_t          wring;
    pa_ring_point_t   *wpoints;
    unsigned char      wseen[(NWALK + 7) / 8];
    char               names[NWALK][32];
    pa_ring_server_t   srv[NWALK];

    wpoints = ring_new(&wring, srv, names, NWALK, 1);
    CHECK(wpoints != NULL);

    if (wpoints == NULL) {
        return;
    }

    memset(&in, 0, sizeof(pa_choose_in_t));
    memset(&cl, 0, sizeof(walk_cluster_t));

    in.key = 0xfeedfacecafebeefULL;
    in.units = 1000;
    in.block_units = 100;
    in.nservers = NWALK;
    in.threshold = 2;
    in.cold = PA_COLD_RING;
    in.ring = &wring;
    in.probe = walk_probe;
    in.ctx = &cl;
    in.seen = wseen;

    /* the servers in the order the ring meets them from the key */

    memset(wseen, 0, sizeof(wseen));
    n = 0;
    k = pa_ring_find(&wring, in.key);

    while (n < NWALK) {
        s = wring.points[k].server;
        k = (k + 1) % wring.npoints;

        if (!(wseen[s >> 3] & (1u << (s & 7)))) {
            wseen[s >> 3] |= (unsigned char) (1u << (s & 7));
            order[n++] = s;
        }
    }

    for (i = 0; i < NWALK; i++) {
        cl.inflight[i] = 2;
        cl.work[i] = 100 + i;
    }

    /* within the first 20 met: ring order, whatever the work */
    cl.inflight[order[9]] = cl.inflight[order[14]] = 0;
    cl.work[order[14]] = 1;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == order[9]);

    /* past them: the least work within the bounds */
    cl.inflight[order[9]] = cl.inflight[order[14]] = 2;
    cl.inflight[order[29]] = cl.inflight[order[39]] = 0;
    cl.work[order[39]] = 2;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_COLD && ch.server == order[39]);

    /* every server at the cap: the least work of all */
    cl.inflight[order[29]] = cl.inflight[order[39]] = 2;
    cl.work[order[50]] = 0;
    CHECK(pa_choose(&in, &ch) == 0);
    CHECK(ch.kind == PA_CHOICE_LEAST && ch.server == order[50]);

    free(wpoints);
}


/* a ring of n servers named "10.<net>.0.<i>:8000", i from 1 */

static pa_ring_point_t *
ring_new(pa_ring_t *r, pa_ring_server_t *srv, char (*names)[32], uint32_t n,
    unsigned net)
{
    uint32_t          i;
    pa_ring_point_t  *p;

    for (i = 0; i < n; i++) {
        snprintf(names[i], 32, "10.%u.0.%u:8000", net, i + 1);
        srv[i].name = (const unsigned char *) names[i];
        srv[i].len = strlen(names[i]);
        srv[i].weight = 1;
    }

    p = malloc(pa_ring_points(srv, n) * sizeof(pa_ring_point_t));

    if (p != NULL && pa_ring_build(r, p, srv, n) != 0) {
        free(p);
        p = NULL;
    }

    return p;
}


int
main(void)
{
    char              names[NSRV][32];
    pa_ring_server_t  srv[NSRV];

    points = ring_new(&ring, srv, names, NSRV, 0);
    if (points == NULL) {
        return 1;
    }

    test_cost();
    test_match();
    test_bounds();
    test_cold_ring();
    test_cold_least();
    test_cold_two();
    test_cap_saved();
    test_cap_cost();
    test_past_key();
    test_cold_ceiling();
    test_cold_strict();
    test_least();
    test_weights();
    test_walk_bound();

    free(points);

    return UNIT_DONE();
}
