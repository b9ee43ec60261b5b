
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The module's own work per request, apart from nginx: the body key (XXH3
 * over the first "length" bytes, fed in 4 KB buffers as nginx holds a
 * body), the mix with a tenant id, and the bounded-load ring walk, for
 * rings of 4, 16, 64 and 1024 servers, idle and with every server at the
 * threshold (the longest walk).  Best of 5 slices of 0.1 s of the
 * thread's cpu time; markdown tables in nanoseconds per request.
 *
 * Then routing v2 (docs/routing-v2.md): chained block keys, the prefix
 * index, the choice and the record, for 4, 64 and 1024 servers, 4 KB and
 * 64 KB prefixes and blocks of 64, 128 and 256 units, for a prefix seen
 * before and a new one, next to today's path (body key + ring walk) for
 * the same prefix and servers.  "BENCH_V2=0" in the environment skips it.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pa_key.h"
#include "pa_ring.h"
#include "pa_block.h"
#include "pa_index.h"
#include "pa_choose.h"


#define B_SLICES     5
#define B_SLICE      0.1
#define B_MAX_SRV    1024
#define B_BODY       (64 * 1024)
#define B_KEYS       1024
#define B_BATCH      16             /* requests between two clock reads */

#define B_BODIES     64             /* request bodies cycled through */
#define B_PROMPTS    8              /* shared first halves among them */
#define B_MAX_BLK    1024
#define B_ENTRIES    (1u << 20)     /* index entries */
#define B_HOLDERS    4
#define B_SEED       0x746e616e74ULL  /* model, cache_salt, tenant */


typedef struct {
    uint64_t        inflight[B_MAX_SRV];
} b_load_t;


typedef struct {
    uint64_t        work[B_MAX_SRV];
    uint64_t        inflight[B_MAX_SRV];
    uint64_t        id_hash[B_MAX_SRV];
} b_v2_load_t;


/* one configuration of routing v2 and its measures, ns per request */
typedef struct {
    uint32_t        nservers;
    uint32_t        block;
    size_t          prefix;
    int             is_char;
    int             spread;         /* records to any server: full walks */
    int             stress;         /* 1: totals summed, 2: all over cap */
    double          hash;
    double          match;
    double          choose;
    double          record;
    double          total;
    double          cold;
    double          today;
} b_v2_t;


static double b_now(void);
static int b_probe(void *ctx, uint32_t server, uint64_t *inflight);
static double b_key_ns(const unsigned char *body, size_t size, size_t length);
static double b_pick_ns(uint32_t n, uint64_t busy);
static void b_ring(uint32_t n, pa_ring_t *ring, pa_ring_point_t **points);
static int b_v2_probe(void *ctx, uint32_t server, pa_load_t *load);
static uint32_t b_v2_hash(pa_blocks_t *b, const unsigned char *body,
    const b_v2_t *cf, uint64_t *hashes, uint64_t seed);
static void b_v2_run(b_v2_t *cf, unsigned char **bodies, pa_index_t *idx,
    const pa_ring_t *ring);
static void b_v2(unsigned char **bodies);


static volatile uint64_t  b_sink;
static b_v2_load_t        b_v2_load;
static uint64_t           b_v2_tenant;


int
main(void)
{
    size_t          i;
    uint32_t        n;
    unsigned char  *body;
    unsigned char  *bodies[B_BODIES];
    const char     *env;
    static const uint32_t  servers[] = { 4, 16, 64, 1024 };

    body = malloc(B_BODY);
    if (body == NULL) {
        return 1;
    }

    srand(1);

    for (i = 0; i < B_BODY; i++) {
        body[i] = (unsigned char) (' ' + rand() % 95);
    }

    printf("| work | ns per request |\n|---|---:|\n");
    printf("| body key, length=4096, 4 KB body | %.0f |\n",
           b_key_ns(body, 4096, 4096));
    printf("| body key, length=4096, 64 KB body | %.0f |\n",
           b_key_ns(body, B_BODY, 4096));
    printf("| body key, length=65536, 64 KB body | %.0f |\n",
           b_key_ns(body, B_BODY, 65536));

    for (i = 0; i < sizeof(servers) / sizeof(servers[0]); i++) {
        n = servers[i];
        printf("| ring walk, %u servers, idle | %.0f |\n", n,
               b_pick_ns(n, 0));
        printf("| ring walk, %u servers, all at threshold | %.0f |\n", n,
               b_pick_ns(n, 10));
    }

    env = getenv("BENCH_V2");

    if (env == NULL || strcmp(env, "0") != 0) {

        /* a shared first half, then text of its own, as chat requests */

        for (i = 0; i < B_BODIES; i++) {
            bodies[i] = malloc(B_BODY);
            if (bodies[i] == NULL) {
                return 1;
            }

            for (n = 0; n < B_BODY; n++) {
                bodies[i][n] = (unsigned char) (' ' + rand() % 95);
            }

            if (i >= B_PROMPTS) {
                memcpy(bodies[i], bodies[i % B_PROMPTS], B_BODY / 2);
            }
        }

        b_v2(bodies);

        for (i = 0; i < B_BODIES; i++) {
            free(bodies[i]);
        }
    }

    free(body);

    return 0;
}


static double
b_now(void)
{
    struct timespec  ts;

    /*
     * the thread's cpu time, not the wall clock: on a shared machine the
     * time the thread waits for a cpu is not the module's work
     */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


static int
b_probe(void *ctx, uint32_t server, uint64_t *inflight)
{
    b_load_t  *load = ctx;

    *inflight = load->inflight[server];

    return PA_SERVER_USABLE;
}


static double
b_key_ns(const unsigned char *body, size_t size, size_t length)
{
    int             s, r;
    size_t          off, chunk;
    double          start, best, t;
    uint64_t        ops, h;
    pa_body_key_t   k;

    best = 1e18;

    for (s = 0; s < B_SLICES; s++) {
        ops = 0;
        start = b_now();

        do {
            for (r = 0; r < B_BATCH; r++) {
                pa_body_key_init(&k, length);

                for (off = 0; off < size; off += chunk) {
                    chunk = size - off < 4096 ? size - off : 4096;

                    if (pa_body_key_feed(&k, body + off, chunk) == 0) {
                        break;
                    }
                }

                h = pa_key_mix(pa_body_key_digest(&k),
                               (const unsigned char *) "tenant-42", 9);
                b_sink += h;
            }

            ops += B_BATCH;

        } while ((t = b_now() - start) < B_SLICE);

        if (t / ops < best) {
            best = t / ops;
        }
    }

    return best * 1e9;
}


static double
b_pick_ns(uint32_t n, uint64_t busy)
{
    int               s;
    double            start, best, t;
    uint32_t          i;
    uint64_t          ops;
    pa_pick_t         pick;
    pa_ring_t         ring;
    unsigned char     seen[B_MAX_SRV / 8];
    pa_ring_point_t  *points;
    static b_load_t   load;

    for (i = 0; i < n; i++) {
        load.inflight[i] = busy;
    }

    b_ring(n, &ring, &points);

    best = 1e18;

    for (s = 0; s < B_SLICES; s++) {
        ops = 0;
        start = b_now();

        do {
            for (i = 0; i < B_KEYS; i++) {
                pa_ring_pick(&ring, (uint64_t) i * 0x9e3779b97f4a7c15ULL,
                             10, b_probe, &load, seen, &pick);
                b_sink += pick.server;
            }

            ops += B_KEYS;

        } while ((t = b_now() - start) < B_SLICE);

        if (t / ops < best) {
            best = t / ops;
        }
    }

    free(points);

    return best * 1e9;
}


static void
b_ring(uint32_t n, pa_ring_t *ring, pa_ring_point_t **points)
{
    char                     name[32];
    uint32_t                 i;
    static char              names[B_MAX_SRV][32];
    static pa_ring_server_t  srv[B_MAX_SRV];

    for (i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "10.0.%u.%u:8000", i / 200, i % 200);
        memcpy(names[i], name, sizeof(name));
        srv[i].name = (const unsigned char *) names[i];
        srv[i].len = strlen(names[i]);
        srv[i].weight = 1;
    }

    *points = malloc(pa_ring_points(srv, n) * sizeof(pa_ring_point_t));
    if (*points == NULL || pa_ring_build(ring, *points, srv, n) != 0) {
        exit(1);
    }
}


static int
b_v2_probe(void *ctx, uint32_t server, pa_load_t *load)
{
    b_v2_load_t  *l = ctx;

    load->work = l->work[server];
    load->inflight = l->inflight[server];
    load->id_hash = l->id_hash[server];
    load->weight = 1;

    return PA_SERVER_USABLE;
}


/* the prefix fed in the 4 KB buffers nginx holds a body in */

static uint32_t
b_v2_hash(pa_blocks_t *b, const unsigned char *body, const b_v2_t *cf,
    uint64_t *hashes, uint64_t seed)
{
    size_t  off, chunk;

    (void) pa_blocks_init(b, cf->is_char, cf->block,
                          (uint32_t) (cf->prefix / cf->block), hashes);

    for (off = 0; off < B_BODY; off += chunk) {
        chunk = B_BODY - off < 4096 ? B_BODY - off : 4096;

        if (pa_blocks_feed(b, body + off, chunk) == 0) {
            break;
        }
    }

    return pa_blocks_finish(b, seed);
}


/*
 * each slice cycles through the bodies; "match", "choose" and "record"
 * are timed alone on the hashes of the body, "total" is the whole
 * pipeline, as the module would run it per request
 */

static void
b_v2_run(b_v2_t *cf, unsigned char **bodies, pa_index_t *idx,
    const pa_ring_t *ring)
{
    int              s, r, phase;
    double           start, t, best[6];
    uint32_t         i, n, nf, nh[B_BODIES];
    uint64_t         ops;
    pa_choice_t      ch;
    pa_blocks_t     *b;
    pa_choose_in_t   in;
    static uint64_t  hashes[B_BODIES][B_MAX_BLK];
    static uint64_t  tails[B_BODIES];
    static uint32_t  chosen[B_BODIES], cdepth[B_BODIES];
    static uint32_t  depth[B_MAX_SRV], found[B_MAX_SRV];
    static unsigned char  seen[B_MAX_SRV / 8];

    b = malloc(sizeof(pa_blocks_t));
    if (b == NULL) {
        exit(1);
    }

    for (i = 0; i < B_BODIES; i++) {
        nh[i] = b_v2_hash(b, bodies[i], cf, hashes[i], B_SEED);
        tails[i] = b->tail;
    }

    memset(&in, 0, sizeof(pa_choose_in_t));
    in.decode = 256;
    in.block_units = cf->block;
    in.depth = depth;
    in.found = found;
    in.nservers = cf->nservers;
    in.balance = 125;
    in.threshold = 0;
    in.cold = PA_COLD_RING;
    in.ring = ring;
    in.totals = 1;
    in.probe = b_v2_probe;
    in.ctx = &b_v2_load;
    in.seen = seen;

    /*
     * loads of a busy cluster: up to 8 prefixes of work in flight each,
     * so that the bounds are met by some servers and not by others
     */

    for (i = 0; i < cf->nservers; i++) {
        b_v2_load.work[i] = (uint64_t) (rand() % 8) * cf->prefix
                            + rand() % 1000;
        b_v2_load.inflight[i] = (cf->stress == 2) ? 1 : rand() % 8;
        in.total_work += b_v2_load.work[i];
        in.total_weight++;
    }

    if (cf->stress == 1) {
        in.totals = 0;

    } else if (cf->stress == 2) {
        in.threshold = 1;
    }

    /* warm: two passes of the pipeline, or of records anywhere */

    for (i = 0; i < 2 * B_BODIES; i++) {
        n = nh[i % B_BODIES];
        (void) pa_index_match(idx, hashes[i % B_BODIES], n, depth,
                              cf->nservers, found, &nf);
        in.key = (n > 0) ? hashes[i % B_BODIES][0] : tails[i % B_BODIES];
        in.units = cf->prefix;
        in.nfound = nf;
        (void) pa_choose(&in, &ch);
        pa_index_record(idx, cf->spread ? (i * 7919u) % cf->nservers
                                        : ch.server,
                        hashes[i % B_BODIES], n, ch.depth);

        chosen[i % B_BODIES] = ch.server;
        cdepth[i % B_BODIES] = ch.depth;
    }

    for (phase = 0; phase < 6; phase++) {
        best[phase] = 1e18;

        for (s = 0; s < B_SLICES; s++) {
            ops = 0;
            start = b_now();

            do {
                for (r = 0; r < B_BATCH; r++, ops++) {
                    i = ops % B_BODIES;
                    n = nh[i];

                    switch (phase) {

                    case 0:
                        n = b_v2_hash(b, bodies[i], cf, hashes[i], B_SEED);
                        break;

                    case 1:
                        b_sink += pa_index_match(idx, hashes[i], n, depth,
                                                 cf->nservers, found, &nf);
                        break;

                    case 2:
                        in.key = (n > 0) ? hashes[i][0] : tails[i];
                        in.units = cf->prefix;
                        depth[i % cf->nservers] = n / 2;
                        found[0] = i % cf->nservers;
                        in.nfound = 1;
                        (void) pa_choose(&in, &ch);
                        depth[i % cf->nservers] = 0;
                        b_sink += ch.server;
                        break;

                    case 3:
                        /* the same request again, as routed last time */
                        pa_index_record(idx, cf->spread
                                        ? (i * 7919u) % cf->nservers
                                        : chosen[i],
                                        hashes[i], n,
                                        cf->spread ? n : cdepth[i]);
                        break;

                    case 4:
                        n = b_v2_hash(b, bodies[i], cf, hashes[i], B_SEED);
                        (void) pa_index_match(idx, hashes[i], n, depth,
                                              cf->nservers, found, &nf);
                        in.key = (n > 0) ? hashes[i][0] : b->tail;
                        in.units = b->units;
                        in.nfound = nf;
                        (void) pa_choose(&in, &ch);
                        pa_index_record(idx, cf->spread
                                        ? (i * 7919u) % cf->nservers
                                        : ch.server,
                                        hashes[i], n, ch.depth);
                        b_sink += ch.server;
                        break;

                    default:
                        /* a new tenant each time: every block is new */
                        n = b_v2_hash(b, bodies[i], cf, hashes[i],
                                      B_SEED + ++b_v2_tenant);
                        (void) pa_index_match(idx, hashes[i], n, depth,
                                              cf->nservers, found, &nf);
                        in.key = (n > 0) ? hashes[i][0] : b->tail;
                        in.units = b->units;
                        in.nfound = nf;
                        (void) pa_choose(&in, &ch);
                        pa_index_record(idx, ch.server, hashes[i], n,
                                        ch.depth);
                        b_sink += ch.server;
                        break;
                    }

                }

            } while ((t = b_now() - start) < B_SLICE);

            if (t / ops < best[phase]) {
                best[phase] = t / ops;
            }
        }
    }

    cf->hash = best[0] * 1e9;
    cf->match = best[1] * 1e9;
    cf->choose = best[2] * 1e9;
    cf->record = best[3] * 1e9;
    cf->total = best[4] * 1e9;
    cf->cold = best[5] * 1e9;

    free(b);
}


static void
b_v2(unsigned char **bodies)
{
    void             *region;
    size_t            size, p, k;
    uint32_t          i, h, ns, bs;
    pa_ring_t         ring;
    b_v2_t            cf;
    pa_index_t        idx;
    pa_ring_point_t  *points;
    static const uint32_t  servers[] = { 4, 64, 1024 };
    static const uint32_t  blocks[] = { 64, 128, 256 };
    static const size_t    prefixes[] = { 4096, 65536 };
    static const uint32_t  holders[] = { 1, 2, 4, 8 };

    printf("\n## routing v2, ns per request\n\n");
    printf("index: %u entries, %u holders; today = body key + ring walk "
           "(idle); v2 = block keys + match + choice + record, for a "
           "request seen before (seen) and for a new prefix (new); the "
           "last four columns are each phase alone, request seen before"
           "\n\n", B_ENTRIES, B_HOLDERS);
    printf("| servers | prefix | block | today | v2 seen | v2 seen - "
           "today | v2 new | v2 new - today | block keys | match | choice "
           "| record |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
           "\n");

    size = pa_index_region_size(B_ENTRIES, B_MAX_SRV, B_HOLDERS);

    if (posix_memalign(&region, 64, size) != 0) {
        exit(1);
    }

    srand(2);

    for (i = 0; i < B_MAX_SRV; i++) {
        b_v2_load.id_hash[i] = (uint64_t) rand() << 32 | (uint64_t) rand();
    }

    for (ns = 0; ns < sizeof(servers) / sizeof(servers[0]); ns++) {
        b_ring(servers[ns], &ring, &points);

        for (p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
            for (bs = 0; bs < sizeof(blocks) / sizeof(blocks[0]); bs++) {

                if (pa_index_init(&idx, region, size, B_MAX_SRV, B_HOLDERS,
                                  1u << 24) != 0)
                {
                    exit(1);
                }

                memset(&cf, 0, sizeof(b_v2_t));
                cf.nservers = servers[ns];
                cf.block = blocks[bs];
                cf.prefix = prefixes[p];

                cf.today = b_key_ns(bodies[0], B_BODY, cf.prefix)
                           + b_pick_ns(cf.nservers, 0);

                b_v2_run(&cf, bodies, &idx, &ring);

                printf("| %u | %zu KB | %u | %.0f | %.0f | %+.0f | %.0f "
                       "| %+.0f | %.0f | %.0f | %.0f | %.0f |\n",
                       cf.nservers, cf.prefix / 1024, cf.block, cf.today,
                       cf.total, cf.total - cf.today, cf.cold,
                       cf.cold - cf.today, cf.hash, cf.match, cf.choose,
                       cf.record);
            }
        }

        free(points);
    }

    /* the worst walk: each prefix on several servers, block 1 full */

    printf("\n### prefixes recorded on 4+ servers each (match walks every "
           "block), and code points\n\n");
    printf("| servers | prefix | block | units | v2 seen | v2 new "
           "| block keys | match | record |\n");
    printf("|---:|---:|---:|---|---:|---:|---:|---:|---:|\n");

    b_ring(64, &ring, &points);

    for (k = 0; k < 4; k++) {
        if (pa_index_init(&idx, region, size, B_MAX_SRV, B_HOLDERS, 1u << 24)
            != 0)
        {
            exit(1);
        }

        memset(&cf, 0, sizeof(b_v2_t));
        cf.nservers = 64;
        cf.block = (k & 1) ? 128 : 64;
        cf.prefix = 4096;
        cf.spread = (k < 2);
        cf.is_char = (k >= 2);

        b_v2_run(&cf, bodies, &idx, &ring);

        printf("| %u | %zu KB | %u | %s | %.0f | %.0f | %.0f | %.0f | %.0f "
               "|\n", cf.nservers, cf.prefix / 1024, cf.block,
               cf.is_char ? "code points" : "bytes, spread", cf.total,
               cf.cold, cf.hash, cf.match, cf.record);
    }

    free(points);

    /* the choice when the caller keeps no totals, and in the worst case */

    printf("\n### choice alone, 4 KB, blocks of 128\n\n| servers | case "
           "| ns |\n|---:|---|---:|\n");

    for (ns = 1; ns < sizeof(servers) / sizeof(servers[0]); ns++) {
        b_ring(servers[ns], &ring, &points);

        for (k = 0; k < 3; k++) {
            if (pa_index_init(&idx, region, size, B_MAX_SRV, B_HOLDERS,
                              1u << 24) != 0)
            {
                exit(1);
            }

            memset(&cf, 0, sizeof(b_v2_t));
            cf.nservers = servers[ns];
            cf.block = 128;
            cf.prefix = 4096;
            cf.stress = (int) k;

            b_v2_run(&cf, bodies, &idx, &ring);

            printf("| %u | %s | %.0f |\n", cf.nservers,
                   k == 0 ? "totals kept by the caller"
                   : k == 1 ? "totals summed here (a probe per server)"
                   : "every server at the cap: 20 on the ring, least work",
                   cf.choose);
        }

        free(points);
    }

    printf("\n### index memory\n\n| holders per entry | entries per "
           "128-byte bucket | MB per million block hashes |\n"
           "|---:|---:|---:|\n");

    for (h = 0; h < sizeof(holders) / sizeof(holders[0]); h++) {
        size = pa_index_region_size(1000000, 1, holders[h])
               - pa_index_region_size(0, 1, holders[h]);

        (void) pa_index_init(&idx, region, 4096, 1, holders[h], 1);

        printf("| %u | %u | %.1f |\n", holders[h], idx.ways, size / 1e6);
    }

    free(region);
}
