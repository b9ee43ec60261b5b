
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Models and LoRA adapters: a request whose model has a known set of
 * servers is routed among that set only.  Sets are declared
 * ("prefix_aware_model NAME SERVER...;", bitmaps built at configuration
 * time) or discovered ("prefix_aware ... models=discover": one worker at
 * a time asks each server GET /v1/models on a timer, and the lists are
 * kept in a shared zone of the upstream, by server name).  The balancer's
 * only hook is the bitmap in the request's data, which the probe reads:
 * a server outside the set is passed over as if it were not on the ring.
 */


#include "ngx_http_prefix_aware.h"


static ngx_http_prefix_aware_models_t *ngx_http_prefix_aware_models_get(
    ngx_conf_t *cf, ngx_http_prefix_aware_srv_conf_t *pacf);
static ngx_uint_t ngx_http_prefix_aware_models_usable(
    ngx_http_prefix_aware_srv_conf_t *pacf, uintptr_t *set);


/* "prefix_aware_model NAME SERVER...;" in an upstream, after prefix_aware */

char *
ngx_http_prefix_aware_model(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf = conf;

    uint64_t                         hash;
    ngx_str_t                       *value, *s;
    ngx_uint_t                       i;
    ngx_http_prefix_aware_model_t   *d;
    ngx_http_prefix_aware_models_t  *m;

    if (pacf->length == NGX_CONF_UNSET_UINT) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"prefix_aware_model\" must come after "
                           "\"prefix_aware\" in the upstream");
        return NGX_CONF_ERROR;
    }

    m = ngx_http_prefix_aware_models_get(cf, pacf);
    if (m == NULL) {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;

    if (value[1].len == 0 || value[1].len > PA_MODELS_ID_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid model name \"%V\" in "
                           "\"prefix_aware_model\", it must be 1 to %d "
                           "bytes long", &value[1], PA_MODELS_ID_MAX);
        return NGX_CONF_ERROR;
    }

    hash = pa_models_hash(value[1].data, value[1].len);

    d = m->declared.elts;

    for (i = 0; i < m->declared.nelts; i++) {
        if (d[i].hash == hash) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate model \"%V\" in "
                               "\"prefix_aware_model\"", &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    if (m->declared.nelts == NGX_HTTP_PREFIX_AWARE_MAX_MODELS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "too many \"prefix_aware_model\" lines in the "
                           "upstream, at most %d",
                           NGX_HTTP_PREFIX_AWARE_MAX_MODELS);
        return NGX_CONF_ERROR;
    }

    d = ngx_array_push(&m->declared);
    if (d == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(d, sizeof(ngx_http_prefix_aware_model_t));

    d->name = value[1];
    d->hash = hash;

    d->servers = ngx_array_create(cf->pool, cf->args->nelts - 2,
                                  sizeof(ngx_str_t));
    if (d->servers == NULL) {
        return NGX_CONF_ERROR;
    }

    for (i = 2; i < cf->args->nelts; i++) {
        if (value[i].len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "empty server name in \"prefix_aware_model "
                               "%V\"", &value[1]);
            return NGX_CONF_ERROR;
        }

        s = ngx_array_push(d->servers);
        if (s == NULL) {
            return NGX_CONF_ERROR;
        }

        *s = value[i];
    }

    return NGX_CONF_OK;
}


/* models=, models_interval=, model_header=, model_fallback= */

ngx_int_t
ngx_http_prefix_aware_models_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value)
{
    ngx_str_t                        s;
    ngx_msec_t                       ms;
    ngx_http_prefix_aware_models_t  *m;

    if (ngx_strncmp(value->data, "models=", 7) == 0) {
        s.data = value->data + 7;
        s.len = value->len - 7;

        if (s.len != 8 || ngx_strncmp(s.data, "discover", 8) != 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"models\" value \"%V\" in "
                               "\"prefix_aware\", it must be \"discover\"",
                               &s);
            return NGX_ERROR;
        }

        m = ngx_http_prefix_aware_models_get(cf, pacf);
        if (m == NULL) {
            return NGX_ERROR;
        }

        m->discover = 1;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "models_interval=", 16) == 0) {
        if (ngx_http_prefix_aware_time(cf, value, 16, "prefix_aware", 100,
                                       "100ms", 3600000, "1h", &ms)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        m = ngx_http_prefix_aware_models_get(cf, pacf);
        if (m == NULL) {
            return NGX_ERROR;
        }

        m->interval = ms;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "model_header=", 13) == 0) {
        s.data = value->data + 13;
        s.len = value->len - 13;

        if (s.len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "empty \"model_header\" in \"prefix_aware\"");
            return NGX_ERROR;
        }

        m = ngx_http_prefix_aware_models_get(cf, pacf);
        if (m == NULL) {
            return NGX_ERROR;
        }

        m->header = s;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "model_fallback=", 15) == 0) {
        s.data = value->data + 15;
        s.len = value->len - 15;

        m = ngx_http_prefix_aware_models_get(cf, pacf);
        if (m == NULL) {
            return NGX_ERROR;
        }

        if (s.len == 3 && ngx_strncmp(s.data, "all", 3) == 0) {
            m->fallback = 1;

        } else if (s.len == 4 && ngx_strncmp(s.data, "none", 4) == 0) {
            m->fallback = 0;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"model_fallback\" value \"%V\" in "
                               "\"prefix_aware\", it must be \"none\" or "
                               "\"all\"", &s);
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    return NGX_DECLINED;
}


static ngx_http_prefix_aware_models_t *
ngx_http_prefix_aware_models_get(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_http_prefix_aware_models_t  *m;

    if (pacf->models) {
        return pacf->models;
    }

    m = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_models_t));
    if (m == NULL) {
        return NULL;
    }

    if (ngx_array_init(&m->declared, cf->pool, 4,
                       sizeof(ngx_http_prefix_aware_model_t))
        != NGX_OK)
    {
        return NULL;
    }

    m->interval = 10000;
    m->pacf = pacf;
    pacf->models = m;

    return m;
}


/*
 * once the upstream's servers are known: each declared set as a bitmap of
 * ring indices, the per-process tables, the zone
 */

ngx_int_t
ngx_http_prefix_aware_models_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    size_t                           len;
    ngx_str_t                       *s, *name;
    ngx_uint_t                       i, j, k, found;
    ngx_pool_cleanup_t              *cln;
    ngx_http_prefix_aware_model_t   *d;
    ngx_http_prefix_aware_models_t  *m;

    m = pacf->models;

    if (m == NULL) {
        return NGX_OK;
    }

    m->words = (pacf->nservers + 8 * sizeof(uintptr_t) - 1)
               / (8 * sizeof(uintptr_t));

    /* what a server's list keeps whatever the others list (discover.c) */

    m->share = pa_models_share(NGX_HTTP_PREFIX_AWARE_MAX_MODELS,
                               m->declared.nelts, pacf->nservers);

    d = m->declared.elts;

    for (i = 0; i < m->declared.nelts; i++) {
        d[i].set = ngx_pcalloc(cf->pool, m->words * sizeof(uintptr_t));
        if (d[i].set == NULL) {
            return NGX_ERROR;
        }

        s = d[i].servers->elts;

        for (k = 0; k < d[i].servers->nelts; k++) {
            found = 0;

            /* a name resolved to several addresses is "name address" */

            for (j = 0; j < pacf->nservers; j++) {
                name = &pacf->names[j];
                len = s[k].len;

                if (name->len >= len
                    && ngx_strncmp(name->data, s[k].data, len) == 0
                    && (name->len == len || name->data[len] == ' '))
                {
                    ngx_http_prefix_aware_set_bit(d[i].set, j);
                    found = 1;
                }
            }

            if (!found) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "prefix_aware: unknown server \"%V\" in "
                              "\"prefix_aware_model %V\" of upstream "
                              "\"%V\", it must be written as in a "
                              "\"server\" line", &s[k], &d[i].name,
                              &pacf->upstream->host);
                return NGX_ERROR;
            }
        }
    }

    m->hash = ngx_pcalloc(cf->pool,
                          NGX_HTTP_PREFIX_AWARE_MAX_MODELS * sizeof(uint64_t));
    m->sets = ngx_pcalloc(cf->pool, NGX_HTTP_PREFIX_AWARE_MAX_MODELS
                                    * m->words * sizeof(uintptr_t));
    m->known = ngx_pcalloc(cf->pool, NGX_HTTP_PREFIX_AWARE_MAX_MODELS);
    m->rec = ngx_pcalloc(cf->pool, pacf->nservers
                             * sizeof(ngx_http_prefix_aware_shm_mserver_t *));

    if (m->hash == NULL || m->sets == NULL || m->known == NULL
        || m->rec == NULL)
    {
        return NGX_ERROR;
    }

    if (m->discover) {
        cln = ngx_pool_cleanup_add(cf->pool, 0);
        if (cln == NULL) {
            return NGX_ERROR;
        }

        cln->handler = ngx_http_prefix_aware_models_stop;
        cln->data = m;
    }

    return ngx_http_prefix_aware_models_zone(cf, m);
}


/*
 * the request's model (the model_header= header, else the OpenAI body's
 * "model") and its set: declared, else discovered, else none (all
 * servers); with no usable server in the set, a 503 naming the model, or
 * all servers with model_fallback=all
 */

ngx_int_t
ngx_http_prefix_aware_models_route(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    size_t                              n;
    u_char                             *p;
    uintptr_t                          *set;
    ngx_str_t                           reason, name;
    ngx_uint_t                          i;
    ngx_table_elt_t                    *h;
    ngx_http_prefix_aware_model_t      *d;
    ngx_http_prefix_aware_models_t     *m;
    ngx_http_prefix_aware_shm_model_t  *slot;

    m = pd->conf->models;

    if (m->header.len) {
        h = ngx_http_prefix_aware_header(r, &m->header, NULL);

        if (h && h->value.len) {
            pd->model_hash = pa_models_hash(h->value.data, h->value.len);
            pd->model_name = h->value;
            pd->has_model = 1;
        }
    }

    if (!pd->has_model) {
        return NGX_OK;
    }

    d = m->declared.elts;

    for (i = 0; i < m->declared.nelts; i++) {
        if (d[i].hash == pd->model_hash) {
            set = d[i].set;
            slot = d[i].slot;
            name = d[i].name;
            goto found;
        }
    }

    if (m->discover) {
        if (!m->built || m->version != m->sh->version) {
            ngx_http_prefix_aware_models_build(m);
        }

        for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
            if (m->hash[i] == pd->model_hash && m->known[i]) {

                /*
                 * the set by value: this process's sets are rebuilt in
                 * place when the zone's version moves, and a retry
                 * (proxy_next_upstream) must stay in the set the request
                 * was routed with, not in what the slot holds then
                 */

                set = ngx_palloc(r->pool, m->words * sizeof(uintptr_t));
                if (set == NULL) {
                    return NGX_ERROR;
                }

                ngx_memcpy(set, &m->sets[i * m->words],
                           m->words * sizeof(uintptr_t));

                slot = &m->sh->model[i];

                /*
                 * the name, copied once: a poll may give the slot to
                 * another model at any time; its hash, cleared before the
                 * name is written and set after, tells a torn copy
                 */

                name.data = ngx_pnalloc(r->pool, PA_MODELS_ID_MAX);
                if (name.data == NULL) {
                    return NGX_ERROR;
                }

                name.len = ngx_min(slot->len, PA_MODELS_ID_MAX);
                ngx_memcpy(name.data, slot->name, name.len);
                ngx_memory_barrier();

                if (slot->hash != pd->model_hash) {
                    name.len = 0;
                }

                goto found;
            }
        }
    }

    ngx_atomic_fetch_add(&m->sh->unknown, 1);

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_aware model: %016uxL has no known set, "
                   "all servers", pd->model_hash);

    return NGX_OK;

found:

    pd->model = slot;
    pd->model_name = name;

    ngx_atomic_fetch_add(&slot->requests, 1);

    if (ngx_http_prefix_aware_models_usable(pd->conf, set)) {
        pd->set = set;

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "prefix_aware model: \"%V\", routed in its set",
                       &name);
        return NGX_OK;
    }

    ngx_atomic_fetch_add(&slot->noserver, 1);

    if (m->fallback) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "prefix_aware: no server of model \"%V\" is usable, "
                      "sent to all servers (model_fallback=all)", &name);
        return NGX_OK;
    }

    n = sizeof("no server of model \"\" is usable") - 1 + name.len;

    p = ngx_pnalloc(r->pool, n);
    if (p == NULL) {
        return NGX_ERROR;
    }

    reason.data = p;
    reason.len = ngx_sprintf(p, "no server of model \"%V\" is usable", &name)
                 - p;

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "prefix_aware: %V, answered 503", &reason);

    (void) ngx_http_prefix_aware_answer(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                        &reason);

    return NGX_ERROR;
}


/* is a server of the set neither down nor failed (max_fails)? */

static ngx_uint_t
ngx_http_prefix_aware_models_usable(ngx_http_prefix_aware_srv_conf_t *pacf,
    uintptr_t *set)
{
    time_t                         now;
    ngx_uint_t                     j, usable;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    peers = pacf->upstream->peer.data;
    now = ngx_time();
    usable = 0;

    ngx_http_upstream_rr_peers_rlock(peers);

    for (j = 0; j < pacf->nservers && !usable; j++) {
        peer = pacf->peer[j];

        if (!ngx_http_prefix_aware_bit(set, j) || peer == NULL || peer->down) {
            continue;
        }

        if (peer->max_fails
            && peer->fails >= peer->max_fails
            && now - peer->checked <= peer->fail_timeout)
        {
            continue;
        }

        usable = 1;
    }

    ngx_http_upstream_rr_peers_unlock(peers);

    return usable;
}


/*
 * this process's copy of the discovered sets, when the zone's version
 * moved: a model's set is the servers that list it and the servers that
 * count as serving everything (never answered, or silent too long); a
 * model no answering server lists has no known set
 */

void
ngx_http_prefix_aware_models_build(ngx_http_prefix_aware_models_t *m)
{
    uintptr_t                             *set, *wild;
    ngx_uint_t                             i, j, w;
    ngx_slab_pool_t                       *shpool;
    ngx_http_prefix_aware_srv_conf_t      *pacf;
    ngx_http_prefix_aware_models_shm_t    *sh;
    ngx_http_prefix_aware_shm_mserver_t   *rec;

    pacf = m->pacf;
    sh = m->sh;
    shpool = (ngx_slab_pool_t *) m->zone->shm.addr;

    /* the last set's words are scratch for the servers that serve all */

    wild = ngx_alloc(m->words * sizeof(uintptr_t), ngx_cycle->log);
    if (wild == NULL) {
        return;
    }

    ngx_memzero(wild, m->words * sizeof(uintptr_t));
    ngx_memzero(m->sets, NGX_HTTP_PREFIX_AWARE_MAX_MODELS * m->words
                         * sizeof(uintptr_t));
    ngx_memzero(m->known, NGX_HTTP_PREFIX_AWARE_MAX_MODELS);

    ngx_shmtx_lock(&shpool->mutex);

    /* the records found before, unless one was freed since */

    if (m->freed != sh->freed) {
        ngx_memzero(m->rec, pacf->nservers
                            * sizeof(ngx_http_prefix_aware_shm_mserver_t *));
        m->freed = sh->freed;
    }

    m->version = sh->version;

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        m->hash[i] = sh->model[i].hash;
    }

    for (j = 0; j < pacf->nservers; j++) {
        rec = m->rec[j];

        if (rec == NULL) {
            for (rec = sh->servers; rec; rec = rec->next) {
                if (rec->name.len == pacf->names[j].len
                    && ngx_strncmp(rec->name.data, pacf->names[j].data,
                                   rec->name.len) == 0)
                {
                    m->rec[j] = rec;
                    break;
                }
            }
        }

        if (rec == NULL || rec->wild) {
            ngx_http_prefix_aware_set_bit(wild, j);
            continue;
        }

        for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
            if (rec->listed[i / 64] & ((uint64_t) 1 << (i % 64))) {
                ngx_http_prefix_aware_set_bit(&m->sets[i * m->words], j);
                m->known[i] = 1;
            }
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        if (!m->known[i]) {
            continue;
        }

        set = &m->sets[i * m->words];

        for (w = 0; w < m->words; w++) {
            set[w] |= wild[w];
        }
    }

    ngx_free(wild);

    m->built = 1;
}
