
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * strategy=: how a request's server is chosen, fixed or per request from a
 * variable: by prefix (the ring, or the index), the fewest in flight over
 * all workers, or weighted random; every strategy takes its server through
 * the probe (down, failed, max_conns, tried) and the hard threshold of
 * ngx_http_prefix_aware_get_peer().  Requests are counted by strategy and
 * route, so that the arms of an A/B on one upstream can be compared.
 */


#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_strategy_parse(ngx_str_t *s);
static int ngx_http_prefix_aware_strategy_below(void *ctx, uint32_t server,
    uint64_t *inflight);
static void ngx_http_prefix_aware_strategy_home(
    ngx_http_prefix_aware_peer_data_t *pd, pa_pick_t *pick);


ngx_str_t  ngx_http_prefix_aware_strategies[] = {
    ngx_string("prefix"),
    ngx_string("least_outstanding"),
    ngx_string("random")
};


/* per process: the random generator, the start of least-loaded walks */
static uint64_t    ngx_http_prefix_aware_random_state;
static ngx_uint_t  ngx_http_prefix_aware_least_start;


static ngx_int_t
ngx_http_prefix_aware_strategy_parse(ngx_str_t *s)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_PA_STRATEGIES; i++) {
        if (s->len == ngx_http_prefix_aware_strategies[i].len
            && ngx_strncmp(s->data, ngx_http_prefix_aware_strategies[i].data,
                           s->len) == 0)
        {
            return (ngx_int_t) i;
        }
    }

    return NGX_ERROR;
}


/*
 * strategy=prefix|least_outstanding|random|$variable and
 * strategy_default= (with a variable); NGX_DECLINED: not one of them
 */

ngx_int_t
ngx_http_prefix_aware_strategy_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value)
{
    u_char     *p;
    ngx_int_t   n;
    ngx_str_t   s, name;
    ngx_uint_t  dflt;

    if (ngx_strncmp(value->data, "strategy=", 9) == 0) {
        s.data = value->data + 9;
        s.len = value->len - 9;
        dflt = 0;

    } else if (ngx_strncmp(value->data, "strategy_default=", 17) == 0) {
        s.data = value->data + 17;
        s.len = value->len - 17;
        dflt = 1;

    } else {
        return NGX_DECLINED;
    }

    if (!dflt && s.len > 0 && s.data[0] == '$') {
        name.data = s.data + 1;
        name.len = s.len - 1;

        for (p = name.data; p < name.data + name.len; p++) {
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                  || (*p >= '0' && *p <= '9') || *p == '_'))
            {
                break;
            }
        }

        if (name.len == 0 || p < name.data + name.len) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"strategy\" value \"%V\" in "
                               "\"prefix_aware\", a variable's name has "
                               "letters, digits and \"_\" only", &s);
            return NGX_ERROR;
        }

        n = ngx_http_get_variable_index(cf, &name);
        if (n == NGX_ERROR) {
            return NGX_ERROR;
        }

        pacf->strategy_var = (ngx_uint_t) n + 1;
        pacf->strategy_name = s;
        return NGX_OK;
    }

    n = ngx_http_prefix_aware_strategy_parse(&s);

    if (n == NGX_ERROR && dflt) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"strategy_default\" value \"%V\" in "
                           "\"prefix_aware\", it must be \"prefix\", "
                           "\"least_outstanding\" or \"random\"", &s);
        return NGX_ERROR;
    }

    if (n == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"strategy\" value \"%V\" in "
                           "\"prefix_aware\", it must be \"prefix\", "
                           "\"least_outstanding\", \"random\" or a "
                           "$variable", &s);
        return NGX_ERROR;
    }

    /* a default is for a variable's unknown values: not with a fixed one */

    if ((dflt && !pacf->strategy_var) || (!dflt && pacf->strategy_default)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"strategy_default\" in \"prefix_aware\" "
                           "follows a variable: \"strategy=$name "
                           "strategy_default=%V\"",
                           &ngx_http_prefix_aware_strategies[n]);
        return NGX_ERROR;
    }

    pacf->strategy = (ngx_uint_t) n;

    if (dflt) {
        pacf->strategy_default = 1;

    } else {
        pacf->strategy_var = 0;
        pacf->strategy_name = s;
    }

    return NGX_OK;
}


/*
 * once per request, before its first choice: a variable's value, or the
 * default for a value that names no strategy (counted, logged at info;
 * an empty value is the default without a word)
 */

void
ngx_http_prefix_aware_strategy_init(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    ngx_int_t                          n;
    ngx_str_t                          s;
    ngx_http_variable_value_t         *vv;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;
    pd->strategy = pacf->strategy;

    if (pacf->strategy_var == 0) {
        return;
    }

    vv = ngx_http_get_indexed_variable(r, pacf->strategy_var - 1);

    if (vv == NULL || vv->not_found || vv->len == 0) {
        return;
    }

    s.data = vv->data;
    s.len = vv->len;

    n = ngx_http_prefix_aware_strategy_parse(&s);

    if (n == NGX_ERROR) {
        ngx_atomic_fetch_add(&pacf->shm->strategy_unknown, 1);

        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "prefix_aware: unknown strategy \"%V\" from \"%V\", "
                      "routed by \"%V\"", &s, &pacf->strategy_name,
                      &ngx_http_prefix_aware_strategies[pacf->strategy]);
        return;
    }

    pd->strategy = (ngx_uint_t) n;
}


/*
 * least_outstanding: the fewest in flight per unit of weight over all
 * workers among the servers below threshold, ties by smooth weighted round
 * robin (as requests without a key); random: weighted among the usable
 * servers below threshold; either, when every usable server is at
 * threshold, the least loaded of them
 */

ngx_int_t
ngx_http_prefix_aware_strategy_pick(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick)
{
    int                                rc;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;

    if (pd->strategy == NGX_HTTP_PA_STRATEGY_LEAST) {

        /*
         * per unit of weight the least loaded may be at threshold while
         * a lighter server is below it: those below come first
         */

        rc = pa_least_loaded((uint32_t) pacf->nservers,
                             (uint32_t) ngx_http_prefix_aware_least_start,
                             pacf->weights, pacf->current,
                             ngx_http_prefix_aware_strategy_below, pd, pick);
        rc = (rc == 0) ? 0 : 1;

    } else {
        if (ngx_http_prefix_aware_random_state == 0) {
            ngx_http_prefix_aware_random_state =
                ((uint64_t) ngx_random() << 32) ^ (uint64_t) ngx_random()
                ^ (uint64_t) ngx_pid;
        }

        rc = pa_random_pick((uint32_t) pacf->nservers, pacf->weights,
                            pacf->threshold,
                            &ngx_http_prefix_aware_random_state,
                            ngx_http_prefix_aware_probe, pd, pick);
    }

    if (rc == 1) {
        rc = pa_least_loaded((uint32_t) pacf->nservers,
                             (uint32_t) ngx_http_prefix_aware_least_start,
                             pacf->weights, pacf->current,
                             ngx_http_prefix_aware_probe, pd, pick);
    }

    ngx_http_prefix_aware_least_start++;

    if (rc != 0) {
        return NGX_DECLINED;
    }

    if (pd->keyed) {
        ngx_http_prefix_aware_strategy_home(pd, pick);
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                   "prefix_aware strategy %V: server %uD, %uL in flight",
                   &ngx_http_prefix_aware_strategies[pd->strategy],
                   pick->server, pick->inflight);

    return NGX_OK;
}


/* the probe, and a server at threshold counts as unusable */

static int
ngx_http_prefix_aware_strategy_below(void *ctx, uint32_t server,
    uint64_t *inflight)
{
    ngx_http_prefix_aware_peer_data_t  *pd = ctx;

    if (ngx_http_prefix_aware_probe(pd, server, inflight) != PA_SERVER_USABLE
        || *inflight >= pd->conf->threshold)
    {
        return PA_SERVER_UNUSABLE;
    }

    return PA_SERVER_USABLE;
}


/*
 * a keyed request's route is told against its home, the first server of
 * its key on the ring, as for the prefix strategy: "affinity" if it went
 * there, "spill" elsewhere while the home was usable, "failover" if not;
 * so the affinity ratios of the strategies compare
 */

static void
ngx_http_prefix_aware_strategy_home(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick)
{
    uint32_t                           home;
    uint64_t                           inflight;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;

    home = pacf->ring.points[pa_ring_find(&pacf->ring, pd->ring_key)].server;

    inflight = 0;
    pick->first_usable = (ngx_http_prefix_aware_probe(pd, home, &inflight)
                          == PA_SERVER_USABLE);
    pick->first_inflight = inflight;

    if (pick->server == home) {
        pick->route = PA_ROUTE_AFFINITY;

    } else {
        pick->route = pick->first_usable ? PA_ROUTE_SPILL : PA_ROUTE_FAILOVER;
    }
}


/* a server was taken: the counters by strategy */

void
ngx_http_prefix_aware_strategy_count(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick)
{
    ngx_http_prefix_aware_shm_server_t  *s;

    s = pd->conf->shm_server[pick->server];

    ngx_atomic_fetch_add(&s->strategy[pd->strategy][pick->route], 1);
    ngx_atomic_fetch_add(&pd->conf->shm->chosen_inflight[pd->strategy],
                         (ngx_atomic_int_t) pick->inflight);
}


/*
 * the figures by strategy, of the upstreams with "strategy=" (as those of
 * the index are of the upstreams with "index="): a page without them
 * stays as it was
 */

void
ngx_http_prefix_aware_strategy_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                           i, j, k, st, nup, any;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_shm_server_t  *s;

    pacf = pamcf->upstreams.elts;
    nup = pamcf->upstreams.nelts;
    any = 0;

    for (i = 0; i < nup; i++) {
        any |= pacf[i]->strategy_name.len ? 1 : 0;
    }

    if (!any) {
        return;
    }

    ngx_http_prefix_aware_family(w, "strategy_requests_total", "counter",
        "Requests sent to a server by the strategy that chose it, "
        "and route.");

    for (i = 0; i < nup; i++) {
        if (pacf[i]->strategy_name.len == 0) {
            continue;
        }

        for (j = 0; j < pacf[i]->nservers; j++) {
            s = pacf[i]->shm_server[j];

            for (st = 0; st < NGX_HTTP_PA_STRATEGIES; st++) {
                for (k = PA_ROUTE_AFFINITY; k < PA_ROUTE_N; k++) {
                    ngx_http_prefix_aware_printf(w,
                        "nginx_prefix_aware_strategy_requests_total"
                        "{upstream=\"%V\",server=\"%V\",strategy=\"%V\","
                        "route=\"%s\"} %uA\n",
                        &label[i][0], &label[i][1 + j],
                        &ngx_http_prefix_aware_strategies[st],
                        pa_route_name(k), s->strategy[st][k]);
                }
            }
        }
    }

    ngx_http_prefix_aware_family(w, "strategy_chosen_inflight_total",
        "counter",
        "Sum over requests of the in-flight count of the server a "
        "strategy chose, when it chose it.");

    for (i = 0; i < nup; i++) {
        if (pacf[i]->strategy_name.len == 0) {
            continue;
        }

        for (st = 0; st < NGX_HTTP_PA_STRATEGIES; st++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_strategy_chosen_inflight_total"
                "{upstream=\"%V\",strategy=\"%V\"} %uA\n",
                &label[i][0], &ngx_http_prefix_aware_strategies[st],
                pacf[i]->shm->chosen_inflight[st]);
        }
    }

    ngx_http_prefix_aware_family(w, "strategy_unknown_total", "counter",
        "Requests whose strategy variable named no strategy: they took "
        "the default.");

    for (i = 0; i < nup; i++) {
        if (pacf[i]->strategy_name.len == 0) {
            continue;
        }

        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_strategy_unknown_total{upstream=\"%V\"} %uA\n",
            &label[i][0], pacf[i]->shm->strategy_unknown);
    }
}


void
ngx_http_prefix_aware_strategy_json(ngx_http_prefix_aware_srv_conf_t *c,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                             j, k, st;
    ngx_atomic_uint_t                      n;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    if (c->strategy_name.len == 0) {
        return;
    }

    up = c->shm;

    /* a variable's name is a word of letters, digits and "_" */

    ngx_http_prefix_aware_printf(w,
        "      \"strategy\": \"%V\", \"strategy_default\": \"%V\", "
        "\"strategy_unknown\": %uA,\n      \"strategies\": {",
        c->strategy_var ? &c->strategy_name
                        : &ngx_http_prefix_aware_strategies[c->strategy],
        &ngx_http_prefix_aware_strategies[c->strategy],
        up->strategy_unknown);

    for (st = 0; st < NGX_HTTP_PA_STRATEGIES; st++) {
        n = 0;

        for (j = 0; j < c->nservers; j++) {
            for (k = PA_ROUTE_AFFINITY; k < PA_ROUTE_N; k++) {
                n += c->shm_server[j]->strategy[st][k];
            }
        }

        ngx_http_prefix_aware_printf(w,
            "%s\n        \"%V\": { \"requests\": %uA, "
            "\"chosen_inflight\": %uA }",
            st ? "," : "", &ngx_http_prefix_aware_strategies[st], n,
            up->chosen_inflight[st]);
    }

    ngx_http_prefix_aware_printf(w, "\n      },\n");
}


void
ngx_http_prefix_aware_strategy_json_server(
    ngx_http_prefix_aware_srv_conf_t *c, ngx_uint_t j,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                           k, st;
    ngx_http_prefix_aware_shm_server_t  *s;

    if (c->strategy_name.len == 0) {
        return;
    }

    s = c->shm_server[j];

    ngx_http_prefix_aware_printf(w, ",\n          \"strategies\": {");

    for (st = 0; st < NGX_HTTP_PA_STRATEGIES; st++) {
        ngx_http_prefix_aware_printf(w, "%s\n            \"%V\": {",
                                     st ? "," : "",
                                     &ngx_http_prefix_aware_strategies[st]);

        for (k = PA_ROUTE_AFFINITY; k < PA_ROUTE_N; k++) {
            ngx_http_prefix_aware_printf(w, "%s\"%s\": %uA",
                                         k == PA_ROUTE_AFFINITY ? " " : ", ",
                                         pa_route_name(k), s->strategy[st][k]);
        }

        ngx_http_prefix_aware_printf(w, " }");
    }

    ngx_http_prefix_aware_printf(w, "\n          }");
}
