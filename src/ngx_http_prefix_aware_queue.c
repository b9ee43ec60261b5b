
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
 * frees a server) at the places below the bounds of each server, gives
 * them in the order to the waiting requests of the whole table that may
 * use them (their model sets, pa_queue_pick()), and releases those of
 * its own requests that got one.  With "server ... resolve" the servers
 * are those of the worker's current view, brought up to date first.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_queue.h"
#include "pa_work.h"

#include <signal.h>


/* places released at most in one look */
#define NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH  64

static ngx_int_t ngx_http_prefix_aware_queue_start(
    ngx_http_prefix_aware_queue_t *qu);
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
static void ngx_http_prefix_aware_queue_reap_locked(
    ngx_http_prefix_aware_queue_t *qu, ngx_log_t *log, ngx_msec_t now);


static ngx_str_t  ngx_http_prefix_aware_queue_why[] = {
    ngx_null_string,
    ngx_string("every server is busy and the queue is full"),
    ngx_string("every server stayed busy for the queue's time out"),
    ngx_string("every server is busy and the request's priority is "
               "sheddable"),
    ngx_null_string,
    ngx_null_string
};


/* per process, at its first request that waits */

static ngx_int_t
ngx_http_prefix_aware_queue_start(ngx_http_prefix_aware_queue_t *qu)
{
    if (qu->started) {
        return NGX_OK;
    }

    qu->of = ngx_pcalloc(ngx_cycle->pool,
                         qu->size * sizeof(ngx_http_prefix_aware_wait_t *));

    if (qu->of == NULL
        || ngx_http_prefix_aware_queue_scratch(qu) != NGX_OK)
    {
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
 * from the peer initialization, the key read: NGX_OK, the request goes
 * on; NGX_DONE, it waits or was answered (the initialization returns
 * NGX_ERROR, the upstream no longer has it); NGX_ERROR
 */

ngx_int_t
ngx_http_prefix_aware_queue_enter(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    int                             pass, heavy;
    int32_t                         slot, priority;
    uint32_t                        out[NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH];
    uint64_t                        flow, cost;
    ngx_int_t                       room;
    ngx_uint_t                      n, limit;
    ngx_pool_cleanup_t             *cln;
    ngx_http_variable_value_t      *vv;
    ngx_http_prefix_aware_wait_t   *w;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = pd->conf->queue;
    pd->now = ngx_time();

    /* under capacity: one look at the servers until one has room */

    if (qu->q.head->waiting == 0
        && ngx_http_prefix_aware_queue_room(pd, 1, pd->conf->threshold) != 0)
    {
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

    flow = ngx_http_prefix_aware_queue_flow(r, pd);

    /*
     * queue_reserve=: a request of a flow with a backlog (others waiting,
     * at least the mean of the flows that wait) leaves the last places of
     * each server to the others; priority_reserve=: while requests wait,
     * one of priority 0 or less leaves the last places to higher ones
     */

    heavy = 0;
    limit = pd->conf->threshold;

    if ((qu->reserve && flow) || qu->high) {
        ngx_shmtx_lock(&qu->shpool->mutex);
        limit -= pa_queue_kept_new(&qu->q, priority, flow, &heavy);
        ngx_shmtx_unlock(&qu->shpool->mutex);
    }

    room = ngx_http_prefix_aware_queue_room(pd, 0, limit);

    if (room < 0) {
        return NGX_OK;
    }

    /* its work: the prefill no server holds (with the index), or its units */

    cost = ngx_http_prefix_aware_queue_uncached(pd);

    /*
     * queue_reserve=: a light request of a flow not ahead of its band
     * whose prefix holder takes it (over the cap by what its match saves,
     * cap=cost) goes there at once, as it would have without others
     * waiting, its work charged to its flow: the queue holds what would
     * spill or go cold
     */

    if (room == 0 && qu->reserve && flow && !heavy
        && ngx_http_prefix_aware_queue_match(pd))
    {
        ngx_shmtx_lock(&qu->shpool->mutex);
        pass = pa_queue_pass(&qu->q, priority, flow, cost);
        ngx_shmtx_unlock(&qu->shpool->mutex);

        if (pass) {
            return NGX_OK;
        }
    }

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

    ngx_http_prefix_aware_queue_mask(pd, (uint32_t) slot);

    /*
     * others wait: it goes at once only if a free place of its servers is
     * left to it when the free places go, in order, to those that wait
     * and may use them
     */

    if (room > 0 && ngx_http_prefix_aware_queue_scratch(qu) == NGX_OK) {
        ngx_http_prefix_aware_queue_fill(pd, qu->room);

        n = pa_queue_pick(&qu->q, qu->room, (uint32_t) pd->conf->nservers,
                          NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH, slot, out);

        if (n && out[n - 1] == (uint32_t) slot) {
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
    ngx_uint_t                      limit;
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

    /* "resolve": the view may have changed while it waited */

    if (ngx_http_prefix_aware_resolve_current(pd, r->connection->log)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    ngx_shmtx_lock(&qu->shpool->mutex);

    if (qu->q.slots[w->slot].seq == w->seq) {

        limit = pd->conf->threshold - pa_queue_kept(&qu->q, w->slot);

        if (ngx_http_prefix_aware_queue_room(pd, 1, limit) == 0) {
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
    ngx_uint_t                          i, n, k;
    ngx_msec_t                          now;
    ngx_http_prefix_aware_wait_t       *w;
    ngx_http_prefix_aware_peer_data_t   pd;

    if (qu->nwaiters == 0) {
        return;
    }

    /* "resolve": the servers of the current view */

    ngx_http_prefix_aware_resolve_update(qu->pacf, ev->log);

    if (ngx_http_prefix_aware_queue_scratch(qu) != NGX_OK) {
        goto again;
    }

    ngx_memzero(&pd, sizeof(ngx_http_prefix_aware_peer_data_t));
    pd.conf = qu->pacf;
    pd.rrp.tried = qu->tried;
    pd.now = ngx_time();

    now = ngx_current_msec;
    k = 0;

    ngx_http_prefix_aware_queue_fill(&pd, qu->room);

    ngx_shmtx_lock(&qu->shpool->mutex);

    ngx_http_prefix_aware_queue_reap_locked(qu, ev->log, now);

    n = pa_queue_pick(&qu->q, qu->room, (uint32_t) qu->pacf->nservers,
                      NGX_HTTP_PREFIX_AWARE_QUEUE_BATCH, -1, top);

    for (i = 0; i < n; i++) {
        w = qu->of[top[i]];

        if (w && w->seq == qu->q.slots[top[i]].seq
            && w->state == NGX_HTTP_PREFIX_AWARE_WAITING)
        {
            slot[k] = top[i];
            seq[k++] = w->seq;
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

again:

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


/* the places of workers that died, once a second, under the lock */

static void
ngx_http_prefix_aware_queue_reap_locked(ngx_http_prefix_aware_queue_t *qu,
    ngx_log_t *log, ngx_msec_t now)
{
    ngx_uint_t  n;

    if (now - (ngx_msec_t) qu->q.head->reaped < 1000) {
        return;
    }

    n = pa_queue_reap(&qu->q, ngx_http_prefix_aware_queue_alive, NULL, now);

    if (n) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "prefix_aware: %ui requests waiting in a worker "
                      "that died left the queue of upstream \"%V\"",
                      n, &qu->pacf->upstream->host);
    }
}


/*
 * from the reaper (zone.c), one worker a second: the places of dead
 * workers, where requests wait, also when no live worker has one waiting
 */

void
ngx_http_prefix_aware_queue_reap(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_log_t *log)
{
    ngx_uint_t                          i;
    ngx_http_prefix_aware_queue_t      *qu;
    ngx_http_prefix_aware_srv_conf_t  **pacf;

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        qu = pacf[i]->queue;

        if (qu == NULL || qu->q.head == NULL || qu->q.head->waiting == 0) {
            continue;
        }

        ngx_shmtx_lock(&qu->shpool->mutex);
        ngx_http_prefix_aware_queue_reap_locked(qu, log, ngx_current_msec);
        ngx_shmtx_unlock(&qu->shpool->mutex);
    }
}


static int
ngx_http_prefix_aware_queue_alive(uint32_t pid, void *ctx)
{
    if (pid == (uint32_t) ngx_pid) {
        return 1;
    }

    return !(kill((ngx_pid_t) pid, 0) == -1 && ngx_errno == NGX_ESRCH);
}


/*
 * the request's flow for fairness: flow=$variable's value, else the
 * tenant id; its hash, 0 for none (a flow of its own)
 */

uint64_t
ngx_http_prefix_aware_queue_flow(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    ngx_http_variable_value_t      *vv;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = pd->conf->queue;

    if (qu == NULL || qu->flow < 0) {
        return pd->flow;
    }

    vv = ngx_http_get_indexed_variable(r, qu->flow);

    return (vv && !vv->not_found && vv->len)
           ? pa_key_id_only(vv->data, vv->len) | 1 : 0;
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
