
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The models zone of an upstream: its model slots (names and counters,
 * declared and discovered models) and its server records (each server's
 * last answer to GET /v1/models, by name).  Kept over a reload that
 * leaves its size alone; a server record lives while a configuration
 * that a process may still run has its name.
 */


#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_models_init_zone(
    ngx_shm_zone_t *shm_zone, void *data);


/*
 * a zone per upstream, named after it; kept over a reload that leaves its
 * size alone, and with it the servers' lists, found again by name
 */

ngx_int_t
ngx_http_prefix_aware_models_zone(ngx_conf_t *cf,
    ngx_http_prefix_aware_models_t *m)
{
    size_t                             size;
    ngx_uint_t                         j;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    static ngx_str_t  prefix =
                          ngx_string("ngx_http_prefix_aware_module:models:");

    pacf = m->pacf;

    size = sizeof(ngx_http_prefix_aware_models_shm_t);

    for (j = 0; j < pacf->nservers; j++) {
        size += 2 * (sizeof(ngx_http_prefix_aware_shm_mserver_t)
                     + pacf->names[j].len);
    }

    size = ngx_align(8 * ngx_pagesize + 2 * size, 256 * 1024);

    m->zone = ngx_http_prefix_aware_upstream_zone(cf, pacf, &prefix, size);
    if (m->zone == NULL) {
        return NGX_ERROR;
    }

    m->zone->init = ngx_http_prefix_aware_models_init_zone;
    m->zone->data = m;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_models_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_int_t                             k;
    ngx_uint_t                            i, w;
    ngx_slab_pool_t                      *shpool;
    ngx_http_prefix_aware_model_t        *d;
    ngx_http_prefix_aware_models_t       *m;
    ngx_http_prefix_aware_models_shm_t   *sh;
    ngx_http_prefix_aware_shm_mserver_t  *rec;
    uint64_t                    listed[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];
    uint64_t                    kept[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];

    m = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (data || shm_zone->shm.exists) {
        sh = shpool->data;

    } else {
        sh = ngx_slab_calloc(shpool,
                             sizeof(ngx_http_prefix_aware_models_shm_t));
        if (sh == NULL) {
            return NGX_ERROR;
        }

        shpool->data = sh;
        shpool->log_nomem = 0;
    }

    m->sh = sh;

    ngx_shmtx_lock(&shpool->mutex);

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        sh->model[i].declared = 0;
    }

    /* a declared model takes any slot of a model that is not declared */

    ngx_memzero(listed, sizeof(listed));
    ngx_memzero(kept, sizeof(kept));

    for (rec = sh->servers; rec; rec = rec->next) {
        for (w = 0; w < NGX_HTTP_PREFIX_AWARE_MODELS_WORDS; w++) {
            listed[w] |= rec->listed[w];
        }
    }

    d = m->declared.elts;

    for (i = 0; i < m->declared.nelts; i++) {
        /* there are at most as many declared models as slots */

        k = ngx_http_prefix_aware_models_slot(sh, d[i].hash, d[i].name.data,
                                              d[i].name.len, listed, kept,
                                              1);

        sh->model[k].declared = 1;
        kept[k / 64] |= (uint64_t) 1 << (k % 64);
        d[i].slot = &sh->model[k];
    }

    sh->version++;

    ngx_shmtx_unlock(&shpool->mutex);

    return NGX_OK;
}


/* the slot of a model, -1 if it has none */

ngx_int_t
ngx_http_prefix_aware_models_find(ngx_http_prefix_aware_models_shm_t *sh,
    uint64_t hash)
{
    ngx_int_t  i;

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        if (sh->model[i].hash == hash) {
            return i;
        }
    }

    return -1;
}


/*
 * the slot of a declared model, made if need be (pa_models_pick()): a
 * free one, else one of a model in neither "listed" (what the servers
 * list) nor "kept" (the declared models); with "evict", else any slot
 * not "kept"; -1 if none.  Under the zone's lock
 */

ngx_int_t
ngx_http_prefix_aware_models_slot(ngx_http_prefix_aware_models_shm_t *sh,
    uint64_t hash, u_char *name, size_t len, uint64_t *listed, uint64_t *kept,
    ngx_uint_t evict)
{
    int        k;
    ngx_int_t  i;
    uint64_t   used[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];

    i = ngx_http_prefix_aware_models_find(sh, hash);

    if (i >= 0) {
        return i;
    }

    ngx_memzero(used, sizeof(used));

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_MAX_MODELS; i++) {
        if (sh->model[i].hash) {
            used[i / 64] |= (uint64_t) 1 << (i % 64);
        }
    }

    k = pa_models_pick(NGX_HTTP_PREFIX_AWARE_MAX_MODELS, used, listed, kept,
                       evict);
    if (k < 0) {
        return -1;
    }

    ngx_http_prefix_aware_models_take(sh, k, hash, name, len);

    return k;
}


/*
 * slot k is given to a model (under the zone's lock): the model it had
 * leaves the servers' lists, its counters start again
 */

void
ngx_http_prefix_aware_models_take(ngx_http_prefix_aware_models_shm_t *sh,
    ngx_uint_t k, uint64_t hash, u_char *name, size_t len)
{
    uint64_t                              bit;
    ngx_http_prefix_aware_shm_model_t    *s;
    ngx_http_prefix_aware_shm_mserver_t  *rec;

    s = &sh->model[k];

    if (s->hash) {
        bit = (uint64_t) 1 << (k % 64);

        for (rec = sh->servers; rec; rec = rec->next) {
            rec->listed[k / 64] &= ~bit;
            rec->own[k / 64] &= ~bit;
        }

        sh->version++;
    }

    /* the hash is cleared first and set last: readers without the lock */

    s->hash = 0;
    ngx_memory_barrier();

    s->requests = 0;
    s->noserver = 0;
    s->seen = 0;
    s->declared = 0;
    s->len = ngx_min(len, PA_MODELS_ID_MAX);
    ngx_memcpy(s->name, name, s->len);
    ngx_memory_barrier();
    s->hash = hash;
}


/*
 * the record of a server name in the zone, made if need be (NULL if the
 * zone is full), marked as had by this configuration; under the lock
 */

ngx_http_prefix_aware_shm_mserver_t *
ngx_http_prefix_aware_models_record(ngx_http_prefix_aware_models_t *m,
    ngx_str_t *name)
{
    ngx_slab_pool_t                      *shpool;
    ngx_http_prefix_aware_models_shm_t   *sh;
    ngx_http_prefix_aware_shm_mserver_t  *rec;

    sh = m->sh;
    shpool = (ngx_slab_pool_t *) m->zone->shm.addr;

    for (rec = sh->servers; rec; rec = rec->next) {
        if (rec->name.len == name->len
            && ngx_strncmp(rec->name.data, name->data, name->len) == 0)
        {
            break;
        }
    }

    if (rec == NULL) {
        rec = ngx_slab_calloc_locked(shpool,
                                 sizeof(ngx_http_prefix_aware_shm_mserver_t)
                                 + name->len);
        if (rec == NULL) {
            return NULL;
        }

        rec->name.data = (u_char *) (rec + 1);
        rec->name.len = name->len;
        ngx_memcpy(rec->name.data, name->data, name->len);
        rec->wild = 1;
        rec->gen_min = m->generation;

        rec->next = sh->servers;
        sh->servers = rec;
    }

    rec->gen_min = ngx_min(rec->gen_min, m->generation);
    rec->gen_max = ngx_max(rec->gen_max, m->generation);

    return rec;
}


/*
 * a configuration is committed (the master, at its start and at each
 * reload): the records of its servers' names are marked with its
 * generation, and those of names that no live configuration has are
 * freed, as the main zone frees its server records.  "live" holds the
 * generations whose records the main zone keeps (a process may run them),
 * NULL if there were too many to copy (then nothing is freed); a record is
 * kept while one of them is in the range of generations that had its
 * name.  A process that ran a configuration whose records went
 * finds its servers' records again by name (models_build()).
 */

void
ngx_http_prefix_aware_models_commit(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_uint_t *live, ngx_uint_t nlive)
{
    ngx_uint_t                            i, j, k, changed;
    ngx_slab_pool_t                      *shpool;
    ngx_http_prefix_aware_models_t       *m;
    ngx_http_prefix_aware_srv_conf_t    **pacf;
    ngx_http_prefix_aware_models_shm_t   *sh;
    ngx_http_prefix_aware_shm_mserver_t  *rec, **prec;

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        m = pacf[i]->models;

        if (m == NULL || !m->discover || m->sh == NULL) {
            continue;
        }

        m->generation = pamcf->generation;
        sh = m->sh;
        shpool = (ngx_slab_pool_t *) m->zone->shm.addr;
        changed = 0;

        ngx_shmtx_lock(&shpool->mutex);

        for (rec = sh->servers; rec; rec = rec->next) {
            for (j = 0; j < pacf[i]->nservers; j++) {
                if (rec->name.len == pacf[i]->names[j].len
                    && ngx_strncmp(rec->name.data, pacf[i]->names[j].data,
                                   rec->name.len) == 0)
                {
                    rec->gen_max = ngx_max(rec->gen_max, m->generation);
                    break;
                }
            }
        }

        for (prec = &sh->servers; live && *prec; /* void */) {
            rec = *prec;

            for (k = 0; k < nlive; k++) {
                if (live[k] >= rec->gen_min && live[k] <= rec->gen_max) {
                    break;
                }
            }

            if (k < nlive || rec->gen_max >= m->generation) {
                prec = &rec->next;
                continue;
            }

            /* the sets of a process that still has the name change */

            changed |= !rec->wild;

            *prec = rec->next;
            ngx_slab_free_locked(shpool, rec);
            sh->freed++;
        }

        if (changed) {
            sh->version++;
        }

        ngx_shmtx_unlock(&shpool->mutex);
    }
}
