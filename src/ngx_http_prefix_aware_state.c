
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Stored responses follow their server (responses=): an engine that
 * keeps a response (the Responses API's "store", vLLM's and SGLang's
 * stores are their own) answers its follow-ups only on the instance that
 * made it: a POST /v1/responses with "previous_response_id", GET and
 * DELETE /v1/responses/{id}, .../cancel and .../input_items; any other
 * answers 404.  The id of each response is read from the answer of a
 * POST /v1/responses as it passes in the body filter (src/pa_respid.c,
 * nothing held back) and kept with its server in the upstream's own zone
 * (src/pa_store.c, the oldest forgotten first); a follow-up goes to that
 * server past "threshold" and the work bounds (no other server can
 * answer it), as the route "state".  An id not known, or whose server is
 * gone from the upstream or not usable (down, failed, at max_conns, not
 * in the request's model set), is routed by its key as before and
 * counted ("lost").  With prefix_aware_sync the ids learned travel to
 * the other hosts (sync_send.c, sync_hosts.c).
 */


#include "ngx_http_prefix_aware.h"


#define NGX_HTTP_PREFIX_AWARE_STATE_MAX   (16 * 1024 * 1024)


/* the zone: the counters, then the table */
typedef struct {
    ngx_atomic_t                           lock;      /* ngx_rwlock */
    ngx_atomic_t                           learned;
    ngx_atomic_t                           synced;
    ngx_atomic_t                           rejected;
    ngx_atomic_t                           routed;
    ngx_atomic_t                           unknown;
    ngx_atomic_t                           gone;
    ngx_uint_t                             capacity;
    pa_store_t                            *table;
} ngx_http_prefix_aware_state_shm_t;


struct ngx_http_prefix_aware_state_s {
    ngx_shm_zone_t                        *zone;
    ngx_http_prefix_aware_state_shm_t     *sh;
};


static ngx_int_t ngx_http_prefix_aware_state_init_zone(
    ngx_shm_zone_t *shm_zone, void *data);
static ngx_uint_t ngx_http_prefix_aware_state_learns(ngx_http_request_t *r);


ngx_int_t
ngx_http_prefix_aware_state_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value)
{
    if (ngx_strncmp(value->data, "responses=", 10) != 0) {
        return NGX_DECLINED;
    }

    if (value->len == 13 && ngx_strncmp(value->data + 10, "off", 3) == 0) {
        pacf->responses = 0;
        return NGX_OK;
    }

    if (ngx_http_prefix_aware_number(cf, value, 10, PA_STORE_MIN,
                                     NGX_HTTP_PREFIX_AWARE_STATE_MAX,
                                     &pacf->responses)
        != NGX_CONF_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * the upstream's zone of responses= places: kept over a reload while
 * responses= is the same (nginx reuses a zone of the same name and
 * size), made anew, empty, when it changes
 */

ngx_int_t
ngx_http_prefix_aware_state_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    size_t                          size;
    ngx_http_prefix_aware_state_t  *st;

    static ngx_str_t  prefix =
        ngx_string("ngx_http_prefix_aware_module:responses:");

    if (pacf->responses == 0) {
        return NGX_OK;
    }

    st = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_state_t));
    if (st == NULL) {
        return NGX_ERROR;
    }

    /* the slab pool's pages and their records: a 64th and 16 pages more */

    size = sizeof(ngx_http_prefix_aware_state_shm_t)
           + pa_store_size((uint32_t) pacf->responses);
    size += size / 64 + 16 * ngx_pagesize;
    size = ngx_align(size, ngx_pagesize);

    st->zone = ngx_http_prefix_aware_upstream_zone(cf, pacf, &prefix, size);
    if (st->zone == NULL) {
        return NGX_ERROR;
    }

    st->zone->init = ngx_http_prefix_aware_state_init_zone;
    st->zone->data = pacf;

    pacf->state = st;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_state_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t                    *shpool;
    ngx_http_prefix_aware_srv_conf_t   *pacf;
    ngx_http_prefix_aware_state_shm_t  *sh;

    pacf = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    sh = shpool->data;

    /*
     * a reload: the zone of the same size is the old one, its table kept;
     * of another responses= that the page rounding gave the same size,
     * the table is made anew in it
     */

    if (sh && sh->capacity != pacf->responses) {
        ngx_slab_free(shpool, sh);
        shpool->data = NULL;
        sh = NULL;
    }

    if (sh == NULL) {
        sh = ngx_slab_alloc(shpool, sizeof(ngx_http_prefix_aware_state_shm_t)
                                    + pa_store_size((uint32_t) pacf->responses)
                                    + 8);
        if (sh == NULL) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "prefix_aware: the zone \"%V\" is too small",
                          &shm_zone->shm.name);
            return NGX_ERROR;
        }

        ngx_memzero(sh, sizeof(ngx_http_prefix_aware_state_shm_t));

        sh->capacity = pacf->responses;
        sh->table = pa_store_init(ngx_align_ptr(sh + 1, 8),
                                  (uint32_t) pacf->responses);

        if (sh->table == NULL) {
            return NGX_ERROR;
        }

        shpool->data = sh;
    }

    pacf->state->sh = sh;

    return NGX_OK;
}


/*
 * a request routed by prefix_aware: does it name a stored response (its
 * body's previous_response_id, read with the key, or the path), and is
 * its answer to be read for one (POST .../v1/responses)
 */

void
ngx_http_prefix_aware_state_start(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    size_t         len;
    const u_char  *id;

    if (pd->conf->state == NULL || pd->conf->state->sh == NULL) {
        pd->state_id = 0;
        return;
    }

    if (r->method == NGX_HTTP_POST && ngx_http_prefix_aware_state_learns(r)) {
        pd->learn = 1;

    } else if (pa_respid_path(r->uri.data, r->uri.len, &id, &len)) {
        pd->state_id = pa_store_hash(id, len);
    }

    if (pd->state_id == 0) {
        return;
    }

    ngx_http_prefix_aware_state_lookup(r, pd, pd->conf->sync == NULL);
}


/*
 * the server of the response the request names; not found, counted
 * "unknown" if this is the last look (with prefix_aware_sync, the entry
 * looks again once the datagrams waiting are read)
 */

void
ngx_http_prefix_aware_state_lookup(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t last)
{
    ngx_http_prefix_aware_state_shm_t  *sh;

    sh = pd->conf->state->sh;

    ngx_rwlock_rlock(&sh->lock);
    pd->state_server = pa_store_get(sh->table, pd->state_id);
    ngx_rwlock_unlock(&sh->lock);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_aware state: response %016uxL on %016uxL",
                   pd->state_id, pd->state_server);

    if (pd->state_server == 0 && last) {
        ngx_atomic_fetch_add(&sh->unknown, 1);
    }
}


/* the path ends in "/v1/responses": its answer has the response's id */

static ngx_uint_t
ngx_http_prefix_aware_state_learns(ngx_http_request_t *r)
{
    static ngx_str_t  path = ngx_string("/v1/responses");

    return r->uri.len >= path.len
           && ngx_strncmp(r->uri.data + r->uri.len - path.len, path.data,
                          path.len) == 0;
}


/*
 * the first try of a request that names a known response: its server,
 * by the hash of its name in this view of the upstream, if usable
 * (threshold and the work bounds aside); NGX_DECLINED: routed by its key
 */

ngx_int_t
ngx_http_prefix_aware_state_find(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick)
{
    uint64_t                           want, inflight;
    ngx_uint_t                         j;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;
    want = pd->state_server;
    pd->state_server = 0;

    /* with the index, the hashes of the names are made (the same hash) */

    for (j = 0; j < pacf->nservers; j++) {
        if ((pacf->id_hash ? pacf->id_hash[j]
                           : pa_store_hash(pacf->names[j].data,
                                           pacf->names[j].len))
            == want)
        {
            break;
        }
    }

    if (j == pacf->nservers
        || ngx_http_prefix_aware_probe(pd, (uint32_t) j, &inflight)
           != PA_SERVER_USABLE)
    {
        ngx_atomic_fetch_add(&pacf->state->sh->gone, 1);
        return NGX_DECLINED;
    }

    pick->server = (uint32_t) j;
    pick->route = PA_ROUTE_STATE;
    pick->inflight = inflight;
    pick->first_inflight = inflight;
    pick->first_usable = 1;

    return NGX_OK;
}


/*
 * a server was taken for the request: whether by its state ("routed";
 * else it was found unusable as it was taken, and the request is routed
 * by its key); and the server that answers, if its answer is read for
 * an id
 */

void
ngx_http_prefix_aware_state_taken(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server, ngx_uint_t routed)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;

    if (routed == 1) {
        ngx_atomic_fetch_add(&pacf->state->sh->routed, 1);

    } else if (routed == 0) {
        ngx_atomic_fetch_add(&pacf->state->sh->gone, 1);
        return;
    }

    if (pd->learn) {
        pd->learn_server = pacf->id_hash
                           ? pacf->id_hash[server]
                           : pa_store_hash(pacf->names[server].data,
                                           pacf->names[server].len);
    }
}


/*
 * the answer to a POST /v1/responses, as it passes: its id, once, kept
 * here; the hash of the id when it is found (the caller tells the other
 * hosts), else 0
 */

uint64_t
ngx_http_prefix_aware_state_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_chain_t *in)
{
    uint64_t                            id;
    ngx_buf_t                          *b;
    ngx_chain_t                        *cl;
    pa_respid_rc_e                      rc;
    ngx_http_prefix_aware_state_shm_t  *sh;

    /* an error, or an answer compressed by the engine, stores nothing */

    if (r->headers_out.status != NGX_HTTP_OK
        || r->headers_out.content_encoding != NULL
        || pd->learn_server == 0)
    {
        pd->learn = 0;
        return 0;
    }

    if (pd->respid == NULL) {
        pd->respid = ngx_palloc(r->pool, sizeof(pa_respid_t));
        if (pd->respid == NULL) {
            pd->learn = 0;
            return 0;
        }

        pa_respid_init(pd->respid);
    }

    rc = PA_RESPID_MORE;

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b) && b->last > b->pos) {
            rc = pa_respid_feed(pd->respid, b->pos, b->last - b->pos);

            if (rc != PA_RESPID_MORE) {
                break;
            }
        }

        if (b->last_buf) {
            rc = pa_respid_finish(pd->respid);
            break;
        }
    }

    if (rc == PA_RESPID_MORE) {
        return 0;
    }

    pd->learn = 0;
    sh = pd->conf->state->sh;

    if (rc == PA_RESPID_BAD) {
        ngx_atomic_fetch_add(&sh->rejected, 1);

        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "prefix_aware: the id of a response is not a string "
                      "of 1 to %d printable ASCII characters, not stored",
                      PA_RESPID_MAX);
        return 0;
    }

    if (rc != PA_RESPID_FOUND) {
        return 0;
    }

    id = pa_store_hash(pd->respid->id, pd->respid->len);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_aware state: response \"%*s\" stored on %016uxL",
                   (size_t) pd->respid->len, pd->respid->id,
                   pd->learn_server);

    ngx_http_prefix_aware_state_put(pd->conf, id, pd->learn_server, 0);

    return id;
}


/* an id learned from an answer, or from another host ("synced") */

void
ngx_http_prefix_aware_state_put(ngx_http_prefix_aware_srv_conf_t *pacf,
    uint64_t id, uint64_t server, ngx_uint_t synced)
{
    ngx_http_prefix_aware_state_shm_t  *sh;

    if (pacf->state == NULL || pacf->state->sh == NULL) {
        return;
    }

    sh = pacf->state->sh;

    ngx_rwlock_wlock(&sh->lock);
    (void) pa_store_put(sh->table, id, server);
    ngx_rwlock_unlock(&sh->lock);

    ngx_atomic_fetch_add(synced ? &sh->synced : &sh->learned, 1);
}


void
ngx_http_prefix_aware_state_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_http_prefix_aware_state_shm_t  *sh;

    if (pacf->state == NULL || pacf->state->sh == NULL) {
        return;
    }

    sh = pacf->state->sh;

    ngx_http_prefix_aware_printf(w,
        "      \"responses\": { \"capacity\": %ui, \"size\": %uD, "
        "\"evicted\": %uL, \"learned\": %uA, \"synced\": %uA,\n"
        "                     \"rejected\": %uA, \"state\": %uA, "
        "\"state_lost\": %uA, \"unknown\": %uA, \"server_lost\": %uA },\n",
        sh->capacity, sh->table->size, sh->table->evicted, sh->learned,
        sh->synced, sh->rejected, sh->routed, sh->unknown + sh->gone,
        sh->unknown, sh->gone);
}


static ngx_http_prefix_aware_family_t
    ngx_http_prefix_aware_state_families[] = {
    { "responses_capacity", "gauge",
      "Stored responses' ids the upstream keeps at most (responses=)." },
    { "responses_stored", "gauge",
      "Stored responses' ids kept, with their server." },
    { "responses_evicted_total", "counter",
      "Ids forgotten, the oldest first, to keep a new one." },
    { "responses_learned_total", "counter",
      "Ids read from the answers to POST /v1/responses (source=answer) "
      "or from other hosts (source=sync)." },
    { "responses_rejected_total", "counter",
      "Ids not kept: over 64 bytes, escaped, not ASCII." },
    { "state_total", "counter",
      "Requests naming a stored response sent to its server." },
    { "state_lost_total", "counter",
      "Requests naming a stored response routed by their key: the id "
      "is not known (reason=unknown) or its server is gone or not usable "
      "(reason=server)." },
    { NULL, NULL, NULL }
};


void
ngx_http_prefix_aware_state_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                           i, f, any;
    ngx_http_prefix_aware_family_t      *fam;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_state_shm_t   *sh;

    pacf = pamcf->upstreams.elts;
    any = 0;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->state && pacf[i]->state->sh) {
            any = 1;
        }
    }

    if (!any) {
        return;
    }

    for (f = 0; ngx_http_prefix_aware_state_families[f].name; f++) {
        fam = &ngx_http_prefix_aware_state_families[f];

        ngx_http_prefix_aware_family(w, fam->name, fam->type, fam->help);

        for (i = 0; i < pamcf->upstreams.nelts; i++) {
            if (pacf[i]->state == NULL || pacf[i]->state->sh == NULL) {
                continue;
            }

            sh = pacf[i]->state->sh;

            switch (f) {

            case 0:
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\"} %ui\n",
                    fam->name, &label[i][0], sh->capacity);
                break;

            case 1:
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\"} %uD\n",
                    fam->name, &label[i][0], sh->table->size);
                break;

            case 2:
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\"} %uL\n",
                    fam->name, &label[i][0], sh->table->evicted);
                break;

            case 3:
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\",source="
                    "\"answer\"} %uA\n"
                    "nginx_prefix_aware_%s{upstream=\"%V\",source="
                    "\"sync\"} %uA\n",
                    fam->name, &label[i][0], sh->learned,
                    fam->name, &label[i][0], sh->synced);
                break;

            case 4:
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\"} %uA\n",
                    fam->name, &label[i][0], sh->rejected);
                break;

            case 5:
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\"} %uA\n",
                    fam->name, &label[i][0], sh->routed);
                break;

            default:
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\",reason="
                    "\"unknown\"} %uA\n"
                    "nginx_prefix_aware_%s{upstream=\"%V\",reason="
                    "\"server\"} %uA\n",
                    fam->name, &label[i][0], sh->unknown,
                    fam->name, &label[i][0], sh->gone);
                break;
            }
        }
    }
}
