
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * What the engines report of themselves (capacity=auto, metrics=): each
 * server is polled on its own schedule, so that one that is slow or hung
 * delays only itself: each worker has a timer per server, and the first
 * whose turn it is (a compare-and-swap of the server's poll time in the
 * zone, while no other worker's poll of it is in progress) asks the
 * server for its /metrics page, on nginx's event loop (a round of one,
 * ngx_http_prefix_aware_get.c), and reads it as it streams in
 * (src/pa_prom.c).  What a server says goes to its record in the zone,
 * for every worker and the status page; with capacity=auto, the size of
 * its KV cache becomes its capacity in the index.  A server that does not
 * answer, or answers what cannot be read, keeps what it last said for
 * NGX_HTTP_PREFIX_AWARE_ENGINE_HOLD intervals, then its capacity is the
 * configured one again.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_time.h"


/* the default interval, in milliseconds */
#define NGX_HTTP_PREFIX_AWARE_ENGINE_INTERVAL  1000

/* the largest /metrics answer read (as it streams, never kept) */
#define NGX_HTTP_PREFIX_AWARE_ENGINE_MAX     (8 * 1024 * 1024)
#define NGX_HTTP_PREFIX_AWARE_ENGINE_MAX_TEXT  "8 MB"

/*
 * a poll's timeout, in milliseconds: the interval, at least 200 ms (an
 * engine busy with a batch may take tens of milliseconds to render its
 * page), at most 2 s; a slow poll delays only its own server's next one
 */
#define NGX_HTTP_PREFIX_AWARE_ENGINE_LEAST   200
#define NGX_HTTP_PREFIX_AWARE_ENGINE_WAIT    2000

/* a server that stops reporting keeps its capacity this many intervals */
#define NGX_HTTP_PREFIX_AWARE_ENGINE_HOLD    3

/* load=engine uses a report this many intervals (peer.c) */
#define NGX_HTTP_PREFIX_AWARE_ENGINE_FRESH   2


/* the poller of an upstream: a round per server, rounds[j] polls server j */
struct ngx_http_prefix_aware_engine_s {
    ngx_http_prefix_aware_srv_conf_t      *pacf;
    ngx_http_prefix_aware_round_t         *rounds;
};


/* a poll of one server's /metrics */
typedef struct {
    ngx_http_prefix_aware_get_t         get;
    ngx_http_prefix_aware_engine_t     *engine;
    ngx_uint_t                          server;
    pa_prom_t                           prom;
} ngx_http_prefix_aware_engine_poll_t;


static void ngx_http_prefix_aware_engine_stop(void *data);
static void ngx_http_prefix_aware_engine_poll(
    ngx_http_prefix_aware_round_t *rd, ngx_uint_t server);
static ngx_int_t ngx_http_prefix_aware_engine_body(
    ngx_http_prefix_aware_get_t *g, u_char *p, size_t n);
static void ngx_http_prefix_aware_engine_done(ngx_http_prefix_aware_get_t *g,
    const char *error);
static void ngx_http_prefix_aware_engine_apply(
    ngx_http_prefix_aware_engine_poll_t *p, const char *error);
static void ngx_http_prefix_aware_engine_hold(
    ngx_http_prefix_aware_engine_poll_t *p,
    ngx_http_prefix_aware_shm_server_t *s);


static ngx_str_t  ngx_http_prefix_aware_engine_uri = ngx_string("/metrics");


/*
 * "metrics=", "metrics_interval=" and "load="; NGX_DECLINED: not one of
 * them
 */

ngx_int_t
ngx_http_prefix_aware_engine_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value)
{
    ngx_str_t   s;
    ngx_msec_t  t;

    if (ngx_strncmp(value->data, "metrics=", 8) == 0) {
        s.data = value->data + 8;
        s.len = value->len - 8;

        if (s.len == 3 && ngx_strncmp(s.data, "off", 3) == 0) {
            pacf->metrics = 0;
            return NGX_OK;
        }

        if (s.len == 0 || s.data[0] != '/' || s.len > 256) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"metrics\" value \"%V\" in "
                               "\"prefix_aware\", it must be \"off\" or a "
                               "path from \"/\", of up to 256 characters",
                               &s);
            return NGX_ERROR;
        }

        pacf->metrics = 1;
        pacf->metrics_uri = s;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "load=", 5) == 0) {
        s.data = value->data + 5;
        s.len = value->len - 5;

        if (s.len == 3 && ngx_strncmp(s.data, "own", 3) == 0) {
            pacf->engine_load = 0;
            return NGX_OK;
        }

        if (s.len == 6 && ngx_strncmp(s.data, "engine", 6) == 0) {
            pacf->engine_load = 1;
            return NGX_OK;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"load\" value \"%V\" in "
                           "\"prefix_aware\", it must be \"own\" or "
                           "\"engine\"", &s);
        return NGX_ERROR;
    }

    if (ngx_strncmp(value->data, "metrics_interval=", 17) == 0) {
        if (ngx_http_prefix_aware_time(cf, value, 17, "prefix_aware", 10,
                                       "10ms", 60000, "60s", &t)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pacf->metrics_interval = t;
        return NGX_OK;
    }

    return NGX_DECLINED;
}


/*
 * the upstream's poller, where its engines are asked (metrics=, or
 * capacity=auto); its timer and a round in progress end with the
 * configuration's pool
 */

ngx_int_t
ngx_http_prefix_aware_engine_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_uint_t                       j;
    ngx_msec_t                       timeout;
    ngx_pool_cleanup_t              *cln;
    ngx_http_prefix_aware_round_t   *rd;
    ngx_http_prefix_aware_engine_t  *e;

    if (pacf->metrics == NGX_CONF_UNSET_UINT) {
        pacf->metrics = pacf->capacity_auto;
    }

    if (pacf->capacity_auto && !pacf->metrics) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"capacity=auto\" in \"prefix_aware\" of "
                           "upstream \"%V\" reads the engines' metrics, it "
                           "cannot go with \"metrics=off\"",
                           &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (pacf->engine_load && (!pacf->metrics || pacf->index_size == 0)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"load=engine\" in \"prefix_aware\" of "
                           "upstream \"%V\" needs the engines' metrics "
                           "(\"metrics=\") and the index",
                           &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (pacf->capacity_auto && pacf->index_size == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"capacity=auto\" in \"prefix_aware\" of "
                           "upstream \"%V\" sets the capacity of the index, "
                           "which is off", &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (pacf->feedback && pacf->index_size == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"feedback=on\" in \"prefix_aware\" of "
                           "upstream \"%V\" corrects the index, which is "
                           "off", &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (!pacf->metrics) {
        return NGX_OK;
    }

    if (pacf->resolve) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"metrics\" in \"prefix_aware\" of upstream "
                           "\"%V\" does not go with servers that are "
                           "resolved (\"resolve\")", &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (pacf->metrics_uri.len == 0) {
        pacf->metrics_uri = ngx_http_prefix_aware_engine_uri;
    }

    if (pacf->metrics_interval == NGX_CONF_UNSET_MSEC) {
        pacf->metrics_interval = NGX_HTTP_PREFIX_AWARE_ENGINE_INTERVAL;
    }

    e = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_engine_t));
    if (e == NULL) {
        return NGX_ERROR;
    }

    e->rounds = ngx_pcalloc(cf->pool, pacf->nservers
                                      * sizeof(ngx_http_prefix_aware_round_t));
    if (e->rounds == NULL) {
        return NGX_ERROR;
    }

    timeout = ngx_min(ngx_max(pacf->metrics_interval,
                              NGX_HTTP_PREFIX_AWARE_ENGINE_LEAST),
                      NGX_HTTP_PREFIX_AWARE_ENGINE_WAIT);

    for (j = 0; j < pacf->nservers; j++) {
        rd = &e->rounds[j];

        rd->name = "metrics";
        rd->interval = pacf->metrics_interval;
        rd->timeout = timeout;
        rd->n = 1;
        rd->poll = ngx_http_prefix_aware_engine_poll;
        rd->data = e;
    }

    e->pacf = pacf;
    pacf->engine = e;

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ngx_http_prefix_aware_engine_stop;
    cln->data = e;

    return NGX_OK;
}


/*
 * each worker's timers, one per server; the first whose turn it is polls
 * the server for all, the lock in the server's record
 */

void
ngx_http_prefix_aware_engine_start(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf)
{
    ngx_uint_t                           i, j;
    ngx_http_prefix_aware_round_t       *rd;
    ngx_http_prefix_aware_engine_t      *e;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_shm_server_t  *s;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return;
    }

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        e = pacf[i]->engine;

        if (e == NULL || pacf[i]->shm == NULL) {
            continue;
        }

        for (j = 0; j < pacf[i]->nservers; j++) {
            rd = &e->rounds[j];
            s = pacf[i]->shm_server[j];

            rd->polled = &s->engine_polled;
            rd->busy = &s->engine_polling;

            ngx_http_prefix_aware_round_start(rd, cycle->log);
        }
    }
}


static void
ngx_http_prefix_aware_engine_stop(void *data)
{
    ngx_http_prefix_aware_engine_t  *e = data;

    ngx_uint_t  j;

    for (j = 0; j < e->pacf->nservers; j++) {
        ngx_http_prefix_aware_round_stop(&e->rounds[j]);
    }
}


/* server j's round: its only GET is gets[0] */

static void
ngx_http_prefix_aware_engine_poll(ngx_http_prefix_aware_round_t *rd,
    ngx_uint_t k)
{
    ngx_uint_t                            server;
    ngx_http_prefix_aware_engine_t       *e;
    ngx_http_prefix_aware_engine_poll_t  *p;

    e = rd->data;
    server = (ngx_uint_t) (rd - e->rounds);

    p = ngx_pcalloc(rd->pool, sizeof(ngx_http_prefix_aware_engine_poll_t));
    if (p == NULL) {
        ngx_http_prefix_aware_round_done(rd);
        return;
    }

    rd->gets[k] = &p->get;
    p->engine = e;
    p->server = server;
    pa_prom_init(&p->prom);

    p->get.uri = e->pacf->metrics_uri;
    p->get.limit = NGX_HTTP_PREFIX_AWARE_ENGINE_MAX;
    p->get.over = "answer over " NGX_HTTP_PREFIX_AWARE_ENGINE_MAX_TEXT;
    p->get.timeout = rd->timeout;
    p->get.body = ngx_http_prefix_aware_engine_body;
    p->get.done = ngx_http_prefix_aware_engine_done;
    p->get.data = p;

    ngx_http_prefix_aware_get(&p->get, rd->pool, e->pacf->peer[server],
                              rd->timer.log);
}


static ngx_int_t
ngx_http_prefix_aware_engine_body(ngx_http_prefix_aware_get_t *g, u_char *p,
    size_t n)
{
    ngx_http_prefix_aware_engine_poll_t  *poll = g->data;

    pa_prom_feed(&poll->prom, p, n);

    return NGX_OK;
}


/* a poll ends: its result goes to the zone, then the round's pool */

static void
ngx_http_prefix_aware_engine_done(ngx_http_prefix_aware_get_t *g,
    const char *error)
{
    ngx_http_prefix_aware_engine_poll_t  *p = g->data;

    ngx_http_prefix_aware_engine_t  *e;

    e = p->engine;

    if (error) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, g->log, 0,
                       "prefix_aware metrics: server %ui: %s",
                       p->server, error);
    }

    ngx_http_prefix_aware_engine_apply(p, error);

    ngx_http_prefix_aware_round_done(&e->rounds[p->server]);
}


static void
ngx_http_prefix_aware_engine_apply(ngx_http_prefix_aware_engine_poll_t *p,
    const char *error)
{
    double                               *v;
    uint64_t                              tokens;
    unsigned                              seen;
    ngx_str_t                            *name;
    ngx_http_prefix_aware_srv_conf_t     *pacf;
    ngx_http_prefix_aware_shm_server_t   *s;
    ngx_http_prefix_aware_shm_upstream_t *up;

    pacf = p->engine->pacf;
    s = pacf->shm_server[p->server];
    up = pacf->shm;
    name = &pacf->names[p->server];

    ngx_atomic_fetch_add(&up->engine_polls, 1);

    seen = 0;

    if (error == NULL) {
        seen = pa_prom_finish(&p->prom);

        if (p->prom.rejected) {
            ngx_atomic_fetch_add(&s->engine_rejected, p->prom.rejected);
        }

        if (seen == 0) {
            error = "no metric of an engine in the answer";
        }
    }

    if (error) {
        ngx_atomic_fetch_add(&s->engine_errors, 1);

        if (!s->engine_failing) {
            s->engine_failing = 1;

            ngx_log_error(NGX_LOG_WARN, p->get.log, 0,
                          "prefix_aware: server \"%V\" of upstream \"%V\" "
                          "gave no metrics at \"%V\": %s", name,
                          &pacf->upstream->host, &pacf->metrics_uri, error);
        }

        ngx_http_prefix_aware_engine_hold(p, s);
        return;
    }

    if (s->engine_failing || s->engine_reported == 0) {
        ngx_log_error(NGX_LOG_NOTICE, p->get.log, 0,
                      "prefix_aware: server \"%V\" of upstream \"%V\" "
                      "reports its engine's metrics", name,
                      &pacf->upstream->host);
    }

    v = p->prom.value;

    s->engine_failing = 0;
    s->engine_seen = seen;
    s->engine_waiting = (seen & (1u << PA_PROM_WAITING))
                        ? (ngx_atomic_uint_t) (v[PA_PROM_WAITING] + 0.5) : 0;
    s->engine_running = (seen & (1u << PA_PROM_RUNNING))
                        ? (ngx_atomic_uint_t) (v[PA_PROM_RUNNING] + 0.5) : 0;
    s->engine_usage = (seen & (1u << PA_PROM_USAGE))
                      ? (ngx_atomic_uint_t) (v[PA_PROM_USAGE] * 1000000 + 0.5)
                      : 0;
    s->engine_reported = ngx_current_msec ? ngx_current_msec : 1;

    if (!(seen & (1u << PA_PROM_CAPACITY))) {
        if (pacf->capacity_auto && s->engine_capacity == 0
            && !s->engine_nocapacity)
        {
            s->engine_nocapacity = 1;

            ngx_log_error(NGX_LOG_WARN, p->get.log, 0,
                          "prefix_aware: server \"%V\" of upstream \"%V\" "
                          "does not report the size of its KV cache, its "
                          "capacity stays %ui tokens", name,
                          &pacf->upstream->host, pacf->capacity);
        }

        ngx_http_prefix_aware_engine_hold(p, s);
        return;
    }

    tokens = (uint64_t) v[PA_PROM_CAPACITY];
    s->engine_nocapacity = 0;
    s->engine_capacity_ms = s->engine_reported;

    if (s->engine_capacity != tokens) {
        if (pacf->capacity_auto) {
            ngx_log_error(NGX_LOG_NOTICE, p->get.log, 0,
                          "prefix_aware: server \"%V\" of upstream \"%V\" "
                          "has a KV cache of %uL tokens", name,
                          &pacf->upstream->host, tokens);
        }

        s->engine_capacity = (ngx_atomic_uint_t) tokens;
    }

    if (pacf->capacity_auto) {
        ngx_http_prefix_aware_index_capacity(pacf, p->server, tokens);
    }
}


/*
 * no capacity this time: the last one reported stands for
 * NGX_HTTP_PREFIX_AWARE_ENGINE_HOLD intervals, then the configured one
 */

static void
ngx_http_prefix_aware_engine_hold(ngx_http_prefix_aware_engine_poll_t *p,
    ngx_http_prefix_aware_shm_server_t *s)
{
    ngx_msec_t                         hold;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = p->engine->pacf;

    if (s->engine_capacity == 0) {
        return;
    }

    /* the monotonic clock, cached by each process: an age (pa_time.h) */

    hold = NGX_HTTP_PREFIX_AWARE_ENGINE_HOLD * pacf->metrics_interval;

    if (pa_age(ngx_current_msec, s->engine_capacity_ms) < hold) {
        return;
    }

    s->engine_capacity = 0;

    if (!pacf->capacity_auto) {
        return;
    }

    ngx_http_prefix_aware_index_capacity(pacf, p->server, 0);

    ngx_log_error(NGX_LOG_WARN, p->get.log, 0,
                  "prefix_aware: server \"%V\" of upstream \"%V\" has not "
                  "reported its KV cache for %d intervals, its capacity is "
                  "%ui tokens again", &pacf->names[p->server],
                  &pacf->upstream->host, NGX_HTTP_PREFIX_AWARE_ENGINE_HOLD,
                  pacf->capacity);
}


/* the status page: the upstream's polls, then each server's report */

void
ngx_http_prefix_aware_engine_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_str_t  uri;

    if (pacf->engine == NULL) {
        return;
    }

    ngx_http_prefix_aware_escape(w, &uri, &pacf->metrics_uri, 1);

    ngx_http_prefix_aware_printf(w,
        "      \"metrics\": { \"uri\": \"%V\", \"interval_ms\": %M, "
        "\"capacity_auto\": %s, \"polls\": %uA },\n",
        &uri, pacf->metrics_interval,
        pacf->capacity_auto ? "true" : "false", pacf->shm->engine_polls);
}


void
ngx_http_prefix_aware_engine_json_server(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t j,
    ngx_http_prefix_aware_writer_t *w)
{
    unsigned                             seen;
    ngx_msec_t                           reported, age;
    ngx_atomic_uint_t                    usage;
    ngx_http_prefix_aware_shm_server_t  *s;

    if (pacf->engine == NULL) {
        return;
    }

    s = pacf->shm_server[j];
    seen = (unsigned) s->engine_seen;
    reported = s->engine_reported;
    usage = s->engine_usage;

    /* another worker's cached clock may be a few ms ahead: an age */

    age = pa_age(ngx_current_msec, reported);

    /* stale: no report, or one older than load=engine uses (peer.c) */

    ngx_http_prefix_aware_printf(w,
        ",\n          \"engine\": { \"reported\": %s, \"failing\": %s, "
        "\"stale\": %s, \"errors\": %uA, \"rejected\": %uA",
        reported ? "true" : "false", s->engine_failing ? "true" : "false",
        (reported == 0
         || age > NGX_HTTP_PREFIX_AWARE_ENGINE_FRESH * pacf->metrics_interval)
        ? "true" : "false",
        s->engine_errors, s->engine_rejected);

    if (reported) {
        ngx_http_prefix_aware_printf(w, ", \"age_ms\": %M", age);
    }

    if (s->engine_capacity) {
        ngx_http_prefix_aware_printf(w, ", \"capacity\": %uA",
                                     s->engine_capacity);
    }

    if (reported && (seen & (1u << PA_PROM_WAITING))) {
        ngx_http_prefix_aware_printf(w, ", \"waiting\": %uA",
                                     s->engine_waiting);
    }

    if (reported && (seen & (1u << PA_PROM_RUNNING))) {
        ngx_http_prefix_aware_printf(w, ", \"running\": %uA",
                                     s->engine_running);
    }

    if (reported && (seen & (1u << PA_PROM_USAGE))) {
        ngx_http_prefix_aware_printf(w, ", \"kv_usage\": %uA.%06uA",
                                     usage / 1000000, usage % 1000000);
    }

    if (pacf->index_size) {
        ngx_http_prefix_aware_printf(w, ", \"index_capacity\": %uL",
            ngx_http_prefix_aware_index_capacity_of(pacf, j));
    }

    ngx_http_prefix_aware_printf(w, " }");
}


/* the Prometheus families of the engines' reports, for every upstream */


static ngx_http_prefix_aware_family_t
    ngx_http_prefix_aware_engine_families[] = {
    { "engine_capacity_tokens", "gauge",
      "KV cache of the server's engine in tokens, as it reports it." },
    { "engine_waiting_requests", "gauge",
      "Requests the engine reports waiting." },
    { "engine_running_requests", "gauge",
      "Requests the engine reports running." },
    { "engine_kv_usage_ratio", "gauge",
      "KV cache usage the engine reports, 0 to 1." },
    { "engine_report_age_seconds", "gauge",
      "Seconds since the engine's last readable metrics." },
    { "engine_poll_errors_total", "counter",
      "Polls of the engine's metrics that failed." },
    { "engine_rejected_values_total", "counter",
      "Values in the engine's metrics out of their range." },
    { NULL, NULL, NULL }
};


void
ngx_http_prefix_aware_engine_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    unsigned                             seen;
    ngx_uint_t                           i, j, f, any;
    ngx_msec_t                           reported;
    ngx_atomic_uint_t                    v, div;
    ngx_http_prefix_aware_family_t      *fam;
    ngx_http_prefix_aware_srv_conf_t   **pacf, *c;
    ngx_http_prefix_aware_shm_server_t  *s;

    static const unsigned  need[] = {
        0, 1u << PA_PROM_WAITING, 1u << PA_PROM_RUNNING,
        1u << PA_PROM_USAGE, 0, 0, 0
    };

    pacf = pamcf->upstreams.elts;
    any = 0;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->engine && pacf[i]->shm) {
            any = 1;
        }
    }

    if (!any) {
        return;
    }

    for (f = 0; ngx_http_prefix_aware_engine_families[f].name; f++) {
        fam = &ngx_http_prefix_aware_engine_families[f];

        ngx_http_prefix_aware_family(w, fam->name, fam->type, fam->help);

        for (i = 0; i < pamcf->upstreams.nelts; i++) {
            c = pacf[i];

            if (c->engine == NULL || c->shm == NULL) {
                continue;
            }

            for (j = 0; j < c->nservers; j++) {
                s = c->shm_server[j];
                seen = (unsigned) s->engine_seen;
                reported = s->engine_reported;
                div = 1;

                if (need[f] && (reported == 0 || !(seen & need[f]))) {
                    continue;
                }

                switch (f) {

                case 0:
                    v = s->engine_capacity;
                    if (v == 0) {
                        continue;
                    }
                    break;

                case 1:
                    v = s->engine_waiting;
                    break;

                case 2:
                    v = s->engine_running;
                    break;

                case 3:
                    v = s->engine_usage;
                    div = 1000000;
                    break;

                case 4:
                    if (reported == 0) {
                        continue;
                    }

                    v = pa_age(ngx_current_msec, reported);
                    div = 1000;
                    break;

                case 5:
                    v = s->engine_errors;
                    break;

                default:
                    v = s->engine_rejected;
                    break;
                }

                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\",server=\"%V\"} "
                    "%uA", fam->name, &label[i][0], &label[i][1 + j],
                    v / div);

                if (div == 1000000) {
                    ngx_http_prefix_aware_printf(w, ".%06uA", v % div);

                } else if (div == 1000) {
                    ngx_http_prefix_aware_printf(w, ".%03uA", v % div);
                }

                ngx_http_prefix_aware_printf(w, "\n");
            }
        }
    }
}
