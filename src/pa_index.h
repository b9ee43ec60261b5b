
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The prefix index of routing v2: a bounded table from a chained block
 * hash (src/pa_block.h) to the servers that recently received a request
 * with that block.  It lives in one region of shared memory given by the
 * caller, shared by the worker processes: no pointers inside, no
 * allocation, a try-lock per bucket that gives up after a bounded spin
 * (a worker may die holding it) and lock-free readers that check a
 * sequence number.  A wrong answer is possible under races, a crash or
 * a hang is not.  Plain C, no nginx headers.
 *
 * Forgetting models each engine's LRU cache: every server has a counter
 * of the blocks recorded for it, and a holder is valid while that counter
 * is at most "capacity" blocks past the holder's stamp.  Stamps are the
 * low 32 bits of the counter; the index's epoch (the blocks added to all
 * servers, 64 bits) keeps their expiry exact past 2^32: each bucket has
 * the epoch it was last swept at, its writers drop its expired holders
 * once the epoch is 2^29 blocks past it, and a holder of a server whose
 * epoch is 2^32 - 2^24 - 2^30 - capacity blocks past its bucket's sweep
 * is expired (see pa_index_life()).
 */


#ifndef _PA_INDEX_H_INCLUDED_
#define _PA_INDEX_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define PA_INDEX_MAGIC        0x78646961u       /* "aidx" */
#define PA_INDEX_VERSION      3
#define PA_INDEX_MAX_SERVERS  1024
#define PA_INDEX_BUCKET       128               /* two cache lines */
#define PA_INDEX_BUCKET_HEAD  16                /* its lock, its sweep */
#define PA_INDEX_NO_SERVER    0xffff

/* a record ages its server by at most 1 / PA_INDEX_SHARE of its cache */
#define PA_INDEX_SHARE        4

/* answers cut a server's cache life to no less than 1 / 8 of it */
#define PA_INDEX_LEARN_FLOOR  8
#define PA_INDEX_LEARN_BACK   16


/* the region's header; counters are updated with atomics */
typedef struct {
    uint32_t        magic;
    uint32_t        version;
    uint64_t        size;
    uint32_t        nservers;
    uint32_t        holders;
    uint32_t        ways;
    uint32_t        entry_size;
    uint64_t        nbuckets;
    uint64_t        servers_off;
    uint64_t        buckets_off;
    unsigned char   pad0[64 - 56];

    uint64_t        entries_used;     /* entries ever filled */
    uint64_t        evictions;        /* entries with a valid holder lost */
    uint64_t        replaced;         /* valid holders pushed out */
    uint64_t        busy;             /* lock not taken: update skipped */
    uint64_t        recorded;         /* blocks recorded */
    uint64_t        fresh;            /* of them, held fresh: not stamped */
    uint64_t        recovered;        /* taken over from a dead writer */
    uint64_t        epoch;            /* blocks added to all servers */
} pa_index_hdr_t;


/* one cache line per server, as every worker adds to its counter */
typedef struct {
    uint64_t        counter;          /* blocks recorded, monotonic */
    uint64_t        epoch;            /* the index's epoch at its last */
    uint32_t        capacity;         /* blocks the engine keeps */
    uint32_t        learned;          /* blocks its answers showed it
                                         keeps, if fewer; 0: no limit */
    uint64_t        confirmed;        /* answers that reused the depth */
    uint64_t        shortfall;        /* answers that reused less */
    uint64_t        forgotten;        /* blocks of cache life taken */
    unsigned char   pad[64 - 48];
} pa_index_srv_t;


/* what the engine's answers told of a server (pa_index_feedback()) */
typedef struct {
    uint32_t        learned;
    uint64_t        confirmed;
    uint64_t        shortfall;
    uint64_t        forgotten;
} pa_index_learned_t;


/* a process's view of the region; the geometry is its own copy */
typedef struct {
    pa_index_hdr_t  *hdr;
    pa_index_srv_t  *srv;
    unsigned char   *buckets;
    uint64_t         nbuckets;
    uint32_t         nservers;
    uint32_t         holders;
    uint32_t         ways;
    uint32_t         entry_size;
} pa_index_t;


typedef struct {
    uint64_t        capacity;         /* entries */
    uint64_t        entries_used;
    uint64_t        evictions;
    uint64_t        replaced;
    uint64_t        busy;
    uint64_t        recorded;
    uint64_t        fresh;
    uint64_t        recovered;
} pa_index_stats_t;


/*
 * bytes of a region for "entries" block hashes, a few more at most;
 * "holders" is 1, 2, 4 or 8 servers per block hash
 */
size_t pa_index_region_size(uint64_t entries, uint32_t nservers,
    uint32_t holders);

/*
 * formats "region" (aligned to 64 bytes, "size" bytes) for up to
 * "nservers" servers, ids 0..nservers - 1, each with a cache of
 * "capacity" blocks (< 2^31); returns 0, or -1 if the region is too
 * small or a parameter is out of range
 */
int pa_index_init(pa_index_t *idx, void *region, size_t size,
    uint32_t nservers, uint32_t holders, uint32_t capacity);

/*
 * reuses a region formatted with the same size and geometry, as after
 * a reload, else formats it; returns 1 if reused, 0 if formatted, -1 as
 * pa_index_init().  the capacities stay as they were on reuse.
 */
int pa_index_attach(pa_index_t *idx, void *region, size_t size,
    uint32_t nservers, uint32_t holders, uint32_t capacity);

void pa_index_set_capacity(pa_index_t *idx, uint32_t server,
    uint32_t capacity);

/* the capacity of "server", in blocks; 0 for an id out of range */
uint32_t pa_index_get_capacity(pa_index_t *idx, uint32_t server);

/*
 * the id of the calling process (its pid, > 0), written beside each
 * bucket it locks: a bucket left locked by a process that no longer
 * exists is taken over, and emptied, by the next writer that finds it
 * so.  call it in each process before it records; without it (0), this
 * process neither takes over nor can be taken over from
 */
void pa_index_set_owner(uint32_t pid);

/* invalidates every holder of "server", as when its id is given anew */
void pa_index_forget(pa_index_t *idx, uint32_t server);

/*
 * after routing a request of "n" blocks to "server": its blocks are held
 * there from now on.  "cached": of them, the leading blocks the server
 * already held (its matched depth), which take no new room in its cache.
 */
void pa_index_record(pa_index_t *idx, uint32_t server,
    const uint64_t *hashes, uint32_t n, uint32_t cached);

/*
 * the same for a request that takes "size" blocks of the server's cache
 * (size >= n): its whole prompt is cached there, the blocks past the
 * indexed ones too, and ages what the server held by as much.  one
 * record ages a server by at most a quarter (PA_INDEX_SHARE) of its
 * capacity (1 block at least): whatever a request claims, the holders
 * stamped in the last three quarters of the cache outlive it.
 */
int64_t pa_index_record_size(pa_index_t *idx, uint32_t server,
    const uint64_t *hashes, uint32_t n, uint32_t cached, uint32_t size);

/*
 * the same for hashes of longer blocks past a head (pa_blocks_stride()):
 * "n" hashes of which the first "cached" are held, the blocks those cover
 * being "held" of the "size" blocks the request takes; it ages its server
 * by size - held
 */
int64_t pa_index_record_held(pa_index_t *idx, uint32_t server,
    const uint64_t *hashes, uint32_t n, uint32_t cached, uint32_t held,
    uint32_t size);

/*
 * pa_index_record_size() returns the age, in blocks the server recorded
 * since, of the deepest of the "cached" blocks as it was before this
 * record (-1 if "cached" is 0 or it was no longer held): what the
 * engine's answer is weighed against (pa_index_feedback()).
 *
 * The engine answered that it reused "reused" blocks of a request
 * recorded with "cached" blocks held there, the deepest "age" blocks
 * old.  It confirms the index when it reused at least half of them; a
 * shortfall of a block older than PA_INDEX_LEARN_FLOOR of the capacity
 * (a younger one may still have been in a prefill) shows that the
 * engine keeps less than the capacity says (other routers' and clients'
 * requests, a smaller cache): the server's cache life is cut to that
 * age, so every block recorded there as long ago is forgotten.  Each
 * confirmation gives back 1 / PA_INDEX_LEARN_BACK of what was cut (at
 * least a block), so that the cut follows the engine and does not stay.
 */
void pa_index_feedback(pa_index_t *idx, uint32_t server, uint32_t cached,
    int64_t age, uint64_t reused);

void pa_index_learned(pa_index_t *idx, uint32_t server,
    pa_index_learned_t *l);

/*
 * the depth, in leading blocks, that each server holds of the prefix:
 * "depth" gets nservers values; "found", if not NULL, gets the servers
 * of depth > 0 (room for nservers) and "nfound" their number.  returns
 * the greatest depth.
 */
uint32_t pa_index_match(pa_index_t *idx, const uint64_t *hashes,
    uint32_t n, uint32_t *depth, uint32_t nservers, uint32_t *found,
    uint32_t *nfound);

/*
 * the same for a caller that keeps "depth" all 0 between matches, as a
 * match of a few servers need not clear nservers values: only the
 * servers put in "found" are set, and the caller sets them back to 0
 */
uint32_t pa_index_match_found(pa_index_t *idx, const uint64_t *hashes,
    uint32_t n, uint32_t *depth, uint32_t nservers, uint32_t *found,
    uint32_t *nfound);

void pa_index_stats(pa_index_t *idx, pa_index_stats_t *st);


#endif /* _PA_INDEX_H_INCLUDED_ */
