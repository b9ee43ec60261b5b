
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * models=discover: each worker has a timer per upstream, and the first
 * whose turn it is (a compare-and-swap of the round's time in the zone)
 * asks every server of the upstream GET /v1/models at once, on nginx's
 * event loop, with a short timeout and a fixed buffer; the ids each
 * server lists go to its record in the upstream's models zone, found by
 * its name.  A server that does not answer keeps its last list for
 * NGX_HTTP_PREFIX_AWARE_MODELS_HOLD intervals, then counts as serving
 * every model until it answers again.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_time.h"


/* the largest /v1/models body read (scanned as it comes, not kept) */
#define NGX_HTTP_PREFIX_AWARE_MODELS_MAX    (4 * 1024 * 1024)
#define NGX_HTTP_PREFIX_AWARE_MODELS_MAX_TEXT  "4 MB"

/* a server that does not answer keeps its last list this many intervals */
#define NGX_HTTP_PREFIX_AWARE_MODELS_HOLD   3

/* a poll's timeout, at most, in milliseconds */
#define NGX_HTTP_PREFIX_AWARE_MODELS_WAIT   2000

/* a server's refused ids are logged at most once in this many ms */
#define NGX_HTTP_PREFIX_AWARE_MODELS_WARN   60000


/* a poll of one server's /v1/models */
typedef struct {
    ngx_http_prefix_aware_get_t            get;
    ngx_http_prefix_aware_models_t        *models;
    ngx_uint_t                             server;
    const char                            *error;
    pa_models_scan_t                       scan;
    ngx_uint_t                             nids;
    uint64_t                              *ids;
    ngx_http_prefix_aware_shm_model_t     *names;     /* scratch, by id */
    ngx_uint_t                             dropped;
} ngx_http_prefix_aware_poll_t;


static void ngx_http_prefix_aware_models_poll(
    ngx_http_prefix_aware_round_t *rd, ngx_uint_t server);
static ngx_int_t ngx_http_prefix_aware_models_body(
    ngx_http_prefix_aware_get_t *g, u_char *p, size_t n);
static void ngx_http_prefix_aware_models_end(ngx_http_prefix_aware_get_t *g,
    const char *error);
static void ngx_http_prefix_aware_models_id(void *ctx, const unsigned char *id,
    size_t len);
static void ngx_http_prefix_aware_models_done(
    ngx_http_prefix_aware_poll_t *p, const char *error);
static void ngx_http_prefix_aware_models_apply(
    ngx_http_prefix_aware_poll_t *p, ngx_uint_t ok);
static ngx_uint_t ngx_http_prefix_aware_models_keep(
    ngx_http_prefix_aware_poll_t *p, ngx_http_prefix_aware_shm_mserver_t *rec,
    uint64_t *listed, uint64_t *own);


static ngx_str_t  ngx_http_prefix_aware_models_uri = ngx_string("/v1/models");


/* each worker's timers; the first whose turn it is polls for all */

void
ngx_http_prefix_aware_models_start(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf)
{
    ngx_uint_t                          i;
    ngx_http_prefix_aware_models_t     *m;
    ngx_http_prefix_aware_srv_conf_t  **pacf;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return;
    }

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        m = pacf[i]->models;

        if (m == NULL || !m->discover) {
            continue;
        }

        m->round.name = "models";
        m->round.interval = m->interval;
        m->round.polled = &m->sh->polled;
        m->round.n = m->pacf->nservers;
        m->round.poll = ngx_http_prefix_aware_models_poll;
        m->round.data = m;

        ngx_http_prefix_aware_round_start(&m->round, cycle->log);
    }
}


static void
ngx_http_prefix_aware_models_poll(ngx_http_prefix_aware_round_t *rd,
    ngx_uint_t server)
{
    ngx_http_prefix_aware_poll_t    *p;
    ngx_http_prefix_aware_models_t  *m;

    m = rd->data;

    p = ngx_pcalloc(rd->pool, sizeof(ngx_http_prefix_aware_poll_t));
    if (p == NULL) {
        ngx_http_prefix_aware_round_done(rd);
        return;
    }

    rd->gets[server] = &p->get;
    p->models = m;
    p->server = server;

    p->get.uri = ngx_http_prefix_aware_models_uri;
    p->get.limit = NGX_HTTP_PREFIX_AWARE_MODELS_MAX;
    p->get.over = "answer over " NGX_HTTP_PREFIX_AWARE_MODELS_MAX_TEXT;
    p->get.timeout = ngx_min(m->interval / 2,
                             NGX_HTTP_PREFIX_AWARE_MODELS_WAIT);
    p->get.body = ngx_http_prefix_aware_models_body;
    p->get.done = ngx_http_prefix_aware_models_end;
    p->get.data = p;

    ngx_http_prefix_aware_get(&p->get, rd->pool, m->pacf->peer[server],
                              rd->timer.log);
}


/*
 * the configuration's pool goes (a process exits, or a single process
 * reloads): its timer and the polls of a round in progress go with it
 */

void
ngx_http_prefix_aware_models_stop(void *data)
{
    ngx_http_prefix_aware_models_t  *m = data;

    ngx_http_prefix_aware_round_stop(&m->round);
}


/*
 * the body as it arrives, to the scanner; the scratch of the ids with
 * its first bytes
 */

static ngx_int_t
ngx_http_prefix_aware_models_body(ngx_http_prefix_aware_get_t *g, u_char *p,
    size_t n)
{
    ngx_http_prefix_aware_poll_t  *poll = g->data;

    ngx_pool_t  *pool;

    if (poll->ids == NULL) {
        pool = poll->models->round.pool;

        poll->ids = ngx_palloc(pool, NGX_HTTP_PREFIX_AWARE_MAX_MODELS
                                     * sizeof(uint64_t));
        poll->names = ngx_palloc(pool, NGX_HTTP_PREFIX_AWARE_MAX_MODELS
                                   * sizeof(ngx_http_prefix_aware_shm_model_t));

        if (poll->ids == NULL || poll->names == NULL) {
            poll->error = "no memory";
            return NGX_ERROR;
        }

        pa_models_init(&poll->scan, ngx_http_prefix_aware_models_id, poll);
    }

    if (pa_models_feed(&poll->scan, p, n) != 0) {
        poll->error = "not a list of models";
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void
ngx_http_prefix_aware_models_end(ngx_http_prefix_aware_get_t *g,
    const char *error)
{
    ngx_http_prefix_aware_poll_t  *p = g->data;

    if (error && p->error) {
        error = p->error;
    }

    if (error == NULL
        && (p->ids == NULL || pa_models_finish(&p->scan, NULL) < 0))
    {
        error = "not a list of models";
    }

    ngx_http_prefix_aware_models_done(p, error);
}


static void
ngx_http_prefix_aware_models_id(void *ctx, const unsigned char *id,
    size_t len)
{
    ngx_http_prefix_aware_poll_t  *p = ctx;

    ngx_http_prefix_aware_shm_model_t  *s;

    if (p->nids == NGX_HTTP_PREFIX_AWARE_MAX_MODELS) {
        p->dropped++;
        return;
    }

    s = &p->names[p->nids];
    s->len = len;
    ngx_memcpy(s->name, id, len);

    p->ids[p->nids++] = pa_models_hash(id, len);
}


/* a poll ends: its result goes to the zone, the round's pool when all did */

static void
ngx_http_prefix_aware_models_done(ngx_http_prefix_aware_poll_t *p,
    const char *error)
{
    ngx_http_prefix_aware_models_t  *m;

    m = p->models;

    if (error) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, m->round.timer.log, 0,
                       "prefix_aware models: server %ui: %s",
                       p->server, error);
    }

    p->error = error;

    ngx_http_prefix_aware_models_apply(p, error == NULL);

    ngx_http_prefix_aware_round_done(&m->round);
}


static void
ngx_http_prefix_aware_models_apply(ngx_http_prefix_aware_poll_t *p,
    ngx_uint_t ok)
{
    time_t                                now;
    ngx_msec_t                            hold;
    uint64_t                    listed[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];
    uint64_t                    own[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];
    ngx_str_t                            *name;
    ngx_uint_t                            changed, refused, warn, kept;
    ngx_slab_pool_t                      *shpool;
    ngx_http_prefix_aware_models_t       *m;
    ngx_http_prefix_aware_models_shm_t   *sh;
    ngx_http_prefix_aware_shm_mserver_t  *rec;

    m = p->models;
    sh = m->sh;
    shpool = (ngx_slab_pool_t *) m->zone->shm.addr;
    name = &m->pacf->names[p->server];
    now = ngx_time();
    changed = 0;
    refused = 0;
    warn = 0;
    kept = 0;

    ngx_shmtx_lock(&shpool->mutex);

    rec = ngx_http_prefix_aware_models_record(m, name);

    if (rec == NULL) {
        ngx_shmtx_unlock(&shpool->mutex);

        ngx_log_error(NGX_LOG_ALERT, m->round.timer.log, 0,
                      "prefix_aware: the models zone of upstream \"%V\" "
                      "is full, server \"%V\" counts as serving every "
                      "model", &m->pacf->upstream->host, name);
        return;
    }

    if (ok) {
        refused = ngx_http_prefix_aware_models_keep(p, rec, listed, own);

        if (rec->wild || ngx_memcmp(listed, rec->listed, sizeof(listed)) != 0)
        {
            changed = 1;
        }

        if (rec->failing || rec->answered == 0) {
            ngx_log_error(NGX_LOG_NOTICE, m->round.timer.log, 0,
                          "prefix_aware: server \"%V\" of upstream \"%V\" "
                          "lists %ui models", name, &m->pacf->upstream->host,
                          p->nids + p->dropped);
        }

        /*
         * refusals are logged at once, then at most once a minute by any
         * worker while they last (the monotonic clock, as "hold" below);
         * their end once after that
         */

        if (refused
            && (rec->warned == 0
                || pa_age(ngx_current_msec, rec->warned)
                   >= NGX_HTTP_PREFIX_AWARE_MODELS_WARN))
        {
            rec->warned = ngx_current_msec;
            rec->warning = 1;
            warn = 1;

        } else if (refused == 0 && rec->warning) {
            rec->warning = 0;
            kept = 1;
        }

        ngx_memcpy(rec->listed, listed, sizeof(listed));
        ngx_memcpy(rec->own, own, sizeof(own));
        rec->nmodels = p->nids + p->dropped;
        rec->refused = refused;
        rec->answered = now;
        rec->answered_ms = ngx_current_msec;
        rec->failing = 0;
        rec->wild = 0;

    } else {
        if (!rec->failing) {
            ngx_log_error(NGX_LOG_WARN, m->round.timer.log, 0,
                          "prefix_aware: server \"%V\" of upstream \"%V\" "
                          "does not list its models: %s", name,
                          &m->pacf->upstream->host, p->error);
        }

        rec->failing = 1;

        /* the monotonic clock, the same in every process */

        hold = NGX_HTTP_PREFIX_AWARE_MODELS_HOLD * m->interval;

        if (!rec->wild
            && (ngx_msec_int_t) (ngx_current_msec - rec->answered_ms)
               >= (ngx_msec_int_t) hold)
        {
            rec->wild = 1;
            changed = 1;

            ngx_log_error(NGX_LOG_WARN, m->round.timer.log, 0,
                          "prefix_aware: server \"%V\" of upstream \"%V\" "
                          "has not listed its models for %d intervals, it "
                          "counts as serving every model", name,
                          &m->pacf->upstream->host,
                          NGX_HTTP_PREFIX_AWARE_MODELS_HOLD);
        }
    }

    if (changed) {
        sh->version++;
    }

    if (refused) {
        ngx_atomic_fetch_add(&sh->full, refused);
    }

    ngx_shmtx_unlock(&shpool->mutex);

    if (warn) {
        ngx_log_error(NGX_LOG_WARN, m->round.timer.log, 0,
                      "prefix_aware: server \"%V\" of upstream \"%V\" lists "
                      "%ui models, %ui refused a slot in the models zone "
                      "(a server's share: %ui of %d slots, the others' "
                      "models keep theirs); a refused model has no known "
                      "set, all servers", name, &m->pacf->upstream->host,
                      p->nids + p->dropped, refused, m->share,
                      NGX_HTTP_PREFIX_AWARE_MAX_MODELS);

    } else if (kept) {
        ngx_log_error(NGX_LOG_NOTICE, m->round.timer.log, 0,
                      "prefix_aware: server \"%V\" of upstream \"%V\" lists "
                      "%ui models, none refused", name,
                      &m->pacf->upstream->host, p->nids + p->dropped);
    }
}


/*
 * the slots of a server's list (under the zone's lock), chosen by
 * pa_models_keep(): "listed", the slots of its ids; "own", those it holds
 * against the others, its share.  What the others hold: the declared
 * models and the shares of the servers of this configuration that list
 * (a server that counts as serving every model, or that only an older
 * configuration has, holds none).  A slot given to a new model leaves
 * the lists that had it.  The ids that find none are refused: their
 * number
 */

static ngx_uint_t
ngx_http_prefix_aware_models_keep(ngx_http_prefix_aware_poll_t *p,
    ngx_http_prefix_aware_shm_mserver_t *rec, uint64_t *listed, uint64_t *own)
{
    time_t                                now;
    ngx_int_t                             k;
    ngx_uint_t                            i, w, refused;
    ngx_http_prefix_aware_models_t       *m;
    ngx_http_prefix_aware_models_shm_t   *sh;
    ngx_http_prefix_aware_shm_mserver_t  *r;
    uint64_t                    hash[NGX_HTTP_PREFIX_AWARE_MAX_MODELS];
    uint64_t                    declared[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];
    uint64_t                    others[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];
    uint64_t                    held[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];
    int                         slot[NGX_HTTP_PREFIX_AWARE_MAX_MODELS];

    m = p->models;
    sh = m->sh;
    now = ngx_time();

    ngx_memzero(declared, sizeof(declared));
    ngx_memzero(others, sizeof(others));
    ngx_memzero(held, sizeof(held));

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        hash[i] = sh->model[i].hash;

        if (hash[i] && sh->model[i].declared) {
            declared[i / 64] |= (uint64_t) 1 << (i % 64);
        }
    }

    for (r = sh->servers; r; r = r->next) {
        if (r == rec) {
            /* its last list is replaced: its slots are for this one */
            continue;
        }

        for (w = 0; w < NGX_HTTP_PREFIX_AWARE_MODELS_WORDS; w++) {
            others[w] |= r->listed[w];

            if (!r->wild && r->gen_max >= m->generation) {
                held[w] |= r->own[w];
            }
        }
    }

    refused = pa_models_keep(NGX_HTTP_PREFIX_AWARE_MAX_MODELS, hash, declared,
                             others, held, p->ids, p->nids, m->share, slot,
                             listed, own);

    for (i = 0; i < p->nids; i++) {
        k = slot[i];

        if (k < 0) {
            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, m->round.timer.log, 0,
                           "prefix_aware models: server %ui: "
                           "\"%*s\" refused a slot",
                           p->server, p->names[i].len, p->names[i].name);
            continue;
        }

        if (sh->model[k].hash != p->ids[i]) {
            ngx_http_prefix_aware_models_take(sh, k, p->ids[i],
                                              p->names[i].name,
                                              p->names[i].len);
        }

        sh->model[k].seen = now;
    }

    return p->dropped + refused;
}
