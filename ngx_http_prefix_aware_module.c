
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Prefix-aware upstream balancing for LLM inference servers: requests
 * whose bodies begin alike go to the same server (so its KV cache is
 * reused), unless that server has "threshold" requests in flight.
 *
 * This file is the nginx glue; the algorithms live in src/.
 */


#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_prefix_aware_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_prefix_aware_get_peer(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_prefix_aware_free_peer(ngx_peer_connection_t *pc,
    void *data, ngx_uint_t state);
static int ngx_http_prefix_aware_pick(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick);
static ngx_int_t ngx_http_prefix_aware_take(
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t server);
static void ngx_http_prefix_aware_count(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick);

static ngx_int_t ngx_http_prefix_aware_postconf(ngx_conf_t *cf);
static void *ngx_http_prefix_aware_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_prefix_aware_create_srv_conf(ngx_conf_t *cf);
static char *ngx_http_prefix_aware(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);


static ngx_command_t  ngx_http_prefix_aware_commands[] = {

    { ngx_string("prefix_aware"),
      NGX_HTTP_UPS_CONF|NGX_CONF_ANY,
      ngx_http_prefix_aware,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("prefix_aware_model"),
      NGX_HTTP_UPS_CONF|NGX_CONF_2MORE,
      ngx_http_prefix_aware_model,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("prefix_aware_sync"),
      NGX_HTTP_UPS_CONF|NGX_CONF_2MORE,
      ngx_http_prefix_aware_sync,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("prefix_aware_status"),
      NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_prefix_aware_status,
      0,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_prefix_aware_module_ctx = {
    ngx_http_prefix_aware_add_variables,   /* preconfiguration */
    ngx_http_prefix_aware_postconf,        /* postconfiguration */

    ngx_http_prefix_aware_create_main_conf, /* create main configuration */
    NULL,                                  /* init main configuration */

    ngx_http_prefix_aware_create_srv_conf, /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_prefix_aware_module = {
    NGX_MODULE_V1,
    &ngx_http_prefix_aware_module_ctx,     /* module context */
    ngx_http_prefix_aware_commands,        /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    ngx_http_prefix_aware_init_module,     /* init module */
    ngx_http_prefix_aware_init_process,    /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_prefix_aware_exit_process,    /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_uint_t  ngx_http_prefix_aware_rotate;


static ngx_int_t
ngx_http_prefix_aware_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_int_t                            rc;
    ngx_http_upstream_rr_peers_t        *peers;
    ngx_http_prefix_aware_srv_conf_t    *pacf, **pp;
    ngx_http_prefix_aware_main_conf_t   *pamcf;

    if (ngx_http_upstream_init_round_robin(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }

    us->peer.init = ngx_http_prefix_aware_init_peer;

    pacf = ngx_http_conf_upstream_srv_conf(us,
                                           ngx_http_prefix_aware_module);
    peers = us->peer.data;

    if (peers->next) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware does not support backup servers "
                      "in upstream \"%V\"", &us->host);
        return NGX_ERROR;
    }

    pacf->upstream = us;

    /* "server ... resolve": the ring is made in each worker, at run time */

    rc = ngx_http_prefix_aware_resolve_init(cf, pacf);

    if (rc != NGX_DECLINED) {
        if (rc != NGX_OK) {
            return NGX_ERROR;
        }

        goto done;
    }

    if (ngx_http_prefix_aware_ring_init(cf, pacf, us) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_prefix_aware_models_init(cf, pacf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (pacf->index_size) {
        pacf->max_blocks = ngx_max(pacf->length / pacf->block, 1);
        pacf->head = ngx_max(NGX_HTTP_PREFIX_AWARE_INDEX_HEAD / pacf->block,
                             64);

        if (ngx_http_prefix_aware_index_add(cf, pacf) != NGX_OK) {
            return NGX_ERROR;
        }
    }

done:

    if (ngx_http_prefix_aware_engine_init(cf, pacf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_prefix_aware_sync_init(cf, pacf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_prefix_aware_state_init(cf, pacf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_prefix_aware_queue_init(cf, pacf) != NGX_OK) {
        return NGX_ERROR;
    }

    pamcf = ngx_http_conf_get_module_main_conf(cf,
                                               ngx_http_prefix_aware_module);

    pp = ngx_array_push(&pamcf->upstreams);
    if (pp == NULL) {
        return NGX_ERROR;
    }

    *pp = pacf;

    return NGX_OK;
}




static ngx_int_t
ngx_http_prefix_aware_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_int_t                           rc;
    ngx_str_t                           reason;
    ngx_http_prefix_aware_srv_conf_t   *pacf;
    ngx_http_prefix_aware_peer_data_t  *pd;
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    pacf = ngx_http_conf_upstream_srv_conf(us, ngx_http_prefix_aware_module);
    pamcf = ngx_http_get_module_main_conf(r, ngx_http_prefix_aware_module);

    /* released from the queue: the upstream is initialized again */

    pd = ngx_http_get_module_ctx(r, ngx_http_prefix_aware_module);

    if (pd && pd->wait && pd->conf == pacf) {
        rc = ngx_http_prefix_aware_queue_resume(r, pd);

        if (rc != NGX_DECLINED) {
            return (rc == NGX_OK) ? NGX_OK : NGX_ERROR;
        }
    }

    pd = ngx_pcalloc(r->pool, sizeof(ngx_http_prefix_aware_peer_data_t));
    if (pd == NULL) {
        return NGX_ERROR;
    }

    r->upstream->peer.data = &pd->rrp;

    if (ngx_http_upstream_init_round_robin_peer(r, us) != NGX_OK) {
        return NGX_ERROR;
    }

    if (!pamcf->attached) {
        /* a single process reloaded: no init_process for the new cycle */

        if (ngx_http_prefix_aware_attach((ngx_cycle_t *) ngx_cycle, pamcf)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    r->upstream->peer.get = ngx_http_prefix_aware_get_peer;
    r->upstream->peer.free = ngx_http_prefix_aware_free_peer;

    pd->conf = pacf;
    pd->route = PA_ROUTE_NONE;

    ngx_http_prefix_aware_strategy_init(r, pd);

    if (ngx_http_prefix_aware_resolve_peer(r, pd) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_http_set_ctx(r, pd, ngx_http_prefix_aware_module);

    ngx_str_null(&reason);

    rc = ngx_http_prefix_aware_key(r, pd, &reason);

    if (rc == NGX_HTTP_BAD_REQUEST) {
        ngx_atomic_fetch_add(&pacf->shm->counter[NGX_HTTP_PA_UP_REJECTED], 1);
        return ngx_http_prefix_aware_reject(r, &reason);
    }

    if (rc != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_atomic_fetch_add(&pacf->shm->counter[pd->source], 1);

    if (pd->source == NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI && pd->api) {
        ngx_atomic_fetch_add(
                  &pacf->shm->counter[NGX_HTTP_PA_UP_API_CHAT + pd->api - 1],
                  1);
    }

    if (pd->id) {
        ngx_atomic_fetch_add(&pacf->shm->counter[NGX_HTTP_PA_UP_ID], 1);
    }

    ngx_http_prefix_aware_state_start(r, pd);
    ngx_http_prefix_aware_sync_unknown(r, pd);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_aware key: %016uxL source:%V id:%ui api:%V",
                   pd->keyed ? pd->hash : 0,
                   &ngx_http_prefix_aware_sources[pd->source],
                   (ngx_uint_t) pd->id, &ngx_http_prefix_aware_apis[pd->api]);

    if (pacf->queue) {
        rc = ngx_http_prefix_aware_queue_enter(r, pd);
        return (rc == NGX_OK) ? NGX_OK : NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_prefix_aware_peer_data_t  *pd = data;

    int                                  rc;
    uintptr_t                            m;
    ngx_int_t                            taken;
    ngx_uint_t                           n, walks;
    pa_pick_t                            pick;
    ngx_http_upstream_rr_peer_t         *peer;
    ngx_http_upstream_rr_peers_t        *peers;
    ngx_http_prefix_aware_srv_conf_t    *pacf;
    ngx_http_prefix_aware_shm_server_t  *s;

    pacf = pd->conf;
    peers = pd->rrp.peers;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                   "prefix_aware get peer, try: %ui", pc->tries);

    pc->cached = 0;
    pc->connection = NULL;

    if (ngx_http_prefix_aware_resolve_current(pd, pc->log) != NGX_OK) {
        return NGX_ERROR;
    }

    pd->now = ngx_time();

    /*
     * the choice (the index's match, the probes of the servers, the
     * walks) reads shared state that is updated atomically, or word by
     * word under the peers' lock: it is made without that lock, which
     * with a "zone" is a spinlock of every worker.  the server is
     * reserved by a compare-and-swap of its count below threshold, so
     * that workers choosing at the same moment cannot take it past
     * threshold together; the loser walks again and sees the count that
     * beat it.  A choice at or above threshold is the fallback (every
     * usable server is full): it is walked once more, as counts read one
     * after the other may be a moment old, then taken.  Only then is the
     * peer locked: checked again and taken, or walked past.
     */

    taken = NGX_DECLINED;
    rc = -1;

    /*
     * a stored response's server: the only one that can answer, past
     * threshold and the work bounds, if it is usable; else (and on the
     * next tries) the request goes by its key
     */

    if (pd->state_server
        && ngx_http_prefix_aware_state_find(pd, &pick) == NGX_OK)
    {
        s = pacf->shm_server[pick.server];
        ngx_atomic_fetch_add(&s->inflight, 1);

        if (ngx_http_prefix_aware_take(pd, pick.server) == NGX_OK) {
            rc = 0;
            goto chosen;
        }

        ngx_atomic_fetch_add(&s->inflight, -1);
        ngx_http_prefix_aware_state_taken(pd, pick.server, 0);
    }

    for (walks = 0; /* void */ ; walks++) {

        rc = ngx_http_prefix_aware_pick(pd, &pick);

        if (rc != 0) {
            break;
        }

        s = pacf->shm_server[pick.server];

        if (pick.inflight < pacf->threshold) {
            if (ngx_http_prefix_aware_reserve(s, pacf->threshold) != NGX_OK)
            {
                if (walks < NGX_HTTP_PREFIX_AWARE_RETRIES) {
                    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                                   "prefix_aware: server %uD filled, "
                                   "walk again", pick.server);
                    continue;
                }

                ngx_atomic_fetch_add(&s->inflight, 1);
            }

        } else if (walks == 0
                   && (pacf->cap == PA_CAP_HARD
                       || pd->choice != PA_CHOICE_MATCH))
        {
            /* not a match let over the cap by what it saves (cap=) */
            continue;

        } else {
            ngx_atomic_fetch_add(&s->inflight, 1);
        }

        taken = ngx_http_prefix_aware_take(pd, pick.server);

        if (taken == NGX_OK) {
            break;
        }

        ngx_atomic_fetch_add(&s->inflight, -1);

        if (walks >= 2 * NGX_HTTP_PREFIX_AWARE_RETRIES) {
            rc = -1;
            break;
        }

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                       "prefix_aware: server %uD changed, walk again",
                       pick.server);

        if (taken == NGX_AGAIN
            && ngx_http_prefix_aware_resolve_current(pd, pc->log) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

chosen:

    if (rc != 0) {

        /* all peers failed, mark them as live for quick recovery (no set) */

        ngx_http_upstream_rr_peers_wlock(peers);

        for (peer = peers->peer; peer && pd->set == NULL; peer = peer->next) {
            peer->fails = 0;
        }

        pc->name = peers->name;

        ngx_http_upstream_rr_peers_unlock(peers);

        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                       "prefix_aware: no usable server");

        return NGX_BUSY;
    }

    peer = pacf->peer[pick.server];

    pd->rrp.current = peer;

    pc->sockaddr = peer->sockaddr;
    pc->socklen = peer->socklen;
    pc->name = &peer->name;

    n = pick.server / (8 * sizeof(uintptr_t));
    m = (uintptr_t) 1 << pick.server % (8 * sizeof(uintptr_t));

    pd->rrp.tried[n] |= m;

    ngx_http_prefix_aware_count(pd, &pick);

    if (pick.route == PA_ROUTE_STATE || pd->learn) {
        ngx_http_prefix_aware_state_taken(pd, pick.server,
                                          pick.route == PA_ROUTE_STATE ? 1
                                                                       : 2);
    }

    /*
     * a state route is not the key's choice: its server is not recorded,
     * its work counts there
     */

    if (pd->nblocks && pd->strategy == NGX_HTTP_PA_STRATEGY_PREFIX) {
        if (pick.route == PA_ROUTE_STATE) {
            ngx_http_prefix_aware_work_uncached(pd, pick.server);

        } else {
            ngx_http_prefix_aware_index_record(pd, pick.server);
        }
    }

    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                   "prefix_aware peer: \"%V\" route:%s hash:%016uxL "
                   "first in flight:%uL threshold:%ui",
                   &peer->name, pa_route_name(pick.route),
                   pd->keyed ? pd->hash : 0, pick.first_inflight,
                   pacf->threshold);

    return NGX_OK;
}


/* one walk: the server for the request's strategy and key, 0 or -1 */

static int
ngx_http_prefix_aware_pick(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;

    if (pd->strategy != NGX_HTTP_PA_STRATEGY_PREFIX) {
        return (ngx_http_prefix_aware_strategy_pick(pd, pick) == NGX_OK)
               ? 0 : -1;
    }

    if (pd->nblocks) {
        return (ngx_http_prefix_aware_index_choose(pd, pick) == NGX_OK)
               ? 0 : -1;
    }

    if (pd->keyed) {
        return pa_ring_pick(&pacf->ring, pd->hash, pacf->threshold,
                            ngx_http_prefix_aware_probe, pd, pd->seen, pick);
    }

    return pa_least_loaded(pacf->nservers, ngx_http_prefix_aware_rotate++,
                           pacf->weights, pacf->current,
                           ngx_http_prefix_aware_probe, pd, pick);
}


/*
 * the chosen peer, under the peers' lock: still usable (its state may
 * have changed since it was read without the lock) and taken: its
 * connections and a reference.  NGX_BUSY: no longer usable; NGX_AGAIN:
 * the "resolve" view is older than the peers, it is made again first
 */

static ngx_int_t
ngx_http_prefix_aware_take(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server)
{
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    peers = pd->rrp.peers;
    peer = pd->conf->peer[server];

    ngx_http_upstream_rr_peers_wlock(peers);

#if (NGX_HTTP_UPSTREAM_ZONE)
    if (peers->shpool) {
        uint64_t  inflight;

        if (ngx_http_prefix_aware_resolve_stale(pd->conf)) {
            ngx_http_upstream_rr_peers_unlock(peers);
            return NGX_AGAIN;
        }

        if (ngx_http_prefix_aware_probe(pd, (uint32_t) server, &inflight)
            != PA_SERVER_USABLE)
        {
            ngx_http_upstream_rr_peers_unlock(peers);
            return NGX_BUSY;
        }
    }
#endif

    peer->conns++;
    ngx_http_prefix_aware_peer_ref(peers, peer);

    if (pd->now - peer->checked > peer->fail_timeout) {
        peer->checked = pd->now;
    }

    ngx_http_upstream_rr_peers_unlock(peers);

    return NGX_OK;
}


/* the server's count is taken already: this worker's share, the counters */

static void
ngx_http_prefix_aware_count(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick)
{
    uint64_t                               v;
    ngx_uint_t                             b;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    s = pd->conf->shm_server[pick->server];
    up = pd->conf->shm;

    if (pd->conf->counts) {
        pd->count = &pd->conf->counts[pick->server];
        ngx_atomic_fetch_add(pd->count, 1);
    }

    pd->held = s;
    pd->route = pick->route;

    ngx_atomic_fetch_add(&s->requests, 1);
    ngx_atomic_fetch_add(&s->route[pick->route], 1);
    ngx_http_prefix_aware_strategy_count(pd, pick);

    if (!pd->keyed || pd->tries++ > 0) {
        return;
    }

    /* the first decision of a keyed request: what reuse was available */

    ngx_atomic_fetch_add(&up->counter[NGX_HTTP_PA_UP_KEYED], 1);

    if (pick->first_usable) {
        ngx_atomic_fetch_add(&up->counter[NGX_HTTP_PA_UP_FIRST_USABLE], 1);
    }

    v = pick->first_inflight;

    for (b = 0; b < NGX_HTTP_PREFIX_AWARE_HIST - 1; b++) {
        if (v <= (b ? (uint64_t) 1 << (b - 1) : 0)) {
            break;
        }
    }

    ngx_atomic_fetch_add(&up->hist[b], 1);
    ngx_atomic_fetch_add(&up->counter[NGX_HTTP_PA_UP_HIST_SUM],
                         (ngx_atomic_int_t) v);
}


static void
ngx_http_prefix_aware_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ngx_http_prefix_aware_peer_data_t  *pd = data;

    ngx_http_prefix_aware_shm_server_t  *s;

    s = pd->held;

    /* once for each get_peer(): keepalive and retries call both in pairs */

    if (s) {
        pd->held = NULL;

        ngx_atomic_fetch_add(&s->inflight, -1);

        if (pd->count) {
            ngx_atomic_fetch_add(pd->count, -1);
            pd->count = NULL;
        }

        if (pd->cost) {
            ngx_atomic_fetch_add(&s->work, - (ngx_atomic_int_t) pd->cost);

            if (pd->wcount) {
                ngx_atomic_fetch_add(pd->wcount,
                                     - (ngx_atomic_int_t) pd->cost);
                pd->wcount = NULL;
            }

            pd->cost = 0;
        }

        pd->prefill = 0;

        if (pd->conf->queue) {
            ngx_http_prefix_aware_queue_kick(pd->conf);
        }
    }

    ngx_http_upstream_free_round_robin_peer(pc, data, state);
}


static ngx_int_t
ngx_http_prefix_aware_postconf(ngx_conf_t *cf)
{
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    pamcf = ngx_http_conf_get_module_main_conf(cf,
                                               ngx_http_prefix_aware_module);

    if (pamcf->upstreams.nelts == 0) {
        return NGX_OK;
    }

    ngx_http_prefix_aware_filter_init();

    return ngx_http_prefix_aware_zone_add(cf, pamcf);
}


static void *
ngx_http_prefix_aware_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    pamcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_main_conf_t));
    if (pamcf == NULL) {
        return NULL;
    }

    if (ngx_array_init(&pamcf->upstreams, cf->pool, 4,
                       sizeof(ngx_http_prefix_aware_srv_conf_t *))
        != NGX_OK)
    {
        return NULL;
    }

    return pamcf;
}


static void *
ngx_http_prefix_aware_create_srv_conf(ngx_conf_t *cf)
{
    ngx_http_prefix_aware_srv_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_srv_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->ring = { NULL, 0, 0 };
     *     conf->peer = NULL;
     *     conf->shm = NULL;
     */

    conf->length = NGX_CONF_UNSET_UINT;
    conf->threshold = NGX_CONF_UNSET_UINT;
    conf->format = NGX_CONF_UNSET_UINT;

    return conf;
}


static char *
ngx_http_prefix_aware(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf = conf;

    char                            *rv;
    ngx_int_t                        rc;
    ngx_str_t                       *value, *length, s;
    ngx_uint_t                       i;
    ngx_http_upstream_server_t      *server;
    ngx_http_upstream_srv_conf_t    *uscf;

    if (pacf->length != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    pacf->length = NGX_HTTP_PREFIX_AWARE_LENGTH;
    length = NULL;
    pacf->threshold = 10;
    pacf->format = NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO;
    pacf->index_size = NGX_HTTP_PREFIX_AWARE_INDEX_AUTO_MIN;
    pacf->index_auto = 1;
    pacf->block = 128;
    pacf->stride = 8;
    pacf->balance = 125;
    pacf->capacity = 262144;
    pacf->cold = PA_COLD_TWO;
    pacf->place = PA_PLACE_DEEPEST;
    pacf->cap = PA_CAP_COST;
    pacf->overload = 1;
    pacf->match = 60;
    pacf->prefill_end = 0;
    pacf->feedback = 0;
    pacf->capacity_auto = 0;
    pacf->engine_load = 0;
    pacf->metrics = NGX_CONF_UNSET_UINT;
    pacf->metrics_interval = NGX_CONF_UNSET_MSEC;
    pacf->responses = NGX_HTTP_PREFIX_AWARE_RESPONSES;

    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "length=", 7) == 0) {
            length = &value[i];
            continue;
        }

        if (ngx_strncmp(value[i].data, "threshold=", 10) == 0) {
            rv = ngx_http_prefix_aware_number(cf, &value[i], 10, 1, 1024,
                                              &pacf->threshold);
            if (rv != NGX_CONF_OK) {
                return rv;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "format=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            if (s.len == 4 && ngx_strncmp(s.data, "auto", 4) == 0) {
                pacf->format = NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO;

            } else if (s.len == 4 && ngx_strncmp(s.data, "body", 4) == 0) {
                pacf->format = NGX_HTTP_PREFIX_AWARE_FORMAT_BODY;

            } else if (s.len == 6 && ngx_strncmp(s.data, "openai", 6) == 0) {
                pacf->format = NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI;

            } else {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"format\" value \"%V\" in "
                                   "\"prefix_aware\", it must be \"auto\", "
                                   "\"body\" or \"openai\"", &s);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        rc = ngx_http_prefix_aware_index_param(cf, pacf, &value[i]);

        if (rc == NGX_DECLINED) {
            rc = ngx_http_prefix_aware_strategy_param(cf, pacf, &value[i]);
        }

        if (rc == NGX_DECLINED) {
            rc = ngx_http_prefix_aware_models_param(cf, pacf, &value[i]);
        }

        if (rc == NGX_DECLINED) {
            rc = ngx_http_prefix_aware_engine_param(cf, pacf, &value[i]);
        }

        if (rc == NGX_DECLINED) {
            rc = ngx_http_prefix_aware_state_param(cf, pacf, &value[i]);
        }

        if (rc == NGX_DECLINED) {
            rc = ngx_http_prefix_aware_queue_param(cf, pacf, &value[i]);
        }

        if (rc == NGX_OK) {
            continue;
        }

        if (rc == NGX_ERROR) {
            return NGX_CONF_ERROR;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" in \"prefix_aware\", "
                           "it takes length=, threshold=, format=, index=, "
                           "block=, capacity=, balance=, cold=, match=, "
                           "prefill=, "
                           "strategy=, strategy_default=, models=, "
                           "models_interval=, model_header=, "
                           "model_fallback=, metrics=, "
                           "metrics_interval=, load=, responses=, queue=, "
                           "queue_timeout=, queue_poll=, queue_status=, "
                           "queue_retry=, priority= and flow=", &value[i]);
        return NGX_CONF_ERROR;
    }

    if (ngx_http_prefix_aware_index_length(cf, pacf, length) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (uscf->servers) {
        server = uscf->servers->elts;

        for (i = 0; i < uscf->servers->nelts; i++) {
            if (server[i].backup) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"prefix_aware\" does not support "
                                   "backup servers: every server is on "
                                   "the ring, use \"down\" or remove it");
                return NGX_CONF_ERROR;
            }
        }
    }

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "load balancing method redefined");
    }

    uscf->peer.init_upstream = ngx_http_prefix_aware_init_upstream;

    uscf->flags = NGX_HTTP_UPSTREAM_CREATE
                  |NGX_HTTP_UPSTREAM_WEIGHT
                  |NGX_HTTP_UPSTREAM_MAX_CONNS
                  |NGX_HTTP_UPSTREAM_MAX_FAILS
                  |NGX_HTTP_UPSTREAM_FAIL_TIMEOUT
                  |NGX_HTTP_UPSTREAM_DOWN
                  |NGX_HTTP_PREFIX_AWARE_MODIFY;

    return NGX_CONF_OK;
}
