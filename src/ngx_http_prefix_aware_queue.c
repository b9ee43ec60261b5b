
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * queue=: a request that finds every server it may use at its bounds
 * (threshold; with load=engine, an engine that reports requests waiting)
 * waits in nginx, without an upstream connection, until one falls under
 * them, then is routed as usual; past the queue's bound or its time out
 * it is answered 429 (or 503) with Retry-After.
 *
 * The request is parked in the upstream's peer initialization, where the
 * module has read its key: the upstream is taken away from it as for the
 * module's own 400 (its cleanup removed, a reference taken, NGX_ERROR:
 * the upstream finalizes with NGX_DONE), and given back by calling
 * ngx_http_upstream_init() again, which comes back to the peer
 * initialization with the key read.  The order of the waiting requests
 * is a table in a zone of the upstream (src/pa_queue.c) that every
 * worker reads under the zone's lock: each worker with requests waiting
 * looks every queue_poll= (and at once when one of its own requests
 * frees a server) at the places below the bounds, and releases those of
 * its requests that are among as many first of the whole table.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_queue.h"
#include "pa_work.h"

#include <signal.h>


/* places released at most in one look */
#define NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH  64

#define NGX_HTTP_PREFIX_AWARE_WAITING      1
#define NGX_HTTP_PREFIX_AWARE_RELEASED     2
#define NGX_HTTP_PREFIX_AWARE_WAITED       3


struct ngx_http_prefix_aware_queue_s {
    ngx_uint_t                             size;      /* queue=, 0: off */
    ngx_uint_t                             off;
    ngx_msec_t                             timeout;
    ngx_msec_t                             poll;
    ngx_uint_t                             status;
    ngx_uint_t                             retry;     /* s */
    ngx_int_t                              priority;  /* index, -1 */
    ngx_str_t                              priority_name;
    ngx_int_t                              flow;      /* index, -1 */
    ngx_str_t                              flow_name;

    ngx_http_prefix_aware_srv_conf_t      *pacf;
    ngx_shm_zone_t                        *zone;
    ngx_slab_pool_t                       *shpool;
    pa_queue_t                             q;

    /* per process: its requests that wait, by place; the look's timer */
    ngx_queue_t                            waiters;
    ngx_uint_t                             nwaiters;
    ngx_http_prefix_aware_wait_t         **of;
    uintptr_t                             *tried;
    ngx_event_t                            look;
    ngx_uint_t                             started;
};


struct ngx_http_prefix_aware_wait_s {
    ngx_http_request_t                    *r;
    ngx_http_prefix_aware_queue_t         *qu;
    ngx_queue_t                            queue;
    ngx_event_t                            timer;
    uint64_t                               seq;
    uint32_t                               slot;
    int32_t                                priority;
    ngx_msec_t                             since;
    ngx_msec_t                             waited;
    ngx_uint_t                             state;
};


static ngx_int_t ngx_http_prefix_aware_queue_init_zone(
    ngx_shm_zone_t *shm_zone, void *data);
static ngx_int_t ngx_http_prefix_aware_queue_start(
    ngx_http_prefix_aware_queue_t *qu);
static ngx_int_t ngx_http_prefix_aware_queue_room(
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t first);
static ngx_uint_t ngx_http_prefix_aware_queue_engine_full(
    ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_shm_server_t *s);
static ngx_int_t ngx_http_prefix_aware_queue_park(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_http_prefix_aware_wait_t *w);
static ngx_int_t ngx_http_prefix_aware_queue_shed(ngx_http_request_t *r,
    ngx_http_prefix_aware_queue_t *qu, pa_queue_reason_e reason,
    ngx_msec_t waited);
static void ngx_http_prefix_aware_queue_look(ngx_event_t *ev);
static void ngx_http_prefix_aware_queue_release(
    ngx_http_prefix_aware_wait_t *w);
static void ngx_http_prefix_aware_queue_timeout(ngx_event_t *ev);
static void ngx_http_prefix_aware_queue_cleanup(void *data);
static void ngx_http_prefix_aware_queue_unlink(
    ngx_http_prefix_aware_wait_t *w);
static int ngx_http_prefix_aware_queue_alive(uint32_t pid, void *ctx);
static ngx_int_t ngx_http_prefix_aware_queue_var(ngx_conf_t *cf,
    ngx_str_t *value, size_t skip, const char *name, ngx_int_t *index,
    ngx_str_t *text);


static ngx_str_t  ngx_http_prefix_aware_queue_why[] = {
    ngx_null_string,
    ngx_string("every server is busy and the queue is full"),
    ngx_string("every server stayed busy for the queue's time out"),
    ngx_string("every server is busy and the request's priority is "
               "sheddable"),
    ngx_null_string,
    ngx_null_string
};


static ngx_http_prefix_aware_queue_t *
ngx_http_prefix_aware_queue_conf(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_http_prefix_aware_queue_t  *qu;

    if (pacf->queue) {
        return pacf->queue;
    }

    qu = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_queue_t));
    if (qu == NULL) {
        return NULL;
    }

    qu->timeout = 10000;
    qu->poll = 5;
    qu->status = 429;
    qu->retry = 1;
    qu->priority = -1;
    qu->flow = -1;
    qu->pacf = pacf;

    pacf->queue = qu;

    return qu;
}


/* queue=, queue_timeout=, queue_poll=, queue_status=, queue_retry=, */
/* priority=, flow=: NGX_OK, NGX_DECLINED (not one), NGX_ERROR */

ngx_int_t
ngx_http_prefix_aware_queue_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value)
{
    char                           *rv;
    ngx_int_t                       n;
    ngx_str_t                       s;
    ngx_http_prefix_aware_queue_t  *qu;

    if (ngx_strncmp(value->data, "queue", 5) != 0
        && ngx_strncmp(value->data, "priority=", 9) != 0
        && ngx_strncmp(value->data, "flow=", 5) != 0)
    {
        return NGX_DECLINED;
    }

    qu = ngx_http_prefix_aware_queue_conf(cf, pacf);
    if (qu == NULL) {
        return NGX_ERROR;
    }

    if (value->len == 9 && ngx_strncmp(value->data, "queue=off", 9) == 0) {
        qu->off = 1;
        qu->size = 0;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "queue=", 6) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 6, 1, 65536, &qu->size);
        qu->off = 0;
        return (rv == NGX_CONF_OK) ? NGX_OK : NGX_ERROR;
    }

    if (ngx_strncmp(value->data, "queue_timeout=", 14) == 0) {
        return ngx_http_prefix_aware_time(cf, value, 14, "prefix_aware",
                                          1, "1ms", 3600000, "1h",
                                          &qu->timeout);
    }

    if (ngx_strncmp(value->data, "queue_poll=", 11) == 0) {
        return ngx_http_prefix_aware_time(cf, value, 11, "prefix_aware",
                                          1, "1ms", 1000, "1s", &qu->poll);
    }

    if (ngx_strncmp(value->data, "queue_retry=", 12) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 12, 0, 3600, &qu->retry);
        return (rv == NGX_CONF_OK) ? NGX_OK : NGX_ERROR;
    }

    if (ngx_strncmp(value->data, "queue_status=", 13) == 0) {
        s.data = value->data + 13;
        s.len = value->len - 13;

        n = ngx_atoi(s.data, s.len);

        if (n != 429 && n != 503) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"queue_status\" value \"%V\" in "
                               "\"prefix_aware\", it must be 429 or 503",
                               &s);
            return NGX_ERROR;
        }

        qu->status = (ngx_uint_t) n;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "priority=", 9) == 0) {
        return ngx_http_prefix_aware_queue_var(cf, value, 9, "priority",
                                               &qu->priority,
                                               &qu->priority_name);
    }

    if (ngx_strncmp(value->data, "flow=", 5) == 0) {
        return ngx_http_prefix_aware_queue_var(cf, value, 5, "flow",
                                               &qu->flow, &qu->flow_name);
    }

    return NGX_DECLINED;
}


static ngx_int_t
ngx_http_prefix_aware_queue_var(ngx_conf_t *cf, ngx_str_t *value,
    size_t skip, const char *name, ngx_int_t *index, ngx_str_t *text)
{
    u_char     *p;
    ngx_str_t   s;

    s.data = value->data + skip + 1;
    s.len = value->len - skip - 1;

    for (p = s.data; p < s.data + s.len; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '_'))
        {
            break;
        }
    }

    if (value->len <= skip || value->data[skip] != '$' || s.len == 0
        || p < s.data + s.len)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"%s\" value \"%*s\" in "
                           "\"prefix_aware\", it must be a $variable", name,
                           value->len - skip, value->data + skip);
        return NGX_ERROR;
    }

    *index = ngx_http_get_variable_index(cf, &s);
    if (*index == NGX_ERROR) {
        return NGX_ERROR;
    }

    text->data = value->data + skip;
    text->len = value->len - skip;

    return NGX_OK;
}


/* at the upstream's initialization: its zone, or the parameters' errors */

ngx_int_t
ngx_http_prefix_aware_queue_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t resolve)
{
    size_t                          size;
    ngx_shm_zone_t                 *shm_zone;
    ngx_http_prefix_aware_queue_t  *qu;

    static ngx_str_t  prefix =
        ngx_string("ngx_http_prefix_aware_module:queue:");

    qu = pacf->queue;

    if (qu == NULL) {
        return NGX_OK;
    }

    if (qu->off) {
        pacf->queue = NULL;
        return NGX_OK;
    }

    if (qu->size == 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: queue_timeout=, queue_poll=, "
                      "queue_status=, queue_retry=, priority= and flow= "
                      "need queue=N in upstream \"%V\"",
                      &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (resolve) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: queue= does not support "
                      "\"server ... resolve\" in upstream \"%V\"",
                      &pacf->upstream->host);
        return NGX_ERROR;
    }

    size = ngx_align(pa_queue_size((uint32_t) qu->size), ngx_pagesize)
           + 8 * ngx_pagesize;

    shm_zone = ngx_http_prefix_aware_upstream_zone(cf, pacf, &prefix, size);
    if (shm_zone == NULL) {
        return NGX_ERROR;
    }

    shm_zone->init = ngx_http_prefix_aware_queue_init_zone;
    shm_zone->data = qu;

    qu->zone = shm_zone;

    return NGX_OK;
}


/* the table is kept across reloads while queue= is the same */

static ngx_int_t
ngx_http_prefix_aware_queue_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    size_t                          size;
    void                           *mem;
    ngx_slab_pool_t                *shpool;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    size = pa_queue_size((uint32_t) qu->size);
    mem = shpool->data;

    if (mem == NULL) {
        mem = ngx_slab_alloc(shpool, size);
        if (mem == NULL) {
            return NGX_ERROR;
        }

        shpool->data = mem;
    }

    if (pa_queue_attach(&qu->q, mem, size, (uint32_t) qu->size) == -1) {
        return NGX_ERROR;
    }

    qu->shpool = shpool;

    return NGX_OK;
}


/* per process, at its first request that waits */

static ngx_int_t
ngx_http_prefix_aware_queue_start(ngx_http_prefix_aware_queue_t *qu)
{
    size_t  n;

    if (qu->started) {
        return NGX_OK;
    }

    qu->of = ngx_pcalloc(ngx_cycle->pool,
                         qu->size * sizeof(ngx_http_prefix_aware_wait_t *));

    n = qu->pacf->nservers / (8 * sizeof(uintptr_t)) + 1;
    qu->tried = ngx_pcalloc(ngx_cycle->pool, n * sizeof(uintptr_t));

    if (qu->of == NULL || qu->tried == NULL) {
        return NGX_ERROR;
    }

    ngx_queue_init(&qu->waiters);

    qu->look.handler = ngx_http_prefix_aware_queue_look;
    qu->look.data = qu;
    qu->look.log = ngx_cycle->log;
    qu->look.cancelable = 1;

    qu->started = 1;

    return NGX_OK;
}


/*
 * the places below the bounds of the servers the request may use (with
 * "first", as soon as there is one); -1 if none is usable: the request
 * goes on, to be answered as without a queue
 */

static ngx_int_t
ngx_http_prefix_aware_queue_room(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t first)
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

        if (inflight >= pacf->threshold
            || ngx_http_prefix_aware_queue_engine_full(pacf,
                                                       pacf->shm_server[j]))
        {
            continue;
        }

        room += pacf->threshold - inflight;

        if (first) {
            return room;
        }
    }

    return usable ? room : -1;
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
 * from the peer initialization, the key read: NGX_OK, the request goes
 * on; NGX_DONE, it waits or was answered (the initialization returns
 * NGX_ERROR, the upstream no longer has it); NGX_ERROR
 */

ngx_int_t
ngx_http_prefix_aware_queue_enter(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    int32_t                         slot, priority;
    uint64_t                        flow, cost;
    ngx_int_t                       room;
    ngx_uint_t                      rank;
    ngx_pool_cleanup_t             *cln;
    ngx_http_variable_value_t      *vv;
    ngx_http_prefix_aware_wait_t   *w;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = pd->conf->queue;
    pd->now = ngx_time();

    /* under capacity: one look at the servers until one has room */

    if (qu->q.head->waiting == 0
        && ngx_http_prefix_aware_queue_room(pd, 1) != 0)
    {
        return NGX_OK;
    }

    room = ngx_http_prefix_aware_queue_room(pd, 0);

    if (room < 0) {
        return NGX_OK;
    }

    priority = 0;

    if (qu->priority >= 0) {
        vv = ngx_http_get_indexed_variable(r, qu->priority);

        if (vv && !vv->not_found && vv->len
            && pa_queue_priority(vv->data, vv->len, &priority) != 0)
        {
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "prefix_aware: priority \"%v\" from \"%V\" is not "
                          "an integer from %d to %d, 0 is taken", vv,
                          &qu->priority_name, PA_QUEUE_PRIO_MIN,
                          PA_QUEUE_PRIO_MAX);
            priority = 0;
        }
    }

    flow = pd->flow;

    if (qu->flow >= 0) {
        vv = ngx_http_get_indexed_variable(r, qu->flow);

        flow = (vv && !vv->not_found && vv->len)
               ? pa_key_id_only(vv->data, vv->len) | 1 : 0;
    }

    cost = pd->total_units ? pd->total_units : pd->units;

    if (room == 0 && priority < 0) {
        ngx_shmtx_lock(&qu->shpool->mutex);
        pa_queue_count(&qu->q, priority, PA_QUEUE_SHEDDABLE);
        ngx_shmtx_unlock(&qu->shpool->mutex);

        return ngx_http_prefix_aware_queue_shed(r, qu, PA_QUEUE_SHEDDABLE, 0);
    }

    if (ngx_http_prefix_aware_queue_start(qu) != NGX_OK) {
        return NGX_ERROR;
    }

    w = ngx_pcalloc(r->pool, sizeof(ngx_http_prefix_aware_wait_t));
    if (w == NULL) {
        return NGX_ERROR;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    ngx_shmtx_lock(&qu->shpool->mutex);

    slot = pa_queue_admit(&qu->q, priority, flow, cost, (uint32_t) ngx_pid,
                          ngx_current_msec);

    if (slot < 0) {
        pa_queue_count(&qu->q, priority, PA_QUEUE_FULL);
        ngx_shmtx_unlock(&qu->shpool->mutex);

        return ngx_http_prefix_aware_queue_shed(r, qu, PA_QUEUE_FULL, 0);
    }

    /* others wait: it goes at once only among as many first as have room */

    if (room > 0) {
        rank = pa_queue_rank(&qu->q, (uint32_t) slot);

        if (rank < (ngx_uint_t) room) {
            pa_queue_leave(&qu->q, (uint32_t) slot, PA_QUEUE_RELEASED,
                           ngx_current_msec);
            ngx_shmtx_unlock(&qu->shpool->mutex);

            return NGX_OK;
        }
    }

    w->seq = qu->q.slots[slot].seq;

    ngx_shmtx_unlock(&qu->shpool->mutex);

    w->r = r;
    w->qu = qu;
    w->slot = (uint32_t) slot;
    w->priority = priority;
    w->since = ngx_current_msec;

    w->timer.handler = ngx_http_prefix_aware_queue_timeout;
    w->timer.data = w;
    w->timer.log = r->connection->log;

    ngx_add_timer(&w->timer, qu->timeout);

    cln->handler = ngx_http_prefix_aware_queue_cleanup;
    cln->data = w;

    pd->wait = w;

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_aware: waits, place %D priority %D room %i",
                   slot, priority, room);

    return ngx_http_prefix_aware_queue_park(r, pd, w);
}


/* the upstream taken away from the request, which waits in the queue */

static ngx_int_t
ngx_http_prefix_aware_queue_park(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_http_prefix_aware_wait_t *w)
{
    ngx_http_upstream_t            *u;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = w->qu;
    u = r->upstream;

    if (u->cleanup) {
        *u->cleanup = NULL;
        u->cleanup = NULL;
    }

    r->main->count++;

    if (!u->conf->ignore_client_abort) {
        r->read_event_handler = ngx_http_test_reading;
        r->write_event_handler = ngx_http_request_empty_handler;
    }

    w->state = NGX_HTTP_PREFIX_AWARE_WAITING;

    ngx_queue_insert_tail(&qu->waiters, &w->queue);
    qu->nwaiters++;
    qu->of[w->slot] = w;

    if (!qu->look.timer_set) {
        ngx_add_timer(&qu->look, qu->poll);
    }

    return NGX_DONE;
}


/*
 * from the peer initialization of a request released: it goes on, or
 * waits again if the servers it may use filled since (its place kept)
 */

ngx_int_t
ngx_http_prefix_aware_queue_resume(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    ngx_http_upstream_t            *u;
    ngx_http_upstream_state_t      *st;
    ngx_http_prefix_aware_wait_t   *w;
    ngx_http_prefix_aware_queue_t  *qu;

    w = pd->wait;
    qu = w->qu;
    u = r->upstream;

    if (w->state != NGX_HTTP_PREFIX_AWARE_RELEASED) {
        return NGX_DECLINED;
    }

    /* the initialization again pushed a state of no peer: taken back */

    if (u->state && r->upstream_states && r->upstream_states->nelts) {
        st = r->upstream_states->elts;

        if (u->state == &st[r->upstream_states->nelts - 1]
            && u->state->peer == NULL)
        {
            r->upstream_states->nelts--;
            u->state = NULL;
        }
    }

    pd->now = ngx_time();

    ngx_shmtx_lock(&qu->shpool->mutex);

    if (qu->q.slots[w->slot].seq == w->seq) {

        if (ngx_http_prefix_aware_queue_room(pd, 1) == 0) {
            ngx_shmtx_unlock(&qu->shpool->mutex);

            ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "prefix_aware: place %uD filled, waits again",
                           w->slot);

            return ngx_http_prefix_aware_queue_park(r, pd, w);
        }

        pa_queue_leave(&qu->q, w->slot, PA_QUEUE_RELEASED, ngx_current_msec);
    }

    ngx_shmtx_unlock(&qu->shpool->mutex);

    if (qu->of[w->slot] == w) {
        qu->of[w->slot] = NULL;
    }

    if (w->timer.timer_set) {
        ngx_del_timer(&w->timer);
    }

    w->state = NGX_HTTP_PREFIX_AWARE_WAITED;
    w->waited = ngx_current_msec - w->since;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_aware: released after %M ms, place %uD",
                   w->waited, w->slot);

    return NGX_OK;
}


/* a request of this worker freed a server: a look at once */

void
ngx_http_prefix_aware_queue_kick(ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_http_prefix_aware_queue_t  *qu;

    qu = pacf->queue;

    if (qu->nwaiters && !qu->look.posted) {
        ngx_post_event(&qu->look, &ngx_posted_events);
    }
}


static void
ngx_http_prefix_aware_queue_look(ngx_event_t *ev)
{
    ngx_http_prefix_aware_queue_t *qu = ev->data;

    uint32_t                            top[NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH];
    uint32_t                            slot[NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH];
    uint64_t                            seq[NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH];
    ngx_int_t                           room;
    ngx_uint_t                          i, n, k;
    ngx_msec_t                          now;
    ngx_http_prefix_aware_wait_t       *w;
    ngx_http_prefix_aware_peer_data_t   pd;

    if (qu->nwaiters == 0) {
        return;
    }

    ngx_memzero(&pd, sizeof(ngx_http_prefix_aware_peer_data_t));
    pd.conf = qu->pacf;
    pd.rrp.tried = qu->tried;
    pd.now = ngx_time();

    now = ngx_current_msec;
    k = 0;

    ngx_shmtx_lock(&qu->shpool->mutex);

    /* the places of workers that died, once a second */

    if (now - (ngx_msec_t) qu->q.head->reaped >= 1000) {
        n = pa_queue_reap(&qu->q, ngx_http_prefix_aware_queue_alive, NULL,
                          now);

        if (n) {
            ngx_log_error(NGX_LOG_WARN, ev->log, 0,
                          "prefix_aware: %ui requests waiting in a worker "
                          "that died left the queue of upstream \"%V\"",
                          n, &qu->pacf->upstream->host);
        }
    }

    room = ngx_http_prefix_aware_queue_room(&pd, 0);

    if (room > 0) {
        n = pa_queue_top(&qu->q,
                         (uint32_t) ngx_min(room,
                                          NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH),
                         top);

        for (i = 0; i < n; i++) {
            w = qu->of[top[i]];

            if (w && w->seq == qu->q.slots[top[i]].seq
                && w->state == NGX_HTTP_PREFIX_AWARE_WAITING)
            {
                slot[k] = top[i];
                seq[k++] = w->seq;
            }
        }
    }

    ngx_shmtx_unlock(&qu->shpool->mutex);

    /* a release may end others (streams of one connection): found again */

    for (i = 0; i < k; i++) {
        w = qu->of[slot[i]];

        if (w && w->seq == seq[i] && w->state == NGX_HTTP_PREFIX_AWARE_WAITING)
        {
            ngx_http_prefix_aware_queue_release(w);
        }
    }

    if (qu->nwaiters && !ev->timer_set) {
        ngx_add_timer(ev, qu->poll);
    }
}


static void
ngx_http_prefix_aware_queue_release(ngx_http_prefix_aware_wait_t *w)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = w->r;
    c = r->connection;

    ngx_queue_remove(&w->queue);
    w->qu->nwaiters--;
    w->state = NGX_HTTP_PREFIX_AWARE_RELEASED;

    ngx_http_set_log_request(c->log, r);

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, c->log, 0,
                   "prefix_aware: place %uD released", w->slot);

    ngx_http_upstream_init(r);

    ngx_http_run_posted_requests(c);
}


static void
ngx_http_prefix_aware_queue_timeout(ngx_event_t *ev)
{
    ngx_http_prefix_aware_wait_t *w = ev->data;

    ngx_connection_t               *c;
    ngx_http_request_t             *r;
    ngx_http_prefix_aware_queue_t  *qu;

    r = w->r;
    c = r->connection;
    qu = w->qu;

    ngx_shmtx_lock(&qu->shpool->mutex);

    if (qu->q.slots[w->slot].seq == w->seq) {
        pa_queue_leave(&qu->q, w->slot, PA_QUEUE_TIMEOUT, ngx_current_msec);
    }

    ngx_shmtx_unlock(&qu->shpool->mutex);

    ngx_http_prefix_aware_queue_unlink(w);

    w->waited = ngx_current_msec - w->since;

    ngx_http_set_log_request(c->log, r);

    (void) ngx_http_prefix_aware_queue_shed(r, qu, PA_QUEUE_TIMEOUT,
                                            w->waited);

    /* the reference the queue held */

    ngx_http_finalize_request(r, NGX_DONE);

    ngx_http_run_posted_requests(c);
}


/* the request's pool freed while it waits: the client went away */

static void
ngx_http_prefix_aware_queue_cleanup(void *data)
{
    ngx_http_prefix_aware_wait_t *w = data;

    ngx_http_prefix_aware_queue_t  *qu;

    qu = w->qu;

    if (w->state == NGX_HTTP_PREFIX_AWARE_WAITING
        || w->state == NGX_HTTP_PREFIX_AWARE_RELEASED)
    {
        ngx_shmtx_lock(&qu->shpool->mutex);

        if (qu->q.slots[w->slot].seq == w->seq) {
            pa_queue_leave(&qu->q, w->slot, PA_QUEUE_GONE, ngx_current_msec);
        }

        ngx_shmtx_unlock(&qu->shpool->mutex);

        ngx_log_error(NGX_LOG_INFO, w->r->connection->log, 0,
                      "prefix_aware: the client went away after waiting "
                      "%M ms for a server of upstream \"%V\"",
                      ngx_current_msec - w->since, &qu->pacf->upstream->host);
    }

    ngx_http_prefix_aware_queue_unlink(w);
}


/* out of this worker's list, its timer stopped */

static void
ngx_http_prefix_aware_queue_unlink(ngx_http_prefix_aware_wait_t *w)
{
    if (w->state == NGX_HTTP_PREFIX_AWARE_WAITING) {
        ngx_queue_remove(&w->queue);
        w->qu->nwaiters--;
    }

    if (w->state && w->qu->of[w->slot] == w) {
        w->qu->of[w->slot] = NULL;
    }

    if (w->timer.timer_set) {
        ngx_del_timer(&w->timer);
    }

    w->state = NGX_HTTP_PREFIX_AWARE_WAITED;
}


/*
 * 429 or 503 with Retry-After and a one-line reason, logged; the caller
 * counted it
 */

static ngx_int_t
ngx_http_prefix_aware_queue_shed(ngx_http_request_t *r,
    ngx_http_prefix_aware_queue_t *qu, pa_queue_reason_e reason,
    ngx_msec_t waited)
{
    u_char           *p;
    ngx_table_elt_t  *h;

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "prefix_aware: %ui answered after %M ms in the queue of "
                  "upstream \"%V\" (%s): %V", qu->status, waited,
                  &qu->pacf->upstream->host, pa_queue_reasons[reason],
                  &ngx_http_prefix_aware_queue_why[reason]);

    if (qu->retry) {
        h = ngx_list_push(&r->headers_out.headers);
        p = ngx_pnalloc(r->pool, NGX_INT_T_LEN);

        if (h == NULL || p == NULL) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return NGX_DONE;
        }

        h->hash = 1;
#if (nginx_version >= 1023000)
        h->next = NULL;
#endif
        ngx_str_set(&h->key, "Retry-After");
        h->value.data = p;
        h->value.len = ngx_sprintf(p, "%ui", qu->retry) - p;
    }

    (void) ngx_http_prefix_aware_answer(r, qu->status,
                                        &ngx_http_prefix_aware_queue_why
                                                                  [reason]);

    return NGX_DONE;
}


static int
ngx_http_prefix_aware_queue_alive(uint32_t pid, void *ctx)
{
    if (pid == (uint32_t) ngx_pid) {
        return 1;
    }

    return !(kill((ngx_pid_t) pid, 0) == -1 && ngx_errno == NGX_ESRCH);
}


/* $prefix_aware_wait: ms waited, while or after; 0 if it never waited */

ngx_msec_t
ngx_http_prefix_aware_queue_waited(ngx_http_prefix_aware_peer_data_t *pd)
{
    ngx_http_prefix_aware_wait_t  *w;

    w = pd->wait;

    if (w == NULL) {
        return 0;
    }

    if (w->state == NGX_HTTP_PREFIX_AWARE_WAITED) {
        return w->waited;
    }

    return ngx_current_msec - w->since;
}


static void
ngx_http_prefix_aware_queue_json_left(ngx_http_prefix_aware_writer_t *w,
    uint64_t *left)
{
    ngx_uint_t  k;

    ngx_http_prefix_aware_printf(w, "\"released\": %uL, \"shed\": {", left[0]);

    for (k = 1; k < PA_QUEUE_NREASONS; k++) {
        ngx_http_prefix_aware_printf(w, "%s\"%s\": %uL", k > 1 ? ", " : " ",
                                     pa_queue_reasons[k], left[k]);
    }

    ngx_http_prefix_aware_printf(w, " }");
}


/* the status page's "queue" of an upstream (a read without the lock) */

void
ngx_http_prefix_aware_queue_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_str_t                       s;
    ngx_uint_t                      k, first;
    pa_queue_band_t                *b;
    pa_queue_head_t                *h;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = pacf->queue;

    if (qu == NULL || qu->q.head == NULL) {
        return;
    }

    h = qu->q.head;

    ngx_http_prefix_aware_printf(w,
        "      \"queue\": { \"size\": %ui, \"timeout_ms\": %M, "
        "\"poll_ms\": %M, \"status\": %ui, \"retry_after\": %ui, ",
        qu->size, qu->timeout, qu->poll, qu->status, qu->retry);

    if (qu->priority >= 0) {
        ngx_http_prefix_aware_escape(w, &s, &qu->priority_name, 1);
        ngx_http_prefix_aware_printf(w, "\"priority\": \"%V\", ", &s);
    }

    if (qu->flow >= 0) {
        ngx_http_prefix_aware_escape(w, &s, &qu->flow_name, 1);
        ngx_http_prefix_aware_printf(w, "\"flow\": \"%V\", ", &s);
    }

    ngx_http_prefix_aware_printf(w,
        "\"waiting\": %uL, \"max_waiting\": %uL, ", h->waiting,
        h->max_waiting);

    ngx_http_prefix_aware_queue_json_left(w, h->left);

    ngx_http_prefix_aware_printf(w, ",\n        \"wait_ms\": { \"counts\": [");

    for (k = 0; k < PA_QUEUE_HIST; k++) {
        ngx_http_prefix_aware_printf(w, "%s%uL", k ? ", " : " ", h->hist[k]);
    }

    ngx_http_prefix_aware_printf(w, " ], \"le\": [");

    for (k = 0; k < PA_QUEUE_HIST - 1; k++) {
        ngx_http_prefix_aware_printf(w, "%s%uL", k ? ", " : " ",
                                     pa_queue_hist_ms[k]);
    }

    ngx_http_prefix_aware_printf(w, ", \"+Inf\" ], \"sum\": %uL },\n"
                                    "        \"bands\": [", h->wait_sum);

    first = 1;

    for (k = 0; k <= PA_QUEUE_BANDS; k++) {
        b = &h->bands[k];

        if (k < PA_QUEUE_BANDS && !b->used) {
            continue;
        }

        if (k == PA_QUEUE_BANDS) {
            if (b->waiting == 0 && b->released == 0 && b->left[1] == 0
                && b->left[2] == 0 && b->left[3] == 0 && b->left[4] == 0
                && b->left[5] == 0)
            {
                continue;
            }

            ngx_http_prefix_aware_printf(w, "%s\n          { \"priority\": "
                                         "\"other\", ", first ? "" : ",");

        } else {
            ngx_http_prefix_aware_printf(w, "%s\n          { \"priority\": "
                                         "%D, ", first ? "" : ",",
                                         b->priority);
        }

        first = 0;

        ngx_http_prefix_aware_printf(w, "\"waiting\": %uL, \"work\": %uL, ",
                                     b->waiting, b->work);
        ngx_http_prefix_aware_queue_json_left(w, b->left);
        ngx_http_prefix_aware_printf(w, " }");
    }

    ngx_http_prefix_aware_printf(w, "%s] },\n", first ? " " : "\n        ");
}


static void
ngx_http_prefix_aware_queue_band_label(u_char *buf, pa_queue_head_t *h,
    ngx_uint_t k)
{
    if (k == PA_QUEUE_BANDS) {
        ngx_sprintf(buf, "other%Z");

    } else {
        ngx_sprintf(buf, "%D%Z", h->bands[k].priority);
    }
}


void
ngx_http_prefix_aware_queue_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    u_char                             band[NGX_INT32_LEN + 8];
    uint64_t                           cum;
    ngx_uint_t                         i, k, r, any;
    pa_queue_head_t                   *h;
    ngx_http_prefix_aware_srv_conf_t **pacf;

    pacf = pamcf->upstreams.elts;
    any = 0;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue && pacf[i]->queue->q.head) {
            any = 1;
        }
    }

    if (!any) {
        return;
    }

    ngx_http_prefix_aware_family(w, "queue_waiting", "gauge",
        "Requests waiting now for a server under its bounds, by priority.");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue == NULL || pacf[i]->queue->q.head == NULL) {
            continue;
        }

        h = pacf[i]->queue->q.head;

        for (k = 0; k <= PA_QUEUE_BANDS; k++) {
            if (k < PA_QUEUE_BANDS && !h->bands[k].used) {
                continue;
            }

            ngx_http_prefix_aware_queue_band_label(band, h, k);

            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_queue_waiting"
                "{upstream=\"%V\",priority=\"%s\"} %uL\n",
                &label[i][0], band, h->bands[k].waiting);
        }
    }

    ngx_http_prefix_aware_family(w, "queue_left_total", "counter",
        "Requests that left the queue, by priority and why: released to "
        "a server, or shed (full, timeout, sheddable), or gone (the "
        "client), or lost (their worker died).");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue == NULL || pacf[i]->queue->q.head == NULL) {
            continue;
        }

        h = pacf[i]->queue->q.head;

        for (k = 0; k <= PA_QUEUE_BANDS; k++) {
            if (k < PA_QUEUE_BANDS && !h->bands[k].used) {
                continue;
            }

            ngx_http_prefix_aware_queue_band_label(band, h, k);

            for (r = 0; r < PA_QUEUE_NREASONS; r++) {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_queue_left_total"
                    "{upstream=\"%V\",priority=\"%s\",reason=\"%s\"} %uL\n",
                    &label[i][0], band, pa_queue_reasons[r],
                    h->bands[k].left[r]);
            }
        }
    }

    ngx_http_prefix_aware_family(w, "queue_wait_seconds", "histogram",
        "Time the requests released to a server waited in the queue.");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue == NULL || pacf[i]->queue->q.head == NULL) {
            continue;
        }

        h = pacf[i]->queue->q.head;
        cum = 0;

        for (k = 0; k < PA_QUEUE_HIST; k++) {
            cum += h->hist[k];

            if (k < PA_QUEUE_HIST - 1) {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_queue_wait_seconds_bucket"
                    "{upstream=\"%V\",le=\"%uL.%03uL\"} %uL\n",
                    &label[i][0], pa_queue_hist_ms[k] / 1000,
                    pa_queue_hist_ms[k] % 1000, cum);

            } else {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_queue_wait_seconds_bucket"
                    "{upstream=\"%V\",le=\"+Inf\"} %uL\n", &label[i][0], cum);
            }
        }

        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_queue_wait_seconds_sum{upstream=\"%V\"} "
            "%uL.%03uL\n"
            "nginx_prefix_aware_queue_wait_seconds_count{upstream=\"%V\"} "
            "%uL\n",
            &label[i][0], h->wait_sum / 1000, h->wait_sum % 1000,
            &label[i][0], cum);
    }

    ngx_http_prefix_aware_family(w, "queue_max_waiting", "gauge",
        "The most requests that waited at once, since the queue's zone "
        "was made.");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue && pacf[i]->queue->q.head) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_queue_max_waiting{upstream=\"%V\"} %uL\n",
                &label[i][0], pacf[i]->queue->q.head->max_waiting);
        }
    }
}
