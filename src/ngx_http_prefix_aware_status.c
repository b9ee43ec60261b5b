
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The status page: JSON, or Prometheus text for a scrape, or the page
 * for a person (status_html.c), written through the writer (writer.c).
 * Names from the configuration (upstream and server names, addresses)
 * may hold any byte a quoted nginx.conf string can: they are escaped for
 * the format they go into.
 */


#include "ngx_http_prefix_aware.h"


static const char *ngx_http_prefix_aware_state(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t i);
static void ngx_http_prefix_aware_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_writer_t *w);
static void ngx_http_prefix_aware_json(
    ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_writer_t *w);
static void ngx_http_prefix_aware_json_servers(
    ngx_http_prefix_aware_srv_conf_t *c, ngx_http_prefix_aware_writer_t *w);
static void ngx_http_prefix_aware_json_index(
    ngx_http_prefix_aware_srv_conf_t *c, ngx_http_prefix_aware_writer_t *w);
static ngx_atomic_uint_t ngx_http_prefix_aware_buckets(
    ngx_http_prefix_aware_writer_t *w, const char *name, ngx_str_t *up,
    ngx_atomic_t *bucket, ngx_uint_t n);
static void ngx_http_prefix_aware_prometheus_index(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w);


static ngx_http_prefix_aware_metric_t  ngx_http_prefix_aware_up_metrics[] = {
    { "id_total", "Requests with a tenant id (header or prompt_cache_key).",
      NGX_HTTP_PA_UP_ID },
    { "openai_fallbacks_total",
      "OpenAI requests keyed by raw bytes: their JSON was unusable.",
      NGX_HTTP_PA_UP_FALLBACK },
    { "unbuffered_total",
      "Requests whose body was not buffered when they were routed.",
      NGX_HTTP_PA_UP_UNBUFFERED },
    { "rejected_total", "Requests answered 400 for an invalid tenant id.",
      NGX_HTTP_PA_UP_REJECTED },
    { "invalid_cache_key_total",
      "OpenAI requests routed without their invalid prompt_cache_key.",
      NGX_HTTP_PA_UP_INVALID_PCK },
    { "keyed_total", "Requests that had a routing key.",
      NGX_HTTP_PA_UP_KEYED },
    { "first_choice_usable_total",
      "Keyed requests whose first-choice server was usable.",
      NGX_HTTP_PA_UP_FIRST_USABLE },
    { NULL, NULL, 0 }
};


static ngx_str_t  ngx_http_prefix_aware_accept = ngx_string("Accept");


/* prefix_aware_status: the location answers with the status page */

char *
ngx_http_prefix_aware_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_prefix_aware_status_handler;

    return NGX_CONF_OK;
}


ngx_int_t
ngx_http_prefix_aware_status_handler(ngx_http_request_t *r)
{
    ngx_int_t                           rc;
    ngx_str_t                           value;
    ngx_buf_t                          *b;
    ngx_uint_t                          prom;
    ngx_table_elt_t                    *accept;
    ngx_http_prefix_aware_writer_t      w;
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    pamcf = ngx_http_get_module_main_conf(r, ngx_http_prefix_aware_module);

    /* the servers of upstreams with "resolve" as they are now */

    ngx_http_prefix_aware_resolve_refresh(pamcf, r->connection->log);

    /*
     * a prometheus scrape asks for text/plain, a browser for text/html
     * (the page, which reads the json); curl and the rest get json
     */

    prom = 0;

    if (ngx_http_arg(r, (u_char *) "format", 6, &value) == NGX_OK) {
        if (value.len == 10
            && ngx_strncmp(value.data, "prometheus", 10) == 0)
        {
            prom = 1;

        } else if (value.len == 4 && ngx_strncmp(value.data, "html", 4) == 0) {
            return ngx_http_prefix_aware_status_html(r);

        } else if (value.len != 4
                   || ngx_strncmp(value.data, "json", 4) != 0)
        {
            return NGX_HTTP_BAD_REQUEST;
        }

    } else {
        accept = ngx_http_prefix_aware_header(r, &ngx_http_prefix_aware_accept,
                                              NULL);

        if (accept
            && ngx_strlcasestrn(accept->value.data,
                                accept->value.data + accept->value.len,
                                (u_char *) "text/html", 9 - 1)
               != NULL)
        {
            return ngx_http_prefix_aware_status_html(r);
        }

        if (accept
            && ngx_strlcasestrn(accept->value.data,
                                accept->value.data + accept->value.len,
                                (u_char *) "text/plain", 10 - 1)
               != NULL)
        {
            prom = 1;
        }
    }

    if (ngx_http_prefix_aware_writer_init(&w, r->pool) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (prom) {
        ngx_http_prefix_aware_prometheus(pamcf, &w);
        ngx_str_set(&r->headers_out.content_type,
                    "text/plain; version=0.0.4; charset=utf-8");

    } else {
        ngx_http_prefix_aware_json(pamcf, &w);
        ngx_str_set(&r->headers_out.content_type, "application/json");
    }

    if (w.error) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_aware status: %uz bytes, %s", w.size,
                   prom ? "prometheus" : "json");

    b = w.last->buf;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = w.size;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    return ngx_http_output_filter(r, w.out);
}


static const char *
ngx_http_prefix_aware_state(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_uint_t i)
{
    ngx_http_upstream_rr_peer_t  *peer;

    if (pacf->peer[0] == NULL) {
        return "up";
    }

    /* without a "zone" in the upstream, this is this worker's view */

    peer = pacf->peer[i];

    if (peer->down) {
        return "down";
    }

    if (peer->max_fails
        && peer->fails >= peer->max_fails
        && ngx_time() - peer->checked <= peer->fail_timeout)
    {
        return "failed";
    }

    return "up";
}


static void
ngx_http_prefix_aware_prometheus(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_str_t                             *up, *srv, **label;
    ngx_uint_t                             i, j, k, nup;
    const char                            *state;
    ngx_atomic_uint_t                      cum;
    ngx_http_prefix_aware_metric_t        *m;
    ngx_http_prefix_aware_srv_conf_t     **pacf, *c;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_shm_upstream_t  *sup;

    static const char  *states[] = { "up", "down", "failed" };

    pacf = pamcf->upstreams.elts;
    nup = pamcf->upstreams.nelts;

    /* label values escaped once: label[i][0] upstream, [1 + j] server */

    label = ngx_palloc(w->pool, nup * sizeof(ngx_str_t *));
    if (label == NULL) {
        w->error = 1;
        return;
    }

    for (i = 0; i < nup; i++) {
        c = pacf[i];

        label[i] = ngx_palloc(w->pool, (1 + c->nservers) * sizeof(ngx_str_t));
        if (label[i] == NULL) {
            w->error = 1;
            return;
        }

        ngx_http_prefix_aware_escape(w, &label[i][0], &c->upstream->host, 0);

        for (j = 0; j < c->nservers; j++) {
            ngx_http_prefix_aware_escape(w, &label[i][1 + j], &c->names[j], 0);
        }
    }

    ngx_http_prefix_aware_family(w, "length", "gauge",
        "Prefix length: body bytes, or characters for OpenAI bodies.");

    for (i = 0; i < nup; i++) {
        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_length{upstream=\"%V\"} %ui\n",
            &label[i][0], pacf[i]->length);
    }

    ngx_http_prefix_aware_family(w, "threshold", "gauge",
        "Requests in flight on a server before requests spill.");

    for (i = 0; i < nup; i++) {
        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_threshold{upstream=\"%V\"} %ui\n",
            &label[i][0], pacf[i]->threshold);
    }

    ngx_http_prefix_aware_family(w, "keys_total", "counter",
        "Requests by the source of their routing key.");

    for (i = 0; i < nup; i++) {
        for (k = 0; k < 3; k++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_keys_total"
                "{upstream=\"%V\",source=\"%V\"} %uA\n",
                &label[i][0], &ngx_http_prefix_aware_sources[k],
                pacf[i]->shm->counter[k]);
        }
    }

    ngx_http_prefix_aware_family(w, "keys_api_total", "counter",
        "Requests keyed by the JSON of an API, by the API.");

    for (i = 0; i < nup; i++) {
        for (k = 1; k < PA_OAI_API_N; k++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_keys_api_total"
                "{upstream=\"%V\",api=\"%V\"} %uA\n",
                &label[i][0], &ngx_http_prefix_aware_apis[k],
                pacf[i]->shm->counter[NGX_HTTP_PA_UP_API_CHAT + k - 1]);
        }
    }

    for (m = ngx_http_prefix_aware_up_metrics; m->name; m++) {
        ngx_http_prefix_aware_family(w, m->name, "counter", m->help);

        for (i = 0; i < nup; i++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_%s{upstream=\"%V\"} %uA\n",
                m->name, &label[i][0], pacf[i]->shm->counter[m->counter]);
        }
    }

    ngx_http_prefix_aware_family(w, "first_choice_inflight", "histogram",
        "Requests in flight on the first choice when a keyed request "
        "was routed.");

    for (i = 0; i < nup; i++) {
        sup = pacf[i]->shm;
        up = &label[i][0];

        cum = ngx_http_prefix_aware_buckets(w, "first_choice_inflight", up,
                                            sup->hist,
                                            NGX_HTTP_PREFIX_AWARE_HIST);

        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_first_choice_inflight_sum"
            "{upstream=\"%V\"} %uA\n"
            "nginx_prefix_aware_first_choice_inflight_count"
            "{upstream=\"%V\"} %uA\n",
            up, sup->counter[NGX_HTTP_PA_UP_HIST_SUM], up, cum);
    }

    ngx_http_prefix_aware_prometheus_index(pamcf, label, w);

    ngx_http_prefix_aware_family(w, "server_weight", "gauge",
        "Configured weight of a server.");

    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_server_weight"
                "{upstream=\"%V\",server=\"%V\"} %uD\n",
                &label[i][0], &label[i][1 + j], pacf[i]->weights[j]);
        }
    }

    ngx_http_prefix_aware_family(w, "server_state", "gauge",
        "1 for the state a server is in: up, down or failed.");

    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            state = ngx_http_prefix_aware_state(pacf[i], j);

            for (k = 0; k < 3; k++) {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_server_state"
                    "{upstream=\"%V\",server=\"%V\",state=\"%s\"} %d\n",
                    &label[i][0], &label[i][1 + j], states[k],
                    states[k] == state ? 1 : 0);
            }
        }
    }

    ngx_http_prefix_aware_family(w, "server_inflight", "gauge",
        "Requests in flight on a server, over all workers.");

    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_server_inflight"
                "{upstream=\"%V\",server=\"%V\"} %uA\n",
                &label[i][0], &label[i][1 + j],
                pacf[i]->shm_server[j]->inflight);
        }
    }

    ngx_http_prefix_aware_family(w, "server_requests_total", "counter",
        "Requests sent to a server, retries included.");

    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_server_requests_total"
                "{upstream=\"%V\",server=\"%V\"} %uA\n",
                &label[i][0], &label[i][1 + j],
                pacf[i]->shm_server[j]->requests);
        }
    }

    ngx_http_prefix_aware_family(w, "server_routed_total", "counter",
        "Requests sent to a server by why it was chosen.");

    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            s = pacf[i]->shm_server[j];
            srv = &label[i][1 + j];

            for (k = PA_ROUTE_AFFINITY; k < PA_ROUTE_N; k++) {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_server_routed_total"
                    "{upstream=\"%V\",server=\"%V\",route=\"%s\"} %uA\n",
                    &label[i][0], srv, pa_route_name(k), s->route[k]);
            }
        }
    }

    ngx_http_prefix_aware_strategy_prometheus(pamcf, label, w);
    ngx_http_prefix_aware_models_prometheus(pamcf, w, label);
    ngx_http_prefix_aware_engine_prometheus(pamcf, label, w);
    ngx_http_prefix_aware_feedback_prometheus(pamcf, label, w);
    ngx_http_prefix_aware_sync_prometheus(pamcf, label, w);
    ngx_http_prefix_aware_sync_prometheus_socket(pamcf, label, w);
    ngx_http_prefix_aware_state_prometheus(pamcf, label, w);
    ngx_http_prefix_aware_queue_prometheus(pamcf, label, w);
}


/* laid out as in docs/directives.md: an upstream's figures a few a line */

static void
ngx_http_prefix_aware_json(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_str_t                              name, *src;
    ngx_uint_t                             i, k;
    ngx_http_prefix_aware_metric_t        *m;
    ngx_http_prefix_aware_srv_conf_t     **pacf, *c;
    ngx_http_prefix_aware_zone_usage_t     zone;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    static const char  *formats[] = { "auto", "body", "openai" };

    pacf = pamcf->upstreams.elts;
    src = ngx_http_prefix_aware_sources;

    ngx_http_prefix_aware_zone_usage(pamcf, &zone);

    ngx_http_prefix_aware_printf(w, "{\n  \"version\": 1,\n"
        "  \"zone\": { \"size\": %uz, \"pages\": %ui, "
        "\"free_pages\": %ui,\n"
        "            \"upstreams\": %ui, \"servers\": %ui, "
        "\"configurations\": %ui, \"workers\": %ui },\n"
        "  \"upstreams\": {",
        zone.size, zone.pages, zone.free, zone.upstreams, zone.servers,
        zone.confs, zone.workers);

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        c = pacf[i];
        up = c->shm;

        ngx_http_prefix_aware_escape(w, &name, &c->upstream->host, 1);

        ngx_http_prefix_aware_printf(w,
            "%s\n    \"%V\": {\n"
            "      \"length\": %ui, \"threshold\": %ui, \"format\": \"%s\",\n"
            "      \"keys\": { \"%V\": %uA, \"%V\": %uA, \"%V\": %uA },\n"
            "      \"apis\": { \"%V\": %uA, \"%V\": %uA, \"%V\": %uA, "
            "\"%V\": %uA },\n",
            i ? "," : "", &name, c->length, c->threshold, formats[c->format],
            &src[0], up->counter[0], &src[1], up->counter[1],
            &src[2], up->counter[2],
            &ngx_http_prefix_aware_apis[1],
            up->counter[NGX_HTTP_PA_UP_API_CHAT],
            &ngx_http_prefix_aware_apis[2],
            up->counter[NGX_HTTP_PA_UP_API_COMPLETIONS],
            &ngx_http_prefix_aware_apis[3],
            up->counter[NGX_HTTP_PA_UP_API_RESPONSES],
            &ngx_http_prefix_aware_apis[4],
            up->counter[NGX_HTTP_PA_UP_API_MESSAGES]);

        /* the Prometheus names without "_total" */

        for (m = ngx_http_prefix_aware_up_metrics; m->name; m++) {
            ngx_http_prefix_aware_printf(w, "      \"%*s\": %uA,\n",
                                         ngx_strlen(m->name) - 6, m->name,
                                         up->counter[m->counter]);
        }

        ngx_http_prefix_aware_strategy_json(c, w);

        ngx_http_prefix_aware_printf(w, "      \"first_choice_inflight\": {\n"
                                        "        \"buckets\": [");

        for (k = 0; k < NGX_HTTP_PREFIX_AWARE_HIST; k++) {
            ngx_http_prefix_aware_printf(w, "%s%uA", k ? ", " : " ",
                                         up->hist[k]);
        }

        ngx_http_prefix_aware_printf(w, " ],\n        \"le\": [");

        for (k = 0; k < NGX_HTTP_PREFIX_AWARE_HIST - 1; k++) {
            ngx_http_prefix_aware_printf(w, "%s%ui", k ? ", " : " ",
                                         k ? (ngx_uint_t) 1 << (k - 1) : 0);
        }

        ngx_http_prefix_aware_printf(w, ", \"+Inf\" ],\n"
                                        "        \"sum\": %uA\n      },\n",
                                     up->counter[NGX_HTTP_PA_UP_HIST_SUM]);

        if (c->index_size) {
            ngx_http_prefix_aware_json_index(c, w);
        }

        if (c->models) {
            ngx_http_prefix_aware_models_json(c, w);
        }

        ngx_http_prefix_aware_engine_json(c, w);
        ngx_http_prefix_aware_queue_json(c, w);
        ngx_http_prefix_aware_sync_json(c, w);
        ngx_http_prefix_aware_sync_json_socket(c, w);
        ngx_http_prefix_aware_state_json(c, w);

        ngx_http_prefix_aware_printf(w, "      \"servers\": [");

        ngx_http_prefix_aware_json_servers(c, w);

        ngx_http_prefix_aware_printf(w, "\n      ]\n    }");
    }

    ngx_http_prefix_aware_printf(w, "\n  }\n}\n");
}


/* routing v2: how requests were placed, how deep they matched, the index */

static void
ngx_http_prefix_aware_json_index(ngx_http_prefix_aware_srv_conf_t *c,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                             k;
    pa_index_stats_t                       st;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    up = c->shm;

    pa_index_stats(&c->index, &st);

    ngx_http_prefix_aware_printf(w,
        "      \"index\": {\n"
        "        \"size\": %uz, \"block\": %ui, \"stride\": %ui, "
        "\"balance\": %ui.%02ui, "
        "\"capacity\": %ui, \"cold\": \"%s\", \"place\": \"%s\", "
        "\"cap\": \"%s\", \"match\": %ui, \"prefill\": \"%s\", "
        "\"overload\": \"%s\",\n"
        "        \"entries\": %uL, \"used\": %uL, \"evictions\": %uL, "
        "\"recorded\": %uL, \"busy\": %uL, \"recovered\": %uL,\n"
        "        \"placed\": { \"match\": %uA, \"cold\": %uA, "
        "\"spill\": %uA, \"least\": %uA },\n"
        "        \"depth\": { \"buckets\": [",
        c->index_size, c->block, c->stride, c->balance / 100, c->balance % 100,
        c->capacity,
        c->cold == PA_COLD_RING ? "ring"
        : c->cold == PA_COLD_LEAST ? "least"
        : c->cold == PA_COLD_AUTO ? "auto" : "two",
        c->place == PA_PLACE_COST ? "cost" : "deepest",
        c->cap == PA_CAP_COST ? "cost"
        : c->cap == PA_CAP_SAVED ? "saved" : "hard",
        c->match,
        c->prefill_end ? "end" : "first",
        c->overload ? "holder" : "least",
        st.capacity, st.entries_used, st.evictions, st.recorded, st.busy,
        st.recovered,
        up->placed[PA_CHOICE_MATCH], up->placed[PA_CHOICE_COLD],
        up->placed[PA_CHOICE_SPILL], up->placed[PA_CHOICE_LEAST]);

    for (k = 0; k < NGX_HTTP_PREFIX_AWARE_DEPTHS; k++) {
        ngx_http_prefix_aware_printf(w, "%s%uA", k ? ", " : " ",
                                     up->depth[k]);
    }

    ngx_http_prefix_aware_printf(w, " ],\n                   \"le\": [");

    for (k = 0; k < NGX_HTTP_PREFIX_AWARE_DEPTHS - 1; k++) {
        ngx_http_prefix_aware_printf(w, "%s%ui", k ? ", " : " ",
                                     k ? (ngx_uint_t) 1 << (k - 1) : 0);
    }

    ngx_http_prefix_aware_printf(w, ", \"+Inf\" ] }\n      },\n");
}


/* a histogram's buckets, bounds 0, 1, 2, 4, ... +Inf; returns the count */

static ngx_atomic_uint_t
ngx_http_prefix_aware_buckets(ngx_http_prefix_aware_writer_t *w,
    const char *name, ngx_str_t *up, ngx_atomic_t *bucket, ngx_uint_t n)
{
    ngx_uint_t         k;
    ngx_atomic_uint_t  cum;

    cum = 0;

    for (k = 0; k < n; k++) {
        cum += bucket[k];

        if (k == n - 1) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_%s_bucket"
                "{upstream=\"%V\",le=\"+Inf\"} %uA\n", name, up, cum);

        } else {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_%s_bucket"
                "{upstream=\"%V\",le=\"%ui\"} %uA\n",
                name, up, k ? (ngx_uint_t) 1 << (k - 1) : 0, cum);
        }
    }

    return cum;
}


static void
ngx_http_prefix_aware_prometheus_index(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                             i, k, nup, any;
    ngx_str_t                             *up;
    pa_index_stats_t                       st;
    ngx_atomic_uint_t                      cum;
    ngx_http_prefix_aware_srv_conf_t     **pacf;
    ngx_http_prefix_aware_shm_upstream_t  *sup;

    static const char  *how[] = { "none", "match", "cold", "spill", "least" };

    pacf = pamcf->upstreams.elts;
    nup = pamcf->upstreams.nelts;
    any = 0;

    for (i = 0; i < nup; i++) {
        any |= pacf[i]->index_size ? 1 : 0;
    }

    if (!any) {
        return;
    }

    ngx_http_prefix_aware_family(w, "placed_total", "counter",
        "Requests by how routing v2 placed them: deepest match, cold, "
        "spilled from a match over a bound, least work.");

    for (i = 0; i < nup; i++) {
        if (pacf[i]->index_size == 0) {
            continue;
        }

        for (k = PA_CHOICE_MATCH; k <= PA_CHOICE_LEAST; k++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_placed_total"
                "{upstream=\"%V\",how=\"%s\"} %uA\n",
                &label[i][0], how[k], pacf[i]->shm->placed[k]);
        }
    }

    ngx_http_prefix_aware_family(w, "matched_depth", "histogram",
        "Blocks of a request's prefix the chosen server held.");

    for (i = 0; i < nup; i++) {
        if (pacf[i]->index_size == 0) {
            continue;
        }

        sup = pacf[i]->shm;
        up = &label[i][0];

        cum = ngx_http_prefix_aware_buckets(w, "matched_depth", up,
                                            sup->depth,
                                            NGX_HTTP_PREFIX_AWARE_DEPTHS);

        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_matched_depth_count{upstream=\"%V\"} %uA\n",
            up, cum);
    }

    ngx_http_prefix_aware_family(w, "index_entries", "gauge",
        "Block hashes the prefix index can hold, and holds (state).");

    for (i = 0; i < nup; i++) {
        if (pacf[i]->index_size == 0) {
            continue;
        }

        pa_index_stats(&pacf[i]->index, &st);

        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_index_entries"
            "{upstream=\"%V\",state=\"capacity\"} %uL\n"
            "nginx_prefix_aware_index_entries"
            "{upstream=\"%V\",state=\"used\"} %uL\n",
            &label[i][0], st.capacity, &label[i][0], st.entries_used);
    }

    ngx_http_prefix_aware_family(w, "index_evictions_total", "counter",
        "Index entries with a valid holder pushed out for room.");

    for (i = 0; i < nup; i++) {
        if (pacf[i]->index_size == 0) {
            continue;
        }

        pa_index_stats(&pacf[i]->index, &st);

        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_index_evictions_total"
            "{upstream=\"%V\"} %uL\n", &label[i][0], st.evictions);
    }
}


static void
ngx_http_prefix_aware_json_servers(ngx_http_prefix_aware_srv_conf_t *c,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_str_t                            name, addr;
    ngx_uint_t                           j, k;
    ngx_http_prefix_aware_shm_server_t  *s;

    for (j = 0; j < c->nservers; j++) {
        s = c->shm_server[j];

        ngx_http_prefix_aware_escape(w, &name, &c->names[j], 1);

        ngx_http_prefix_aware_printf(w, "%s\n        { \"server\": \"%V\",",
                                     j ? "," : "", &name);

        /* the address connected to, once this process has the peers */

        if (c->peer[j]) {
            ngx_http_prefix_aware_escape(w, &addr, &c->peer[j]->name, 1);
            ngx_http_prefix_aware_printf(w, " \"address\": \"%V\",", &addr);
        }

        ngx_http_prefix_aware_printf(w,
            "\n          \"weight\": %uD, \"state\": \"%s\","
            " \"inflight\": %uA, \"requests\": %uA,\n          ",
            c->weights[j], ngx_http_prefix_aware_state(c, j),
            s->inflight, s->requests);

        /* the route "state" beside the server's "state": "state_routed" */

        for (k = PA_ROUTE_AFFINITY; k < PA_ROUTE_N; k++) {
            ngx_http_prefix_aware_printf(w, "%s\"%s%s\": %uA",
                                         k == PA_ROUTE_AFFINITY ? "" : ", ",
                                         pa_route_name(k),
                                         k == PA_ROUTE_STATE ? "_routed" : "",
                                         s->route[k]);
        }

        if (c->index_size) {
            ngx_http_prefix_aware_printf(w, ", \"work\": %uA", s->work);
        }

        ngx_http_prefix_aware_strategy_json_server(c, j, w);
        ngx_http_prefix_aware_engine_json_server(c, j, w);
        ngx_http_prefix_aware_feedback_json_server(c, j, w);
        ngx_http_prefix_aware_sync_json_server(c, j, w);

        ngx_http_prefix_aware_printf(w, " }");
    }
}
