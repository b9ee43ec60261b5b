
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Private to the prefix index: the layout of a bucket and the helpers
 * shared by its writers (pa_index.c) and its readers
 * (pa_index_match.c), inline as they are on every request's path.
 * Plain C, no nginx headers; the public interface is pa_index.h.
 *
 * Layout of the region: the header (128 bytes), one line per server,
 * then buckets of PA_INDEX_BUCKET bytes.  A bucket is a 64-bit word, the
 * sequence number (low 32 bits, odd while a writer holds it) and the
 * last writer's process id (high 32 bits), a 64-bit word, the index's
 * epoch when its expired holders were last dropped, then "ways" entries of
 * "entry_size" bytes: a 32-bit tag (the high half of the block hash; the
 * low half picks the bucket), "holders" 32-bit stamps, then "holders"
 * 16-bit server ids, PA_INDEX_NO_SERVER if the slot is empty.
 * Holders are kept most recent first, so empty slots are at the end and
 * an entry is empty if its first slot is.
 */


#ifndef _PA_INDEX_INT_H_INCLUDED_
#define _PA_INDEX_INT_H_INCLUDED_


#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "pa_index.h"


#define PA_INDEX_WORDS     (PA_INDEX_BUCKET / 8)
#define PA_INDEX_SPIN      64         /* lock attempts before skipping */
#define PA_INDEX_RETRY     4          /* reads of a bucket being written */
#define PA_INDEX_AHEAD     32         /* buckets prefetched by a record */
#define PA_INDEX_WALK      8          /* and by a match, which may stop */
#define PA_INDEX_AHEAD_MAX (1 << 24)  /* a stamp ahead of its counter */

/*
 * a writer drops a bucket's expired holders once the epoch is this far
 * past its last sweep; a holder is expired once its server's epoch is
 * PA_INDEX_WRAP - its capacity past it (over 2^30 - 2^24 blocks, as a
 * capacity is under 2^31), leaving 2^30 blocks for records under way
 * (see pa_index_life_at())
 */
#define PA_INDEX_SWEEP     (1LL << 29)
#define PA_INDEX_WRAP      ((1LL << 32) - PA_INDEX_AHEAD_MAX - (1LL << 30))


typedef struct {
    uint64_t        w[PA_INDEX_WORDS];
} pa_index_copy_t;


typedef struct {
    uint64_t        evictions;
    uint64_t        replaced;
    uint64_t        used;
    uint64_t        busy;
    uint64_t        fresh;
    uint64_t        recovered;
} pa_index_count_t;


static inline unsigned char *pa_index_bucket(pa_index_t *idx,
    uint64_t hash);
static inline int pa_index_read(unsigned char *bucket, pa_index_copy_t *c);
static inline int64_t pa_index_life_at(pa_index_t *idx, uint32_t server,
    uint32_t stamp, uint64_t swept);
static inline int64_t pa_index_life(pa_index_t *idx, uint32_t server,
    uint32_t stamp);
static inline int64_t pa_index_left(uint32_t now, uint32_t stamp,
    uint32_t cap);
static inline uint32_t pa_index_life_cap(pa_index_t *idx, uint32_t server,
    uint32_t cap);
static inline uint32_t pa_index_get32(const pa_index_copy_t *c, size_t off);
static inline uint32_t pa_index_get16(const pa_index_copy_t *c, size_t off);
static inline void pa_index_set32(pa_index_copy_t *c, size_t off,
    uint32_t v);
static inline void pa_index_set16(pa_index_copy_t *c, size_t off,
    uint32_t v);
static inline void pa_index_pause(void);
static inline void pa_index_prefetch(pa_index_t *idx, uint64_t hash);


static inline unsigned char *
pa_index_bucket(pa_index_t *idx, uint64_t hash)
{
    uint64_t  b;

    /* the low half of the hash scaled to the buckets, no division */
    b = ((hash & 0xffffffff) * idx->nbuckets) >> 32;

    return idx->buckets + b * PA_INDEX_BUCKET;
}


/*
 * a consistent copy of a bucket, or -1 if writers kept it busy; a seqlock
 * read: the sequence is even and the same before and after the copy
 */

static inline int
pa_index_read(unsigned char *bucket, pa_index_copy_t *c)
{
    int        r;
    size_t     i;
    uint64_t   s1, s2, *w;

    w = (uint64_t *) bucket;

    for (r = 0; r < PA_INDEX_RETRY; r++) {
        s1 = __atomic_load_n(&w[0], __ATOMIC_ACQUIRE);

        if (s1 & 1) {
            pa_index_pause();
            continue;
        }

        for (i = 1; i < PA_INDEX_WORDS; i++) {
            c->w[i] = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
        }

        __atomic_thread_fence(__ATOMIC_ACQUIRE);

        s2 = __atomic_load_n(&w[0], __ATOMIC_RELAXED);

        if (s1 == s2) {
            return 0;
        }
    }

    return -1;
}


/*
 * the blocks a holder has left in its server's cache before the LRU
 * drops it, -1 if it has, or if the slot is empty; no division, as it
 * is computed for every holder met.  "swept": the epoch its bucket was
 * last swept at.  Stamps are 32 bits: the age of a holder is known
 * modulo 2^32 only, which is its age while that is under 2^32 -
 * PA_INDEX_AHEAD_MAX.  It is: at the sweep it was at most "capacity"
 * (< 2^31), and its server's counter has moved on by no more than the
 * server's epoch past the sweep, each record adding to both, plus the
 * records under way; from PA_INDEX_WRAP - capacity of that on, the
 * holder is taken as expired.
 */

static inline int64_t
pa_index_life_at(pa_index_t *idx, uint32_t server, uint32_t stamp,
    uint64_t swept)
{
    uint32_t  now, cap;
    uint64_t  epoch;

    if (server >= idx->nservers) {
        return -1;
    }

    /* the counter first: the epoch read after it accounts for it */

    now = (uint32_t) __atomic_load_n(&idx->srv[server].counter,
                                     __ATOMIC_ACQUIRE);
    epoch = __atomic_load_n(&idx->srv[server].epoch, __ATOMIC_RELAXED);
    cap = __atomic_load_n(&idx->srv[server].capacity, __ATOMIC_RELAXED);

    if ((int64_t) (epoch - swept) >= PA_INDEX_WRAP - (int64_t) cap) {
        return -1;
    }

    return pa_index_left(now, stamp, pa_index_life_cap(idx, server, cap));
}


/*
 * the cache life of a server: its capacity, or less where the engine's
 * answers showed it keeps less (pa_index_feedback()); the wrap bound
 * stays with the capacity, the larger
 */

static inline uint32_t
pa_index_life_cap(pa_index_t *idx, uint32_t server, uint32_t cap)
{
    uint32_t  learned;

    learned = __atomic_load_n(&idx->srv[server].learned, __ATOMIC_RELAXED);

    return (learned != 0 && learned < cap) ? learned : cap;
}


/* the same where the stamp is known to read right: in a writer's bucket */

static inline int64_t
pa_index_life(pa_index_t *idx, uint32_t server, uint32_t stamp)
{
    uint32_t  now, cap;

    if (server >= idx->nservers) {
        return -1;
    }

    now = (uint32_t) __atomic_load_n(&idx->srv[server].counter,
                                     __ATOMIC_RELAXED);
    cap = __atomic_load_n(&idx->srv[server].capacity, __ATOMIC_RELAXED);

    return pa_index_left(now, stamp, pa_index_life_cap(idx, server, cap));
}


static inline int64_t
pa_index_left(uint32_t now, uint32_t stamp, uint32_t cap)
{
    int32_t  d;

    /*
     * serial-number arithmetic: a stamp just ahead of the counter is new
     * (its record's addition not seen yet); one far ahead is at least
     * 2^31 blocks old, the counter having gone round
     */
    d = (int32_t) (now - stamp);

    if (d <= 0) {
        return (d > -PA_INDEX_AHEAD_MAX) ? (int64_t) cap : -1;
    }

    if ((uint32_t) d > cap) {
        return -1;
    }

    return (int64_t) cap - d;
}


static inline uint32_t
pa_index_get32(const pa_index_copy_t *c, size_t off)
{
    uint32_t  v;

    memcpy(&v, (const unsigned char *) c->w + off, sizeof(uint32_t));

    return v;
}


static inline uint32_t
pa_index_get16(const pa_index_copy_t *c, size_t off)
{
    uint16_t  v;

    memcpy(&v, (const unsigned char *) c->w + off, sizeof(uint16_t));

    return v;
}


static inline void
pa_index_set32(pa_index_copy_t *c, size_t off, uint32_t v)
{
    memcpy((unsigned char *) c->w + off, &v, sizeof(uint32_t));
}


static inline void
pa_index_set16(pa_index_copy_t *c, size_t off, uint32_t v)
{
    uint16_t  x;

    x = (uint16_t) v;

    memcpy((unsigned char *) c->w + off, &x, sizeof(uint16_t));
}


/* both cache lines of a bucket, ahead of their use */

static inline void
pa_index_prefetch(pa_index_t *idx, uint64_t hash)
{
    unsigned char  *b;

    b = pa_index_bucket(idx, hash);

    __builtin_prefetch(b);
    __builtin_prefetch(b + 64);
}


static inline void
pa_index_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__ ("yield");
#endif
}


#endif /* _PA_INDEX_INT_H_INCLUDED_ */
