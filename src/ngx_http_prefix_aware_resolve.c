
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Membership that follows DNS: "server name resolve" in an upstream with
 * a "zone" (nginx 1.27.3 and later).  nginx's zone module adds and removes
 * peers as the name's addresses change, and moves the peers'
 * configuration generation (*peers->config).  Each worker keeps a view of
 * the current peers: the ring, the peer, weight and shared record arrays
 * of the srv conf, in a pool of the view's own; before a choice it is
 * rebuilt if the generation moved, and the old one's pool destroyed.
 *
 * Resolved peers are on the ring by address ("10.0.0.5:8000"), each its
 * own points, so one address more or less moves only its share of keys;
 * servers without "resolve" in such an upstream are on it by name, as
 * elsewhere.  Their shared records are found by the same names, so a
 * server that stays keeps its in-flight count and counters; a view holds
 * a reference to each record it uses and, as the core balancers do, to
 * each peer (ngx_http_upstream_rr_peer_ref), so that neither is freed
 * under it; records no view uses are freed by the zone's sweep once
 * nothing is in flight on them.
 */


#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_resolve_scratch(
    ngx_http_prefix_aware_peer_data_t *pd);


#if (NGX_HTTP_PREFIX_AWARE_RESOLVE)

typedef struct {
    ngx_uint_t                            config;   /* *peers->config */
    ngx_uint_t                            id;       /* views made */
    ngx_uint_t                            failed;   /* config + 1 */
    ngx_uint_t                            retry;    /* config + 1 */
    ngx_pool_t                           *pool;
    ngx_http_prefix_aware_shm_block_t    *block;
    ngx_http_prefix_aware_main_conf_t    *pamcf;
} ngx_http_prefix_aware_view_t;


typedef struct {
    ngx_str_t                             name;
    ngx_http_upstream_rr_peer_t          *peer;
} ngx_http_prefix_aware_entry_t;


static void ngx_http_prefix_aware_resolve_cleanup(void *data);
static ngx_uint_t ngx_http_prefix_aware_resolve_due(
    ngx_http_prefix_aware_view_t *view, ngx_uint_t config, ngx_uint_t tick);
static void ngx_http_prefix_aware_resolve_view(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_log_t *log, ngx_uint_t tick);
static ngx_int_t ngx_http_prefix_aware_resolve_names(ngx_pool_t *pool,
    ngx_http_prefix_aware_entry_t *e, ngx_uint_t n,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_log_t *log);
static ngx_int_t ngx_http_prefix_aware_entry_cmp(const void *one,
    const void *two);
static ngx_int_t ngx_http_prefix_aware_resolve_bind(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *names,
    ngx_http_prefix_aware_shm_server_t **server, ngx_uint_t n,
    ngx_http_prefix_aware_shm_block_t **blockp);


/*
 * an upstream with a server to resolve: its ring is made at run time;
 * NGX_DECLINED for the others
 */

ngx_int_t
ngx_http_prefix_aware_resolve_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_uint_t                     i;
    ngx_pool_cleanup_t            *cln;
    ngx_http_upstream_server_t    *server;
    ngx_http_upstream_rr_peers_t  *peers;
    ngx_http_prefix_aware_view_t  *view;

    peers = pacf->upstream->peer.data;

    if (peers->resolve == NULL) {
        return NGX_DECLINED;
    }

    if (pacf->index_auto) {
        ngx_http_prefix_aware_index_off(cf, pacf, "servers with \"resolve\"");
    }

    if (pacf->index_size) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: \"index\" does not follow servers "
                      "resolved at run time, in upstream \"%V\" use "
                      "\"index=off\" or servers without \"resolve\"",
                      &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (pacf->models) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: model sets do not follow servers "
                      "resolved at run time, in upstream \"%V\" remove "
                      "\"prefix_aware_model\" and the model parameters "
                      "or use servers without \"resolve\"",
                      &pacf->upstream->host);
        return NGX_ERROR;
    }

    server = pacf->upstream->servers->elts;

    for (i = 0; i < pacf->upstream->servers->nelts; i++) {
        if (server[i].weight > NGX_HTTP_PREFIX_AWARE_MAX_WEIGHT) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "prefix_aware: invalid \"weight\" value %ui of "
                          "server \"%V\" in upstream \"%V\", it must be "
                          "a number from 1 to %d", server[i].weight,
                          &server[i].name, &pacf->upstream->host,
                          NGX_HTTP_PREFIX_AWARE_MAX_WEIGHT);
            return NGX_ERROR;
        }
    }

    view = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_view_t));
    if (view == NULL) {
        return NGX_ERROR;
    }

    view->pamcf = ngx_http_conf_get_module_main_conf(cf,
                                                ngx_http_prefix_aware_module);
    pacf->resolve = view;
    pacf->nservers = 0;

    /* a single process that reloads frees the old configuration's view */

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ngx_http_prefix_aware_resolve_cleanup;
    cln->data = view;

    return NGX_OK;
}


static void
ngx_http_prefix_aware_resolve_cleanup(void *data)
{
    ngx_http_prefix_aware_view_t  *view = data;

    if (view->pool) {
        ngx_destroy_pool(view->pool);
        view->pool = NULL;
    }
}


/*
 * 1 if the view is to be made for the peers' generation "config": it is
 * not made yet, and making it did not fail for that generation.  A
 * failure that the same peers would meet again (too many ring points) is
 * not retried; one that passes (the zone full while the records of
 * servers that left drain, no memory) is retried at the reaper's tick
 */

static ngx_uint_t
ngx_http_prefix_aware_resolve_due(ngx_http_prefix_aware_view_t *view,
    ngx_uint_t config, ngx_uint_t tick)
{
    if (view->pool && view->config == config) {
        return 0;
    }

    if (view->failed == config + 1) {
        return 0;
    }

    if (view->retry == config + 1 && !tick) {
        return 0;
    }

    return 1;
}


/*
 * the current view of an upstream with "resolve".  The peers' lock (a
 * spinlock of every worker) is held only to list the peers, each taken
 * with a reference so that it stays while the view is made without the
 * lock (sorting, up to 4 M ring points), and to swap the views' peer
 * references.  The peers may change meanwhile: the view is of the
 * generation it listed, and one made again once the generation moved.
 */

static void
ngx_http_prefix_aware_resolve_view(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_log_t *log, ngx_uint_t tick)
{
    size_t                                total;
    int64_t                              *current;
    uint32_t                             *weights;
    ngx_int_t                             rc;
    ngx_str_t                            *names;
    pa_ring_t                             ring;
    ngx_uint_t                            i, n, all, config, lasting;
    ngx_pool_t                           *pool;
    pa_ring_point_t                      *points;
    pa_ring_server_t                     *servers;
    ngx_http_upstream_rr_peer_t          *peer, **peer_of, **listed;
    ngx_http_upstream_rr_peers_t         *peers;
    ngx_http_prefix_aware_view_t         *view;
    ngx_http_prefix_aware_entry_t        *e;
    ngx_http_prefix_aware_shm_block_t    *block;
    ngx_http_prefix_aware_shm_server_t  **shm_server;

    view = pacf->resolve;
    peers = pacf->upstream->peer.data;

    if (peers->config == NULL) {
        return;
    }

    /* read without the lock, and again under it */

    config = *peers->config;

    if (!ngx_http_prefix_aware_resolve_due(view, config, tick)) {
        return;
    }

    all = 0;
    listed = NULL;
    lasting = 0;

    pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, log);
    if (pool == NULL) {
        goto failed;
    }

    ngx_http_upstream_rr_peers_wlock(peers);

    config = *peers->config;

    if (!ngx_http_prefix_aware_resolve_due(view, config, tick)) {
        ngx_http_upstream_rr_peers_unlock(peers);
        ngx_destroy_pool(pool);
        return;
    }

    n = 0;

    for (peer = peers->peer; peer; peer = peer->next) {
        n++;
    }

    e = ngx_palloc(pool, (n + 1) * sizeof(ngx_http_prefix_aware_entry_t));
    listed = ngx_palloc(pool, (n + 1) * sizeof(void *));

    if (e == NULL || listed == NULL) {
        ngx_http_upstream_rr_peers_unlock(peers);
        goto failed;
    }

    for (peer = peers->peer; peer; peer = peer->next) {
        ngx_http_upstream_rr_peer_ref(peers, peer);

        listed[all] = peer;
        e[all].peer = peer;
        e[all].name = peer->host ? peer->name : peer->server;
        all++;
    }

    ngx_http_upstream_rr_peers_unlock(peers);

    rc = ngx_http_prefix_aware_resolve_names(pool, e, all, pacf, log);
    if (rc == NGX_ERROR) {
        goto failed;
    }

    n = (ngx_uint_t) rc;

    servers = ngx_palloc(pool, (n + 1) * sizeof(pa_ring_server_t));
    peer_of = ngx_palloc(pool, (n + 1) * sizeof(void *));
    shm_server = ngx_palloc(pool, (n + 1) * sizeof(void *));
    names = ngx_palloc(pool, (n + 1) * sizeof(ngx_str_t));
    weights = ngx_palloc(pool, (n + 1) * sizeof(uint32_t));
    current = ngx_pcalloc(pool, (n + 1) * sizeof(int64_t));

    if (servers == NULL || peer_of == NULL || shm_server == NULL
        || names == NULL || weights == NULL || current == NULL)
    {
        goto failed;
    }

    for (i = 0; i < n; i++) {
        names[i] = e[i].name;
        weights[i] = (uint32_t) ngx_min(ngx_max(e[i].peer->weight, 1),
                                        NGX_HTTP_PREFIX_AWARE_MAX_WEIGHT);
        peer_of[i] = e[i].peer;

        servers[i].name = names[i].data;
        servers[i].len = names[i].len;
        servers[i].weight = weights[i];
    }

    ngx_memzero(&ring, sizeof(pa_ring_t));

    if (n) {
        total = pa_ring_points(servers, n);

        if (total == 0 || total > NGX_HTTP_PREFIX_AWARE_MAX_POINTS) {
            ngx_log_error(NGX_LOG_ERR, log, 0,
                          "prefix_aware: the ring of upstream \"%V\" would "
                          "have more than %d points",
                          &pacf->upstream->host,
                          NGX_HTTP_PREFIX_AWARE_MAX_POINTS);
            lasting = 1;
            goto failed;
        }

        points = ngx_palloc(pool, total * sizeof(pa_ring_point_t));
        if (points == NULL) {
            goto failed;
        }

        if (pa_ring_build(&ring, points, servers, n) != 0) {
            lasting = 1;
            goto failed;
        }
    }

    /* the records: found by name, or made; this worker's counts of them */

    if (ngx_http_prefix_aware_resolve_bind(pacf, names, shm_server, n, &block)
        != NGX_OK)
    {
        goto failed;
    }

    /*
     * the new view's peers are taken before the listing's references and
     * the old view's are released
     */

    ngx_http_upstream_rr_peers_wlock(peers);

    for (i = 0; i < n; i++) {
        ngx_http_upstream_rr_peer_ref(peers, peer_of[i]);
    }

    for (i = 0; i < all; i++) {
        (void) ngx_http_upstream_rr_peer_unref(peers, listed[i]);
    }

    for (i = 0; i < pacf->nservers; i++) {
        (void) ngx_http_upstream_rr_peer_unref(peers, pacf->peer[i]);
    }

    ngx_http_upstream_rr_peers_unlock(peers);

    pacf->nservers = n;
    pacf->ring = ring;
    pacf->names = names;
    pacf->weights = weights;
    pacf->current = current;
    pacf->peer = peer_of;
    pacf->shm_server = shm_server;
    pacf->counts = block ? block->count : NULL;
    pacf->works = block ? block->work : NULL;

    if (view->pool) {
        ngx_destroy_pool(view->pool);
    }

    view->pool = pool;
    view->block = block;
    view->config = config;
    view->failed = 0;
    view->retry = 0;
    view->id++;

    if (n == 0) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "prefix_aware: upstream \"%V\" has no servers, "
                      "its requests fail until a name resolves",
                      &pacf->upstream->host);

    } else {
        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, log, 0,
                       "prefix_aware: upstream \"%V\" has %ui servers, "
                       "configuration %ui", &pacf->upstream->host, n,
                       config);
    }

    return;

failed:

    /*
     * the view in use stays; this generation is tried again at the
     * reaper's tick, unless the failure would come again
     */

    if (all) {
        ngx_http_upstream_rr_peers_wlock(peers);

        for (i = 0; i < all; i++) {
            (void) ngx_http_upstream_rr_peer_unref(peers, listed[i]);
        }

        ngx_http_upstream_rr_peers_unlock(peers);
    }

    if (pool) {
        ngx_destroy_pool(pool);
    }

    if (lasting) {
        view->failed = config + 1;

    } else {
        view->retry = config + 1;
    }

    ngx_log_error(NGX_LOG_ERR, log, 0,
                  "prefix_aware: cannot follow the servers of upstream "
                  "\"%V\", it keeps the %ui it had%s",
                  &pacf->upstream->host, pacf->nservers,
                  lasting ? "" : ", and tries again in a second");
}


/*
 * sorts the entries by name; servers without "resolve" whose names are
 * equal are told apart by address, as at configuration time; an address
 * found twice (two names resolve to it) is on the ring once.  Returns the
 * number of entries kept.
 */

static ngx_int_t
ngx_http_prefix_aware_resolve_names(ngx_pool_t *pool,
    ngx_http_prefix_aware_entry_t *e, ngx_uint_t n,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_log_t *log)
{
    u_char                       *p;
    size_t                        len;
    ngx_uint_t                    i, j, renamed;
    ngx_http_upstream_rr_peer_t  *peer;

    ngx_sort(e, n, sizeof(ngx_http_prefix_aware_entry_t),
             ngx_http_prefix_aware_entry_cmp);

    renamed = 0;

    for (i = 0; i < n; i++) {
        peer = e[i].peer;

        if (peer->host
            || !((i > 0 && e[i - 1].peer->host == NULL
                  && ngx_http_prefix_aware_entry_cmp(&e[i], &e[i - 1]) == 0)
                 || (i + 1 < n && e[i + 1].peer->host == NULL
                     && ngx_http_prefix_aware_entry_cmp(&e[i], &e[i + 1])
                        == 0)))
        {
            continue;
        }

        len = peer->server.len + 1 + peer->name.len;

        p = ngx_pnalloc(pool, len);
        if (p == NULL) {
            return NGX_ERROR;
        }

        e[i].name.data = p;
        p = ngx_cpymem(p, peer->server.data, peer->server.len);
        *p++ = ' ';
        ngx_memcpy(p, peer->name.data, peer->name.len);
        e[i].name.len = len;

        renamed = 1;
    }

    if (renamed) {
        ngx_sort(e, n, sizeof(ngx_http_prefix_aware_entry_t),
                 ngx_http_prefix_aware_entry_cmp);
    }

    for (i = 0, j = 0; i < n; i++) {
        if (j > 0 && ngx_http_prefix_aware_entry_cmp(&e[i], &e[j - 1]) == 0) {
            ngx_log_error(NGX_LOG_NOTICE, log, 0,
                          "prefix_aware: server \"%V\" is twice in "
                          "upstream \"%V\", it is on the ring once",
                          &e[i].name, &pacf->upstream->host);
            continue;
        }

        e[j++] = e[i];
    }

    return (ngx_int_t) j;
}


static ngx_int_t
ngx_http_prefix_aware_entry_cmp(const void *one, const void *two)
{
    const ngx_http_prefix_aware_entry_t  *a = one;
    const ngx_http_prefix_aware_entry_t  *b = two;

    return ngx_memn2cmp(a->name.data, b->name.data, a->name.len, b->name.len);
}


/*
 * under the zone's lock: the records of the view's servers, each with a
 * reference; this worker's block of counts for them (none if the worker
 * has no record in the zone); the old view's references dropped
 */

static ngx_int_t
ngx_http_prefix_aware_resolve_bind(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_str_t *names, ngx_http_prefix_aware_shm_server_t **server,
    ngx_uint_t n, ngx_http_prefix_aware_shm_block_t **blockp)
{
    ngx_uint_t                             i, k;
    ngx_slab_pool_t                       *shpool;
    ngx_http_prefix_aware_shm_t           *sh;
    ngx_http_prefix_aware_view_t          *view;
    ngx_http_prefix_aware_shm_block_t     *block;
    ngx_http_prefix_aware_main_conf_t     *pamcf;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_shm_worker_t    *w;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    view = pacf->resolve;
    pamcf = view->pamcf;
    sh = pamcf->sh;
    w = pamcf->worker;
    up = pacf->shm;
    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    block = NULL;

    ngx_shmtx_lock(&shpool->mutex);

#if (NGX_HTTP_PREFIX_AWARE_TEST)
    {
    u_char  path[NGX_MAX_PATH];

    /*
     * test builds only (NGX_HTTP_PREFIX_AWARE_TEST=1 at configure time, as
     * t/newer/newer.mk builds): the zone counts as full while a file
     * "zone-full" exists in nginx's prefix, as a real zone (1 MB at
     * least) is hard to fill from a test
     */

    if (ngx_snprintf(path, NGX_MAX_PATH - 1, "%Vzone-full%Z",
                     &ngx_cycle->prefix)
        < path + NGX_MAX_PATH - 1
        && access((char *) path, F_OK) == 0)
    {
        k = 0;
        goto full;
    }
    }
#endif

    for (k = 0; k < n; k++) {

        for (s = up->servers; s; s = s->sibling) {
            if (s->name.len == names[k].len
                && ngx_strncmp(s->name.data, names[k].data, names[k].len)
                   == 0)
            {
                break;
            }
        }

        if (s == NULL) {
            s = ngx_slab_calloc_locked(shpool,
                                  sizeof(ngx_http_prefix_aware_shm_server_t)
                                  + names[k].len);
            if (s == NULL) {
                goto full;
            }

            s->name.data = (u_char *) (s + 1);
            s->name.len = names[k].len;
            ngx_memcpy(s->name.data, names[k].data, names[k].len);

            s->sibling = up->servers;
            up->servers = s;
            sh->nservers++;
        }

        s->refs++;
        server[k] = s;
    }

    if (w) {
        block = ngx_slab_calloc_locked(shpool,
                                  sizeof(ngx_http_prefix_aware_shm_block_t)
                                  + n * (sizeof(void *)
                                         + 2 * sizeof(ngx_atomic_t)));
        if (block == NULL) {
            goto full;
        }

        block->nservers = n;
        block->current = 1;
        block->server = (ngx_http_prefix_aware_shm_server_t **) (block + 1);
        block->count = (ngx_atomic_t *) (block->server + n);
        block->work = block->count + n;

        for (i = 0; i < n; i++) {
            block->server[i] = server[i];
        }

        block->next = w->blocks;
        w->blocks = block;
    }

    /* the old view's references, and the blocks that drained */

    for (i = 0; i < pacf->nservers; i++) {
        pacf->shm_server[i]->refs--;
    }

    if (view->block) {
        view->block->current = 0;
    }

    if (w) {
        ngx_http_prefix_aware_resolve_drain(shpool, w);
    }

    ngx_shmtx_unlock(&shpool->mutex);

    *blockp = block;

    return NGX_OK;

full:

    /* the records made for nothing go at the next sweep */

    for (i = 0; i < k; i++) {
        server[i]->refs--;
    }

    ngx_shmtx_unlock(&shpool->mutex);

    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                  "prefix_aware: shared zone \"%V\" is full",
                  &pamcf->shm_zone->shm.name);

    return NGX_ERROR;
}


/* refreshes the views of this worker, once a second and for the status */

void
ngx_http_prefix_aware_resolve_refresh(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_log_t *log)
{
    ngx_uint_t                           i;
    ngx_slab_pool_t                     *shpool;
    ngx_http_prefix_aware_view_t        *view;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_shm_block_t   *b;

    if (!pamcf->attached) {
        return;
    }

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        view = pacf[i]->resolve;

        if (view == NULL) {
            continue;
        }

        ngx_http_prefix_aware_resolve_view(pacf[i], log, 1);
    }

    /* the blocks of older views whose requests ended */

    if (pamcf->worker == NULL) {
        return;
    }

    for (b = pamcf->worker->blocks; b; b = b->next) {
        if (!b->current) {
            break;
        }
    }

    if (b == NULL) {
        return;
    }

    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);
    ngx_http_prefix_aware_resolve_drain(shpool, pamcf->worker);
    ngx_shmtx_unlock(&shpool->mutex);
}

#else

ngx_int_t
ngx_http_prefix_aware_resolve_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    return NGX_DECLINED;
}


void
ngx_http_prefix_aware_resolve_refresh(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_log_t *log)
{
}

#endif


/*
 * at the start of a request: the view is brought up to date if the
 * generation moved, and the scratch of the walk sized for it
 */

ngx_int_t
ngx_http_prefix_aware_resolve_peer(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;
    pd->pool = r->pool;

    if (pacf->resolve == NULL) {
        pd->seen = ngx_pnalloc(r->pool, (pacf->nservers + 7) / 8);
        if (pd->seen == NULL) {
            return NGX_ERROR;
        }

        return NGX_OK;
    }

#if (NGX_HTTP_PREFIX_AWARE_RESOLVE)
    ngx_http_prefix_aware_resolve_view(pacf, r->connection->log, 0);

    pd->view = ((ngx_http_prefix_aware_view_t *) pacf->resolve)->id;
#endif

    return ngx_http_prefix_aware_resolve_scratch(pd);
}


/* the view brought up to date, outside a request (the queue's look) */

void
ngx_http_prefix_aware_resolve_update(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_log_t *log)
{
#if (NGX_HTTP_PREFIX_AWARE_RESOLVE)
    if (pacf->resolve) {
        ngx_http_prefix_aware_resolve_view(pacf, log, 0);
    }
#endif
}


/*
 * in get_peer(), before the peers are locked: the view brought up to
 * date; if it changed since the request's last choice, the scratch is
 * made for it again
 */

ngx_int_t
ngx_http_prefix_aware_resolve_current(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_log_t *log)
{
#if (NGX_HTTP_PREFIX_AWARE_RESOLVE)
    ngx_http_prefix_aware_view_t  *view;

    view = pd->conf->resolve;

    if (view == NULL) {
        return NGX_OK;
    }

    ngx_http_prefix_aware_resolve_view(pd->conf, log, 0);

    if (pd->view != view->id) {
        pd->view = view->id;
        return ngx_http_prefix_aware_resolve_scratch(pd);
    }
#endif

    return NGX_OK;
}


/*
 * the peers locked: 1 if the view is older than the peers and can be
 * made again (a peer chosen in it may have left)
 */

ngx_uint_t
ngx_http_prefix_aware_resolve_stale(ngx_http_prefix_aware_srv_conf_t *pacf)
{
#if (NGX_HTTP_PREFIX_AWARE_RESOLVE)
    ngx_http_upstream_rr_peers_t  *peers;
    ngx_http_prefix_aware_view_t  *view;

    view = pacf->resolve;

    if (view == NULL) {
        return 0;
    }

    peers = pacf->upstream->peer.data;

    if (peers->config == NULL) {
        return 0;
    }

    return ngx_http_prefix_aware_resolve_due(view, *peers->config, 0);
#else
    return 0;
#endif
}


/*
 * the walk's scratch and the bits of the servers tried, for the view's
 * number of servers; the bits of an older view are cleared, as nothing
 * tells which servers they are now, so a retry may go back to one
 */

static ngx_int_t
ngx_http_prefix_aware_resolve_scratch(ngx_http_prefix_aware_peer_data_t *pd)
{
    size_t      words;
    ngx_uint_t  n;

    n = pd->conf->nservers;

    if (pd->seen == NULL || n > pd->room) {
        pd->room = ngx_max(n, 8 * sizeof(uintptr_t));

        pd->seen = ngx_pnalloc(pd->pool, (pd->room + 7) / 8);
        if (pd->seen == NULL) {
            return NGX_ERROR;
        }

        words = (pd->room + 8 * sizeof(uintptr_t) - 1)
                / (8 * sizeof(uintptr_t));

        if (words == 1) {
            pd->rrp.tried = &pd->rrp.data;

        } else {
            pd->rrp.tried = ngx_palloc(pd->pool, words * sizeof(uintptr_t));
            if (pd->rrp.tried == NULL) {
                return NGX_ERROR;
            }
        }
    }

    words = (pd->room + 8 * sizeof(uintptr_t) - 1) / (8 * sizeof(uintptr_t));

    ngx_memzero(pd->rrp.tried, words * sizeof(uintptr_t));

    return NGX_OK;
}
