
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Routing v2 (index=): the prefix index of an upstream in a shared zone
 * of its own, the stable ids of its servers there, and the choice of the
 * server that holds the longest part of a request's prefix under the
 * load bounds.  The algorithms are src/pa_block.c, pa_index.c (with
 * pa_index_match.c) and pa_choose.c.
 */


#include "ngx_http_prefix_aware.h"


/*
 * servers kept per block in the index (the decode share of a request's
 * work is in the header)
 */
#define NGX_HTTP_PREFIX_AWARE_HOLDERS         4
#define NGX_HTTP_PREFIX_AWARE_INDEX_AUTO_MAX  (64 * 1024 * 1024)

/*
 * index=auto: bytes of the zone for each block the servers' caches hold,
 * two entries of 32 bytes (a bucket of 4 ways half full on average): at
 * one entry, as many blocks as entries, a bucket overflowed as often as
 * a Poisson(4) count exceeds 4 (37 %), and live entries were evicted
 */
#define NGX_HTTP_PREFIX_AWARE_INDEX_PER_BLOCK  64

/*
 * a match may be over the work bound by one cold request of this many
 * units (or what it saves, if more): 65536, where the default length
 * took it to in December 2026, cost multi-tenant chat 5 points of hit
 * rate on a seed of three.  Whatever "length" is: the text past the key
 * counts in a request's work, so a shorter key makes no cold request
 * cheaper (at length=4096, a slack of 4,608 units spilled documents'
 * hits that the default kept, issue 43)
 */
#define NGX_HTTP_PREFIX_AWARE_SLACK           32768


/*
 * the zone: the names of the servers that have an id (XXH3 of the name,
 * 0 for a free id), then the index itself; ids stay with their servers
 * across reloads, so the index is kept for the servers that stay
 */

typedef struct {
    uint64_t                           size;
    uint64_t                           name[PA_INDEX_MAX_SERVERS];
} ngx_http_prefix_aware_index_head_t;


static ngx_int_t ngx_http_prefix_aware_index_init_zone(
    ngx_shm_zone_t *shm_zone, void *data);
static int ngx_http_prefix_aware_index_probe(void *ctx, uint32_t server,
    pa_load_t *load);
static void ngx_http_prefix_aware_index_auto_size(
    ngx_http_prefix_aware_srv_conf_t *pacf);
static uint32_t ngx_http_prefix_aware_index_blocks(
    ngx_http_prefix_aware_srv_conf_t *pacf, uint64_t tokens);



/*
 * index=auto's zone: NGX_HTTP_PREFIX_AWARE_INDEX_PER_BLOCK bytes for each
 * block of the servers' caches ("capacity" tokens of 4 units each),
 * rounded up to a power of two so that a reload which adds or removes a
 * few servers keeps the zone, and with it the index; 1m to 64m
 */

static void
ngx_http_prefix_aware_index_auto_size(ngx_http_prefix_aware_srv_conf_t *pacf)
{
    size_t    size;
    uint64_t  want;

    want = (uint64_t) pacf->nservers * pacf->capacity * 4 / pacf->block
           * NGX_HTTP_PREFIX_AWARE_INDEX_PER_BLOCK;

    size = NGX_HTTP_PREFIX_AWARE_INDEX_AUTO_MIN;

    while (size < want && size < NGX_HTTP_PREFIX_AWARE_INDEX_AUTO_MAX) {
        size <<= 1;
    }

    pacf->index_size = size;
}


ngx_int_t
ngx_http_prefix_aware_index_add(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_uint_t         i, n;
    ngx_shm_zone_t    *shm_zone;

    static ngx_str_t  prefix =
        ngx_string("ngx_http_prefix_aware_module:index:");

    n = pacf->nservers;

    if (n > PA_INDEX_MAX_SERVERS) {
        if (pacf->index_auto) {
            ngx_http_prefix_aware_index_off(cf, pacf, "over 1024 servers");
            return NGX_OK;
        }

        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: \"index\" takes upstreams of at most "
                      "%d servers, upstream \"%V\" has %ui",
                      PA_INDEX_MAX_SERVERS, &pacf->upstream->host, n);
        return NGX_ERROR;
    }

    if (pacf->index_auto) {
        ngx_http_prefix_aware_index_auto_size(pacf);
    }

    pacf->id = ngx_pcalloc(cf->pool, n * sizeof(uint32_t));
    pacf->id_hash = ngx_pcalloc(cf->pool, n * sizeof(uint64_t));
    pacf->ring_of = ngx_pcalloc(cf->pool,
                                PA_INDEX_MAX_SERVERS * sizeof(uint32_t));
    pacf->depth_id = ngx_pcalloc(cf->pool,
                                 PA_INDEX_MAX_SERVERS * sizeof(uint32_t));
    pacf->found_id = ngx_pcalloc(cf->pool,
                                 PA_INDEX_MAX_SERVERS * sizeof(uint32_t));
    pacf->depth = ngx_pcalloc(cf->pool, n * sizeof(uint32_t));
    pacf->found = ngx_pcalloc(cf->pool, n * sizeof(uint32_t));

    if (pacf->id == NULL || pacf->id_hash == NULL || pacf->ring_of == NULL
        || pacf->depth_id == NULL || pacf->found_id == NULL
        || pacf->depth == NULL || pacf->found == NULL)
    {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        /* never 0, which marks a free id */
        pacf->id_hash[i] = XXH3_64bits(pacf->names[i].data,
                                       pacf->names[i].len) | 1;
    }

    shm_zone = ngx_http_prefix_aware_upstream_zone(cf, pacf, &prefix,
                                                   pacf->index_size);
    if (shm_zone == NULL) {
        return NGX_ERROR;
    }

    shm_zone->init = ngx_http_prefix_aware_index_init_zone;
    shm_zone->data = pacf;

    pacf->index_zone = shm_zone;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_index_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    int                                   rc;
    u_char                               *region;
    size_t                                size;
    uint32_t                              capacity;
    ngx_uint_t                            i, j, k, m, n, found;
    ngx_slab_pool_t                      *shpool;
    ngx_http_prefix_aware_srv_conf_t     *pacf;
    ngx_http_prefix_aware_index_head_t   *head;

    pacf = shm_zone->data;
    n = pacf->nservers;

    /* the index takes every page of the zone, as one region */

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    head = shpool->data;

    if (head == NULL) {
        if (shpool->pfree < 8) {
            goto small;
        }

        size = (shpool->pfree - 1) * ngx_pagesize;

        head = ngx_slab_alloc(shpool, size);
        if (head == NULL) {
            goto small;
        }

        ngx_memzero(head, sizeof(ngx_http_prefix_aware_index_head_t));
        head->size = size;
        shpool->data = head;
    }

    region = (u_char *) ngx_align_ptr(head + 1, 64);
    size = head->size - (region - (u_char *) head);

    capacity = ngx_http_prefix_aware_index_blocks(pacf, pacf->capacity);

    rc = pa_index_attach(&pacf->index, region, size, PA_INDEX_MAX_SERVERS,
                         NGX_HTTP_PREFIX_AWARE_HOLDERS, capacity);

    if (rc == -1) {
        goto small;
    }

    if (rc == 0) {
        /* formatted anew: no server has an id yet */
        ngx_memzero(head->name, sizeof(head->name));
    }

    /* the servers that had an id keep it */

    for (i = 0; i < n; i++) {
        pacf->id[i] = PA_INDEX_NO_SERVER;

        for (j = 0; j < PA_INDEX_MAX_SERVERS; j++) {
            if (head->name[j] == pacf->id_hash[i]) {
                pacf->id[i] = (uint32_t) j;
                break;
            }
        }
    }

    /*
     * the others take a free id, else one of a server no longer in this
     * configuration (its holders are forgotten); workers of an older
     * configuration that still record for it give wrong hints, no more
     */

    k = 0;

    for (i = 0; i < n; i++) {
        if (pacf->id[i] != PA_INDEX_NO_SERVER) {
            continue;
        }

        for (j = 0; j < PA_INDEX_MAX_SERVERS; j++) {
            if (head->name[j] == 0) {
                break;
            }
        }

        while (j == PA_INDEX_MAX_SERVERS && k < PA_INDEX_MAX_SERVERS) {
            found = 0;

            for (m = 0; m < n; m++) {
                if (pacf->id[m] == k) {
                    found = 1;
                    break;
                }
            }

            if (!found) {
                j = k;
            }

            k++;
        }

        head->name[j] = pacf->id_hash[i];
        pa_index_forget(&pacf->index, (uint32_t) j);
        pacf->id[i] = (uint32_t) j;
    }

    for (j = 0; j < PA_INDEX_MAX_SERVERS; j++) {
        pacf->ring_of[j] = 0;
    }

    for (i = 0; i < n; i++) {
        pacf->ring_of[pacf->id[i]] = (uint32_t) i + 1;
        pa_index_set_capacity(&pacf->index, pacf->id[i], capacity);
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, shm_zone->shm.log, 0,
                   "prefix_aware index \"%V\": %s, %uz bytes",
                   &shm_zone->shm.name, rc ? "kept" : "formatted", size);

    return NGX_OK;

small:

    ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                  "prefix_aware: index zone \"%V\" of %uz bytes is too small",
                  &shm_zone->shm.name, shm_zone->shm.size);

    return NGX_ERROR;
}


/*
 * the server for a request with block keys: the index's depths by id are
 * turned into depths by ring index for pa_choose(), which probes the
 * servers' loads; the choice is recorded in the index at once, so that
 * requests sent together land together
 */

ngx_int_t
ngx_http_prefix_aware_index_choose(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick)
{
    int                                 rc;
    uint32_t                            i, k, r, nfound, nfound_id;
    pa_choice_t                         ch;
    pa_choose_in_t                      in;
    ngx_http_prefix_aware_srv_conf_t   *pacf;

    pacf = pd->conf;

    /* depth_id is all 0 between matches: only the servers found are set */

    (void) pa_index_match_found(&pacf->index, pd->blocks, pd->nblocks,
                                pacf->depth_id, PA_INDEX_MAX_SERVERS,
                                pacf->found_id, &nfound_id);

    nfound = 0;

    for (k = 0; k < nfound_id; k++) {
        i = pacf->found_id[k];
        r = pacf->ring_of[i];

        if (r != 0) {
            pacf->depth[r - 1] = pa_blocks_span(pacf->depth_id[i],
                                                (uint32_t) pacf->head,
                                                (uint32_t) pacf->stride);
            pacf->found[nfound++] = r - 1;
        }

        /* else a server of another configuration */

        pacf->depth_id[i] = 0;
    }

    ngx_memzero(&in, sizeof(pa_choose_in_t));

    in.key = pd->ring_key;
    in.units = pd->units;
    in.total_units = pd->total_units;
    in.decode = NGX_HTTP_PREFIX_AWARE_DECODE
                + pd->total_units * NGX_HTTP_PREFIX_AWARE_ACTIVE / 100;
    in.block_units = (uint32_t) pacf->block;
    in.nfound = nfound;
    in.depth = pacf->depth;
    in.found = pacf->found;
    in.nservers = (uint32_t) pacf->nservers;
    in.balance = (uint32_t) pacf->balance;
    in.threshold = pacf->threshold;
    in.cold = pacf->cold;
    in.place = pacf->place;
    in.holder = (pacf->overload == 1);
    in.cap = pacf->cap;
    in.match = (uint32_t) pacf->match;
    in.slack = NGX_HTTP_PREFIX_AWARE_SLACK + NGX_HTTP_PREFIX_AWARE_DECODE;
    in.ring = &pacf->ring;
    in.probe = ngx_http_prefix_aware_index_probe;
    in.ctx = pd;
    in.seen = pd->seen;

    rc = pa_choose(&in, &ch);

    for (k = 0; k < nfound; k++) {
        pacf->depth[pacf->found[k]] = 0;
    }

    pick->first_usable = 0;
    pick->first_inflight = 0;

    if (rc != 0) {
        pick->route = PA_ROUTE_NONE;
        return NGX_DECLINED;
    }

    pick->server = ch.server;
    pick->inflight = pd->conf->shm_server[ch.server]->inflight;

    switch (ch.kind) {

    case PA_CHOICE_MATCH:
    case PA_CHOICE_COLD:
        pick->route = PA_ROUTE_AFFINITY;
        break;

    default: /* PA_CHOICE_SPILL, PA_CHOICE_LEAST */
        pick->route = PA_ROUTE_SPILL;
        break;
    }

    pd->choice = ch.kind;
    pd->depth = ch.depth;
    pd->cost = ch.cost;
    pd->decode = ngx_min(in.decode, ch.cost);

    return NGX_OK;
}


/*
 * the request is on "server": its blocks are held there from now on, so
 * that requests sent together land together, and its work counts there:
 * its uncached prefill until the first byte of its response body (with
 * prefill=first, ngx_http_prefix_aware_feedback_first_byte()), its decode
 * share until it ends (ngx_http_prefix_aware_free_peer()): peer.c's
 * ngx_http_prefix_aware_work_add()
 */

void
ngx_http_prefix_aware_index_record(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server)
{
    int64_t                            age;
    uint32_t                           b, cached, held;
    uint64_t                           size;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;

    size = (pd->total_units + pacf->block - 1) / pacf->block;
    size = ngx_min(size, 0x7fffffff);

    /* the hashes (stride=) of the blocks matched there */
    cached = pa_blocks_kept(pd->depth, (uint32_t) pacf->head,
                            (uint32_t) pacf->stride);

    /*
     * the blocks it takes anew: past the match, or none where the match
     * reaches the key's end and the text past the key is held with it
     * (else each hit of a document longer than "length" aged its server
     * by the document, and the index forgot documents the engine held)
     */
    held = pa_choose_holds_past(pd->units, pd->total_units, pd->depth,
                                (uint32_t) pacf->block)
           ? (uint32_t) size : pd->depth;

    if (pd->no_record) {

        /*
         * /v1/messages/count_tokens: routed as its message would be, but
         * the engine prefills nothing of it, so nothing is cached there
         */

        age = -1;

    } else {
        age = pa_index_record_held(&pacf->index, pacf->id[server],
                                   pd->blocks, pd->nblocks, cached,
                                   held, (uint32_t) size);

        /*
         * the other hosts age the server as this one does: by nothing
         * past the match where the text past the key is held with it
         */

        if (pacf->sync) {
            ngx_http_prefix_aware_sync_record(pacf, server, pd->blocks,
                                              pd->nblocks, cached,
                                              (held == size) ? pd->depth
                                                             : (uint32_t) size);
        }
    }

    ngx_http_prefix_aware_feedback_start(pd, server, age);

    ngx_http_prefix_aware_work_add(pd, server);

    if (pd->tries > 1) {
        return;
    }

    /* the first decision: how it was placed, and how deep it matched */

    ngx_atomic_fetch_add(&pacf->shm->placed[pd->choice], 1);

    for (b = 0; b < NGX_HTTP_PREFIX_AWARE_DEPTHS - 1; b++) {
        if (pd->depth <= (b ? (uint32_t) 1 << (b - 1) : 0)) {
            break;
        }
    }

    ngx_atomic_fetch_add(&pacf->shm->depth[b], 1);
}


static int
ngx_http_prefix_aware_index_probe(void *ctx, uint32_t server,
    pa_load_t *load)
{
    ngx_http_prefix_aware_peer_data_t  *pd = ctx;

    int                                  rc;
    uint64_t                             inflight;
    ngx_http_prefix_aware_srv_conf_t    *pacf;

    pacf = pd->conf;

    rc = ngx_http_prefix_aware_probe(pd, server, &inflight);

    load->inflight = inflight;
    load->work = ngx_http_prefix_aware_work(pacf, server,
                                            NGX_HTTP_PREFIX_AWARE_SLACK
                                            + NGX_HTTP_PREFIX_AWARE_DECODE);
    load->id_hash = pacf->id_hash[server];
    load->weight = pacf->weights[server];

    return rc;
}


/* the engine's cache, in tokens of about 4 characters, in blocks */

static uint32_t
ngx_http_prefix_aware_index_blocks(ngx_http_prefix_aware_srv_conf_t *pacf,
    uint64_t tokens)
{
    uint64_t  blocks;

    blocks = ngx_min(tokens, (uint64_t) 1 << 40) * 4 / pacf->block;

    return (uint32_t) ngx_max(ngx_min(blocks, 0x7fffffff), 1);
}


/*
 * capacity=auto: the KV cache "server" reports, in tokens; 0 gives it the
 * configured capacity again
 */

void
ngx_http_prefix_aware_index_capacity(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_uint_t server, uint64_t tokens)
{
    if (pacf->index_size == 0 || pacf->id[server] == PA_INDEX_NO_SERVER) {
        return;
    }

    pa_index_set_capacity(&pacf->index, pacf->id[server],
                          ngx_http_prefix_aware_index_blocks(pacf,
                              tokens ? tokens : pacf->capacity));
}


/* a server's capacity in the index, in tokens, for the status page */

uint64_t
ngx_http_prefix_aware_index_capacity_of(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t server)
{
    if (pacf->index_size == 0 || pacf->id[server] == PA_INDEX_NO_SERVER) {
        return 0;
    }

    return (uint64_t) pa_index_get_capacity(&pacf->index, pacf->id[server])
           * pacf->block / 4;
}
