
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The prefix index's region: its size and layout (see pa_index_int.h),
 * formatting it, attaching to one a reload kept, the per-server
 * capacity and forgetting a server, and the statistics.  Plain C, no
 * nginx headers.
 */


#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "pa_index.h"


#define PA_INDEX_HDR_SIZE  sizeof(pa_index_hdr_t)


static int pa_index_geometry(uint32_t holders, uint32_t *entry_size,
    uint32_t *ways);
static int pa_index_view(pa_index_t *idx, void *region, size_t size,
    uint32_t nservers, uint32_t holders);


size_t
pa_index_region_size(uint64_t entries, uint32_t nservers, uint32_t holders)
{
    uint32_t  esz, ways;
    uint64_t  nbuckets;

    if (pa_index_geometry(holders, &esz, &ways) != 0) {
        return 0;
    }

    nbuckets = (entries + ways - 1) / ways;

    return PA_INDEX_HDR_SIZE + (size_t) nservers * sizeof(pa_index_srv_t)
           + (size_t) nbuckets * PA_INDEX_BUCKET;
}


int
pa_index_init(pa_index_t *idx, void *region, size_t size,
    uint32_t nservers, uint32_t holders, uint32_t capacity)
{
    uint32_t         i;
    uint64_t         b;
    pa_index_hdr_t  *hdr;
    unsigned char   *p;

    if (capacity == 0 || capacity > INT32_MAX) {
        return -1;
    }

    if (pa_index_view(idx, region, size, nservers, holders) != 0) {
        return -1;
    }

    hdr = idx->hdr;

    /* the magic last, so that a half-formatted region is not reused */
    memset(hdr, 0, PA_INDEX_HDR_SIZE);

    for (i = 0; i < nservers; i++) {
        memset(&idx->srv[i], 0, sizeof(pa_index_srv_t));
        idx->srv[i].capacity = capacity;
    }

    memset(idx->buckets, 0xff, idx->nbuckets * PA_INDEX_BUCKET);

    /* the sequence even, no owner, swept at epoch 0 */

    for (b = 0; b < idx->nbuckets; b++) {
        p = idx->buckets + b * PA_INDEX_BUCKET;
        memset(p, 0, PA_INDEX_BUCKET_HEAD);
    }

    hdr->version = PA_INDEX_VERSION;
    hdr->size = size;
    hdr->nservers = nservers;
    hdr->holders = holders;
    hdr->ways = idx->ways;
    hdr->entry_size = idx->entry_size;
    hdr->nbuckets = idx->nbuckets;
    hdr->servers_off = (unsigned char *) idx->srv - (unsigned char *) hdr;
    hdr->buckets_off = idx->buckets - (unsigned char *) hdr;

    __atomic_store_n(&hdr->magic, PA_INDEX_MAGIC, __ATOMIC_RELEASE);

    return 0;
}


int
pa_index_attach(pa_index_t *idx, void *region, size_t size,
    uint32_t nservers, uint32_t holders, uint32_t capacity)
{
    pa_index_hdr_t  *hdr;

    if (pa_index_view(idx, region, size, nservers, holders) != 0) {
        return -1;
    }

    hdr = idx->hdr;

    if (__atomic_load_n(&hdr->magic, __ATOMIC_ACQUIRE) == PA_INDEX_MAGIC
        && hdr->version == PA_INDEX_VERSION
        && hdr->size == size
        && hdr->nservers == nservers
        && hdr->holders == holders
        && hdr->ways == idx->ways
        && hdr->entry_size == idx->entry_size
        && hdr->nbuckets == idx->nbuckets
        && hdr->servers_off
           == (uint64_t) ((unsigned char *) idx->srv - (unsigned char *) hdr)
        && hdr->buckets_off
           == (uint64_t) (idx->buckets - (unsigned char *) hdr))
    {
        return 1;
    }

    if (pa_index_init(idx, region, size, nservers, holders, capacity) != 0) {
        return -1;
    }

    return 0;
}


void
pa_index_set_capacity(pa_index_t *idx, uint32_t server, uint32_t capacity)
{
    if (server >= idx->nservers || capacity == 0 || capacity > INT32_MAX) {
        return;
    }

    __atomic_store_n(&idx->srv[server].capacity, capacity, __ATOMIC_RELAXED);
}


uint32_t
pa_index_get_capacity(pa_index_t *idx, uint32_t server)
{
    if (server >= idx->nservers) {
        return 0;
    }

    return __atomic_load_n(&idx->srv[server].capacity, __ATOMIC_RELAXED);
}


void
pa_index_forget(pa_index_t *idx, uint32_t server)
{
    uint32_t  cap;
    uint64_t  epoch;

    if (server >= idx->nservers) {
        return;
    }

    /* past every stamp by more than the capacity, the epoch too */
    cap = __atomic_load_n(&idx->srv[server].capacity, __ATOMIC_RELAXED);

    epoch = __atomic_add_fetch(&idx->hdr->epoch, (uint64_t) cap + 1,
                               __ATOMIC_RELAXED);
    __atomic_store_n(&idx->srv[server].epoch, epoch, __ATOMIC_RELAXED);

    (void) __atomic_fetch_add(&idx->srv[server].counter,
                              (uint64_t) cap + 1, __ATOMIC_RELEASE);
}


void
pa_index_learned(pa_index_t *idx, uint32_t server, pa_index_learned_t *l)
{
    pa_index_srv_t  *srv;

    memset(l, 0, sizeof(pa_index_learned_t));

    if (server >= idx->nservers) {
        return;
    }

    srv = &idx->srv[server];

    l->learned = __atomic_load_n(&srv->learned, __ATOMIC_RELAXED);
    l->confirmed = __atomic_load_n(&srv->confirmed, __ATOMIC_RELAXED);
    l->shortfall = __atomic_load_n(&srv->shortfall, __ATOMIC_RELAXED);
    l->forgotten = __atomic_load_n(&srv->forgotten, __ATOMIC_RELAXED);
}


void
pa_index_stats(pa_index_t *idx, pa_index_stats_t *st)
{
    pa_index_hdr_t  *hdr;

    hdr = idx->hdr;

    st->capacity = idx->nbuckets * idx->ways;
    st->entries_used = __atomic_load_n(&hdr->entries_used, __ATOMIC_RELAXED);
    st->evictions = __atomic_load_n(&hdr->evictions, __ATOMIC_RELAXED);
    st->replaced = __atomic_load_n(&hdr->replaced, __ATOMIC_RELAXED);
    st->busy = __atomic_load_n(&hdr->busy, __ATOMIC_RELAXED);
    st->recorded = __atomic_load_n(&hdr->recorded, __ATOMIC_RELAXED);
    st->fresh = __atomic_load_n(&hdr->fresh, __ATOMIC_RELAXED);
    st->recovered = __atomic_load_n(&hdr->recovered, __ATOMIC_RELAXED);
}


static int
pa_index_geometry(uint32_t holders, uint32_t *entry_size, uint32_t *ways)
{
    uint32_t  esz;

    if (holders != 1 && holders != 2 && holders != 4 && holders != 8) {
        return -1;
    }

    /* tag, stamps, server ids padded to 4 bytes */
    esz = 4 + 4 * holders + ((2 * holders + 3) & ~3u);

    *entry_size = esz;
    *ways = (PA_INDEX_BUCKET - PA_INDEX_BUCKET_HEAD) / esz;

    return 0;
}


static int
pa_index_view(pa_index_t *idx, void *region, size_t size,
    uint32_t nservers, uint32_t holders)
{
    size_t          off;
    uint64_t        nbuckets;
    unsigned char  *base;

    base = region;

    if (base == NULL || ((uintptr_t) base & 63) != 0) {
        return -1;
    }

    if (nservers == 0 || nservers > PA_INDEX_MAX_SERVERS) {
        return -1;
    }

    if (pa_index_geometry(holders, &idx->entry_size, &idx->ways) != 0) {
        return -1;
    }

    off = PA_INDEX_HDR_SIZE + (size_t) nservers * sizeof(pa_index_srv_t);

    if (size < off + PA_INDEX_BUCKET) {
        return -1;
    }

    nbuckets = (size - off) / PA_INDEX_BUCKET;

    /* the bucket of a hash is taken from its low 32 bits */
    if (nbuckets > UINT32_MAX) {
        nbuckets = UINT32_MAX;
    }

    idx->hdr = (pa_index_hdr_t *) base;
    idx->srv = (pa_index_srv_t *) (base + PA_INDEX_HDR_SIZE);
    idx->buckets = base + off;
    idx->nbuckets = nbuckets;
    idx->nservers = nservers;
    idx->holders = holders;

    return 0;
}
