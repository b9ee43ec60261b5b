
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The prefix index: recording block hashes in the shared region, the
 * writers' side.  Matching them is in pa_index_match.c, the layout of a
 * bucket and the helpers both share in pa_index_int.h; its size,
 * formatting, attaching and statistics are in pa_index_region.c.  Plain
 * C, no nginx headers.
 */


#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/types.h>

#include "pa_index_int.h"


static int pa_index_lock(unsigned char *bucket, uint64_t *word,
    pa_index_count_t *cnt);
static int pa_index_recover(unsigned char *bucket, uint64_t *word);
static void pa_index_unlock(unsigned char *bucket, uint64_t word,
    const pa_index_copy_t *c, size_t from, size_t to);
static void pa_index_release(uint64_t *w, uint64_t word);
static void pa_index_put(pa_index_t *idx, uint64_t hash, uint32_t server,
    uint32_t stamp, uint64_t epoch, pa_index_count_t *cnt);
static int pa_index_touch(pa_index_t *idx, unsigned char *bucket,
    uint64_t word, uint64_t hash, uint32_t server, uint32_t stamp,
    uint64_t epoch);
static void pa_index_sweep(pa_index_t *idx, pa_index_copy_t *c,
    uint64_t swept);
static int64_t pa_index_held(pa_index_t *idx, uint64_t hash,
    uint32_t server);


/* this process's id, the owner of the buckets it writes; 0: unknown */
static uint32_t  pa_index_owner;


void
pa_index_set_owner(uint32_t pid)
{
    pa_index_owner = pid;
}


void
pa_index_record(pa_index_t *idx, uint32_t server, const uint64_t *hashes,
    uint32_t n, uint32_t cached)
{
    (void) pa_index_record_size(idx, server, hashes, n, cached, n);
}


int64_t
pa_index_record_size(pa_index_t *idx, uint32_t server,
    const uint64_t *hashes, uint32_t n, uint32_t cached, uint32_t size)
{
    return pa_index_record_held(idx, server, hashes, n, cached, cached,
                                size);
}


int64_t
pa_index_record_held(pa_index_t *idx, uint32_t server,
    const uint64_t *hashes, uint32_t n, uint32_t cached, uint32_t held,
    uint32_t size)
{
    int64_t           life, age;
    uint32_t          i, k, stamp, added, half, cap, share;
    uint64_t          end, epoch;
    pa_index_hdr_t   *hdr;
    pa_index_count_t  cnt;

    if (server >= idx->nservers || n == 0) {
        return -1;
    }

    cached = (cached > n) ? n : cached;
    held = (held < cached) ? cached : held;
    size = (size < held) ? held : size;
    size = (size < n) ? n : size;
    added = size - held;

    cap = __atomic_load_n(&idx->srv[server].capacity, __ATOMIC_RELAXED);
    half = pa_index_life_cap(idx, server, cap) / 2;

    /* no one request ages its server by more than its share of the cache */

    share = cap / PA_INDEX_SHARE;
    share = (share == 0) ? 1 : share;
    added = (added > share) ? share : added;

    /*
     * the epoch moves with every counter, and the server's epoch is set
     * before its counter moves: a reader that sees the counter sees an
     * epoch that accounts for it (see pa_index_life_at())
     */

    hdr = idx->hdr;

    if (added) {
        epoch = __atomic_add_fetch(&hdr->epoch, added, __ATOMIC_RELAXED);
        __atomic_store_n(&idx->srv[server].epoch, epoch, __ATOMIC_RELAXED);

    } else {
        epoch = __atomic_load_n(&hdr->epoch, __ATOMIC_RELAXED);
    }

    /*
     * the whole prefix gets one stamp, the counter after the request's
     * new blocks: it was all used now, as the engine's LRU sees it
     */

    end = __atomic_add_fetch(&idx->srv[server].counter, added,
                             __ATOMIC_RELEASE);
    stamp = (uint32_t) end;

    memset(&cnt, 0, sizeof(pa_index_count_t));

    /*
     * the blocks the server already holds are not stamped again while
     * the deepest of them has over half its cache life left: every
     * record of a block records the blocks before it too, so they are at
     * least as fresh.  one read instead of a locked write per block for
     * the shared part of a prefix, at the price of an expiry up to half
     * a cache early.
     */

    i = 0;
    age = -1;

    if (cached > 0) {
        life = pa_index_held(idx, hashes[cached - 1], server);

        if (life >= 0) {
            age = (int64_t) pa_index_life_cap(idx, server, cap) - life;
            age = (age < 0) ? 0 : age;
        }

        if (life > (int64_t) half) {
            i = cached;
            cnt.fresh = cached;
        }
    }

    for (k = i; k < n && k < i + PA_INDEX_AHEAD; k++) {
        pa_index_prefetch(idx, hashes[k]);
    }

    for ( /* void */ ; i < n; i++) {

        if (i + PA_INDEX_AHEAD < n) {
            pa_index_prefetch(idx, hashes[i + PA_INDEX_AHEAD]);
        }

        pa_index_put(idx, hashes[i], server, stamp, epoch, &cnt);
    }

    (void) __atomic_fetch_add(&hdr->recorded, n, __ATOMIC_RELAXED);

    if (cnt.used) {
        (void) __atomic_fetch_add(&hdr->entries_used, cnt.used,
                                  __ATOMIC_RELAXED);
    }

    if (cnt.evictions) {
        (void) __atomic_fetch_add(&hdr->evictions, cnt.evictions,
                                  __ATOMIC_RELAXED);
    }

    if (cnt.replaced) {
        (void) __atomic_fetch_add(&hdr->replaced, cnt.replaced,
                                  __ATOMIC_RELAXED);
    }

    if (cnt.busy) {
        (void) __atomic_fetch_add(&hdr->busy, cnt.busy, __ATOMIC_RELAXED);
    }

    if (cnt.recovered) {
        (void) __atomic_fetch_add(&hdr->recovered, cnt.recovered,
                                  __ATOMIC_RELAXED);
    }

    if (cnt.fresh) {
        (void) __atomic_fetch_add(&hdr->fresh, cnt.fresh, __ATOMIC_RELAXED);
    }

    return age;
}


void
pa_index_feedback(pa_index_t *idx, uint32_t server, uint32_t cached,
    int64_t age, uint64_t reused)
{
    uint32_t         cap, learned, life, next, floor;
    pa_index_srv_t  *srv;

    if (server >= idx->nservers || cached == 0 || age < 0) {
        return;
    }

    srv = &idx->srv[server];
    cap = __atomic_load_n(&srv->capacity, __ATOMIC_RELAXED);
    learned = __atomic_load_n(&srv->learned, __ATOMIC_RELAXED);

    if (reused * 2 >= cached) {
        (void) __atomic_fetch_add(&srv->confirmed, 1, __ATOMIC_RELAXED);

        if (learned == 0) {
            return;
        }

        /* give back a part of the cut; all of it, and the cut is gone */

        next = (learned < cap) ? (cap - learned) / PA_INDEX_LEARN_BACK : 0;
        next = learned + ((next == 0) ? 1 : next);
        next = (next >= cap) ? 0 : next;

        (void) __atomic_compare_exchange_n(&srv->learned, &learned, next, 0,
                                           __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED);
        return;
    }

    (void) __atomic_fetch_add(&srv->shortfall, 1, __ATOMIC_RELAXED);

    floor = cap / PA_INDEX_LEARN_FLOOR;
    floor = (floor == 0) ? 1 : floor;

    if (age < (int64_t) floor) {
        return;
    }

    life = (learned != 0 && learned < cap) ? learned : cap;

    if (age >= (int64_t) life) {
        return;
    }

    if (__atomic_compare_exchange_n(&srv->learned, &learned, (uint32_t) age,
                                    0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    {
        (void) __atomic_fetch_add(&srv->forgotten, life - (uint32_t) age,
                                  __ATOMIC_RELAXED);
    }
}


/*
 * a bounded try-lock: the sequence goes odd and the owner becomes this
 * process in one compare-and-swap.  a bucket still held after the
 * attempts is skipped, unless its owner is a process that no longer
 * exists: then it is taken over
 */

static int
pa_index_lock(unsigned char *bucket, uint64_t *word, pa_index_count_t *cnt)
{
    int        i;
    uint64_t   s, n, *p;

    p = (uint64_t *) bucket;

    for (i = 0; i < PA_INDEX_SPIN; i++) {
        s = __atomic_load_n(p, __ATOMIC_RELAXED);

        if ((s & 1) == 0) {
            n = ((uint64_t) pa_index_owner << 32)
                | (uint32_t) ((uint32_t) s + 1);

            if (__atomic_compare_exchange_n(p, &s, n, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
            {
                /* the odd sequence is seen before any of the new data */
                __atomic_thread_fence(__ATOMIC_RELEASE);

                *word = n;
                return 0;
            }
        }

        pa_index_pause();
    }

    if (pa_index_recover(bucket, word) == 0) {
        cnt->recovered++;
        return 0;
    }

    return -1;
}


/*
 * a worker that died holding a bucket (killed in its few instructions
 * of copying) would leave it skipped by writers and empty to readers
 * until the zone is formatted again.  its owner is known and no longer
 * exists: the bucket is taken over in one compare-and-swap, so that of
 * two writers that find it only one does, and emptied, as the dead
 * writer may have left it half written.  a process id used again by
 * another process, or one of another user (EPERM), leaves it skipped
 */

static int
pa_index_recover(unsigned char *bucket, uint64_t *word)
{
    size_t     i;
    uint32_t   owner;
    uint64_t   s, n, *p;

    p = (uint64_t *) bucket;

    s = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    owner = (uint32_t) (s >> 32);

    if ((s & 1) == 0 || owner == 0 || pa_index_owner == 0
        || owner == pa_index_owner || owner > INT32_MAX)
    {
        return -1;
    }

    if (kill((pid_t) owner, 0) == 0 || errno != ESRCH) {
        return -1;
    }

    /* still odd: stays held, by this process now */
    n = ((uint64_t) pa_index_owner << 32) | (uint32_t) ((uint32_t) s + 2);

    if (!__atomic_compare_exchange_n(p, &s, n, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
    {
        return -1;
    }

    __atomic_thread_fence(__ATOMIC_RELEASE);

    for (i = 1; i < PA_INDEX_WORDS; i++) {
        __atomic_store_n(&p[i], UINT64_MAX, __ATOMIC_RELAXED);
    }

    *word = n;

    return 0;
}


/*
 * the words of the copy from byte "from" to byte "to" (excluded), the
 * only ones changed, are written back, and the bucket is released
 */

static void
pa_index_unlock(unsigned char *bucket, uint64_t word,
    const pa_index_copy_t *c, size_t from, size_t to)
{
    size_t     i;
    uint64_t  *w;

    w = (uint64_t *) bucket;

    for (i = from / 8; i < (to + 7) / 8; i++) {
        __atomic_store_n(&w[i], c->w[i], __ATOMIC_RELAXED);
    }

    pa_index_release(w, word);
}


/* the sequence even again, the owner kept: the bucket is released */

static void
pa_index_release(uint64_t *w, uint64_t word)
{
    __atomic_store_n(&w[0],
                     (word & 0xffffffff00000000ULL)
                     | (uint32_t) ((uint32_t) word + 1),
                     __ATOMIC_RELEASE);
}


static void
pa_index_put(pa_index_t *idx, uint64_t hash, uint32_t server,
    uint32_t stamp, uint64_t epoch, pa_index_count_t *cnt)
{
    size_t           ent, st, sv, from;
    int64_t          life, least;
    uint32_t         e, k, h, tag, hit, empty, slot;
    uint64_t         word, swept;
    unsigned char   *bucket;
    pa_index_copy_t  c;

    bucket = pa_index_bucket(idx, hash);

    if (pa_index_lock(bucket, &word, cnt) != 0) {
        cnt->busy++;
        return;
    }

    if (pa_index_touch(idx, bucket, word, hash, server, stamp, epoch) == 0) {
        return;
    }

    /*
     * the lock is held: no writer changes the words while they are read,
     * and readers do not write, so they are copied at once
     */

    memcpy(&c.w[1], bucket + 8, PA_INDEX_BUCKET - 8);

    h = idx->holders;
    tag = (uint32_t) (hash >> 32);

    /*
     * swept less than PA_INDEX_SWEEP ago, or now: no server's epoch is
     * far enough past it for a stamp to read wrong, so the choices below
     * need no epoch
     */

    swept = c.w[1];
    from = 0;

    if ((int64_t) (epoch - swept) >= PA_INDEX_SWEEP) {
        pa_index_sweep(idx, &c, swept);
        c.w[1] = epoch;

        /* the sweep's epoch and its expired holders are written back too */
        from = 8;
    }

    hit = UINT32_MAX;
    empty = UINT32_MAX;

    /* an entry is empty if its first holder is: holders fill from it */

    for (e = 0; e < idx->ways; e++) {
        ent = PA_INDEX_BUCKET_HEAD + (size_t) e * idx->entry_size;

        if (pa_index_get16(&c, ent + 4 + 4 * h) == PA_INDEX_NO_SERVER) {
            empty = (empty == UINT32_MAX) ? e : empty;

        } else if (pa_index_get32(&c, ent) == tag) {
            hit = e;
            break;
        }
    }

    if (hit == UINT32_MAX && empty != UINT32_MAX) {
        hit = empty;
        cnt->used++;

    } else if (hit == UINT32_MAX) {

        /*
         * the bucket is full: out goes the entry whose most recent holder,
         * the first, has the least life left in its server's cache, an
         * expired one first; one read of a server counter per entry
         */

        least = INT64_MAX;
        hit = 0;

        for (e = 0; e < idx->ways; e++) {
            ent = PA_INDEX_BUCKET_HEAD + (size_t) e * idx->entry_size;

            life = pa_index_life(idx, pa_index_get16(&c, ent + 4 + 4 * h),
                                 pa_index_get32(&c, ent + 4));

            if (life < least) {
                least = life;
                hit = e;
            }
        }

        if (least >= 0) {
            cnt->evictions++;
        }
    }

    ent = PA_INDEX_BUCKET_HEAD + (size_t) hit * idx->entry_size;
    st = ent + 4;
    sv = st + 4 * h;

    if (pa_index_get32(&c, ent) != tag
        || pa_index_get16(&c, sv) == PA_INDEX_NO_SERVER)
    {
        /* a new entry: no holder of the old one carries over */
        pa_index_set32(&c, ent, tag);

        for (k = 0; k < h; k++) {
            pa_index_set16(&c, sv + 2 * k, PA_INDEX_NO_SERVER);
        }
    }

    /*
     * holders are kept most recent first: the server's own slot, else
     * the first empty one, else an expired one, else the last
     */

    for (slot = 0; slot < h; slot++) {
        k = pa_index_get16(&c, sv + 2 * slot);

        if (k == server || k == PA_INDEX_NO_SERVER) {
            break;
        }
    }

    if (slot == h) {
        slot = h - 1;

        for (k = 0; k < h; k++) {
            life = pa_index_life(idx, pa_index_get16(&c, sv + 2 * k),
                                 pa_index_get32(&c, st + 4 * k));

            if (life < 0) {
                slot = k;
                break;
            }
        }

        if (k == h) {
            cnt->replaced++;
        }
    }

    /* move the slots before it down by one, then stamp the first */

    for (k = slot; k > 0; k--) {
        pa_index_set16(&c, sv + 2 * k, pa_index_get16(&c, sv + 2 * (k - 1)));
        pa_index_set32(&c, st + 4 * k, pa_index_get32(&c, st + 4 * (k - 1)));
    }

    pa_index_set16(&c, sv, server);
    pa_index_set32(&c, st, stamp);

    /* only the entry changed, unless the bucket was swept */
    pa_index_unlock(bucket, word, &c, from ? from : ent,
                    from ? PA_INDEX_BUCKET : ent + idx->entry_size);
}


/*
 * a block its server holds first already, the common case of a prefix
 * stamped again: the stamp's word alone is written, in place, and the
 * bucket released; -1 (the bucket still held) for any other case.  The
 * lock is held, so the words are read without a copy
 */

static int
pa_index_touch(pa_index_t *idx, unsigned char *bucket, uint64_t word,
    uint64_t hash, uint32_t server, uint32_t stamp, uint64_t epoch)
{
    size_t     ent, st;
    uint16_t   first;
    uint32_t   e, tag, t;
    uint64_t  *w, v;

    w = (uint64_t *) bucket;

    if ((int64_t) (epoch - w[1]) >= PA_INDEX_SWEEP) {
        return -1;
    }

    tag = (uint32_t) (hash >> 32);

    for (e = 0; e < idx->ways; e++) {
        ent = PA_INDEX_BUCKET_HEAD + (size_t) e * idx->entry_size;
        st = ent + 4;

        memcpy(&t, bucket + ent, sizeof(uint32_t));
        memcpy(&first, bucket + st + 4 * idx->holders, sizeof(uint16_t));

        if (t != tag || first == PA_INDEX_NO_SERVER) {
            continue;
        }

        if (first != server || (st & 3) != 0) {
            return -1;
        }

        /* the 32-bit stamp is in one word: that word is rewritten */

        v = w[st / 8];
        memcpy((unsigned char *) &v + (st & 7), &stamp, sizeof(uint32_t));

        __atomic_store_n(&w[st / 8], v, __ATOMIC_RELAXED);
        pa_index_release(w, word);

        return 0;
    }

    return -1;
}


/*
 * drops the expired holders of every entry of a bucket's copy, keeping
 * the others in their order: after it, every holder left is at most
 * "capacity" blocks old, so that none can be 2^32 - PA_INDEX_AHEAD_MAX
 * blocks old, where a 32-bit stamp reads as new again, before its
 * server's epoch is PA_INDEX_WRAP - capacity past the sweep
 */

static void
pa_index_sweep(pa_index_t *idx, pa_index_copy_t *c, uint64_t swept)
{
    size_t    ent, st, sv;
    uint32_t  e, k, m, h, s, stamp;

    h = idx->holders;

    for (e = 0; e < idx->ways; e++) {
        ent = PA_INDEX_BUCKET_HEAD + (size_t) e * idx->entry_size;
        st = ent + 4;
        sv = st + 4 * h;
        m = 0;

        for (k = 0; k < h; k++) {
            s = pa_index_get16(c, sv + 2 * k);
            stamp = pa_index_get32(c, st + 4 * k);

            if (pa_index_life_at(idx, s, stamp, swept) < 0) {
                continue;
            }

            pa_index_set16(c, sv + 2 * m, s);
            pa_index_set32(c, st + 4 * m, stamp);
            m++;
        }

        for ( /* void */ ; m < h; m++) {
            pa_index_set16(c, sv + 2 * m, PA_INDEX_NO_SERVER);
        }
    }
}


/* 1 if "server" holds the block with more than "life" blocks left */

/* the life left of "server"'s hold of a block hash, -1 if none */

static int64_t
pa_index_held(pa_index_t *idx, uint64_t hash, uint32_t server)
{
    size_t           ent, sv;
    uint32_t         e, k, h, tag;
    pa_index_copy_t  c;

    if (pa_index_read(pa_index_bucket(idx, hash), &c) != 0) {
        return -1;
    }

    h = idx->holders;
    tag = (uint32_t) (hash >> 32);

    for (e = 0; e < idx->ways; e++) {
        ent = PA_INDEX_BUCKET_HEAD + (size_t) e * idx->entry_size;

        if (pa_index_get32(&c, ent) != tag) {
            continue;
        }

        sv = ent + 4 + 4 * h;

        for (k = 0; k < h; k++) {
            if (pa_index_get16(&c, sv + 2 * k) == server) {
                return pa_index_life_at(idx, server,
                                        pa_index_get32(&c, ent + 4 + 4 * k),
                                        c.w[1]);
            }
        }
    }

    return -1;
}
