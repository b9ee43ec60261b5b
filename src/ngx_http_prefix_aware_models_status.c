
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The models of an upstream on the status page: each model's set
 * (declared or discovered, when a server last listed it), its requests
 * and those that found no usable server, and the servers' answers to
 * GET /v1/models; in the JSON and as Prometheus metrics.
 */


#include "ngx_http_prefix_aware.h"


/*
 * the zone as the page shows it: its model slots and server records,
 * copied under the zone's lock.  Another worker's poll renames slots (and
 * frees records) at any time, so a name read twice in shared memory, to
 * size its escaping and then to escape it, may be two names: the page
 * reads these copies only.
 */
typedef struct {
    ngx_http_prefix_aware_shm_model_t     *model;
    ngx_http_prefix_aware_shm_mserver_t   *server;
    ngx_uint_t                             nservers;
} ngx_http_prefix_aware_models_copy_t;


static ngx_int_t ngx_http_prefix_aware_models_copy(
    ngx_http_prefix_aware_models_t *m, ngx_pool_t *pool, ngx_uint_t servers,
    ngx_http_prefix_aware_models_copy_t *copy);
static uintptr_t *ngx_http_prefix_aware_models_set(
    ngx_http_prefix_aware_models_t *m, ngx_uint_t i, uint64_t hash,
    ngx_uint_t *declared);


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
    ngx_http_prefix_aware_models_copy_t   copy;

    m = c->models;
    sh = m->sh;

    if (m->discover && (!m->built || m->version != sh->version)) {
        ngx_http_prefix_aware_models_build(m);
    }

    if (ngx_http_prefix_aware_models_copy(m, w->pool, m->discover, &copy)
        != NGX_OK)
    {
        w->error = 1;
        return;
    }

    ngx_http_prefix_aware_printf(w,
        "      \"models\": { \"discover\": %s, \"interval_ms\": %M, "
        "\"fallback\": \"%s\",\n"
        "        \"unknown\": %uA, \"full\": %uA, \"share\": %ui,\n"
        "        \"list\": [",
        m->discover ? "true" : "false", m->interval,
        m->fallback ? "all" : "none", sh->unknown, sh->full, m->share);

    n = 0;

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        s = &copy.model[i];

        if (s->hash == 0) {
            continue;
        }

        set = ngx_http_prefix_aware_models_set(m, i, s->hash, &declared);

        name.data = s->name;
        name.len = s->len;
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

    for (i = 0; i < copy.nservers; i++) {
        rec = &copy.server[i];

        ngx_http_prefix_aware_escape(w, &e, &rec->name, 1);

        ngx_http_prefix_aware_printf(w,
            "%s\n          { \"server\": \"%V\", \"answered\": %T, "
            "\"failing\": %s, \"serves_all\": %s, \"models\": %ui, "
            "\"refused\": %ui }",
            n++ ? "," : "", &e, rec->answered,
            rec->failing ? "true" : "false", rec->wild ? "true" : "false",
            rec->nmodels, rec->refused);
    }

    ngx_http_prefix_aware_printf(w, "\n        ] },\n");
}


/*
 * copies the zone's model slots, and with "servers" its server records
 * and their names, under its lock; the lengths are bounded by the slots'
 * room whatever the zone holds
 */

static ngx_int_t
ngx_http_prefix_aware_models_copy(ngx_http_prefix_aware_models_t *m,
    ngx_pool_t *pool, ngx_uint_t servers,
    ngx_http_prefix_aware_models_copy_t *copy)
{
    u_char                               *p;
    size_t                                len;
    ngx_uint_t                            i, n;
    ngx_slab_pool_t                      *shpool;
    ngx_http_prefix_aware_models_shm_t   *sh;
    ngx_http_prefix_aware_shm_mserver_t  *rec, *r;

    sh = m->sh;
    shpool = (ngx_slab_pool_t *) m->zone->shm.addr;

    copy->model = ngx_palloc(pool, sizeof(sh->model));
    if (copy->model == NULL) {
        return NGX_ERROR;
    }

    copy->server = NULL;
    copy->nservers = 0;

    n = 0;
    len = 0;

    ngx_shmtx_lock(&shpool->mutex);

    ngx_memcpy(copy->model, sh->model, sizeof(sh->model));

    for (rec = sh->servers; servers && rec; rec = rec->next) {
        n++;
        len += rec->name.len;
    }

    ngx_shmtx_unlock(&shpool->mutex);

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        copy->model[i].len = ngx_min(copy->model[i].len, PA_MODELS_ID_MAX);
    }

    if (n == 0) {
        return NGX_OK;
    }

    /* the records as many and as long as counted: the list may change */

    r = ngx_palloc(pool, n * sizeof(ngx_http_prefix_aware_shm_mserver_t)
                         + len);
    if (r == NULL) {
        return NGX_ERROR;
    }

    p = (u_char *) (r + n);

    ngx_shmtx_lock(&shpool->mutex);

    for (rec = sh->servers, i = 0; rec && i < n; rec = rec->next, i++) {
        if (rec->name.len > len) {
            break;
        }

        r[i] = *rec;
        r[i].next = NULL;
        r[i].name.data = p;

        p = ngx_cpymem(p, rec->name.data, rec->name.len);
        len -= rec->name.len;
    }

    ngx_shmtx_unlock(&shpool->mutex);

    copy->server = r;
    copy->nservers = i;

    return NGX_OK;
}


/*
 * the set of the model of slot i (its hash as copied) as this process sees
 * it: declared, else discovered (and known), else NULL; "declared" tells
 * which
 */

static uintptr_t *
ngx_http_prefix_aware_models_set(ngx_http_prefix_aware_models_t *m,
    ngx_uint_t i, uint64_t hash, ngx_uint_t *declared)
{
    ngx_uint_t                      j;
    ngx_http_prefix_aware_model_t  *d;

    d = m->declared.elts;
    *declared = 0;

    for (j = 0; j < m->declared.nelts; j++) {
        if (d[j].hash == hash) {
            *declared = 1;
            return d[j].set;
        }
    }

    if (m->discover && m->built && m->hash[i] == hash && m->known[i]) {
        return &m->sets[i * m->words];
    }

    return NULL;
}


void
ngx_http_prefix_aware_models_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_writer_t *w, ngx_str_t **label)
{
    uintptr_t                            *set;
    ngx_str_t                             name, **model, *up;
    ngx_uint_t                            i, j, k, f, declared, any;
    ngx_http_prefix_aware_models_t       *m;
    ngx_http_prefix_aware_shm_mserver_t  *rec;
    ngx_http_prefix_aware_shm_model_t    *s;
    ngx_http_prefix_aware_srv_conf_t    **pacf;
    ngx_http_prefix_aware_models_copy_t  *copy;

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
          "Model names not kept: every slot of the zone was taken." },
        { "models_refused", "gauge",
          "Ids of a server's last /v1/models list refused a slot of the "
          "zone." }
    };

    pacf = pamcf->upstreams.elts;
    any = 0;

    model = ngx_pcalloc(w->pool, pamcf->upstreams.nelts * sizeof(ngx_str_t *));
    copy = ngx_pcalloc(w->pool, pamcf->upstreams.nelts
                                * sizeof(ngx_http_prefix_aware_models_copy_t));
    if (model == NULL || copy == NULL) {
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
        if (model[i] == NULL
            || ngx_http_prefix_aware_models_copy(m, w->pool, m->discover,
                                                 &copy[i])
               != NGX_OK)
        {
            w->error = 1;
            return;
        }

        for (k = 0; k < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; k++) {
            s = &copy[i].model[k];
            name.data = s->name;
            name.len = s->len;
            ngx_http_prefix_aware_escape(w, &model[i][k], &name, 0);
        }
    }

    for (f = 0; any && f < 7; f++) {
        ngx_http_prefix_aware_family(w, families[f][0], families[f][1],
                                     families[f][2]);

        for (i = 0; i < pamcf->upstreams.nelts; i++) {
            m = pacf[i]->models;

            if (m == NULL) {
                continue;
            }

            up = &label[i][0];

            if (f == 6) {
                /* the records of this configuration's servers, by name */

                for (j = 0; j < pacf[i]->nservers; j++) {
                    for (k = 0; k < copy[i].nservers; k++) {
                        rec = &copy[i].server[k];

                        if (rec->name.len == pacf[i]->names[j].len
                            && ngx_strncmp(rec->name.data,
                                           pacf[i]->names[j].data,
                                           rec->name.len) == 0)
                        {
                            ngx_http_prefix_aware_printf(w,
                                "nginx_prefix_aware_models_refused"
                                "{upstream=\"%V\",server=\"%V\"} %ui\n",
                                up, &label[i][1 + j], rec->refused);
                            break;
                        }
                    }
                }

                continue;
            }

            if (f == 4 || f == 5) {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\"} %uA\n",
                    families[f][0], up,
                    f == 4 ? m->sh->unknown : m->sh->full);
                continue;
            }

            for (k = 0; k < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; k++) {
                s = &copy[i].model[k];

                if (s->hash == 0) {
                    continue;
                }

                set = ngx_http_prefix_aware_models_set(m, k, s->hash,
                                                       &declared);

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
