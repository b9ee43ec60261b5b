
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * queue=: which servers have room, and for which requests: the places
 * below the bounds of each server, the servers of a request's model set
 * in its place, the room of the set a request may use, and its work (the
 * prefill no server holds); src/ngx_http_prefix_aware_queue.c keeps the
 * requests that wait.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_queue.h"
#include "pa_work.h"


static ngx_uint_t ngx_http_prefix_aware_queue_engine_full(
    ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_shm_server_t *s);


/*
 * the scratch of a look for the servers of the configuration, or of the
 * current view with "resolve" (its number changes: made again, twice as
 * large, when it grows past)
 */

ngx_int_t
ngx_http_prefix_aware_queue_scratch(ngx_http_prefix_aware_queue_t *qu)
{
    size_t      n;
    ngx_uint_t  cap;

    if (qu->pacf->nservers <= qu->cap && qu->room) {
        return NGX_OK;
    }

    cap = ngx_max(qu->pacf->nservers, ngx_max(2 * qu->cap, 64));
    n = cap / (8 * sizeof(uintptr_t)) + 1;

    qu->tried = ngx_pcalloc(ngx_cycle->pool, n * sizeof(uintptr_t));
    qu->room = ngx_pcalloc(ngx_cycle->pool, cap * sizeof(uint32_t));

    if (qu->tried == NULL || qu->room == NULL) {
        qu->room = NULL;
        return NGX_ERROR;
    }

    qu->cap = cap;

    return NGX_OK;
}


/*
 * each server's places below its bounds, of all the servers (whatever
 * the request's model), into "room"
 */

void
ngx_http_prefix_aware_queue_fill(ngx_http_prefix_aware_peer_data_t *pd,
    uint32_t *room)
{
    uint64_t                           inflight;
    uintptr_t                         *set;
    ngx_uint_t                         j;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;
    set = pd->set;
    pd->set = NULL;

    for (j = 0; j < pacf->nservers; j++) {
        room[j] = 0;

        if (ngx_http_prefix_aware_probe(pd, (uint32_t) j, &inflight)
            != PA_SERVER_USABLE
            || inflight >= pacf->threshold
            || ngx_http_prefix_aware_queue_engine_full(pacf,
                                                       pacf->shm_server[j]))
        {
            continue;
        }

        room[j] = (uint32_t) (pacf->threshold - inflight);
    }

    pd->set = set;
}


/* the servers of the request's model set in its place (none: all) */

void
ngx_http_prefix_aware_queue_mask(ngx_http_prefix_aware_peer_data_t *pd,
    uint32_t slot)
{
    uint64_t                        mask[PA_QUEUE_MAX_WORDS];
    ngx_uint_t                      j, nw, bits;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = pd->conf->queue;
    nw = qu->q.head->nwords;

    if (nw == 0 || pd->set == NULL) {
        return;
    }

    ngx_memzero(mask, nw * sizeof(uint64_t));

    bits = 8 * sizeof(uintptr_t);

    for (j = 0; j < pd->conf->nservers && j < nw * 64; j++) {
        if (pd->set[j / bits] & ((uintptr_t) 1 << (j % bits))) {
            mask[j / 64] |= (uint64_t) 1 << (j % 64);
        }
    }

    pa_queue_set_mask(&qu->q, slot, mask);
}


/*
 * the places below the bounds of the servers the request may use, at
 * most "limit" requests in flight a server (threshold, or less the
 * reserved places: queue_reserve=); with "first", as soon as there is
 * one; -1 if none is usable: the request goes on, to be answered as
 * without a queue
 */

ngx_int_t
ngx_http_prefix_aware_queue_room(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t first, ngx_uint_t limit)
{
    uint64_t                           inflight;
    ngx_int_t                          room;
    ngx_uint_t                         j, usable;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;
    room = 0;
    usable = 0;

    for (j = 0; j < pacf->nservers; j++) {

        if (ngx_http_prefix_aware_probe(pd, (uint32_t) j, &inflight)
            != PA_SERVER_USABLE)
        {
            continue;
        }

        usable++;

        if (inflight >= limit
            || ngx_http_prefix_aware_queue_engine_full(pacf,
                                                       pacf->shm_server[j]))
        {
            continue;
        }

        room += limit - inflight;

        if (first) {
            return room;
        }
    }

    return usable ? room : -1;
}


/*
 * whether the index's choice for the request is a match its holder takes
 * now: under "threshold", or over it by what cap=cost lets a match save
 * (pa_choose()), on a server whose engine does not report requests
 * waiting (load=engine); the choice is made again when the request goes
 */

ngx_uint_t
ngx_http_prefix_aware_queue_match(ngx_http_prefix_aware_peer_data_t *pd)
{
    pa_pick_t                          pick;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;

    if (pd->strategy != NGX_HTTP_PA_STRATEGY_PREFIX
        || pd->nblocks == 0
        || pacf->index_size == 0
        || ngx_http_prefix_aware_index_choose(pd, &pick) != NGX_OK
        || pd->choice != PA_CHOICE_MATCH)
    {
        return 0;
    }

    return !ngx_http_prefix_aware_queue_engine_full(pacf,
                                             pacf->shm_server[pick.server]);
}


/* load=engine: an engine that reports requests waiting is full */

static ngx_uint_t
ngx_http_prefix_aware_queue_engine_full(
    ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_shm_server_t *s)
{
    if (!pacf->engine_load
        || s->engine_failing
        || !((unsigned) s->engine_seen & (1u << PA_PROM_WAITING))
        || !pa_work_fresh(ngx_current_msec, s->engine_reported,
                          pacf->metrics_interval))
    {
        return 0;
    }

    return s->engine_waiting > 0;
}


/*
 * the request's prefill that no server holds: its units past the deepest
 * match of any server of the configuration, as the index's choice
 * matches (ngx_http_prefix_aware_index_choose()), choosing nothing; only
 * for a request that waits
 */

uint64_t
ngx_http_prefix_aware_queue_uncached(ngx_http_prefix_aware_peer_data_t *pd)
{
    uint32_t                           i, k, nfound_id, depth, best;
    uint64_t                           held;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;

    if (pd->nblocks == 0 || pacf->index_size == 0) {
        return pd->total_units;
    }

    /* depth_id is all 0 between matches: only the servers found are set */

    (void) pa_index_match_found(&pacf->index, pd->blocks, pd->nblocks,
                                pacf->depth_id, PA_INDEX_MAX_SERVERS,
                                pacf->found_id, &nfound_id);

    best = 0;

    for (k = 0; k < nfound_id; k++) {
        i = pacf->found_id[k];

        if (pacf->ring_of[i] != 0) {
            depth = pa_blocks_span(pacf->depth_id[i], (uint32_t) pacf->head,
                                   (uint32_t) pacf->stride);
            best = ngx_max(best, depth);
        }

        pacf->depth_id[i] = 0;
    }

    held = (uint64_t) best * pacf->block;

    return (pd->total_units > held) ? pd->total_units - held : 0;
}
