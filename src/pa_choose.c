
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 */


#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "pa_choose.h"


/*
 * servers met on the ring before the rest are scanned in index order, as
 * nginx's hash balancer gives up its ring after 20 tries: when every
 * server is over a bound a walk of the whole ring visits about N ln N
 * points (14 us at 1024 servers), a scan N probes
 */
#define PA_CHOOSE_WALK  20


/* a candidate, compared by depth, then work per weight, then its tie */
typedef struct {
    uint64_t        after;        /* work in flight with the request */
    uint64_t        cost;
    uint64_t        held;         /* units of the prompt held there */
    uint64_t        tie;          /* once has_tie */
    uint64_t        id_hash;
    uint64_t        inflight;
    uint32_t        server;
    uint32_t        depth;
    uint32_t        weight;
    uint32_t        have;
    uint32_t        has_tie;
} pa_cand_t;


static void pa_choose_totals(const pa_choose_in_t *in, uint64_t *work,
    uint64_t *weight, uint64_t *inflight);
static int pa_choose_load(const pa_choose_in_t *in, uint32_t s,
    pa_load_t *load, pa_cand_t *c);
static int pa_choose_within(const pa_choose_in_t *in, const pa_load_t *load,
    const pa_cand_t *c, uint64_t total_work, uint64_t total_weight,
    uint64_t slack);
static int pa_choose_cold_within(const pa_choose_in_t *in,
    const pa_load_t *load, const pa_cand_t *c, uint64_t total_inflight,
    uint64_t total_weight);
static int pa_choose_better(const pa_choose_in_t *in, pa_cand_t *a,
    pa_cand_t *b, int by_depth);
static uint64_t pa_choose_tie(const pa_choose_in_t *in, pa_cand_t *c);
static void pa_choose_set(pa_choice_t *out, const pa_cand_t *c,
    pa_choice_e kind);
static uint64_t pa_choose_mix(uint64_t z);
static uint64_t pa_choose_held(const pa_choose_in_t *in, uint32_t depth);
static int pa_choose_by_cost(const pa_choose_in_t *in, pa_choice_t *out);


int
pa_choose(const pa_choose_in_t *in, pa_choice_t *out)
{
    int               over, scan;
    uint32_t          i, k, s, nseen;
    uint64_t          tw, tweight, tin, fewest;
    pa_cand_t         c, best, least, first, hold;
    pa_load_t         load;
    const pa_ring_t  *ring;

    memset(out, 0, sizeof(pa_choice_t));
    out->kind = PA_CHOICE_NONE;

    if (in->nservers == 0) {
        return -1;
    }

    if (in->place == PA_PLACE_COST) {
        return pa_choose_by_cost(in, out);
    }

    if (in->totals) {
        tw = in->total_work;
        tweight = in->total_weight;
        tin = in->total_inflight;

    } else {
        pa_choose_totals(in, &tw, &tweight, &tin);
    }

    memset(&best, 0, sizeof(pa_cand_t));
    memset(&least, 0, sizeof(pa_cand_t));
    memset(&first, 0, sizeof(pa_cand_t));
    memset(&hold, 0, sizeof(pa_cand_t));
    over = 0;
    fewest = UINT64_MAX;

    /* the servers that hold a part of the prefix: the deepest in bounds */

    for (i = 0; i < in->nfound; i++) {
        s = in->found[i];

        if (s >= in->nservers || in->depth[s] == 0) {
            continue;
        }

        /*
         * a match of a small part of the prefix, as a system prompt
         * shared by every conversation, does not outweigh the ring: the
         * rest of the prefix, and the requests that will share it, go to
         * the key's home
         */

        if ((uint64_t) in->depth[s] * in->block_units * 100
            < (uint64_t) in->match * in->units)
        {
            continue;
        }

        if (pa_choose_load(in, s, &load, &c) != PA_SERVER_USABLE) {
            continue;
        }

        /*
         * a holder may be over the bound by the prefill it saves: sent
         * elsewhere, the request would add that much work there, as
         * Dynamo's KV router weighs it.  A long history (an agent's)
         * stays on its server while that server is not busier by more
         * than the history; a document of a few blocks, by "slack"
         */

        if (!pa_choose_within(in, &load, &c, tw, tweight,
                              (c.held > in->slack) ? c.held : in->slack))
        {
            over = 1;

            if (pa_choose_better(in, &c, &hold, 1)) {
                hold = c;
            }

            continue;
        }

        if (pa_choose_better(in, &c, &best, 1)) {
            best = c;
        }
    }

    if (best.have) {
        pa_choose_set(out, &best, PA_CHOICE_MATCH);
        return 0;
    }

    /*
     * cold, or every holder is over a bound: option A walks the ring from
     * the key's point to the first server within the bounds, so that
     * independent balancers agree and a new prefix has a stable home
     * (cold=two, the default: to the first two, the less work of them);
     * option B takes the least work within the bounds, as does option A
     * once PA_CHOOSE_WALK servers were met on the ring and none was
     */

    ring = in->ring;
    scan = 1;

    /*
     * option C (auto): a prefix that servers hold a part of, too little
     * for a match (a system prompt, a document, the start of a
     * conversation), goes by the least work after the request, which
     * counts what each server holds; one nobody holds has a home
     */

    if ((in->cold == PA_COLD_RING || in->cold == PA_COLD_TWO
         || (in->cold == PA_COLD_AUTO && in->nfound == 0))
        && ring != NULL && ring->npoints > 0
        && ring->nservers == in->nservers)
    {
        memset(in->seen, 0, (in->nservers + 7) / 8);

        nseen = 0;
        i = pa_ring_find(ring, in->key);

        for (k = 0;
             k < ring->npoints && nseen < in->nservers
             && nseen < PA_CHOOSE_WALK;
             k++)
        {
            s = ring->points[i].server;

            if (++i == ring->npoints) {
                i = 0;
            }

            if (in->seen[s >> 3] & (1u << (s & 7))) {
                continue;
            }

            in->seen[s >> 3] |= (unsigned char) (1u << (s & 7));
            nseen++;

            if (pa_choose_load(in, s, &load, &c) != PA_SERVER_USABLE) {
                continue;
            }

            fewest = (load.inflight < fewest) ? load.inflight : fewest;

            if (pa_choose_within(in, &load, &c, tw, tweight, 0)
                && pa_choose_cold_within(in, &load, &c, tin, tweight))
            {
                if (in->cold == PA_COLD_TWO && !first.have) {
                    first = c;
                    continue;
                }

                /*
                 * two choices: the second only for less work after the
                 * request, its prefill past what each holds counted, so
                 * that an idle cluster keeps the home
                 */

                if (first.have
                    && c.after * first.weight >= first.after * c.weight)
                {
                    c = first;
                }

                pa_choose_set(out, &c,
                              over ? PA_CHOICE_SPILL : PA_CHOICE_COLD);
                return 0;
            }

            if (pa_choose_better(in, &c, &least, 0)) {
                least = c;
            }
        }

        if (first.have) {
            pa_choose_set(out, &first,
                          over ? PA_CHOICE_SPILL : PA_CHOICE_COLD);
            return 0;
        }

        /* every server was met: the least work among them */
        scan = (nseen < in->nservers);
    }

    if (scan) {

        for (s = 0; s < in->nservers; s++) {

            if (pa_choose_load(in, s, &load, &c) != PA_SERVER_USABLE) {
                continue;
            }

            fewest = (load.inflight < fewest) ? load.inflight : fewest;

            if (pa_choose_better(in, &c, &least, 0)) {
                least = c;
            }

            if (pa_choose_within(in, &load, &c, tw, tweight, 0)
                && pa_choose_cold_within(in, &load, &c, tin, tweight)
                && pa_choose_better(in, &c, &best, 0))
            {
                best = c;
            }
        }

        if (best.have) {
            pa_choose_set(out, &best,
                          over ? PA_CHOICE_SPILL : PA_CHOICE_COLD);
            return 0;
        }
    }

    if (!least.have) {
        return -1;
    }

    /*
     * overload=holder: every server over a bound, the deepest holder of a
     * match keeps the request while it has fewer than "threshold" more
     * in flight than the least busy server: no server idles at overload,
     * so the least work buys nothing the holder's cache does not, and a
     * tenant's prompt is not computed again on every server (as SGLang's
     * gateway keeps a prefix on its worker until the loads differ by its
     * absolute and relative thresholds)
     */

    if (in->holder && hold.have && in->threshold != 0
        && hold.inflight < fewest + in->threshold)
    {
        pa_choose_set(out, &hold, PA_CHOICE_LEAST);
        return 0;
    }

    pa_choose_set(out, &least, PA_CHOICE_LEAST);

    return 0;
}


/*
 * place=cost: of every server under the cap on requests, the least work
 * after the request, its prefill past the blocks each server holds
 * counted there (Dynamo's KV router's cost with its default weights, in
 * the module's own counts): a holder is chosen while what it saves is
 * more than the work it has over the others.  Over the cap everywhere:
 * the least work.
 */

static int
pa_choose_by_cost(const pa_choose_in_t *in, pa_choice_t *out)
{
    uint32_t   s;
    pa_cand_t  c, best, least;
    pa_load_t  load;

    memset(&best, 0, sizeof(pa_cand_t));
    memset(&least, 0, sizeof(pa_cand_t));

    for (s = 0; s < in->nservers; s++) {
        if (pa_choose_load(in, s, &load, &c) != PA_SERVER_USABLE) {
            continue;
        }

        if (pa_choose_better(in, &c, &least, 0)) {
            least = c;
        }

        if (in->threshold != 0 && load.inflight >= in->threshold) {
            continue;
        }

        if (pa_choose_better(in, &c, &best, 0)) {
            best = c;
        }
    }

    if (best.have) {
        pa_choose_set(out, &best,
                      ((uint64_t) best.depth * in->block_units * 100
                       >= (uint64_t) in->match * in->units && best.depth)
                      ? PA_CHOICE_MATCH : PA_CHOICE_COLD);
        return 0;
    }

    if (!least.have) {
        return -1;
    }

    pa_choose_set(out, &least, PA_CHOICE_LEAST);

    return 0;
}


uint64_t
pa_choose_cost(uint64_t units, uint32_t depth, uint32_t block_units,
    uint64_t decode)
{
    uint64_t  cached;

    cached = (uint64_t) depth * block_units;

    return ((units > cached) ? units - cached : 0) + decode;
}


/*
 * where "length" cut the key short of the prompt (total over units), a
 * match that reaches the key's last whole block holds the text past the
 * key too, most likely: the rest of the same document or history, which
 * the engine cached with the key's text.  Without that, every hit of a
 * document longer than "length" counted as a cold prefill of its rest:
 * the work bound and cap=cost spilled it and documents were computed
 * again elsewhere (issue 43)
 */

int
pa_choose_holds_past(uint64_t units, uint64_t total, uint32_t depth,
    uint32_t block_units)
{
    return depth != 0 && total > units
           && (uint64_t) depth * block_units + block_units > units;
}


/* the units of the request's prompt that a server of "depth" holds */

static uint64_t
pa_choose_held(const pa_choose_in_t *in, uint32_t depth)
{
    uint64_t  held, total;

    held = (uint64_t) depth * in->block_units;
    total = in->total_units ? in->total_units : in->units;

    if (pa_choose_holds_past(in->units, total, depth, in->block_units)) {
        return total;
    }

    return (held < total) ? held : total;
}


const char *
pa_choice_name(pa_choice_e kind)
{
    switch (kind) {

    case PA_CHOICE_NONE:
        return "none";

    case PA_CHOICE_MATCH:
        return "match";

    case PA_CHOICE_COLD:
        return "cold";

    case PA_CHOICE_SPILL:
        return "spill";

    case PA_CHOICE_LEAST:
        return "least";
    }

    return "unknown";
}


static void
pa_choose_totals(const pa_choose_in_t *in, uint64_t *work, uint64_t *weight,
    uint64_t *inflight)
{
    uint32_t   s;
    pa_load_t  load;

    *work = 0;
    *weight = 0;
    *inflight = 0;

    for (s = 0; s < in->nservers; s++) {
        memset(&load, 0, sizeof(pa_load_t));

        if (in->probe(in->ctx, s, &load) != PA_SERVER_USABLE) {
            continue;
        }

        *work += load.work;
        *weight += load.weight ? load.weight : 1;
        *inflight += load.inflight;
    }
}


static int
pa_choose_load(const pa_choose_in_t *in, uint32_t s, pa_load_t *load,
    pa_cand_t *c)
{
    int  rc;

    memset(load, 0, sizeof(pa_load_t));

    rc = in->probe(in->ctx, s, load);

    c->server = s;
    c->depth = (in->depth != NULL) ? in->depth[s] : 0;
    c->held = pa_choose_held(in, c->depth);
    c->cost = (in->total_units ? in->total_units : in->units) - c->held
              + in->decode;
    c->after = load->work + c->cost;
    c->weight = load->weight ? load->weight : 1;
    c->has_tie = 0;
    c->id_hash = load->id_hash;
    c->inflight = load->inflight;
    c->have = 1;

    return rc;
}


/*
 * the cap on requests, and work at most F times the mean work per
 * weight, the request included so that an idle cluster accepts, plus
 * "slack"; as the ceiling does in consistent hashing with bounded loads,
 * an idle server always has room for one request
 */

static int
pa_choose_within(const pa_choose_in_t *in, const pa_load_t *load,
    const pa_cand_t *c, uint64_t total_work, uint64_t total_weight,
    uint64_t slack)
{
    double    lhs, rhs;
    uint64_t  over, saved, rest;

    if (in->threshold != 0 && load->inflight >= in->threshold) {

        /*
         * cap=saved: a match that saves more prefill than a cold request
         * has (an agent's history) may wait at its server, one request
         * over the cap for each such prefill it saves, up to twice the
         * cap: sent elsewhere, its history would be computed again in
         * front of that server's requests.  "slack" is the prefill it
         * saves where that is more than in->slack
         */

        if (in->cap == PA_CAP_HARD || slack == 0 || in->slack == 0
            || load->inflight >= 2 * in->threshold)
        {
            return 0;
        }

        over = load->inflight - in->threshold + 1;

        if (in->cap == PA_CAP_COST) {

            /*
             * cap=cost: one request over the cap for each time the
             * prefill the match saves covers the prefill the request
             * still has there (at least a block, at most "slack": what
             * cap=saved lets over, cap=cost does too)
             */

            saved = c->held;
            rest = (c->cost > in->decode) ? c->cost - in->decode : 0;
            rest = (rest > in->block_units) ? rest : in->block_units;
            rest = (rest < in->slack) ? rest : in->slack;

            /* rest is 0 only with blocks of 0 units: nothing saved */

            if (rest == 0 || over > saved / rest) {
                return 0;
            }

        } else if (slack <= in->slack || over > slack / in->slack) {
            return 0;
        }
    }

    if (in->balance == 0 || load->work == 0 || total_weight == 0) {
        return 1;
    }

    /*
     * work / weight <= F / 100 * (total + cost) / total_weight: a server
     * not above the bound takes the request, whatever its cost, as a
     * server below the ceiling takes one in consistent hashing with
     * bounded loads; a bound on the work after it would turn a single
     * long prompt away from every server that has any work at all.
     * "slack" more (a cold request's work) keeps a few requests in
     * flight from looking like an imbalance for a match, whose hits are
     * worth a little more work: the mean of a few long and short
     * prompts says little, as in the absolute threshold of SGLang's
     * gateway.  A request placed cold has no hit to keep and is held to
     * the bound itself (slack 0): with the slack, cold prompts piled
     * their prefill on one server while cached requests waited behind
     * it (code completion's P99)
     */

    lhs = (double) load->work * (double) total_weight * 100.0;
    rhs = (double) in->balance * (double) (total_work + c->cost)
          * (double) c->weight
          + 100.0 * (double) slack * (double) c->weight
            * (double) total_weight;

    return lhs <= rhs;
}


/*
 * a prefix placed cold (nobody holds enough of it, or its holders are
 * over a bound) takes a server only below the ceiling of consistent
 * hashing with bounded loads, counted in requests, plus one request:
 * inflight < F x (requests in flight + 1) x weight / total weight + 1.
 * The work bound is loose (a cold request's slack) so that matches keep
 * their history; without this one, a few hot prefixes placed cold (one
 * system prompt per tenant) kept their homes busy while a server idled.
 * The one request more keeps a lightly loaded cluster at the ring's
 * home (without it, code completion lost 2 points of hit rate)
 */

static int
pa_choose_cold_within(const pa_choose_in_t *in, const pa_load_t *load,
    const pa_cand_t *c, uint64_t total_inflight, uint64_t total_weight)
{
    uint64_t  lhs, rhs;

    if (in->balance == 0 || total_weight == 0) {
        return 1;
    }

    /* inflight < F (I + 1) w / W + 1, multiplied by 100 W */

    lhs = load->inflight * total_weight * 100;
    rhs = (uint64_t) in->balance * (total_inflight + 1) * c->weight
          + 100 * total_weight;

    return lhs < rhs;
}


static int
pa_choose_better(const pa_choose_in_t *in, pa_cand_t *a, pa_cand_t *b,
    int by_depth)
{
    uint64_t  x, y, ta, tb;

    if (!b->have) {
        return 1;
    }

    if (by_depth && a->depth != b->depth) {
        return a->depth > b->depth;
    }

    /* a->after / a->weight < b->after / b->weight, without division */

    x = a->after * b->weight;
    y = b->after * a->weight;

    if (x != y) {
        return x < y;
    }

    /*
     * equals are ranked by a rendezvous hash of the key and the server's
     * stable identity: another balancer ranks them the same, as the ring
     * order would, without a walk of the ring per candidate
     */

    ta = pa_choose_tie(in, a);
    tb = pa_choose_tie(in, b);

    if (ta != tb) {
        return ta > tb;
    }

    return a->server < b->server;
}


static void
pa_choose_set(pa_choice_t *out, const pa_cand_t *c, pa_choice_e kind)
{
    out->server = c->server;
    out->depth = c->depth;
    out->cost = c->cost;
    out->kind = kind;
}


/* the rendezvous hash, computed only for candidates that tie on work */

static uint64_t
pa_choose_tie(const pa_choose_in_t *in, pa_cand_t *c)
{
    if (!c->has_tie) {
        c->tie = pa_choose_mix(in->key ^ pa_choose_mix(c->id_hash));
        c->has_tie = 1;
    }

    return c->tie;
}


/* splitmix64's finalizer */

static uint64_t
pa_choose_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}
