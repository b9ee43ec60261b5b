
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The shared zone: in-flight counts and counters of every upstream and
 * server, kept across reloads.  Records live as long as something uses
 * them:
 *
 *   - a configuration (generation) record per configuration the master
 *     loaded, holding a reference to each upstream and server record it
 *     uses; it is freed once it is older than the master's and no worker
 *     that runs it is alive;
 *   - a worker record per worker process, with its in-flight counts; it is
 *     freed, and its counts given back, when the worker exits, or when any
 *     process finds its pid dead (a timer in every worker, and each reload);
 *   - upstream and server records, freed once no configuration refers to
 *     them and nothing is in flight on them.
 */


#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_http_prefix_aware_shm_conf_t *ngx_http_prefix_aware_conf(
    ngx_slab_pool_t *shpool, ngx_http_prefix_aware_shm_t *sh,
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_uint_t generation);
static ngx_int_t ngx_http_prefix_aware_bind(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_shm_conf_t *conf, ngx_uint_t k);
static void ngx_http_prefix_aware_conf_free(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_shm_conf_t *conf);
static void ngx_http_prefix_aware_records_free(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh);
static void ngx_http_prefix_aware_sweep(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_shm_worker_t *self,
    ngx_log_t *log);
static void ngx_http_prefix_aware_reap(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_shm_worker_t **pw);
static void ngx_http_prefix_aware_set_peers(
    ngx_http_prefix_aware_srv_conf_t *pacf);
static void ngx_http_prefix_aware_reaper(ngx_event_t *ev);


/*
 * a ':' cannot be in the zone names of limit_req_zone, limit_conn_zone,
 * keys_zone= or ssl_session_cache, and the module's name starts it
 */

static ngx_str_t  ngx_http_prefix_aware_zone_name =
    ngx_string("ngx_http_prefix_aware_module:zone");

static ngx_event_t       ngx_http_prefix_aware_reaper_event;

/* the event's "connection", for the timer's debug log, as cache manager's */
static ngx_connection_t  ngx_http_prefix_aware_dumb;


/*
 * the shared zone is sized once every upstream is known: room for a few
 * generations of the configuration's records and of its workers' counts,
 * rounded up generously so that a reload which changes little reuses it,
 * and with it the counts of requests still in flight
 */

ngx_int_t
ngx_http_prefix_aware_zone_add(ngx_conf_t *cf,
    ngx_http_prefix_aware_main_conf_t *pamcf)
{
    size_t                               size, gen;
    ngx_int_t                            workers;
    ngx_uint_t                           i, j, n;
    ngx_core_conf_t                     *ccf;
    ngx_http_prefix_aware_srv_conf_t   **pacf;

    pacf = pamcf->upstreams.elts;

    n = 0;
    size = 0;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        pacf[i]->base = n;
        n += pacf[i]->nservers;

        /* the slab rounds small allocations up to a power of two */

        size += 2 * (sizeof(ngx_http_prefix_aware_shm_upstream_t)
                     + pacf[i]->upstream->host.len);

        for (j = 0; j < pacf[i]->nservers; j++) {
            size += 2 * (sizeof(ngx_http_prefix_aware_shm_server_t)
                         + pacf[i]->names[j].len);
        }
    }

    pamcf->nservers = n;

    /* worker_processes may come after the http block: then guess */

    ccf = (ngx_core_conf_t *) ngx_get_conf(cf->cycle->conf_ctx,
                                           ngx_core_module);

    workers = ccf->worker_processes;

    if (workers == NGX_CONF_UNSET) {
        workers = ngx_ncpu;
    }

    gen = size
          + 2 * (sizeof(ngx_http_prefix_aware_shm_conf_t)
                 + (pamcf->upstreams.nelts + n) * sizeof(void *))
          + 2 * workers * (sizeof(ngx_http_prefix_aware_shm_worker_t)
                           + n * sizeof(ngx_atomic_t));

    gen += ngx_http_prefix_aware_resolve_size(pamcf, workers);

    size = 8 * ngx_pagesize + NGX_HTTP_PREFIX_AWARE_GENERATIONS * gen;
    size = ngx_align(size, 1024 * 1024);

    pamcf->shm_zone = ngx_shared_memory_add(cf,
                                            &ngx_http_prefix_aware_zone_name,
                                            size,
                                            &ngx_http_prefix_aware_module);
    if (pamcf->shm_zone == NULL) {
        return NGX_ERROR;
    }

    pamcf->shm_zone->init = ngx_http_prefix_aware_init_zone;
    pamcf->shm_zone->data = pamcf;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t                     *shpool;
    ngx_http_prefix_aware_shm_t         *sh;
    ngx_http_prefix_aware_shm_conf_t    *conf, *next;
    ngx_http_prefix_aware_main_conf_t   *pamcf;

    pamcf = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (data || shm_zone->shm.exists) {
        /* a reload: keep the counts of the servers that stay */
        sh = shpool->data;

    } else {
        sh = ngx_slab_calloc(shpool, sizeof(ngx_http_prefix_aware_shm_t));
        if (sh == NULL) {
            return NGX_ERROR;
        }

        shpool->data = sh;
        shpool->log_nomem = 0;
    }

    pamcf->sh = sh;

    ngx_shmtx_lock(&shpool->mutex);

    /*
     * a configuration newer than the master's is one whose reload failed
     * after its zone was set up: no worker runs it
     */

    for (conf = sh->confs; conf; conf = next) {
        next = conf->next;

        if (conf->generation > sh->current && !conf->pinned) {
            ngx_http_prefix_aware_conf_free(shpool, sh, conf);
        }
    }

    ngx_http_prefix_aware_sweep(shpool, sh, NULL, shm_zone->shm.log);

    conf = ngx_http_prefix_aware_conf(shpool, sh, pamcf, sh->generation + 1);

    if (conf) {
        sh->generation++;
    }

    ngx_shmtx_unlock(&shpool->mutex);

    if (conf == NULL) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "prefix_aware: shared zone \"%V\" is full, "
                      "restart nginx to rebuild it",
                      &shm_zone->shm.name);
        return NGX_ERROR;
    }

    pamcf->conf = conf;
    pamcf->conf_id = conf->id;
    pamcf->generation = conf->generation;

    return NGX_OK;
}


/* makes the record of a configuration, and binds it to the zone's records */

static ngx_http_prefix_aware_shm_conf_t *
ngx_http_prefix_aware_conf(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_uint_t generation)
{
    ngx_uint_t                          i, nup;
    ngx_http_prefix_aware_shm_conf_t   *conf;
    ngx_http_prefix_aware_srv_conf_t  **pacf;

    pacf = pamcf->upstreams.elts;
    nup = pamcf->upstreams.nelts;

    conf = ngx_slab_calloc_locked(shpool,
                                  sizeof(ngx_http_prefix_aware_shm_conf_t)
                                  + (nup + pamcf->nservers) * sizeof(void *));
    if (conf == NULL) {
        return NULL;
    }

    conf->id = ++sh->ids;
    conf->generation = generation;
    conf->nupstreams = nup;
    conf->nservers = pamcf->nservers;
    conf->upstream = (ngx_http_prefix_aware_shm_upstream_t **) (conf + 1);
    conf->server = (ngx_http_prefix_aware_shm_server_t **)
                       (conf->upstream + nup);

    conf->next = sh->confs;
    sh->confs = conf;
    sh->nconfs++;

    for (i = 0; i < nup; i++) {
        if (ngx_http_prefix_aware_bind(shpool, sh, pacf[i], conf, i)
            != NGX_OK)
        {
            ngx_http_prefix_aware_conf_free(shpool, sh, conf);
            ngx_http_prefix_aware_records_free(shpool, sh);
            return NULL;
        }
    }

    return conf;
}


/* finds or makes the zone's records of an upstream and of its servers */

static ngx_int_t
ngx_http_prefix_aware_bind(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_shm_conf_t *conf, ngx_uint_t k)
{
    ngx_str_t                             *name;
    ngx_uint_t                             i;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    name = &pacf->upstream->host;

    for (up = sh->upstreams; up; up = up->next) {
        if (up->name.len == name->len
            && ngx_strncmp(up->name.data, name->data, name->len) == 0)
        {
            break;
        }
    }

    if (up == NULL) {
        up = ngx_slab_calloc_locked(shpool,
                              sizeof(ngx_http_prefix_aware_shm_upstream_t)
                              + name->len);
        if (up == NULL) {
            return NGX_ERROR;
        }

        up->name.data = (u_char *) (up + 1);
        up->name.len = name->len;
        ngx_memcpy(up->name.data, name->data, name->len);

        up->next = sh->upstreams;
        sh->upstreams = up;
        sh->nupstreams++;
    }

    up->refs++;
    conf->upstream[k] = up;
    pacf->shm = up;

    for (i = 0; i < pacf->nservers; i++) {
        name = &pacf->names[i];

        for (s = up->servers; s; s = s->sibling) {
            if (s->name.len == name->len
                && ngx_strncmp(s->name.data, name->data, name->len) == 0)
            {
                break;
            }
        }

        if (s == NULL) {
            s = ngx_slab_calloc_locked(shpool,
                                  sizeof(ngx_http_prefix_aware_shm_server_t)
                                  + name->len);
            if (s == NULL) {
                return NGX_ERROR;
            }

            s->name.data = (u_char *) (s + 1);
            s->name.len = name->len;
            ngx_memcpy(s->name.data, name->data, name->len);

            s->sibling = up->servers;
            up->servers = s;
            sh->nservers++;
        }

        s->refs++;
        conf->server[pacf->base + i] = s;
        pacf->shm_server[i] = s;
    }

    return NGX_OK;
}


/* drops a configuration's references; records_free() frees what is unused */

static void
ngx_http_prefix_aware_conf_free(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_shm_conf_t *conf)
{
    ngx_uint_t                          i;
    ngx_http_prefix_aware_shm_conf_t  **pc;

    for (pc = &sh->confs; *pc; pc = &(*pc)->next) {
        if (*pc == conf) {
            *pc = conf->next;
            break;
        }
    }

    for (i = 0; i < conf->nupstreams; i++) {
        if (conf->upstream[i]) {
            conf->upstream[i]->refs--;
        }
    }

    for (i = 0; i < conf->nservers; i++) {
        if (conf->server[i]) {
            conf->server[i]->refs--;
        }
    }

    ngx_slab_free_locked(shpool, conf);
    sh->nconfs--;
}


static void
ngx_http_prefix_aware_records_free(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh)
{
    ngx_http_prefix_aware_shm_server_t    *s, **ps;
    ngx_http_prefix_aware_shm_upstream_t  *up, **pu;

    for (pu = &sh->upstreams; *pu; /* void */) {
        up = *pu;

        /* a count left by a request that still runs keeps its server */

        for (ps = &up->servers; *ps; /* void */) {
            s = *ps;

            if (s->refs == 0 && s->inflight == 0) {
                *ps = s->sibling;
                ngx_slab_free_locked(shpool, s);
                sh->nservers--;
                continue;
            }

            ps = &s->sibling;
        }

        if (up->refs == 0 && up->servers == NULL) {
            *pu = up->next;
            ngx_slab_free_locked(shpool, up);
            sh->nupstreams--;
            continue;
        }

        pu = &up->next;
    }
}


/*
 * gives back the counts of dead workers, then frees the configurations no
 * live process runs and the records no configuration uses; "self" is the
 * caller's own record: its other records are of configurations it ran
 * before a reload of a single process, and go once their counts are 0
 */

static void
ngx_http_prefix_aware_sweep(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_shm_worker_t *self,
    ngx_log_t *log)
{
    ngx_uint_t                           i;
    ngx_http_prefix_aware_shm_conf_t    *conf, *next;
    ngx_http_prefix_aware_shm_worker_t  *w, **pw;

    for (pw = &sh->workers; *pw; /* void */) {
        w = *pw;

        if (w->pid == ngx_pid) {

            if (self == NULL || w == self) {
                pw = &w->next;
                continue;
            }

            for (i = 0; i < w->nservers; i++) {
                if (w->count[i]) {
                    break;
                }
            }

            if (i < w->nservers || ngx_http_prefix_aware_resolve_busy(w)) {
                pw = &w->next;
                continue;
            }

        } else if (kill(w->pid, 0) == 0 || ngx_errno != NGX_ESRCH) {
            pw = &w->next;
            continue;

        } else {
            ngx_log_error(NGX_LOG_NOTICE, log, 0,
                          "prefix_aware: giving back the in-flight counts "
                          "of exited process %P", w->pid);
        }

        ngx_http_prefix_aware_reap(shpool, sh, pw);
    }

    for (conf = sh->confs; conf; conf = next) {
        next = conf->next;

        if (conf->generation >= sh->current || conf->pinned) {
            continue;
        }

        for (w = sh->workers; w; w = w->next) {
            if (w->conf == conf) {
                break;
            }
        }

        if (w == NULL) {
            ngx_http_prefix_aware_conf_free(shpool, sh, conf);
        }
    }

    ngx_http_prefix_aware_records_free(shpool, sh);
}


/* gives back the counts of a worker record and frees it */

static void
ngx_http_prefix_aware_reap(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_shm_worker_t **pw)
{
    ngx_uint_t                           i;
    ngx_atomic_uint_t                    n;
    ngx_http_prefix_aware_shm_worker_t  *w;

    w = *pw;

    for (i = 0; i < w->nservers; i++) {
        n = w->count[i];

        if (n) {
            ngx_atomic_fetch_add(&w->conf->server[i]->inflight,
                                 - (ngx_atomic_int_t) n);
        }

        n = w->work[i];

        if (n) {
            ngx_atomic_fetch_add(&w->conf->server[i]->work,
                                 - (ngx_atomic_int_t) n);
        }
    }

    ngx_http_prefix_aware_resolve_reap(shpool, w);

    *pw = w->next;
    ngx_slab_free_locked(shpool, w);
    sh->nworkers--;
}


/*
 * the ring's server numbers to this process's peers: the zone module moves
 * the peers to shared memory after the configuration is read, so this is
 * done in each process, at its start or at its first request
 */

static void
ngx_http_prefix_aware_set_peers(ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_uint_t                     i;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    peers = pacf->upstream->peer.data;

    for (peer = peers->peer, i = 0;
         peer && i < pacf->nservers;
         peer = peer->next, i++)
    {
        pacf->peer[i] = peer;
    }
}


/*
 * a worker, or a single process at its first request after a reload, puts
 * its record in the zone; its configuration's record is looked for first:
 * a worker forked just before a reload may find it freed already
 */

ngx_int_t
ngx_http_prefix_aware_attach(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf)
{
    ngx_uint_t                           i;
    ngx_slab_pool_t                     *shpool;
    ngx_http_prefix_aware_shm_t         *sh;
    ngx_http_prefix_aware_shm_conf_t    *conf;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_shm_worker_t  *w, **pw;

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        ngx_http_prefix_aware_set_peers(pacf[i]);
    }

    pamcf->attached = 1;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    sh = pamcf->sh;
    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    if (ngx_process == NGX_PROCESS_WORKER) {

        /* a record with this pid is of a worker that died before */

        for (pw = &sh->workers; *pw; /* void */) {
            if ((*pw)->pid == ngx_pid) {
                ngx_http_prefix_aware_reap(shpool, sh, pw);
                continue;
            }

            pw = &(*pw)->next;
        }

        /* the counts of the worker this one replaces, at once */

        ngx_http_prefix_aware_sweep(shpool, sh, NULL, cycle->log);
    }

    /* the id tells apart a new record at the address of a freed one */

    for (conf = sh->confs; conf; conf = conf->next) {
        if (conf == pamcf->conf && conf->id == pamcf->conf_id) {
            break;
        }
    }

    if (conf == NULL) {
        conf = ngx_http_prefix_aware_conf(shpool, sh, pamcf,
                                          pamcf->generation);
        if (conf == NULL) {
            ngx_shmtx_unlock(&shpool->mutex);

            /* the records this process points to are gone */

            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "prefix_aware: shared zone \"%V\" is full",
                          &pamcf->shm_zone->shm.name);
            return NGX_ERROR;
        }

        pamcf->conf = conf;
        pamcf->conf_id = conf->id;

        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "prefix_aware: the records of configuration %ui "
                      "were freed before this process started, made anew",
                      pamcf->generation);
    }

    w = ngx_slab_calloc_locked(shpool,
                               sizeof(ngx_http_prefix_aware_shm_worker_t)
                               + 2 * pamcf->nservers * sizeof(ngx_atomic_t));

    if (w == NULL) {
        /* nothing tells when this process is gone: keep its records */
        conf->pinned = 1;

    } else {
        w->pid = ngx_pid;
        w->nservers = pamcf->nservers;
        w->conf = conf;
        w->count = (ngx_atomic_t *) (w + 1);
        w->work = w->count + pamcf->nservers;

        w->next = sh->workers;
        sh->workers = w;
        sh->nworkers++;

        for (i = 0; i < pamcf->upstreams.nelts; i++) {
            pacf[i]->counts = w->count + pacf[i]->base;
            pacf[i]->works = w->work + pacf[i]->base;
        }
    }

    pamcf->worker = w;

    ngx_shmtx_unlock(&shpool->mutex);

    if (w == NULL) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "prefix_aware: shared zone \"%V\" is full, the "
                      "counts of this process cannot heal if it dies",
                      &pamcf->shm_zone->shm.name);
    }

    if (!ngx_http_prefix_aware_reaper_event.timer_set) {
        ngx_http_prefix_aware_reaper_event.handler =
                                                ngx_http_prefix_aware_reaper;
        ngx_http_prefix_aware_reaper_event.log = cycle->log;
        ngx_http_prefix_aware_dumb.fd = (ngx_socket_t) -1;
        ngx_http_prefix_aware_reaper_event.data = &ngx_http_prefix_aware_dumb;
        ngx_http_prefix_aware_reaper_event.cancelable = 1;

        ngx_add_timer(&ngx_http_prefix_aware_reaper_event,
                      NGX_HTTP_PREFIX_AWARE_REAP);
    }

    return NGX_OK;
}


/* the new configuration is committed: older ones may be freed */

ngx_int_t
ngx_http_prefix_aware_init_module(ngx_cycle_t *cycle)
{
    ngx_uint_t                          n, live[64];
    ngx_slab_pool_t                    *shpool;
    ngx_http_prefix_aware_shm_conf_t   *conf;
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    pamcf = ngx_http_cycle_get_module_main_conf(cycle,
                                                ngx_http_prefix_aware_module);

    if (pamcf == NULL || pamcf->sh == NULL) {
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    pamcf->sh->current = pamcf->generation;

    /* the generations whose records are kept, for the models zones */

    n = 0;

    for (conf = pamcf->sh->confs; conf && n < 64; conf = conf->next) {
        live[n++] = conf->generation;
    }

    ngx_shmtx_unlock(&shpool->mutex);

    /* too many to tell: the models zones free nothing this time */

    ngx_http_prefix_aware_models_commit(pamcf, conf ? NULL : live, n);

    return NGX_OK;
}


ngx_int_t
ngx_http_prefix_aware_init_process(ngx_cycle_t *cycle)
{
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    /* the owner of the index buckets this worker locks (pa_index.c) */
    pa_index_set_owner((uint32_t) ngx_pid);

    pamcf = ngx_http_cycle_get_module_main_conf(cycle,
                                                ngx_http_prefix_aware_module);

    if (pamcf == NULL || pamcf->sh == NULL) {
        return NGX_OK;
    }

    if (ngx_http_prefix_aware_attach(cycle, pamcf) != NGX_OK) {
        return NGX_ERROR;
    }

    /* models=discover: the timers that ask the servers what they serve */

    ngx_http_prefix_aware_models_start(cycle, pamcf);

    /* metrics=, capacity=auto: the timers that ask the engines */

    ngx_http_prefix_aware_engine_start(cycle, pamcf);

    /* prefix_aware_sync: the sockets to the peers, the load's timer */

    ngx_http_prefix_aware_sync_start(cycle, pamcf);

    return NGX_OK;
}


/*
 * every second one worker, the first whose timer fires, looks for dead
 * workers; a worker that runs an older configuration does it too, so the
 * master's not replacing it does not matter
 */

static void
ngx_http_prefix_aware_reaper(ngx_event_t *ev)
{
    time_t                              now;
    ngx_atomic_uint_t                   last;
    ngx_slab_pool_t                    *shpool;
    ngx_http_prefix_aware_shm_t        *sh;
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    pamcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                                ngx_http_prefix_aware_module);

    if (pamcf == NULL || pamcf->sh == NULL || !pamcf->attached) {
        goto next;
    }

    sh = pamcf->sh;
    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    now = ngx_time();
    last = sh->reaped;

    if ((ngx_atomic_uint_t) now > last
        && ngx_atomic_cmp_set(&sh->reaped, last, (ngx_atomic_uint_t) now))
    {
        ngx_shmtx_lock(&shpool->mutex);
        ngx_http_prefix_aware_sweep(shpool, sh, pamcf->worker, ev->log);
        ngx_shmtx_unlock(&shpool->mutex);

        ngx_http_prefix_aware_queue_reap(pamcf, ev->log);
    }

    ngx_http_prefix_aware_resolve_refresh(pamcf, ev->log);

next:

    ngx_add_timer(ev, NGX_HTTP_PREFIX_AWARE_REAP);
}


void
ngx_http_prefix_aware_exit_process(ngx_cycle_t *cycle)
{
    ngx_slab_pool_t                      *shpool;
    ngx_http_prefix_aware_shm_t          *sh;
    ngx_http_prefix_aware_main_conf_t    *pamcf;
    ngx_http_prefix_aware_shm_worker_t  **pw;

    pamcf = ngx_http_cycle_get_module_main_conf(cycle,
                                                ngx_http_prefix_aware_module);

    if (pamcf == NULL || pamcf->sh == NULL || pamcf->worker == NULL) {
        return;
    }

    sh = pamcf->sh;
    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    /* this process's records: one, or one per reload of a single process */

    for (pw = &sh->workers; *pw; /* void */) {
        if ((*pw)->pid == ngx_pid) {
            ngx_http_prefix_aware_reap(shpool, sh, pw);
            continue;
        }

        pw = &(*pw)->next;
    }

    ngx_http_prefix_aware_sweep(shpool, sh, NULL, cycle->log);

    ngx_shmtx_unlock(&shpool->mutex);

    pamcf->worker = NULL;
}


void
ngx_http_prefix_aware_zone_usage(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_zone_usage_t *usage)
{
    ngx_slab_pool_t              *shpool;
    ngx_http_prefix_aware_shm_t  *sh;

    ngx_memzero(usage, sizeof(ngx_http_prefix_aware_zone_usage_t));

    if (pamcf->sh == NULL) {
        return;
    }

    sh = pamcf->sh;
    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    usage->size = pamcf->shm_zone->shm.size;
    usage->pages = (shpool->end - shpool->start) >> ngx_pagesize_shift;
    usage->free = shpool->pfree;
    usage->upstreams = sh->nupstreams;
    usage->servers = sh->nservers;
    usage->confs = sh->nconfs;
    usage->workers = sh->nworkers;

    ngx_shmtx_unlock(&shpool->mutex);
}
