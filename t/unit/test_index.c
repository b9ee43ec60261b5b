
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of src/pa_index*.c: record and match, depths per server,
 * eviction order, a full table, bucket collisions, forgetting by
 * capacity, reuse of a region, a lock left held (by a process alive or
 * gone), garbage in the region, and four threads recording and matching
 * at once.
 */


#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "pa_index.h"
#include "unit.h"


#define NSRV      16
#define CHAIN     64
#define THREADS   4


typedef struct {
    pa_index_t     *idx;
    uint64_t        seed;
    uint64_t        rounds;
    uint64_t        exact;
    int             insane;
} worker_t;


static uint64_t rnd_next(uint64_t *state);
static void *region_new(size_t size);
static void chain(uint64_t root, uint32_t fork, uint64_t *out, uint32_t n);
static void record_by_share(pa_index_t *idx, uint32_t server,
    const uint64_t *h, uint32_t n);
static void test_basic(void);
static void test_match_found(void);
static void test_holders(void);
static void test_eviction(void);
static void test_full(void);
static void test_capacity(void);
static void test_fresh(void);
static void advance(pa_index_t *idx, uint32_t server, uint64_t blocks,
    uint64_t *filler);
static void test_wrap(void);
static void test_attach(void);
static void test_stuck(void);
static void test_garbage(void);
static void *worker(void *data);
static void test_threads(void);


static int  stop;


static uint64_t
rnd_next(uint64_t *state)
{
    uint64_t  z;

    z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}


static void *
region_new(size_t size)
{
    void  *p;

    size = (size + 63) & ~(size_t) 63;

    if (posix_memalign(&p, 64, size) != 0) {
        abort();
    }

    return p;
}


/*
 * a chain of block hashes: the first "fork" blocks follow "root" alone,
 * the rest also depend on the fork point, as a shared prefix followed by
 * different text does
 */

static void
chain(uint64_t root, uint32_t fork, uint64_t *out, uint32_t n)
{
    uint32_t  i;
    uint64_t  st;

    st = root;

    for (i = 0; i < n; i++) {
        if (i == fork) {
            st ^= 0xabcdef12345ULL * (fork + 1);
        }

        out[i] = rnd_next(&st);
    }
}


/*
 * "n" new blocks for "server", in records of at most a quarter of its
 * capacity, the most one record ages it by
 */

static void
record_by_share(pa_index_t *idx, uint32_t server, const uint64_t *h,
    uint32_t n)
{
    uint32_t  k, share;

    share = idx->srv[server].capacity / PA_INDEX_SHARE;

    while (n > 0) {
        k = (n < share) ? n : share;
        pa_index_record(idx, server, h, k, 0);
        h += k;
        n -= k;
    }
}


static void
test_basic(void)
{
    size_t            size;
    uint32_t          d, nf;
    uint64_t          a[CHAIN], b[CHAIN];
    uint32_t          depth[NSRV], found[NSRV];
    void             *region;
    pa_index_t        idx;
    pa_index_stats_t  st;

    size = pa_index_region_size(4096, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 100000) == 0);

    chain(1, CHAIN, a, CHAIN);

    /* nothing recorded: a cold prefix */
    d = pa_index_match(&idx, a, 10, depth, NSRV, found, &nf);
    CHECK(d == 0 && nf == 0);

    pa_index_record(&idx, 3, a, 10, 0);

    d = pa_index_match(&idx, a, 10, depth, NSRV, found, &nf);
    CHECK(d == 10);
    CHECK(nf == 1 && found[0] == 3);
    CHECK(depth[3] == 10 && depth[2] == 0);

    /* a longer request matches the 10 blocks, a shorter one all of it */
    d = pa_index_match(&idx, a, 30, depth, NSRV, found, &nf);
    CHECK(d == 10 && depth[3] == 10);
    d = pa_index_match(&idx, a, 4, depth, NSRV, NULL, NULL);
    CHECK(d == 4 && depth[3] == 4);

    /* the same prefix on three servers, each to its own depth */
    pa_index_record(&idx, 1, a, 5, 0);
    pa_index_record(&idx, 2, a, 8, 0);

    chain(1, 2, b, CHAIN);             /* shares blocks 1 and 2 with a */
    pa_index_record(&idx, 7, b, 20, 0);

    d = pa_index_match(&idx, a, 40, depth, NSRV, found, &nf);
    CHECK(d == 10);
    CHECK(nf == 4);
    CHECK(depth[3] == 10 && depth[2] == 8 && depth[1] == 5 && depth[7] == 2);

    d = pa_index_match(&idx, b, 40, depth, NSRV, found, &nf);
    CHECK(d == 20);
    CHECK(depth[7] == 20 && depth[3] == 2 && depth[2] == 2 && depth[1] == 2);

    /* a caller that knows fewer servers gets only those */
    d = pa_index_match(&idx, a, 40, depth, 3, found, &nf);
    CHECK(d == 8 && nf == 2 && depth[2] == 8 && depth[1] == 5);

    pa_index_stats(&idx, &st);
    CHECK(st.recorded == 43);
    CHECK(st.entries_used == 10 + 18);
    CHECK(st.evictions == 0 && st.busy == 0);
    CHECK(st.capacity >= 4096);

    /* bad parameters */
    CHECK(pa_index_init(&idx, region, size, 0, 4, 100) == -1);
    CHECK(pa_index_init(&idx, region, size, NSRV, 3, 100) == -1);
    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 0) == -1);
    CHECK(pa_index_init(&idx, region, 64, NSRV, 4, 100) == -1);
    CHECK(pa_index_init(&idx, (char *) region + 8, size - 64, NSRV, 4, 100)
          == -1);

    free(region);
}


static void
test_holders(void)
{
    size_t      size;
    uint32_t    s, d, nf;
    uint64_t    a[CHAIN];
    uint32_t    depth[NSRV], found[NSRV];
    void       *region;
    pa_index_t  idx;

    size = pa_index_region_size(4096, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 100000) == 0);

    chain(2, CHAIN, a, CHAIN);

    /*
     * six servers hold the prefix to depths 1..6: block 1 remembers four
     * of them, the deeper blocks the servers that went deeper
     */

    for (s = 0; s < 6; s++) {
        pa_index_record(&idx, s, a, s + 1, 0);
    }

    d = pa_index_match(&idx, a, 20, depth, NSRV, found, &nf);
    CHECK(d == 6);
    CHECK(depth[5] == 6 && depth[4] == 5 && depth[3] == 4 && depth[2] == 3);
    CHECK(nf >= 4);

    free(region);
}


static void
test_eviction(void)
{
    size_t            size;
    uint32_t          i, ways, d;
    uint64_t          h[16];
    uint32_t          depth[NSRV];
    void             *region;
    pa_index_t        idx;
    pa_index_stats_t  st;

    /* one bucket: every hash collides */
    size = pa_index_region_size(1, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 100000) == 0);
    CHECK(idx.nbuckets == 1);

    ways = idx.ways;
    CHECK(ways == 4);

    for (i = 0; i < ways + 2; i++) {
        h[i] = ((uint64_t) (i + 1) << 32) | 0x1234;
    }

    /* the same server, so the stamps give the order of use */
    for (i = 0; i < ways; i++) {
        pa_index_record(&idx, 0, &h[i], 1, 0);
    }

    for (i = 0; i < ways; i++) {
        d = pa_index_match(&idx, &h[i], 1, depth, NSRV, NULL, NULL);
        CHECK(d == 1 && depth[0] == 1);
    }

    /* use the oldest again: the second oldest goes first */
    pa_index_record(&idx, 0, &h[0], 1, 0);
    pa_index_record(&idx, 0, &h[ways], 1, 0);

    CHECK(pa_index_match(&idx, &h[0], 1, depth, NSRV, NULL, NULL) == 1);
    CHECK(pa_index_match(&idx, &h[1], 1, depth, NSRV, NULL, NULL) == 0);
    CHECK(pa_index_match(&idx, &h[2], 1, depth, NSRV, NULL, NULL) == 1);
    CHECK(pa_index_match(&idx, &h[ways], 1, depth, NSRV, NULL, NULL) == 1);

    pa_index_record(&idx, 0, &h[ways + 1], 1, 0);
    CHECK(pa_index_match(&idx, &h[2], 1, depth, NSRV, NULL, NULL) == 0);
    CHECK(pa_index_match(&idx, &h[3], 1, depth, NSRV, NULL, NULL) == 1);

    pa_index_stats(&idx, &st);
    CHECK(st.evictions == 2);
    CHECK(st.entries_used == ways);

    /* holders of one entry: the stalest server is replaced */
    for (i = 1; i <= 5; i++) {
        pa_index_record(&idx, i, &h[3], 1, 0);
    }

    d = pa_index_match(&idx, &h[3], 1, depth, NSRV, NULL, NULL);
    CHECK(d == 1);
    CHECK(depth[0] == 0 && depth[5] == 1);

    /* server 0 was the stalest, then the first of equals */
    pa_index_stats(&idx, &st);
    CHECK(st.replaced == 2);

    free(region);
}


static void
test_full(void)
{
    int               ok;
    size_t            size;
    uint32_t          i, s;
    uint64_t          rnd, h;
    uint32_t          depth[NSRV];
    void             *region;
    pa_index_t        idx;
    pa_index_stats_t  st;

    size = pa_index_region_size(64, NSRV, 2);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 2, 1000000) == 0);

    rnd = 9;
    ok = 1;

    /* far more blocks than entries: the last one recorded is always held */

    for (i = 0; i < 100000; i++) {
        h = rnd_next(&rnd);
        s = i % NSRV;

        pa_index_record(&idx, s, &h, 1, 0);

        if (pa_index_match(&idx, &h, 1, depth, NSRV, NULL, NULL) != 1
            || depth[s] != 1)
        {
            ok = 0;
        }
    }

    CHECK(ok);

    pa_index_stats(&idx, &st);
    CHECK(st.entries_used <= st.capacity);
    CHECK(st.evictions >= 100000 - st.capacity);

    free(region);
}


static void
test_capacity(void)
{
    size_t            size;
    uint64_t          a[CHAIN], b[200], c[CHAIN], d[200];
    uint32_t          depth[NSRV];
    void             *region;
    pa_index_t        idx;
    pa_index_stats_t  st;

    size = pa_index_region_size(8192, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 100) == 0);

    chain(3, CHAIN, a, CHAIN);
    chain(4, 200, b, 200);
    chain(5, CHAIN, c, CHAIN);
    chain(6, 200, d, 200);

    pa_index_record(&idx, 0, a, 10, 0);     /* counter 10, stamp 10 */
    record_by_share(&idx, 0, b, 90);        /* counter 100 */
    CHECK(pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL) == 10);

    /* 100 blocks later it is still in the engine's LRU of 100 */
    pa_index_record(&idx, 0, b + 90, 10, 0);
    CHECK(pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL) == 10);

    /* 101 blocks later it is not */
    pa_index_record(&idx, 0, b + 100, 1, 0);
    CHECK(pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL) == 0);

    /* a hit takes no new room: the cached blocks do not age the others */
    pa_index_record(&idx, 1, a, 10, 0);
    record_by_share(&idx, 1, b, 90);
    pa_index_record(&idx, 1, b, 90, 90);
    pa_index_record(&idx, 1, b, 95, 90);
    CHECK(pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL) == 10);
    pa_index_record(&idx, 1, b, 101, 95);
    CHECK(pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL) == 0);

    /*
     * a cached block with over half its life left is not stamped again,
     * one with less is
     */
    pa_index_record(&idx, 2, a, 10, 0);     /* counter 10 */
    pa_index_record(&idx, 2, b, 20, 0);     /* 30: 80 left */
    pa_index_record(&idx, 2, a, 10, 10);    /* not stamped */
    record_by_share(&idx, 2, b + 20, 81);
    (void) pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[2] == 0);

    pa_index_record(&idx, 3, a, 10, 0);     /* counter 10 */
    record_by_share(&idx, 3, b, 60);        /* 70: 40 left */
    pa_index_record(&idx, 3, a, 10, 10);    /* stamped 70 */
    record_by_share(&idx, 3, b + 60, 99);
    (void) pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[3] == 10);

    pa_index_stats(&idx, &st);
    CHECK(st.fresh >= 10);

    /*
     * a prompt longer than its indexed blocks takes its whole length of
     * the cache: 10 indexed blocks of a 20-block prompt age the server
     * as 20 blocks do; but no record ages it by more than a quarter of
     * its cache (25 blocks), whatever it claims
     */
    pa_index_record(&idx, 4, c, 10, 0);             /* counter 10 */
    pa_index_record_size(&idx, 4, d, 10, 0, 20);    /* 30 */
    CHECK(idx.srv[4].counter == 30);
    pa_index_record_size(&idx, 4, d + 10, 10, 0, 1000000);
    CHECK(idx.srv[4].counter == 55);
    pa_index_record_size(&idx, 4, d + 20, 10, 0, 100);
    pa_index_record_size(&idx, 4, d + 30, 10, 0, 100);  /* 105 */
    pa_index_record_size(&idx, 4, d + 40, 1, 0, 5);     /* 110: c in */
    CHECK(idx.srv[4].counter == 110);
    (void) pa_index_match(&idx, c, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[4] == 10);
    pa_index_record_size(&idx, 4, d + 41, 1, 0, 1); /* 111: c out */
    (void) pa_index_match(&idx, c, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[4] == 0);
    (void) pa_index_match(&idx, d, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[4] == 10);

    /* more blocks than the share: all are held, the server ages by 25 */
    pa_index_record(&idx, 7, c, 10, 0);             /* counter 10 */
    pa_index_record(&idx, 7, d, 100, 0);            /* 35 */
    CHECK(idx.srv[7].counter == 35);
    (void) pa_index_match(&idx, d, 100, depth, NSRV, NULL, NULL);
    CHECK(depth[7] == 100);
    (void) pa_index_match(&idx, c, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[7] == 10);

    /*
     * hashes of longer blocks (stride=): the blocks the held ones cover
     * take no new room, not only as many blocks as hashes
     */
    pa_index_record(&idx, 6, c, 10, 0);                 /* counter 10 */
    pa_index_record_held(&idx, 6, c, 10, 10, 40, 50);   /* 20 */
    CHECK(idx.srv[6].counter == 20);
    pa_index_record_held(&idx, 6, d, 10, 0, 0, 15);     /* 35 */
    CHECK(idx.srv[6].counter == 35);
    pa_index_record_held(&idx, 6, d, 10, 10, 5, 15);    /* held >= cached */
    CHECK(idx.srv[6].counter == 40);

    /* a size below the blocks counts as the blocks */
    pa_index_record(&idx, 5, c, 10, 0);             /* counter 10 */
    pa_index_record_size(&idx, 5, d, 10, 0, 3);     /* 20 */
    CHECK(idx.srv[5].counter == 20);
    record_by_share(&idx, 5, d + 10, 90);           /* 110 */
    (void) pa_index_match(&idx, c, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[5] == 10);
    pa_index_record_size(&idx, 5, d + 100, 1, 0, 1);    /* 111 */
    (void) pa_index_match(&idx, c, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[5] == 0);

    /* a larger cache keeps more */
    pa_index_set_capacity(&idx, 1, 1000);
    CHECK(pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL) == 10);

    pa_index_forget(&idx, 1);
    (void) pa_index_match(&idx, a, 10, depth, NSRV, NULL, NULL);
    CHECK(depth[1] == 0 && depth[3] == 10);
    (void) pa_index_match(&idx, b, 101, depth, NSRV, NULL, NULL);
    CHECK(depth[1] == 0 && depth[0] == 101);

    free(region);
}


/*
 * "blocks" new blocks for "server", in records of its share of the
 * cache, each of one block of a filler chain of its own
 */

static void
advance(pa_index_t *idx, uint32_t server, uint64_t blocks, uint64_t *filler)
{
    uint32_t  k, share;
    uint64_t  h;

    share = idx->srv[server].capacity / PA_INDEX_SHARE;

    while (blocks > 0) {
        k = (blocks < share) ? (uint32_t) blocks : share;
        h = rnd_next(filler);
        pa_index_record_size(idx, server, &h, 1, 0, k);
        blocks -= k;
    }
}


/*
 * expiry is exact past 2^32 blocks: a holder not rewritten while its
 * server's counter went through 2^32 - 2^24 .. 2^32 (and round again)
 * read as fresh with 32-bit stamps alone
 */

static void
test_wrap(void)
{
    size_t      size;
    uint32_t    depth[NSRV], i;
    uint64_t    c, e, y, g, filler;
    void       *region;
    pa_index_t  idx;

    size = pa_index_region_size(4096, NSRV, 4);
    region = region_new(size);

    /* a cache of 2^30 blocks: a record ages a server by 2^28 at most */
    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 1U << 30) == 0);

    filler = 99;
    c = rnd_next(&filler);
    e = rnd_next(&filler);

    pa_index_record(&idx, 0, &c, 1, 0);             /* stamp 1 */

    advance(&idx, 0, (1ULL << 30) - 1, &filler);    /* age 2^30 - 1 */
    CHECK(pa_index_match(&idx, &c, 1, depth, NSRV, NULL, NULL) == 1);
    advance(&idx, 0, 2, &filler);                   /* 2^30 + 1 */
    CHECK(pa_index_match(&idx, &c, 1, depth, NSRV, NULL, NULL) == 0);

    /* near 2^32, and past it: still gone */
    advance(&idx, 0, (1ULL << 32) - (1ULL << 23) - (1ULL << 30) - 1,
            &filler);
    CHECK(idx.srv[0].counter - 1 == (1ULL << 32) - (1ULL << 23));
    CHECK(pa_index_match(&idx, &c, 1, depth, NSRV, NULL, NULL) == 0);
    advance(&idx, 0, (1ULL << 23) + 5, &filler);    /* 2^32 + 5 */
    CHECK(pa_index_match(&idx, &c, 1, depth, NSRV, NULL, NULL) == 0);
    advance(&idx, 0, 3ULL << 32, &filler);
    CHECK(pa_index_match(&idx, &c, 1, depth, NSRV, NULL, NULL) == 0);

    /*
     * the same in a bucket written all along (by server 1, another
     * entry), whose writers drop expired holders as the epoch moves
     */
    c = rnd_next(&filler);
    y = (c & 0xffffffffULL) | ((c ^ 0x5555555500000000ULL)
                               & 0xffffffff00000000ULL);

    pa_index_record(&idx, 0, &c, 1, 0);
    g = idx.srv[0].counter;

    for (i = 0; i < 40; i++) {
        advance(&idx, 0, 1ULL << 27, &filler);
        pa_index_record(&idx, 1, &y, 1, 0);

        (void) pa_index_match(&idx, &c, 1, depth, NSRV, NULL, NULL);
        CHECK_MSG(depth[0] == (idx.srv[0].counter - g <= (1ULL << 30)),
                  "age %llu: depth %u",
                  (unsigned long long) (idx.srv[0].counter - g), depth[0]);
        (void) pa_index_match(&idx, &y, 1, depth, NSRV, NULL, NULL);
        CHECK(depth[1] == 1);
    }

    /*
     * a server that recorded nothing keeps its holders while the others
     * record 2^33 blocks: its own counter decides
     */
    pa_index_record(&idx, 2, &e, 1, 0);
    advance(&idx, 3, 1ULL << 33, &filler);
    (void) pa_index_match(&idx, &e, 1, depth, NSRV, NULL, NULL);
    CHECK(depth[2] == 1);

    /*
     * the bound that remains: a bucket nobody wrote while 2^32 - 2^24 -
     * 2^30 - capacity blocks were recorded (over all servers) no longer
     * vouches for holders of a server that recorded since: they read as
     * gone, however young
     */
    advance(&idx, 2, 100, &filler);
    (void) pa_index_match(&idx, &e, 1, depth, NSRV, NULL, NULL);
    CHECK(depth[2] == 0);

    free(region);
}


/* the deepest cached block decides whether the cached ones are stamped */

static void
test_fresh(void)
{
    size_t            size;
    int64_t           age;
    uint64_t          a[CHAIN], fill[1000];
    uint32_t          depth[NSRV];
    void             *region;
    pa_index_t        idx;
    pa_index_stats_t  st;

    size = pa_index_region_size(4096, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 1000) == 0);

    chain(6, CHAIN, a, CHAIN);

    pa_index_record(&idx, 6, a, 5, 0);
    pa_index_record(&idx, 6, a, 12, 5);      /* 5 fresh, 7 new */

    pa_index_stats(&idx, &st);
    CHECK(st.fresh == 5 && st.recorded == 17);
    CHECK(pa_index_match(&idx, a, 12, depth, NSRV, NULL, NULL) == 12);
    CHECK(depth[6] == 12);

    /* a depth the index does not confirm: every block is stamped */
    pa_index_record(&idx, 7, a, 12, 12);

    pa_index_stats(&idx, &st);
    CHECK(st.fresh == 5);
    CHECK(pa_index_match(&idx, a, 12, depth, NSRV, NULL, NULL) == 12);
    CHECK(depth[7] == 12 && depth[6] == 12);

    free(region);

    /*
     * a block its server holds first is stamped again in place: its age
     * is counted from then, and the other holders keep their order
     */

    size = pa_index_region_size(1 << 16, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 1000) == 0);

    chain(8, CHAIN, a, CHAIN);
    chain(9, 1000, fill, 1000);

    pa_index_record(&idx, 3, a, 1, 0);
    pa_index_record(&idx, 2, a, 1, 0);      /* 2 first, then 3 */
    record_by_share(&idx, 2, fill, 600);

    /* 600 blocks old, under half a life of 1000 left: stamped again */
    age = pa_index_record_size(&idx, 2, a, 1, 1, 1);
    CHECK_MSG(age == 600, "age %lld", (long long) age);

    record_by_share(&idx, 2, fill + 600, 100);
    age = pa_index_record_size(&idx, 2, a, 1, 1, 1);
    CHECK_MSG(age == 100, "age %lld, not counted from the new stamp",
              (long long) age);

    CHECK(pa_index_match(&idx, a, 1, depth, NSRV, NULL, NULL) == 1);
    CHECK(depth[2] == 1 && depth[3] == 1);

    /* 3, second, stamped again: first now, without the in-place path */
    pa_index_record(&idx, 3, a, 1, 0);
    record_by_share(&idx, 2, fill, 450);
    CHECK(pa_index_match(&idx, a, 1, depth, NSRV, NULL, NULL) == 1);
    CHECK(depth[3] == 1 && depth[2] == 1);

    free(region);
}


/*
 * the engine's answers: a shortfall of an old enough block cuts the
 * server's cache life to that block's age, and what was recorded as long
 * ago is no longer matched; a young one (a prefill under way) cuts
 * nothing; confirmations give the cut back; other servers keep theirs
 */

static void
test_feedback(void)
{
    size_t              size;
    int64_t             age;
    uint64_t            a[CHAIN], b[CHAIN], fill[1000];
    uint32_t            i, depth[NSRV];
    void               *region;
    pa_index_t          idx;
    pa_index_learned_t  l;

    size = pa_index_region_size(1 << 16, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 1000) == 0);

    chain(21, CHAIN, a, CHAIN);
    chain(22, CHAIN, b, CHAIN);
    chain(23, 1000, fill, 1000);

    /* b, then a 300 blocks later, then 300 more blocks */

    CHECK(pa_index_record_size(&idx, 2, b, 8, 0, 8) == -1);
    record_by_share(&idx, 2, fill, 300);
    pa_index_record(&idx, 2, a, 8, 0);
    record_by_share(&idx, 2, fill + 300, 300);
    pa_index_record(&idx, 3, b, 8, 0);

    /*
     * a again: 300 blocks were recorded there since (a stamp is the
     * counter after its record); the answer confirms
     */

    age = pa_index_record_size(&idx, 2, a, 8, 8, 8);
    CHECK_MSG(age == 300, "age %lld", (long long) age);

    pa_index_feedback(&idx, 2, 8, age, 8);
    pa_index_learned(&idx, 2, &l);
    CHECK(l.confirmed == 1 && l.shortfall == 0 && l.learned == 0);

    /* b, 608 blocks old: the engine reused 1 of 8, it keeps less */

    age = pa_index_record_size(&idx, 2, b, 8, 8, 8);
    CHECK_MSG(age == 608, "age %lld", (long long) age);

    CHECK(pa_index_match(&idx, fill, 8, depth, NSRV, NULL, NULL) == 8);

    pa_index_feedback(&idx, 2, 8, age, 1);
    pa_index_learned(&idx, 2, &l);
    CHECK(l.shortfall == 1 && l.learned == 608 && l.forgotten == 1000 - 608);

    /*
     * 300 blocks later the first 250 fill blocks (stamped 258) are over
     * 608 old: forgotten there, as they would be held at a capacity of
     * 1000; the later ones not
     */

    CHECK(pa_index_match(&idx, fill, 8, depth, NSRV, NULL, NULL) == 8);
    record_by_share(&idx, 2, fill + 600, 300);
    CHECK(pa_index_match(&idx, fill, 8, depth, NSRV, NULL, NULL) == 0);
    CHECK(pa_index_match(&idx, fill + 300, 8, depth, NSRV, NULL, NULL) == 8);
    CHECK(depth[2] == 8);

    /* server 3 keeps its life */

    CHECK(pa_index_match(&idx, b, 8, depth, NSRV, NULL, NULL) == 8);
    CHECK(depth[3] == 8);
    pa_index_learned(&idx, 3, &l);
    CHECK(l.learned == 0 && l.shortfall == 0);

    /* a young block short: counted, nothing cut */

    pa_index_feedback(&idx, 2, 8, 1000 / PA_INDEX_LEARN_FLOOR - 1, 0);
    pa_index_learned(&idx, 2, &l);
    CHECK(l.shortfall == 2 && l.learned == 608);

    /* an age past the life already cut: nothing more */

    pa_index_feedback(&idx, 2, 8, 700, 0);
    pa_index_learned(&idx, 2, &l);
    CHECK_MSG(l.shortfall == 3 && l.learned == 608 && l.forgotten == 392,
              "%llu %u %llu", (unsigned long long) l.shortfall, l.learned,
              (unsigned long long) l.forgotten);

    /* nothing predicted: nothing told */

    pa_index_feedback(&idx, 2, 0, 500, 0);
    pa_index_feedback(&idx, 2, 8, -1, 0);
    pa_index_learned(&idx, 2, &l);
    CHECK(l.shortfall == 3 && l.confirmed == 1);

    /* confirmations give it back, 1/16 of the cut each, then no limit */

    pa_index_feedback(&idx, 2, 8, 10, 8);
    pa_index_learned(&idx, 2, &l);
    CHECK_MSG(l.learned == 608 + (1000 - 608) / PA_INDEX_LEARN_BACK,
              "learned %u", l.learned);

    for (i = 0; i < 200 && l.learned != 0; i++) {
        pa_index_feedback(&idx, 2, 8, 10, 8);
        pa_index_learned(&idx, 2, &l);
    }

    CHECK_MSG(l.learned == 0 && i > 16, "learned %u after %u", l.learned, i);

    free(region);
}


static void
test_attach(void)
{
    size_t      size;
    uint64_t    a[CHAIN];
    uint32_t    depth[NSRV];
    void       *region;
    pa_index_t  idx, idx2;

    size = pa_index_region_size(4096, NSRV, 4);
    region = region_new(size);

    /* a fresh region is formatted */
    memset(region, 0x5a, size);
    CHECK(pa_index_attach(&idx, region, size, NSRV, 4, 1000) == 0);

    chain(5, CHAIN, a, CHAIN);
    pa_index_record(&idx, 9, a, 12, 0);

    /* a reload with the same geometry keeps what was recorded */
    CHECK(pa_index_attach(&idx2, region, size, NSRV, 4, 1000) == 1);
    CHECK(pa_index_match(&idx2, a, 12, depth, NSRV, NULL, NULL) == 12);
    CHECK(depth[9] == 12);

    /* another geometry starts over */
    CHECK(pa_index_attach(&idx2, region, size, NSRV, 2, 1000) == 0);
    CHECK(pa_index_match(&idx2, a, 12, depth, NSRV, NULL, NULL) == 0);
    CHECK(pa_index_attach(&idx2, region, size, NSRV - 1, 2, 1000) == 0);
    CHECK(pa_index_attach(&idx2, region, size - 128, NSRV - 1, 2, 1000)
          == 0);

    free(region);
}


static void
test_stuck(void)
{
    pid_t             pid;
    size_t            size;
    uint32_t          i;
    uint64_t          h[4], *w;
    uint32_t          depth[NSRV];
    void             *region;
    pa_index_t        idx;
    pa_index_stats_t  st;

    size = pa_index_region_size(1, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 1000) == 0);

    for (i = 0; i < 4; i++) {
        h[i] = ((uint64_t) (i + 1) << 32) | 7;
    }

    pa_index_record(&idx, 2, h, 1, 0);
    CHECK(pa_index_match(&idx, h, 1, depth, NSRV, NULL, NULL) == 1);

    /* a worker died inside the lock: skipped, never waited for */
    *(uint32_t *) idx.buckets |= 1;

    pa_index_record(&idx, 2, h + 1, 1, 0);
    CHECK(pa_index_match(&idx, h, 1, depth, NSRV, NULL, NULL) == 0);
    CHECK(pa_index_match(&idx, h + 1, 1, depth, NSRV, NULL, NULL) == 0);

    pa_index_stats(&idx, &st);
    CHECK(st.busy == 1);

    /*
     * its owner known and gone: the next writer takes the bucket over
     * and empties it, whatever the dead writer left in it
     */

    pid = fork();

    if (pid == 0) {
        _exit(0);
    }

    CHECK(pid > 0 && waitpid(pid, NULL, 0) == pid);

    pa_index_set_owner((uint32_t) getpid());

    w = (uint64_t *) idx.buckets;

    for (i = 1; i < PA_INDEX_BUCKET / 8; i++) {
        w[i] = 0x0102030405060708ULL * i;
    }

    w[0] = ((uint64_t) pid << 32) | 3;

    pa_index_record(&idx, 5, h + 2, 1, 0);
    CHECK(pa_index_match(&idx, h + 2, 1, depth, NSRV, NULL, NULL) == 1);
    CHECK(depth[5] == 1);
    CHECK(pa_index_match(&idx, h, 1, depth, NSRV, NULL, NULL) == 0);
    CHECK((w[0] & 1) == 0 && (uint32_t) (w[0] >> 32) == (uint32_t) getpid());

    pa_index_stats(&idx, &st);
    CHECK(st.busy == 1 && st.recovered == 1);

    /* an owner alive (our parent, or this process) is waited for: skipped */

    w[0] = ((uint64_t) getppid() << 32) | 5;
    pa_index_record(&idx, 6, h + 3, 1, 0);
    w[0] = ((uint64_t) getpid() << 32) | 7;
    pa_index_record(&idx, 6, h + 3, 1, 0);
    w[0] = 8;

    CHECK(pa_index_match(&idx, h + 3, 1, depth, NSRV, NULL, NULL) == 0);
    CHECK(pa_index_match(&idx, h + 2, 1, depth, NSRV, NULL, NULL) == 1);

    pa_index_stats(&idx, &st);
    CHECK(st.busy == 3 && st.recovered == 1);

    free(region);
}


static void
test_garbage(void)
{
    int         ok;
    size_t      size, i;
    uint32_t    k, s, d, nf;
    uint64_t    rnd, a[CHAIN];
    uint32_t    depth[NSRV], found[NSRV];
    void       *region;
    uint64_t   *w;
    pa_index_t  idx;

    size = pa_index_region_size(1024, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 1000) == 0);

    /* random words with even sequences: answers may be wrong, not wild */
    rnd = 11;
    w = (uint64_t *) idx.buckets;

    for (i = 0; i < idx.nbuckets * PA_INDEX_BUCKET / 8; i++) {
        w[i] = rnd_next(&rnd);

        if (i % (PA_INDEX_BUCKET / 8) == 0) {
            w[i] &= ~(uint64_t) 1;
        }
    }

    ok = 1;

    for (k = 0; k < 2000; k++) {
        chain(k, CHAIN, a, CHAIN);

        /* the tags of a few blocks as the garbage has them */
        a[k % CHAIN] = w[(k * 7) % (idx.nbuckets * PA_INDEX_BUCKET / 8)];

        s = k % NSRV;

        if (k & 1) {
            pa_index_record(&idx, s, a, CHAIN, 0);
        }

        d = pa_index_match(&idx, a, CHAIN, depth, NSRV, found, &nf);

        if (d > CHAIN || nf > NSRV) {
            ok = 0;
        }

        for (i = 0; i < nf; i++) {
            if (found[i] >= NSRV || depth[found[i]] > CHAIN) {
                ok = 0;
            }
        }
    }

    CHECK(ok);

    free(region);
}


static void *
worker(void *data)
{
    uint32_t   i, n, s, d, nf, fork;
    uint64_t   a[CHAIN];
    uint32_t   depth[NSRV], found[NSRV];
    worker_t  *wk;

    wk = data;

    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        /* 64 prompts, each forked from 8 shared prefixes */
        i = rnd_next(&wk->seed) % 64;
        fork = 4 + i % 8;
        chain(i / 8, fork, a, CHAIN);

        n = 1 + rnd_next(&wk->seed) % CHAIN;
        s = rnd_next(&wk->seed) % NSRV;

        d = pa_index_match(wk->idx, a, n, depth, NSRV, found, &nf);

        if (d > n || nf > NSRV) {
            wk->insane = 1;
        }

        for (i = 0; i < nf; i++) {
            if (found[i] >= NSRV || depth[found[i]] == 0
                || depth[found[i]] > n)
            {
                wk->insane = 1;
            }
        }

        pa_index_record(wk->idx, s, a, n, depth[s]);

        (void) pa_index_match(wk->idx, a, n, depth, NSRV, NULL, NULL);

        wk->exact += (depth[s] == n);
        wk->rounds++;
    }

    return NULL;
}


static void
test_threads(void)
{
    int               i, insane;
    size_t            size;
    uint64_t          rounds, exact;
    void             *region;
    pthread_t         tid[THREADS];
    worker_t          wk[THREADS];
    pa_index_t        idx;
    pa_index_stats_t  st;
    struct timespec   ts;

    /* small enough to evict all the time */
    size = pa_index_region_size(2048, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 5000) == 0);

    stop = 0;

    for (i = 0; i < THREADS; i++) {
        memset(&wk[i], 0, sizeof(worker_t));
        wk[i].idx = &idx;
        wk[i].seed = 100 + i;

        CHECK(pthread_create(&tid[i], NULL, worker, &wk[i]) == 0);
    }

    ts.tv_sec = 2;
    ts.tv_nsec = 0;
    nanosleep(&ts, NULL);

    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);

    rounds = 0;
    exact = 0;
    insane = 0;

    for (i = 0; i < THREADS; i++) {
        pthread_join(tid[i], NULL);
        rounds += wk[i].rounds;
        exact += wk[i].exact;
        insane |= wk[i].insane;
    }

    pa_index_stats(&idx, &st);

    printf("threads: %llu rounds, %.1f%% held after record, "
           "%llu evictions, %llu busy\n",
           (unsigned long long) rounds, 100.0 * exact / (rounds + 1),
           (unsigned long long) st.evictions, (unsigned long long) st.busy);

    CHECK(!insane);
    CHECK(rounds > 1000);
    CHECK(exact > rounds * 9 / 10);

    free(region);
}


/*
 * pa_index_match_found(), for a caller that keeps "depth" all 0 between
 * matches: the same answer as pa_index_match(), only the servers found
 * set, and, once the caller zeroed those, every value 0 again
 */

static void
test_match_found(void)
{
    size_t       size;
    uint32_t     i, k, d1, d2, nf1, nf2, nonzero;
    uint64_t     a[CHAIN], b[CHAIN];
    uint32_t     depth1[NSRV], depth2[NSRV], found1[NSRV], found2[NSRV];
    void        *region;
    pa_index_t   idx;

    size = pa_index_region_size(4096, NSRV, 4);
    region = region_new(size);

    CHECK(pa_index_init(&idx, region, size, NSRV, 4, 100000) == 0);

    chain(5, CHAIN, a, CHAIN);
    chain(5, 3, b, CHAIN);

    memset(depth2, 0, sizeof(depth2));

    for (i = 0; i < 12; i++) {
        pa_index_record(&idx, i % NSRV, (i & 1) ? b : a, 4 + 3 * i, 0);

        d1 = pa_index_match(&idx, a, CHAIN, depth1, NSRV, found1, &nf1);
        d2 = pa_index_match_found(&idx, a, CHAIN, depth2, NSRV, found2,
                                  &nf2);

        CHECK(d1 == d2 && nf1 == nf2);
        CHECK(memcmp(depth1, depth2, sizeof(depth1)) == 0);
        CHECK(memcmp(found1, found2, nf1 * sizeof(uint32_t)) == 0);

        nonzero = 0;

        for (k = 0; k < NSRV; k++) {
            nonzero += (depth2[k] != 0);
        }

        CHECK(nonzero == nf2);

        for (k = 0; k < nf2; k++) {
            depth2[found2[k]] = 0;
        }

        for (k = 0; k < NSRV; k++) {
            CHECK(depth2[k] == 0);
        }
    }

    CHECK(nf2 >= 2);

    free(region);
}


int
main(void)
{
    test_basic();
    test_match_found();
    test_holders();
    test_eviction();
    test_full();
    test_capacity();
    test_fresh();
    test_feedback();
    test_wrap();
    test_attach();
    test_stuck();
    test_garbage();
    test_threads();

    return UNIT_DONE();
}
