
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The status page: JSON, or Prometheus text for a scrape.
 */


#include "ngx_http_prefix_aware.h"

#include "pa_yajl.h"

#include <yajl/yajl_gen.h>


static const char *ngx_http_prefix_aware_state(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t i);
static ngx_int_t ngx_http_prefix_aware_prometheus(ngx_http_request_t *r,
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_chain_t *out);
static ngx_int_t ngx_http_prefix_aware_json(ngx_http_request_t *r,
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_chain_t *out);
static yajl_gen ngx_http_prefix_aware_json_gen(
    ngx_http_prefix_aware_main_conf_t *pamcf, pa_yajl_mem_t *mem);
static void ngx_http_prefix_aware_gen_uint(yajl_gen g, ngx_atomic_uint_t v);
static void *ngx_http_prefix_aware_json_alloc(void *ctx, size_t size);


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
    { "keyed_total", "Requests that had a routing key.",
      NGX_HTTP_PA_UP_KEYED },
    { "first_choice_usable_total",
      "Keyed requests whose first-choice server was usable.",
      NGX_HTTP_PA_UP_FIRST_USABLE },
    { NULL, NULL, 0 }
};


static ngx_str_t  ngx_http_prefix_aware_accept = ngx_string("Accept");


ngx_int_t
ngx_http_prefix_aware_status_handler(ngx_http_request_t *r)
{
    ngx_int_t                           rc;
    ngx_str_t                           value;
    ngx_uint_t                          prom;
    ngx_chain_t                         out;
    ngx_table_elt_t                    *accept;
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    pamcf = ngx_http_get_module_main_conf(r, ngx_http_prefix_aware_module);

    /* a prometheus scrape asks for text/plain; browsers and curl get json */

    prom = 0;

    if (ngx_http_arg(r, (u_char *) "format", 6, &value) == NGX_OK) {
        if (value.len == 10
            && ngx_strncmp(value.data, "prometheus", 10) == 0)
        {
            prom = 1;

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
                                (u_char *) "text/plain", 10 - 1)
               != NULL)
        {
            prom = 1;
        }
    }

    if (prom) {
        rc = ngx_http_prefix_aware_prometheus(r, pamcf, &out);
        ngx_str_set(&r->headers_out.content_type,
                    "text/plain; version=0.0.4; charset=utf-8");

    } else {
        rc = ngx_http_prefix_aware_json(r, pamcf, &out);
        ngx_str_set(&r->headers_out.content_type, "application/json");
    }

    if (rc != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = out.buf->last - out.buf->pos;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    return ngx_http_output_filter(r, &out);
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


static ngx_int_t
ngx_http_prefix_aware_prometheus(ngx_http_request_t *r,
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_chain_t *out)
{
    size_t                                 size, names;
    u_char                                *p;
    ngx_buf_t                             *b;
    ngx_str_t                             *up, *srv;
    ngx_uint_t                             i, j, k, nup, nsrv;
    ngx_atomic_uint_t                      cum;
    const char                            *state;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_srv_conf_t     **pacf;
    ngx_http_prefix_aware_metric_t        *m;
    ngx_http_prefix_aware_shm_upstream_t  *sup;

    static const char  *states[] = { "up", "down", "failed" };

    pacf = pamcf->upstreams.elts;
    nup = pamcf->upstreams.nelts;

    nsrv = 0;
    names = 0;

    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            nsrv++;
            names += pacf[i]->upstream->host.len + pacf[i]->names[j].len;
        }

        names += pacf[i]->upstream->host.len;
    }

    /* lines of at most 128 bytes besides the names they carry */

    size = 64 * 256 + nup * 32 * 128 + nsrv * 12 * 128 + 32 * names;

    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = b->last;

#define PA_FAMILY(name, type, help)                                           \
    p = ngx_sprintf(p, "# HELP nginx_prefix_aware_" name " " help "\n"       \
                       "# TYPE nginx_prefix_aware_" name " " type "\n")

#define PA_UP_LABELS  "{upstream=\"%V\""

#define PA_SRV_LABELS "{upstream=\"%V\",server=\"%V\""

    PA_FAMILY("length", "gauge",
              "Prefix length: body bytes, or characters for OpenAI bodies.");
    for (i = 0; i < nup; i++) {
        p = ngx_sprintf(p, "nginx_prefix_aware_length" PA_UP_LABELS "} %ui\n",
                        &pacf[i]->upstream->host, pacf[i]->length);
    }

    PA_FAMILY("threshold", "gauge",
              "Requests in flight on a server before requests spill.");
    for (i = 0; i < nup; i++) {
        p = ngx_sprintf(p, "nginx_prefix_aware_threshold" PA_UP_LABELS
                        "} %ui\n",
                        &pacf[i]->upstream->host, pacf[i]->threshold);
    }

    PA_FAMILY("keys_total", "counter",
              "Requests by the source of their routing key.");
    for (i = 0; i < nup; i++) {
        for (k = 0; k < 3; k++) {
            p = ngx_sprintf(p, "nginx_prefix_aware_keys_total" PA_UP_LABELS
                            ",source=\"%V\"} %uA\n",
                            &pacf[i]->upstream->host,
                            &ngx_http_prefix_aware_sources[k],
                            pacf[i]->shm->counter[k]);
        }
    }

    for (m = ngx_http_prefix_aware_up_metrics; m->name; m++) {
        p = ngx_sprintf(p, "# HELP nginx_prefix_aware_%s %s\n"
                           "# TYPE nginx_prefix_aware_%s counter\n",
                        m->name, m->help, m->name);

        for (i = 0; i < nup; i++) {
            p = ngx_sprintf(p, "nginx_prefix_aware_%s" PA_UP_LABELS
                            "} %uA\n", m->name, &pacf[i]->upstream->host,
                            pacf[i]->shm->counter[m->counter]);
        }
    }

    PA_FAMILY("first_choice_inflight", "histogram",
              "Requests in flight on the first choice when a keyed request "
              "was routed.");
    for (i = 0; i < nup; i++) {
        sup = pacf[i]->shm;
        up = &pacf[i]->upstream->host;
        cum = 0;

        for (k = 0; k < NGX_HTTP_PREFIX_AWARE_HIST; k++) {
            cum += sup->hist[k];

            if (k == NGX_HTTP_PREFIX_AWARE_HIST - 1) {
                p = ngx_sprintf(p, "nginx_prefix_aware_first_choice_inflight"
                                "_bucket" PA_UP_LABELS ",le=\"+Inf\"} %uA\n",
                                up, cum);

            } else {
                p = ngx_sprintf(p, "nginx_prefix_aware_first_choice_inflight"
                                "_bucket" PA_UP_LABELS ",le=\"%ui\"} %uA\n",
                                up, k ? (ngx_uint_t) 1 << (k - 1) : 0, cum);
            }
        }

        p = ngx_sprintf(p, "nginx_prefix_aware_first_choice_inflight_sum"
                        PA_UP_LABELS "} %uA\n"
                        "nginx_prefix_aware_first_choice_inflight_count"
                        PA_UP_LABELS "} %uA\n",
                        up, sup->counter[NGX_HTTP_PA_UP_HIST_SUM], up, cum);
    }

    PA_FAMILY("server_weight", "gauge", "Configured weight of a server.");
    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            p = ngx_sprintf(p, "nginx_prefix_aware_server_weight"
                            PA_SRV_LABELS "} %uD\n",
                            &pacf[i]->upstream->host, &pacf[i]->names[j],
                            pacf[i]->weights[j]);
        }
    }

    PA_FAMILY("server_state", "gauge",
              "1 for the state a server is in: up, down or failed.");
    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            state = ngx_http_prefix_aware_state(pacf[i], j);

            for (k = 0; k < 3; k++) {
                p = ngx_sprintf(p, "nginx_prefix_aware_server_state"
                                PA_SRV_LABELS ",state=\"%s\"} %d\n",
                                &pacf[i]->upstream->host, &pacf[i]->names[j],
                                states[k], states[k] == state ? 1 : 0);
            }
        }
    }

    PA_FAMILY("server_inflight", "gauge",
              "Requests in flight on a server, over all workers.");
    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            p = ngx_sprintf(p, "nginx_prefix_aware_server_inflight"
                            PA_SRV_LABELS "} %uA\n",
                            &pacf[i]->upstream->host, &pacf[i]->names[j],
                            pacf[i]->shm_server[j]->inflight);
        }
    }

    PA_FAMILY("server_requests_total", "counter",
              "Requests sent to a server, retries included.");
    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            p = ngx_sprintf(p, "nginx_prefix_aware_server_requests_total"
                            PA_SRV_LABELS "} %uA\n",
                            &pacf[i]->upstream->host, &pacf[i]->names[j],
                            pacf[i]->shm_server[j]->requests);
        }
    }

    PA_FAMILY("server_routed_total", "counter",
              "Requests sent to a server by why it was chosen.");
    for (i = 0; i < nup; i++) {
        for (j = 0; j < pacf[i]->nservers; j++) {
            s = pacf[i]->shm_server[j];
            srv = &pacf[i]->names[j];

            for (k = PA_ROUTE_AFFINITY; k <= PA_ROUTE_NO_KEY; k++) {
                p = ngx_sprintf(p, "nginx_prefix_aware_server_routed_total"
                                PA_SRV_LABELS ",route=\"%s\"} %uA\n",
                                &pacf[i]->upstream->host, srv,
                                pa_route_name(k), s->route[k]);
            }
        }
    }

#undef PA_FAMILY
#undef PA_UP_LABELS
#undef PA_SRV_LABELS

    b->last = p;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out->buf = b;
    out->next = NULL;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_json(ngx_http_request_t *r,
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_chain_t *out)
{
    size_t          len;
    ngx_buf_t      *b;
    yajl_gen        g;
    jmp_buf         jmp;
    pa_yajl_mem_t   mem;
    const u_char   *json;

    mem.alloc.alloc = ngx_http_prefix_aware_json_alloc;
    mem.alloc.ctx = r->pool;
    mem.jmp = &jmp;

    if (setjmp(jmp)) {
        /* the pool is out of memory */
        return NGX_ERROR;
    }

    g = ngx_http_prefix_aware_json_gen(pamcf, &mem);

    if (yajl_gen_get_buf(g, &json, &len) != yajl_gen_status_ok) {
        return NGX_ERROR;
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    /* the buffer is in the pool and lives as long as the request */

    b->pos = (u_char *) json;
    b->last = (u_char *) json + len;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out->buf = b;
    out->next = NULL;

    return NGX_OK;
}


#define pa_gen_str(g, s)                                                      \
    yajl_gen_string(g, (const unsigned char *) s, sizeof(s) - 1)

#define pa_gen_ngx_str(g, s)                                                  \
    yajl_gen_string(g, (const unsigned char *) (s)->data, (s)->len)

#define pa_gen_uint(g, key, v)                                                \
    pa_gen_str(g, key);                                                       \
    ngx_http_prefix_aware_gen_uint(g, v)


static yajl_gen
ngx_http_prefix_aware_json_gen(ngx_http_prefix_aware_main_conf_t *pamcf,
    pa_yajl_mem_t *mem)
{
    ngx_uint_t                             i, j, k;
    const char                            *s;
    yajl_gen                               g;
    yajl_alloc_funcs                       funcs;
    ngx_http_prefix_aware_metric_t        *m;
    ngx_http_prefix_aware_srv_conf_t     **pacf, *c;
    ngx_http_prefix_aware_zone_usage_t     zone;
    ngx_http_prefix_aware_shm_server_t    *srv;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    static const char  *formats[] = { "auto", "body", "openai" };

    pa_yajl_funcs(&funcs, mem);

    g = yajl_gen_alloc(&funcs);
    yajl_gen_config(g, yajl_gen_beautify, 1);

    pacf = pamcf->upstreams.elts;

    yajl_gen_map_open(g);
    pa_gen_uint(g, "version", 1);

    ngx_http_prefix_aware_zone_usage(pamcf, &zone);

    pa_gen_str(g, "zone");
    yajl_gen_map_open(g);
    pa_gen_uint(g, "size", zone.size);
    pa_gen_uint(g, "pages", zone.pages);
    pa_gen_uint(g, "free_pages", zone.free);
    pa_gen_uint(g, "upstreams", zone.upstreams);
    pa_gen_uint(g, "servers", zone.servers);
    pa_gen_uint(g, "configurations", zone.confs);
    pa_gen_uint(g, "workers", zone.workers);
    yajl_gen_map_close(g);

    pa_gen_str(g, "upstreams");
    yajl_gen_map_open(g);

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        c = pacf[i];
        up = c->shm;

        pa_gen_ngx_str(g, &c->upstream->host);
        yajl_gen_map_open(g);

        pa_gen_uint(g, "length", c->length);
        pa_gen_uint(g, "threshold", c->threshold);
        pa_gen_str(g, "format");
        yajl_gen_string(g, (const unsigned char *) formats[c->format],
                        ngx_strlen(formats[c->format]));

        pa_gen_str(g, "keys");
        yajl_gen_map_open(g);
        for (k = 0; k < 3; k++) {
            pa_gen_ngx_str(g, &ngx_http_prefix_aware_sources[k]);
            ngx_http_prefix_aware_gen_uint(g, up->counter[k]);
        }
        yajl_gen_map_close(g);

        for (m = ngx_http_prefix_aware_up_metrics; m->name; m++) {
            yajl_gen_string(g, (const unsigned char *) m->name,
                            ngx_strlen(m->name) - 6);     /* "_total" */
            ngx_http_prefix_aware_gen_uint(g, up->counter[m->counter]);
        }

        pa_gen_str(g, "first_choice_inflight");
        yajl_gen_map_open(g);
        pa_gen_str(g, "buckets");
        yajl_gen_array_open(g);
        for (k = 0; k < NGX_HTTP_PREFIX_AWARE_HIST; k++) {
            ngx_http_prefix_aware_gen_uint(g, up->hist[k]);
        }
        yajl_gen_array_close(g);
        pa_gen_str(g, "le");
        yajl_gen_array_open(g);
        for (k = 0; k < NGX_HTTP_PREFIX_AWARE_HIST - 1; k++) {
            ngx_http_prefix_aware_gen_uint(g, k ? 1 << (k - 1) : 0);
        }
        pa_gen_str(g, "+Inf");
        yajl_gen_array_close(g);
        pa_gen_uint(g, "sum", up->counter[NGX_HTTP_PA_UP_HIST_SUM]);
        yajl_gen_map_close(g);

        pa_gen_str(g, "servers");
        yajl_gen_array_open(g);

        for (j = 0; j < c->nservers; j++) {
            srv = c->shm_server[j];

            yajl_gen_map_open(g);
            pa_gen_str(g, "server");
            pa_gen_ngx_str(g, &c->names[j]);

            if (c->peer[j]) {
                pa_gen_str(g, "address");
                pa_gen_ngx_str(g, &c->peer[j]->name);
            }

            pa_gen_uint(g, "weight", c->weights[j]);

            s = ngx_http_prefix_aware_state(c, j);
            pa_gen_str(g, "state");
            yajl_gen_string(g, (const unsigned char *) s, ngx_strlen(s));

            pa_gen_uint(g, "inflight", srv->inflight);
            pa_gen_uint(g, "requests", srv->requests);

            for (k = PA_ROUTE_AFFINITY; k <= PA_ROUTE_NO_KEY; k++) {
                s = pa_route_name(k);
                yajl_gen_string(g, (const unsigned char *) s, ngx_strlen(s));
                ngx_http_prefix_aware_gen_uint(g, srv->route[k]);
            }

            yajl_gen_map_close(g);
        }

        yajl_gen_array_close(g);
        yajl_gen_map_close(g);
    }

    yajl_gen_map_close(g);
    yajl_gen_map_close(g);

    return g;
}


static void
ngx_http_prefix_aware_gen_uint(yajl_gen g, ngx_atomic_uint_t v)
{
    u_char  buf[NGX_ATOMIC_T_LEN];

    yajl_gen_number(g, (const char *) buf, ngx_sprintf(buf, "%uA", v) - buf);
}


static void *
ngx_http_prefix_aware_json_alloc(void *ctx, size_t size)
{
    return ngx_palloc(ctx, size);
}
