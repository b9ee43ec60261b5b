
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The models of an upstream on the status page: each model's set
 * (declared or discovered, when a server last listed it), its requests
 * and those that found no usable server, and the servers' answers to
 * GET /v1/models; in the JSON and as Prometheus metrics.
 */


#include "ngx_http_prefix_aware.h"


static uintptr_t *ngx_http_prefix_aware_models_set(
    ngx_http_prefix_aware_models_t *m, ngx_uint_t i, ngx_uint_t *declared);


/* "models" of an upstream in the status page's JSON */

void
ngx_http_prefix_aware_models_json(ngx_http_prefix_aware_srv_conf_t *c,
    ngx_http_prefix_aware_writer_t *w)
{
    uintptr_t                            *set;
    ngx_str_t                             name, e;
    ngx_uint_t                            i, j, k, n, declared;
    ngx_http_prefix_aware_models_t       *m;
    ngx_http_prefix_aware_shm_model_t    *s;
    ngx_http_prefix_aware_models_shm_t   *sh;
    ngx_http_prefix_aware_shm_mserver_t  *rec;

    m = c->models;
    sh = m->sh;

    if (m->discover && (!m->built || m->version != sh->version)) {
        ngx_http_prefix_aware_models_build(m);
    }

    ngx_http_prefix_aware_printf(w,
        "      \"models\": { \"discover\": %s, \"interval_ms\": %M, "
        "\"fallback\": \"%s\",\n"
        "        \"unknown\": %uA, \"full\": %uA,\n"
        "        \"list\": [",
        m->discover ? "true" : "false", m->interval,
        m->fallback ? "all" : "none", sh->unknown, sh->full);

    n = 0;

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        s = &sh->model[i];

        if (s->hash == 0) {
            continue;
        }

        set = ngx_http_prefix_aware_models_set(m, i, &declared);

        name.data = s->name;
        name.len = ngx_min(s->len, PA_MODELS_ID_MAX);
        ngx_http_prefix_aware_escape(w, &e, &name, 1);

        ngx_http_prefix_aware_printf(w,
            "%s\n          { \"name\": \"%V\", \"set\": \"%s\", "
            "\"requests\": %uA, \"no_server\": %uA, \"last_seen\": %T,\n"
            "            \"servers\": [",
            n++ ? "," : "", &e,
            declared ? "declared" : (set ? "discovered" : "none"),
            s->requests, s->noserver, s->seen);

        for (j = 0, k = 0; set && j < c->nservers; j++) {
            if (ngx_http_prefix_aware_bit(set, j)) {
                ngx_http_prefix_aware_escape(w, &e, &c->names[j], 1);
                ngx_http_prefix_aware_printf(w, "%s\"%V\"", k++ ? ", " : " ",
                                             &e);
            }
        }

        ngx_http_prefix_aware_printf(w, " ] }");
    }

    ngx_http_prefix_aware_printf(w, "\n        ],\n        \"servers\": [");

    n = 0;

    for (rec = sh->servers; m->discover && rec; rec = rec->next) {
        ngx_http_prefix_aware_escape(w, &e, &rec->name, 1);

        ngx_http_prefix_aware_printf(w,
            "%s\n          { \"server\": \"%V\", \"answered\": %T, "
            "\"failing\": %s, \"serves_all\": %s, \"models\": %ui }",
            n++ ? "," : "", &e, rec->answered,
            rec->failing ? "true" : "false", rec->wild ? "true" : "false",
            rec->nmodels);
    }

    ngx_http_prefix_aware_printf(w, "\n        ] },\n");
}


/*
 * the set of a model as this process sees it: declared, else discovered
 * (and known), else NULL; "declared" tells which
 */

static uintptr_t *
ngx_http_prefix_aware_models_set(ngx_http_prefix_aware_models_t *m,
    ngx_uint_t i, ngx_uint_t *declared)
{
    ngx_uint_t                      j;
    ngx_http_prefix_aware_model_t  *d;

    d = m->declared.elts;
    *declared = 0;

    for (j = 0; j < m->declared.nelts; j++) {
        if (d[j].hash == m->sh->model[i].hash) {
            *declared = 1;
            return d[j].set;
        }
    }

    if (m->discover && m->built && m->hash[i] == m->sh->model[i].hash
        && m->known[i])
    {
        return &m->sets[i * m->words];
    }

    return NULL;
}


void
ngx_http_prefix_aware_models_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_writer_t *w, ngx_str_t **label)
{
    uintptr_t                           *set;
    ngx_str_t                            name, **model, *up;
    ngx_uint_t                           i, j, k, f, declared, any;
    ngx_http_prefix_aware_models_t      *m;
    ngx_http_prefix_aware_shm_model_t   *s;
    ngx_http_prefix_aware_srv_conf_t   **pacf;

    static const char  *families[][3] = {
        { "model_requests_total", "counter",
          "Requests for a model with a known set, by how it is known." },
        { "model_no_server_total", "counter",
          "Requests for a model none of whose servers was usable." },
        { "model_server", "gauge",
          "1 for each server in a model's set." },
        { "model_last_seen_seconds", "gauge",
          "When a server last listed the model at /v1/models (unix time)." },
        { "models_unknown_total", "counter",
          "Requests whose model has no known set (sent to all servers)." },
        { "models_full_total", "counter",
          "Model names not kept: every slot of the zone was taken." }
    };

    pacf = pamcf->upstreams.elts;
    any = 0;

    model = ngx_pcalloc(w->pool, pamcf->upstreams.nelts * sizeof(ngx_str_t *));
    if (model == NULL) {
        w->error = 1;
        return;
    }

    /* label values escaped once, by upstream and slot */

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        m = pacf[i]->models;

        if (m == NULL) {
            continue;
        }

        any = 1;

        if (m->discover && (!m->built || m->version != m->sh->version)) {
            ngx_http_prefix_aware_models_build(m);
        }

        model[i] = ngx_palloc(w->pool,
                   NGX_HTTP_PREFIX_AWARE_MAX_MODELS * sizeof(ngx_str_t));
        if (model[i] == NULL) {
            w->error = 1;
            return;
        }

        for (k = 0; k < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; k++) {
            s = &m->sh->model[k];
            name.data = s->name;
            name.len = ngx_min(s->len, PA_MODELS_ID_MAX);
            ngx_http_prefix_aware_escape(w, &model[i][k], &name, 0);
        }
    }

    for (f = 0; any && f < 6; f++) {
        ngx_http_prefix_aware_family(w, families[f][0], families[f][1],
                                     families[f][2]);

        for (i = 0; i < pamcf->upstreams.nelts; i++) {
            m = pacf[i]->models;

            if (m == NULL) {
                continue;
            }

            up = &label[i][0];

            if (f == 4 || f == 5) {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\"} %uA\n",
                    families[f][0], up,
                    f == 4 ? m->sh->unknown : m->sh->full);
                continue;
            }

            for (k = 0; k < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; k++) {
                s = &m->sh->model[k];

                if (s->hash == 0) {
                    continue;
                }

                set = ngx_http_prefix_aware_models_set(m, k, &declared);

                switch (f) {

                case 0:
                    if (set) {
                        ngx_http_prefix_aware_printf(w,
                            "nginx_prefix_aware_model_requests_total"
                            "{upstream=\"%V\",model=\"%V\",set=\"%s\"} "
                            "%uA\n", up, &model[i][k],
                            declared ? "declared" : "discovered",
                            s->requests);
                    }

                    break;

                case 1:
                    ngx_http_prefix_aware_printf(w,
                        "nginx_prefix_aware_model_no_server_total"
                        "{upstream=\"%V\",model=\"%V\"} %uA\n",
                        up, &model[i][k], s->noserver);
                    break;

                case 2:
                    for (j = 0; set && j < pacf[i]->nservers; j++) {
                        if (ngx_http_prefix_aware_bit(set, j)) {
                            ngx_http_prefix_aware_printf(w,
                                "nginx_prefix_aware_model_server"
                                "{upstream=\"%V\",model=\"%V\","
                                "server=\"%V\"} 1\n",
                                up, &model[i][k], &label[i][1 + j]);
                        }
                    }

                    break;

                default: /* 3 */
                    if (s->seen) {
                        ngx_http_prefix_aware_printf(w,
                            "nginx_prefix_aware_model_last_seen_seconds"
                            "{upstream=\"%V\",model=\"%V\"} %T\n",
                            up, &model[i][k], s->seen);
                    }
                }
            }
        }
    }
}
