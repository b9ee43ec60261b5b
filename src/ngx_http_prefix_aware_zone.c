
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The shared zone: in-flight counts and counters of every upstream and
 * server, kept across reloads; each worker's row of counts, given back
 * when a worker exits or is found dead.
 */


#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_prefix_aware_bind(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_srv_conf_t *conf);
static void ngx_http_prefix_aware_reap(ngx_http_prefix_aware_shm_t *sh,
    ngx_uint_t slot);


/*
 * a ':' cannot be in the zone names of limit_req_zone, limit_conn_zone,
 * keys_zone= or ssl_session_cache, and the module's name starts it
 */

static ngx_str_t  ngx_http_prefix_aware_zone_name =
    ngx_string("ngx_http_prefix_aware_module:zone");

ngx_int_t  ngx_http_prefix_aware_slot = -1;


/*
 * the shared zone is sized once every upstream is known; it is rounded
 * up generously so that a reload which changes little reuses it, and
 * with it the counts of requests still in flight
 */

ngx_int_t
ngx_http_prefix_aware_zone_add(ngx_conf_t *cf,
    ngx_http_prefix_aware_main_conf_t *pamcf)
{
    size_t                               size;
    ngx_uint_t                           i, j;
    ngx_http_prefix_aware_srv_conf_t   **pacf;

    size = sizeof(ngx_http_prefix_aware_shm_t);
    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        size += sizeof(ngx_http_prefix_aware_shm_upstream_t)
                + pacf[i]->upstream->host.len + 64;

        for (j = 0; j < pacf[i]->nservers; j++) {
            size += sizeof(ngx_http_prefix_aware_shm_server_t)
                    + pacf[i]->names[j].len + 64;
        }
    }

    size = ngx_align(8 * ngx_pagesize + 4 * size, 1024 * 1024);

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
    ngx_uint_t                           i;
    ngx_slab_pool_t                     *shpool;
    ngx_http_prefix_aware_shm_t         *sh;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
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

    pacf = pamcf->upstreams.elts;

    ngx_shmtx_lock(&shpool->mutex);

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (ngx_http_prefix_aware_bind(shpool, sh, pacf[i]) != NGX_OK) {
            ngx_shmtx_unlock(&shpool->mutex);

            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "prefix_aware: shared zone \"%V\" is full, "
                          "restart nginx to rebuild it",
                          &shm_zone->shm.name);
            return NGX_ERROR;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return NGX_OK;
}


/* finds or makes the zone's counters of an upstream and of its servers */

static ngx_int_t
ngx_http_prefix_aware_bind(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_srv_conf_t *pacf)
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
    }

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

            s->next = sh->servers;
            sh->servers = s;
        }

        pacf->shm_server[i] = s;
    }

    return NGX_OK;
}


/* gives back the in-flight counts of a worker that is gone */

static void
ngx_http_prefix_aware_reap(ngx_http_prefix_aware_shm_t *sh, ngx_uint_t slot)
{
    ngx_atomic_uint_t                    n;
    ngx_http_prefix_aware_shm_server_t  *s;

    for (s = sh->servers; s; s = s->next) {
        n = s->slot[slot];

        if (n) {
            ngx_atomic_fetch_add(&s->inflight, - (ngx_atomic_int_t) n);
            s->slot[slot] = 0;
        }
    }

    sh->pid[slot] = 0;
}


/*
 * the ring's server numbers to this process's peers: the zone module moves
 * the peers to shared memory after the configuration is read, so this is
 * done in each process, at its start or at its first request
 */

void
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


ngx_int_t
ngx_http_prefix_aware_init_process(ngx_cycle_t *cycle)
{
    ngx_uint_t                           i;
    ngx_slab_pool_t                     *shpool;
    ngx_http_prefix_aware_shm_t         *sh;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_main_conf_t   *pamcf;

    ngx_http_prefix_aware_slot = -1;

    pamcf = ngx_http_cycle_get_module_main_conf(cycle,
                                                ngx_http_prefix_aware_module);

    if (pamcf == NULL || pamcf->sh == NULL) {
        return NGX_OK;
    }

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        ngx_http_prefix_aware_set_peers(pacf[i]);
    }

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    /*
     * claim a row for this worker's in-flight counts, and give back the
     * counts of workers that died holding requests
     */

    sh = pamcf->sh;
    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_SLOTS; i++) {
        if (sh->pid[i] == 0) {
            continue;
        }

        if (kill((ngx_pid_t) sh->pid[i], 0) == -1 && ngx_errno == NGX_ESRCH) {
            ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                          "prefix_aware: giving back the in-flight counts "
                          "of exited process %P", (ngx_pid_t) sh->pid[i]);
            ngx_http_prefix_aware_reap(sh, i);
        }
    }

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_SLOTS; i++) {
        if (sh->pid[i] == 0) {
            sh->pid[i] = ngx_pid;
            ngx_http_prefix_aware_slot = i;
            break;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    if (ngx_http_prefix_aware_slot == -1) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                      "prefix_aware: more than %d worker processes, "
                      "the counts of this one cannot heal if it dies",
                      NGX_HTTP_PREFIX_AWARE_SLOTS);
    }

    return NGX_OK;
}


void
ngx_http_prefix_aware_exit_process(ngx_cycle_t *cycle)
{
    ngx_slab_pool_t                    *shpool;
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    if (ngx_http_prefix_aware_slot == -1) {
        return;
    }

    pamcf = ngx_http_cycle_get_module_main_conf(cycle,
                                                ngx_http_prefix_aware_module);

    if (pamcf == NULL || pamcf->sh == NULL) {
        return;
    }

    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);
    ngx_http_prefix_aware_reap(pamcf->sh, ngx_http_prefix_aware_slot);
    ngx_shmtx_unlock(&shpool->mutex);

    ngx_http_prefix_aware_slot = -1;
}
