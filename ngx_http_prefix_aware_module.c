
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Prefix-aware upstream balancing for LLM inference servers: requests
 * whose bodies begin alike go to the same server (so its KV cache is
 * reused), unless that server has "threshold" requests in flight.
 *
 * This file is the nginx glue; the algorithms live in src/.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "pa_key.h"
#include "pa_ring.h"
#include "pa_openai.h"
#include "pa_yajl.h"

#include <yajl/yajl_gen.h>


#define NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO     0
#define NGX_HTTP_PREFIX_AWARE_FORMAT_BODY     1
#define NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI   2

#define NGX_HTTP_PREFIX_AWARE_SOURCE_NONE     0
#define NGX_HTTP_PREFIX_AWARE_SOURCE_BODY     1
#define NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI   2

/* worker processes that can hold requests at once, reloads included */
#define NGX_HTTP_PREFIX_AWARE_SLOTS           64

/* in flight at the first choice: 0, 1, 2, 4, ... 1024, +inf */
#define NGX_HTTP_PREFIX_AWARE_HIST            13

#define NGX_HTTP_PREFIX_AWARE_ID_HEADER  "X-Amzn-SageMaker-Prefix-Aware-Id"

/* yajl rescans a string split over reads: read temp files in big pieces */
#define NGX_HTTP_PREFIX_AWARE_FILE_BUF        65536


/* per-upstream counters in the shared zone */
enum {
    /* the first three count key sources, indexed by pd->source */
    NGX_HTTP_PA_UP_SOURCE_NONE = NGX_HTTP_PREFIX_AWARE_SOURCE_NONE,
    NGX_HTTP_PA_UP_SOURCE_BODY = NGX_HTTP_PREFIX_AWARE_SOURCE_BODY,
    NGX_HTTP_PA_UP_SOURCE_OPENAI = NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI,
    NGX_HTTP_PA_UP_ID,
    NGX_HTTP_PA_UP_FALLBACK,
    NGX_HTTP_PA_UP_UNBUFFERED,
    NGX_HTTP_PA_UP_REJECTED,
    NGX_HTTP_PA_UP_KEYED,
    NGX_HTTP_PA_UP_FIRST_USABLE,
    NGX_HTTP_PA_UP_HIST_SUM,
    NGX_HTTP_PA_UP_NCOUNTERS
};


typedef struct ngx_http_prefix_aware_shm_server_s
    ngx_http_prefix_aware_shm_server_t;
typedef struct ngx_http_prefix_aware_shm_upstream_s
    ngx_http_prefix_aware_shm_upstream_t;


struct ngx_http_prefix_aware_shm_server_s {
    ngx_atomic_t                           inflight;
    ngx_atomic_t                           requests;
    ngx_atomic_t                           route[PA_ROUTE_NO_KEY + 1];
    ngx_atomic_t                           slot[NGX_HTTP_PREFIX_AWARE_SLOTS];
    ngx_http_prefix_aware_shm_server_t    *next;      /* all servers */
    ngx_http_prefix_aware_shm_server_t    *sibling;   /* same upstream */
    ngx_str_t                              name;
};


struct ngx_http_prefix_aware_shm_upstream_s {
    ngx_atomic_t                           counter[NGX_HTTP_PA_UP_NCOUNTERS];
    ngx_atomic_t                           hist[NGX_HTTP_PREFIX_AWARE_HIST];
    ngx_http_prefix_aware_shm_server_t    *servers;
    ngx_http_prefix_aware_shm_upstream_t  *next;
    ngx_str_t                              name;
};


typedef struct {
    ngx_atomic_t                           pid[NGX_HTTP_PREFIX_AWARE_SLOTS];
    ngx_http_prefix_aware_shm_upstream_t  *upstreams;
    ngx_http_prefix_aware_shm_server_t    *servers;
} ngx_http_prefix_aware_shm_t;


typedef struct {
    ngx_uint_t                             length;
    ngx_uint_t                             threshold;
    ngx_uint_t                             format;

    ngx_uint_t                             nservers;
    pa_ring_t                              ring;
    uint32_t                              *weights;
    ngx_str_t                             *names;

    /* per process: the peers by ring index, where the zone put them */
    ngx_http_upstream_rr_peer_t          **peer;

    ngx_http_prefix_aware_shm_upstream_t  *shm;
    ngx_http_prefix_aware_shm_server_t   **shm_server;

    ngx_http_upstream_srv_conf_t          *upstream;
} ngx_http_prefix_aware_srv_conf_t;


typedef struct {
    ngx_array_t                            upstreams;
    ngx_shm_zone_t                        *shm_zone;
    ngx_http_prefix_aware_shm_t           *sh;
} ngx_http_prefix_aware_main_conf_t;


typedef struct {
    /* the round robin data must be first */
    ngx_http_upstream_rr_peer_data_t       rrp;

    ngx_http_prefix_aware_srv_conf_t      *conf;
    ngx_http_prefix_aware_shm_server_t    *held;
    u_char                                *seen;
    uint64_t                               hash;
    time_t                                 now;
    ngx_uint_t                             tries;
    pa_route_e                             route;

    unsigned                               source:2;
    unsigned                               keyed:1;
    unsigned                               id:1;
} ngx_http_prefix_aware_peer_data_t;


typedef struct {
    const char                            *name;
    const char                            *help;
    ngx_uint_t                             counter;
} ngx_http_prefix_aware_metric_t;


typedef ngx_int_t (*ngx_http_prefix_aware_feed_pt)(void *data, u_char *p,
    size_t n);


static ngx_int_t ngx_http_prefix_aware_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_prefix_aware_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_prefix_aware_get_peer(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_prefix_aware_free_peer(ngx_peer_connection_t *pc,
    void *data, ngx_uint_t state);
static int ngx_http_prefix_aware_probe(void *ctx, uint32_t server,
    uint64_t *inflight);
static void ngx_http_prefix_aware_count(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick);

static ngx_int_t ngx_http_prefix_aware_key(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_str_t *reason);
static ngx_int_t ngx_http_prefix_aware_find_id(ngx_http_request_t *r,
    ngx_str_t *id, ngx_str_t *reason);
static ngx_int_t ngx_http_prefix_aware_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_feed_pt feed, void *data, size_t chunk);
static ngx_int_t ngx_http_prefix_aware_feed_bytes(void *data, u_char *p,
    size_t n);
static ngx_int_t ngx_http_prefix_aware_feed_openai(void *data, u_char *p,
    size_t n);
static void *ngx_http_prefix_aware_alloc(void *ctx, size_t size);
static ngx_int_t ngx_http_prefix_aware_reject(ngx_http_request_t *r,
    ngx_str_t *reason);

static ngx_int_t ngx_http_prefix_aware_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_prefix_aware_bind(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_srv_conf_t *conf);
static void ngx_http_prefix_aware_reap(ngx_http_prefix_aware_shm_t *sh,
    ngx_uint_t slot);
static void ngx_http_prefix_aware_set_peers(
    ngx_http_prefix_aware_srv_conf_t *pacf);
static ngx_int_t ngx_http_prefix_aware_init_process(ngx_cycle_t *cycle);
static void ngx_http_prefix_aware_exit_process(ngx_cycle_t *cycle);

static ngx_table_elt_t *ngx_http_prefix_aware_header(ngx_http_request_t *r,
    ngx_str_t *name, ngx_uint_t *n);

static ngx_int_t ngx_http_prefix_aware_status_handler(ngx_http_request_t *r);
static const char *ngx_http_prefix_aware_state(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t i);
static ngx_int_t ngx_http_prefix_aware_prometheus(ngx_http_request_t *r,
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_chain_t *out);
static ngx_int_t ngx_http_prefix_aware_json(ngx_http_request_t *r,
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_chain_t *out);
static yajl_gen ngx_http_prefix_aware_json_gen(
    ngx_http_prefix_aware_main_conf_t *pamcf, pa_yajl_mem_t *mem);
static void ngx_http_prefix_aware_gen_uint(yajl_gen g, ngx_atomic_uint_t v);

static ngx_int_t ngx_http_prefix_aware_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);

static ngx_int_t ngx_http_prefix_aware_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_prefix_aware_postconf(ngx_conf_t *cf);
static void *ngx_http_prefix_aware_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_prefix_aware_create_srv_conf(ngx_conf_t *cf);
static char *ngx_http_prefix_aware(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_prefix_aware_status(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_prefix_aware_number(ngx_conf_t *cf, ngx_str_t *value,
    size_t skip, ngx_uint_t min, ngx_uint_t max, ngx_uint_t *n);


static ngx_command_t  ngx_http_prefix_aware_commands[] = {

    { ngx_string("prefix_aware"),
      NGX_HTTP_UPS_CONF|NGX_CONF_ANY,
      ngx_http_prefix_aware,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("prefix_aware_status"),
      NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_prefix_aware_status,
      0,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_prefix_aware_module_ctx = {
    ngx_http_prefix_aware_add_variables,   /* preconfiguration */
    ngx_http_prefix_aware_postconf,        /* postconfiguration */

    ngx_http_prefix_aware_create_main_conf, /* create main configuration */
    NULL,                                  /* init main configuration */

    ngx_http_prefix_aware_create_srv_conf, /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_prefix_aware_module = {
    NGX_MODULE_V1,
    &ngx_http_prefix_aware_module_ctx,     /* module context */
    ngx_http_prefix_aware_commands,        /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_prefix_aware_init_process,    /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_prefix_aware_exit_process,    /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_http_variable_t  ngx_http_prefix_aware_vars[] = {

    { ngx_string("prefix_aware_hash"), NULL, ngx_http_prefix_aware_variable,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_route"), NULL, ngx_http_prefix_aware_variable,
      1, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_source"), NULL, ngx_http_prefix_aware_variable,
      2, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


static ngx_str_t  ngx_http_prefix_aware_sources[] = {
    ngx_string("none"),
    ngx_string("body"),
    ngx_string("openai")
};


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


static ngx_str_t  ngx_http_prefix_aware_id_header =
    ngx_string(NGX_HTTP_PREFIX_AWARE_ID_HEADER);
static ngx_str_t  ngx_http_prefix_aware_accept = ngx_string("Accept");

static ngx_str_t  ngx_http_prefix_aware_zone_name =
    ngx_string("prefix_aware");

/* this worker's row in the zone's per-worker in-flight counts */
static ngx_int_t   ngx_http_prefix_aware_slot = -1;
static ngx_uint_t  ngx_http_prefix_aware_unbuffered_warned;
static ngx_uint_t  ngx_http_prefix_aware_rotate;


static ngx_int_t
ngx_http_prefix_aware_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us)
{
    u_char                              *p;
    size_t                               len;
    ngx_uint_t                           i, j, n, dup;
    pa_ring_point_t                     *points;
    pa_ring_server_t                    *servers;
    ngx_http_upstream_rr_peer_t         *peer, *other;
    ngx_http_upstream_rr_peers_t        *peers;
    ngx_http_prefix_aware_srv_conf_t    *pacf, **pp;
    ngx_http_prefix_aware_main_conf_t   *pamcf;

    if (ngx_http_upstream_init_round_robin(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }

    us->peer.init = ngx_http_prefix_aware_init_peer;

    pacf = ngx_http_conf_upstream_srv_conf(us,
                                           ngx_http_prefix_aware_module);
    peers = us->peer.data;

    if (peers->next) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware does not support backup servers "
                      "in upstream \"%V\"", &us->host);
        return NGX_ERROR;
    }

    n = peers->number;

    servers = ngx_palloc(cf->pool, n * sizeof(pa_ring_server_t));
    pacf->names = ngx_palloc(cf->pool, n * sizeof(ngx_str_t));
    pacf->weights = ngx_palloc(cf->pool, n * sizeof(uint32_t));
    pacf->shm_server = ngx_pcalloc(cf->pool,
                              n * sizeof(ngx_http_prefix_aware_shm_server_t *));
    pacf->peer = ngx_pcalloc(cf->pool,
                             n * sizeof(ngx_http_upstream_rr_peer_t *));

    if (servers == NULL || pacf->names == NULL || pacf->weights == NULL
        || pacf->shm_server == NULL || pacf->peer == NULL)
    {
        return NGX_ERROR;
    }

    /*
     * a server's place on the ring depends on its configured name only,
     * so that every nginx with the same servers routes alike; a name that
     * resolved to several addresses is told apart by the address
     */

    for (peer = peers->peer, i = 0; peer; peer = peer->next, i++) {

        dup = 0;

        for (other = peers->peer; other; other = other->next) {
            if (other != peer
                && other->server.len == peer->server.len
                && ngx_strncmp(other->server.data, peer->server.data,
                               peer->server.len) == 0)
            {
                dup = 1;
                break;
            }
        }

        if (dup) {
            len = peer->server.len + 1 + peer->name.len;

            p = ngx_pnalloc(cf->pool, len);
            if (p == NULL) {
                return NGX_ERROR;
            }

            pacf->names[i].data = p;
            p = ngx_cpymem(p, peer->server.data, peer->server.len);
            *p++ = ' ';
            ngx_memcpy(p, peer->name.data, peer->name.len);
            pacf->names[i].len = len;

        } else {
            pacf->names[i] = peer->server;
        }

        for (j = 0; j < i; j++) {
            if (pacf->names[j].len == pacf->names[i].len
                && ngx_strncmp(pacf->names[j].data, pacf->names[i].data,
                               pacf->names[i].len) == 0)
            {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "prefix_aware: duplicate server \"%V\" in "
                              "upstream \"%V\", use \"weight=\" instead",
                              &peer->server, &us->host);
                return NGX_ERROR;
            }
        }

        servers[i].name = pacf->names[i].data;
        servers[i].len = pacf->names[i].len;
        servers[i].weight = (uint32_t) peer->weight;
        pacf->weights[i] = (uint32_t) peer->weight;
    }

    points = ngx_palloc(cf->pool,
                        pa_ring_points(servers, n) * sizeof(pa_ring_point_t));
    if (points == NULL) {
        return NGX_ERROR;
    }

    if (pa_ring_build(&pacf->ring, points, servers, n) != 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: cannot build the ring of "
                      "upstream \"%V\"", &us->host);
        return NGX_ERROR;
    }

    pacf->nservers = n;
    pacf->upstream = us;

    pamcf = ngx_http_conf_get_module_main_conf(cf,
                                               ngx_http_prefix_aware_module);

    pp = ngx_array_push(&pamcf->upstreams);
    if (pp == NULL) {
        return NGX_ERROR;
    }

    *pp = pacf;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_int_t                           rc;
    ngx_str_t                           reason;
    ngx_http_prefix_aware_srv_conf_t   *pacf;
    ngx_http_prefix_aware_peer_data_t  *pd;

    pacf = ngx_http_conf_upstream_srv_conf(us, ngx_http_prefix_aware_module);

    pd = ngx_pcalloc(r->pool, sizeof(ngx_http_prefix_aware_peer_data_t));
    if (pd == NULL) {
        return NGX_ERROR;
    }

    r->upstream->peer.data = &pd->rrp;

    if (ngx_http_upstream_init_round_robin_peer(r, us) != NGX_OK) {
        return NGX_ERROR;
    }

    if (pacf->peer[0] == NULL) {
        /* a single process reloaded: no init_process for the new cycle */
        ngx_http_prefix_aware_set_peers(pacf);
    }

    r->upstream->peer.get = ngx_http_prefix_aware_get_peer;
    r->upstream->peer.free = ngx_http_prefix_aware_free_peer;

    pd->conf = pacf;
    pd->route = PA_ROUTE_NONE;

    pd->seen = ngx_pnalloc(r->pool, (pacf->nservers + 7) / 8);
    if (pd->seen == NULL) {
        return NGX_ERROR;
    }

    ngx_http_set_ctx(r, pd, ngx_http_prefix_aware_module);

    ngx_str_null(&reason);

    rc = ngx_http_prefix_aware_key(r, pd, &reason);

    if (rc == NGX_HTTP_BAD_REQUEST) {
        ngx_atomic_fetch_add(&pacf->shm->counter[NGX_HTTP_PA_UP_REJECTED], 1);
        return ngx_http_prefix_aware_reject(r, &reason);
    }

    if (rc != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_atomic_fetch_add(&pacf->shm->counter[pd->source], 1);

    if (pd->id) {
        ngx_atomic_fetch_add(&pacf->shm->counter[NGX_HTTP_PA_UP_ID], 1);
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_aware key: %016uxL source:%V id:%ui",
                   pd->keyed ? pd->hash : 0,
                   &ngx_http_prefix_aware_sources[pd->source],
                   (ngx_uint_t) pd->id);

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_key(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_str_t *reason)
{
    size_t                              idlen;
    u_char                             *idp;
    ngx_str_t                           id, *uri;
    ngx_int_t                           rc;
    ngx_uint_t                          format, body;
    pa_oai_t                           *x;
    pa_alloc_t                          alloc;
    pa_body_key_t                       bk;
    pa_oai_result_t                     res;
    ngx_http_prefix_aware_srv_conf_t   *pacf;

    static ngx_str_t  completions = ngx_string("/completions");

    pacf = pd->conf;

    rc = ngx_http_prefix_aware_find_id(r, &id, reason);
    if (rc != NGX_OK) {
        return rc;
    }

    idp = id.data;
    idlen = id.len;

    body = 0;

    if (r->request_body_no_buffering) {

        /* only part of the body may be here yet: a key from it would vary */

        ngx_atomic_fetch_add(&pacf->shm->counter[NGX_HTTP_PA_UP_UNBUFFERED],
                             1);

        if (!ngx_http_prefix_aware_unbuffered_warned) {
            ngx_http_prefix_aware_unbuffered_warned = 1;
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "prefix_aware: the request body is not buffered "
                          "(proxy_request_buffering off?), routing by the "
                          "id header or to the least loaded server");
        }

    } else if (r->request_body && r->request_body->bufs) {
        body = 1;
    }

    format = pacf->format;

    if (format == NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO) {
        uri = &r->uri;
        format = NGX_HTTP_PREFIX_AWARE_FORMAT_BODY;

        if (uri->len >= completions.len
            && ngx_strncmp(uri->data + uri->len - completions.len,
                           completions.data, completions.len) == 0)
        {
            format = NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI;
        }
    }

    if (body && format == NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI) {

        alloc.alloc = ngx_http_prefix_aware_alloc;
        alloc.ctx = r->pool;

        x = pa_oai_create(&alloc, pacf->length, 0);
        if (x == NULL) {
            return NGX_ERROR;
        }

        if (ngx_http_prefix_aware_body(r, ngx_http_prefix_aware_feed_openai,
                                       x, NGX_HTTP_PREFIX_AWARE_FILE_BUF)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pa_oai_finish(x, &res);

        if (res.status == PA_OAI_OK) {

            if (res.pck_invalid) {
                ngx_str_set(reason, "prompt_cache_key must be a string of "
                            "1 to 64 printable ASCII characters");
                return NGX_HTTP_BAD_REQUEST;
            }

            if (idlen == 0 && res.has_pck) {
                idp = ngx_pnalloc(r->pool, res.pck_len);
                if (idp == NULL) {
                    return NGX_ERROR;
                }

                ngx_memcpy(idp, res.pck, res.pck_len);
                idlen = res.pck_len;
            }

            pd->hash = res.hash;
            pd->source = NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI;

            ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "prefix_aware openai: %uz characters, "
                           "%uz bytes scanned", res.chars, res.scanned);

        } else {
            ngx_atomic_fetch_add(
                            &pacf->shm->counter[NGX_HTTP_PA_UP_FALLBACK], 1);

            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "prefix_aware: not an OpenAI request body (%s), "
                          "keyed by its raw bytes",
                          pa_oai_status_name(res.status));

            format = NGX_HTTP_PREFIX_AWARE_FORMAT_BODY;
        }
    }

    if (body && format == NGX_HTTP_PREFIX_AWARE_FORMAT_BODY) {

        pa_body_key_init(&bk, pacf->length);

        if (ngx_http_prefix_aware_body(r, ngx_http_prefix_aware_feed_bytes,
                                       &bk, pacf->length)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        if (bk.total) {
            pd->hash = pa_body_key_digest(&bk);
            pd->source = NGX_HTTP_PREFIX_AWARE_SOURCE_BODY;
        }
    }

    if (pd->source != NGX_HTTP_PREFIX_AWARE_SOURCE_NONE) {
        pd->hash = pa_key_mix(pd->hash, idp, idlen);
        pd->keyed = 1;

    } else if (idlen) {
        pd->hash = pa_key_id_only(idp, idlen);
        pd->keyed = 1;
    }

    pd->id = idlen ? 1 : 0;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_find_id(ngx_http_request_t *r, ngx_str_t *id,
    ngx_str_t *reason)
{
    const char       *bad;
    ngx_uint_t        n;
    ngx_table_elt_t  *h;

    ngx_str_null(id);

    h = ngx_http_prefix_aware_header(r, &ngx_http_prefix_aware_id_header, &n);

    if (h == NULL) {
        return NGX_OK;
    }

    if (n > 1) {
        ngx_str_set(reason, "duplicate " NGX_HTTP_PREFIX_AWARE_ID_HEADER
                    " header");
        return NGX_HTTP_BAD_REQUEST;
    }

    bad = pa_id_check(h->value.data, h->value.len);

    if (bad) {
        reason->data = (u_char *) bad;
        reason->len = ngx_strlen(bad);
        return NGX_HTTP_BAD_REQUEST;
    }

    *id = h->value;

    return NGX_OK;
}


/* the first request header called "name", and how many there are */

static ngx_table_elt_t *
ngx_http_prefix_aware_header(ngx_http_request_t *r, ngx_str_t *name,
    ngx_uint_t *n)
{
    ngx_uint_t        i, found;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h, *first;

    first = NULL;
    found = 0;

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len != name->len
            || ngx_strncasecmp(h[i].key.data, name->data, name->len) != 0)
        {
            continue;
        }

        if (first == NULL) {
            first = &h[i];
        }

        found++;
    }

    if (n) {
        *n = found;
    }

    return first;
}


/*
 * hands the buffered body to "feed" in place, buffer by buffer, reading
 * a body kept in a temporary file in pieces of up to "chunk" bytes, until
 * "feed" has enough (NGX_DONE)
 */

static ngx_int_t
ngx_http_prefix_aware_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_feed_pt feed, void *data, size_t chunk)
{
    off_t         offset;
    size_t        size;
    ssize_t       n;
    u_char       *buf;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    buf = NULL;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b)) {

            if (b->last == b->pos) {
                continue;
            }

            if (feed(data, b->pos, b->last - b->pos) == NGX_DONE) {
                return NGX_OK;
            }

            continue;
        }

        if (!b->in_file || b->file_last <= b->file_pos) {
            continue;
        }

        if (buf == NULL) {
            chunk = (size_t) ngx_min((off_t) chunk, b->file_last - b->file_pos);

            buf = ngx_palloc(r->pool, chunk);
            if (buf == NULL) {
                return NGX_ERROR;
            }
        }

        for (offset = b->file_pos; offset < b->file_last; offset += n) {
            size = (size_t) ngx_min(b->file_last - offset, (off_t) chunk);

            n = ngx_read_file(b->file, buf, size, offset);

            if (n == NGX_ERROR) {
                return NGX_ERROR;
            }

            if (n == 0) {
                ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                              "prefix_aware: body temp file \"%V\" is "
                              "shorter than expected", &b->file->name);
                return NGX_ERROR;
            }

            if (feed(data, buf, n) == NGX_DONE) {
                return NGX_OK;
            }
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_feed_bytes(void *data, u_char *p, size_t n)
{
    return pa_body_key_feed(data, p, n) ? NGX_OK : NGX_DONE;
}


static ngx_int_t
ngx_http_prefix_aware_feed_openai(void *data, u_char *p, size_t n)
{
    return pa_oai_feed(data, p, n) == PA_OAI_MORE ? NGX_OK : NGX_DONE;
}


static void *
ngx_http_prefix_aware_alloc(void *ctx, size_t size)
{
    return ngx_palloc(ctx, size);
}


/*
 * answers 400 with a one-line reason from within the upstream's
 * initialization: the upstream's cleanup is taken away so that it only
 * drops the reference taken here when it finalizes with NGX_DONE
 */

static ngx_int_t
ngx_http_prefix_aware_reject(ngx_http_request_t *r, ngx_str_t *reason)
{
    ngx_int_t             rc;
    ngx_buf_t            *b;
    ngx_chain_t           out;
    ngx_http_upstream_t  *u;

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "prefix_aware: bad request: %V", reason);

    u = r->upstream;

    if (u->cleanup) {
        *u->cleanup = NULL;
        u->cleanup = NULL;
    }

    r->main->count++;

    b = ngx_create_temp_buf(r->pool, reason->len + 1);
    if (b == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return NGX_ERROR;
    }

    b->last = ngx_cpymem(b->last, reason->data, reason->len);
    *b->last++ = LF;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    r->headers_out.status = NGX_HTTP_BAD_REQUEST;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "text/plain");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        ngx_http_finalize_request(r, rc);
        return NGX_ERROR;
    }

    ngx_http_finalize_request(r, ngx_http_output_filter(r, &out));

    return NGX_ERROR;
}


static ngx_int_t
ngx_http_prefix_aware_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_prefix_aware_peer_data_t  *pd = data;

    int                                 rc;
    uintptr_t                           m;
    ngx_uint_t                          n;
    pa_pick_t                           pick;
    ngx_http_upstream_rr_peer_t        *peer;
    ngx_http_upstream_rr_peers_t       *peers;
    ngx_http_prefix_aware_srv_conf_t   *pacf;

    pacf = pd->conf;
    peers = pd->rrp.peers;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                   "prefix_aware get peer, try: %ui", pc->tries);

    pc->cached = 0;
    pc->connection = NULL;

    ngx_http_upstream_rr_peers_wlock(peers);

    pd->now = ngx_time();

    if (pd->keyed) {
        rc = pa_ring_pick(&pacf->ring, pd->hash, pacf->threshold,
                          ngx_http_prefix_aware_probe, pd, pd->seen, &pick);

    } else {
        rc = pa_least_loaded(pacf->nservers,
                             ngx_http_prefix_aware_rotate++, pacf->weights,
                             ngx_http_prefix_aware_probe, pd, &pick);
    }

    if (rc != 0) {

        /* all peers failed, mark them as live for quick recovery */

        for (peer = peers->peer; peer; peer = peer->next) {
            peer->fails = 0;
        }

        pc->name = peers->name;

        ngx_http_upstream_rr_peers_unlock(peers);

        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                       "prefix_aware: no usable server");

        return NGX_BUSY;
    }

    peer = pacf->peer[pick.server];

    pd->rrp.current = peer;

    pc->sockaddr = peer->sockaddr;
    pc->socklen = peer->socklen;
    pc->name = &peer->name;

    peer->conns++;

    if (pd->now - peer->checked > peer->fail_timeout) {
        peer->checked = pd->now;
    }

    ngx_http_upstream_rr_peers_unlock(peers);

    n = pick.server / (8 * sizeof(uintptr_t));
    m = (uintptr_t) 1 << pick.server % (8 * sizeof(uintptr_t));

    pd->rrp.tried[n] |= m;

    ngx_http_prefix_aware_count(pd, &pick);

    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                   "prefix_aware peer: \"%V\" route:%s hash:%016uxL "
                   "first in flight:%uL threshold:%ui",
                   &peer->name, pa_route_name(pick.route),
                   pd->keyed ? pd->hash : 0, pick.first_inflight,
                   pacf->threshold);

    return NGX_OK;
}


static int
ngx_http_prefix_aware_probe(void *ctx, uint32_t server, uint64_t *inflight)
{
    ngx_http_prefix_aware_peer_data_t  *pd = ctx;

    uintptr_t                     m;
    ngx_uint_t                    n;
    ngx_http_upstream_rr_peer_t  *peer;

    peer = pd->conf->peer[server];

    *inflight = pd->conf->shm_server[server]->inflight;

    n = server / (8 * sizeof(uintptr_t));
    m = (uintptr_t) 1 << server % (8 * sizeof(uintptr_t));

    if (pd->rrp.tried[n] & m) {
        return PA_SERVER_UNUSABLE;
    }

    if (peer->down) {
        return PA_SERVER_UNUSABLE;
    }

    if (peer->max_fails
        && peer->fails >= peer->max_fails
        && pd->now - peer->checked <= peer->fail_timeout)
    {
        return PA_SERVER_UNUSABLE;
    }

    if (peer->max_conns && peer->conns >= peer->max_conns) {
        return PA_SERVER_UNUSABLE;
    }

    return PA_SERVER_USABLE;
}


static void
ngx_http_prefix_aware_count(ngx_http_prefix_aware_peer_data_t *pd,
    pa_pick_t *pick)
{
    uint64_t                               v;
    ngx_uint_t                             b;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    s = pd->conf->shm_server[pick->server];
    up = pd->conf->shm;

    ngx_atomic_fetch_add(&s->inflight, 1);

    if (ngx_http_prefix_aware_slot >= 0) {
        ngx_atomic_fetch_add(&s->slot[ngx_http_prefix_aware_slot], 1);
    }

    pd->held = s;
    pd->route = pick->route;

    ngx_atomic_fetch_add(&s->requests, 1);
    ngx_atomic_fetch_add(&s->route[pick->route], 1);

    if (!pd->keyed || pd->tries++ > 0) {
        return;
    }

    /* the first decision of a keyed request: what reuse was available */

    ngx_atomic_fetch_add(&up->counter[NGX_HTTP_PA_UP_KEYED], 1);

    if (pick->first_usable) {
        ngx_atomic_fetch_add(&up->counter[NGX_HTTP_PA_UP_FIRST_USABLE], 1);
    }

    v = pick->first_inflight;

    for (b = 0; b < NGX_HTTP_PREFIX_AWARE_HIST - 1; b++) {
        if (v <= (b ? (uint64_t) 1 << (b - 1) : 0)) {
            break;
        }
    }

    ngx_atomic_fetch_add(&up->hist[b], 1);
    ngx_atomic_fetch_add(&up->counter[NGX_HTTP_PA_UP_HIST_SUM],
                         (ngx_atomic_int_t) v);
}


static void
ngx_http_prefix_aware_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ngx_http_prefix_aware_peer_data_t  *pd = data;

    ngx_http_prefix_aware_shm_server_t  *s;

    s = pd->held;

    if (s) {
        pd->held = NULL;

        ngx_atomic_fetch_add(&s->inflight, -1);

        if (ngx_http_prefix_aware_slot >= 0) {
            ngx_atomic_fetch_add(&s->slot[ngx_http_prefix_aware_slot], -1);
        }
    }

    ngx_http_upstream_free_round_robin_peer(pc, data, state);
}


static ngx_int_t
ngx_http_prefix_aware_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_uint_t                           i;
    ngx_slab_pool_t                     *shpool;
    ngx_http_prefix_aware_shm_t         *sh;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_main_conf_t   *pamcf;

    pamcf = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (data || shm_zone->shm.exists) {
        /* a reload: keep the counts of the servers that stay */
        sh = shpool->data;

    } else {
        sh = ngx_slab_calloc(shpool, sizeof(ngx_http_prefix_aware_shm_t));
        if (sh == NULL) {
            return NGX_ERROR;
        }

        shpool->data = sh;
        shpool->log_nomem = 0;
    }

    pamcf->sh = sh;

    pacf = pamcf->upstreams.elts;

    ngx_shmtx_lock(&shpool->mutex);

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (ngx_http_prefix_aware_bind(shpool, sh, pacf[i]) != NGX_OK) {
            ngx_shmtx_unlock(&shpool->mutex);

            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "prefix_aware: shared zone \"%V\" is full, "
                          "restart nginx to rebuild it",
                          &shm_zone->shm.name);
            return NGX_ERROR;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return NGX_OK;
}


/* finds or makes the zone's counters of an upstream and of its servers */

static ngx_int_t
ngx_http_prefix_aware_bind(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_t *sh, ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_str_t                             *name;
    ngx_uint_t                             i;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    name = &pacf->upstream->host;

    for (up = sh->upstreams; up; up = up->next) {
        if (up->name.len == name->len
            && ngx_strncmp(up->name.data, name->data, name->len) == 0)
        {
            break;
        }
    }

    if (up == NULL) {
        up = ngx_slab_calloc_locked(shpool,
                              sizeof(ngx_http_prefix_aware_shm_upstream_t)
                              + name->len);
        if (up == NULL) {
            return NGX_ERROR;
        }

        up->name.data = (u_char *) (up + 1);
        up->name.len = name->len;
        ngx_memcpy(up->name.data, name->data, name->len);

        up->next = sh->upstreams;
        sh->upstreams = up;
    }

    pacf->shm = up;

    for (i = 0; i < pacf->nservers; i++) {
        name = &pacf->names[i];

        for (s = up->servers; s; s = s->sibling) {
            if (s->name.len == name->len
                && ngx_strncmp(s->name.data, name->data, name->len) == 0)
            {
                break;
            }
        }

        if (s == NULL) {
            s = ngx_slab_calloc_locked(shpool,
                                  sizeof(ngx_http_prefix_aware_shm_server_t)
                                  + name->len);
            if (s == NULL) {
                return NGX_ERROR;
            }

            s->name.data = (u_char *) (s + 1);
            s->name.len = name->len;
            ngx_memcpy(s->name.data, name->data, name->len);

            s->sibling = up->servers;
            up->servers = s;

            s->next = sh->servers;
            sh->servers = s;
        }

        pacf->shm_server[i] = s;
    }

    return NGX_OK;
}


/* gives back the in-flight counts of a worker that is gone */

static void
ngx_http_prefix_aware_reap(ngx_http_prefix_aware_shm_t *sh, ngx_uint_t slot)
{
    ngx_atomic_uint_t                    n;
    ngx_http_prefix_aware_shm_server_t  *s;

    for (s = sh->servers; s; s = s->next) {
        n = s->slot[slot];

        if (n) {
            ngx_atomic_fetch_add(&s->inflight, - (ngx_atomic_int_t) n);
            s->slot[slot] = 0;
        }
    }

    sh->pid[slot] = 0;
}


/*
 * the ring's server numbers to this process's peers: the zone module moves
 * the peers to shared memory after the configuration is read, so this is
 * done in each process, at its start or at its first request
 */

static void
ngx_http_prefix_aware_set_peers(ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_uint_t                     i;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    peers = pacf->upstream->peer.data;

    for (peer = peers->peer, i = 0;
         peer && i < pacf->nservers;
         peer = peer->next, i++)
    {
        pacf->peer[i] = peer;
    }
}


static ngx_int_t
ngx_http_prefix_aware_init_process(ngx_cycle_t *cycle)
{
    ngx_uint_t                           i;
    ngx_slab_pool_t                     *shpool;
    ngx_http_prefix_aware_shm_t         *sh;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_main_conf_t   *pamcf;

    ngx_http_prefix_aware_slot = -1;

    pamcf = ngx_http_cycle_get_module_main_conf(cycle,
                                                ngx_http_prefix_aware_module);

    if (pamcf == NULL || pamcf->sh == NULL) {
        return NGX_OK;
    }

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        ngx_http_prefix_aware_set_peers(pacf[i]);
    }

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    /*
     * claim a row for this worker's in-flight counts, and give back the
     * counts of workers that died holding requests
     */

    sh = pamcf->sh;
    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_SLOTS; i++) {
        if (sh->pid[i] == 0) {
            continue;
        }

        if (kill((ngx_pid_t) sh->pid[i], 0) == -1 && ngx_errno == NGX_ESRCH) {
            ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                          "prefix_aware: giving back the in-flight counts "
                          "of exited process %P", (ngx_pid_t) sh->pid[i]);
            ngx_http_prefix_aware_reap(sh, i);
        }
    }

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_SLOTS; i++) {
        if (sh->pid[i] == 0) {
            sh->pid[i] = ngx_pid;
            ngx_http_prefix_aware_slot = i;
            break;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    if (ngx_http_prefix_aware_slot == -1) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                      "prefix_aware: more than %d worker processes, "
                      "the counts of this one cannot heal if it dies",
                      NGX_HTTP_PREFIX_AWARE_SLOTS);
    }

    return NGX_OK;
}


static void
ngx_http_prefix_aware_exit_process(ngx_cycle_t *cycle)
{
    ngx_slab_pool_t                    *shpool;
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    if (ngx_http_prefix_aware_slot == -1) {
        return;
    }

    pamcf = ngx_http_cycle_get_module_main_conf(cycle,
                                                ngx_http_prefix_aware_module);

    if (pamcf == NULL || pamcf->sh == NULL) {
        return;
    }

    shpool = (ngx_slab_pool_t *) pamcf->shm_zone->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);
    ngx_http_prefix_aware_reap(pamcf->sh, ngx_http_prefix_aware_slot);
    ngx_shmtx_unlock(&shpool->mutex);

    ngx_http_prefix_aware_slot = -1;
}


static ngx_int_t
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

    mem.alloc.alloc = ngx_http_prefix_aware_alloc;
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
    ngx_http_prefix_aware_shm_server_t    *srv;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    static const char  *formats[] = { "auto", "body", "openai" };

    pa_yajl_funcs(&funcs, mem);

    g = yajl_gen_alloc(&funcs);
    yajl_gen_config(g, yajl_gen_beautify, 1);

    pacf = pamcf->upstreams.elts;

    yajl_gen_map_open(g);
    pa_gen_uint(g, "version", 1);
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


static ngx_int_t
ngx_http_prefix_aware_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char                             *p;
    const char                         *s;
    ngx_http_prefix_aware_peer_data_t  *pd;

    pd = ngx_http_get_module_ctx(r, ngx_http_prefix_aware_module);

    if (pd == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    switch (data) {

    case 0:
        if (!pd->keyed) {
            v->len = 0;
            v->data = (u_char *) "";
            return NGX_OK;
        }

        p = ngx_pnalloc(r->pool, 16);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v->len = ngx_sprintf(p, "%016uxL", pd->hash) - p;
        v->data = p;
        return NGX_OK;

    case 1:
        if (pd->route == PA_ROUTE_NONE) {
            v->len = 0;
            v->data = (u_char *) "";
            return NGX_OK;
        }

        s = pa_route_name(pd->route);
        v->len = ngx_strlen(s);
        v->data = (u_char *) s;
        return NGX_OK;

    default: /* 2 */
        v->len = ngx_http_prefix_aware_sources[pd->source].len;
        v->data = ngx_http_prefix_aware_sources[pd->source].data;
        return NGX_OK;
    }
}


static ngx_int_t
ngx_http_prefix_aware_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_prefix_aware_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/*
 * the shared zone is sized once every upstream is known; it is rounded
 * up generously so that a reload which changes little reuses it, and
 * with it the counts of requests still in flight
 */

static ngx_int_t
ngx_http_prefix_aware_postconf(ngx_conf_t *cf)
{
    size_t                               size;
    ngx_uint_t                           i, j;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_main_conf_t   *pamcf;

    pamcf = ngx_http_conf_get_module_main_conf(cf,
                                               ngx_http_prefix_aware_module);

    if (pamcf->upstreams.nelts == 0) {
        return NGX_OK;
    }

    size = sizeof(ngx_http_prefix_aware_shm_t);
    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        size += sizeof(ngx_http_prefix_aware_shm_upstream_t)
                + pacf[i]->upstream->host.len + 64;

        for (j = 0; j < pacf[i]->nservers; j++) {
            size += sizeof(ngx_http_prefix_aware_shm_server_t)
                    + pacf[i]->names[j].len + 64;
        }
    }

    size = ngx_align(8 * ngx_pagesize + 4 * size, 1024 * 1024);

    pamcf->shm_zone = ngx_shared_memory_add(cf,
                                            &ngx_http_prefix_aware_zone_name,
                                            size,
                                            &ngx_http_prefix_aware_module);
    if (pamcf->shm_zone == NULL) {
        return NGX_ERROR;
    }

    pamcf->shm_zone->init = ngx_http_prefix_aware_init_zone;
    pamcf->shm_zone->data = pamcf;

    return NGX_OK;
}


static void *
ngx_http_prefix_aware_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_prefix_aware_main_conf_t  *pamcf;

    pamcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_main_conf_t));
    if (pamcf == NULL) {
        return NULL;
    }

    if (ngx_array_init(&pamcf->upstreams, cf->pool, 4,
                       sizeof(ngx_http_prefix_aware_srv_conf_t *))
        != NGX_OK)
    {
        return NULL;
    }

    return pamcf;
}


static void *
ngx_http_prefix_aware_create_srv_conf(ngx_conf_t *cf)
{
    ngx_http_prefix_aware_srv_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_srv_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->ring = { NULL, 0, 0 };
     *     conf->peer = NULL;
     *     conf->shm = NULL;
     */

    conf->length = NGX_CONF_UNSET_UINT;
    conf->threshold = NGX_CONF_UNSET_UINT;
    conf->format = NGX_CONF_UNSET_UINT;

    return conf;
}


static char *
ngx_http_prefix_aware(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf = conf;

    char                            *rv;
    ngx_str_t                       *value, s;
    ngx_uint_t                       i;
    ngx_http_upstream_server_t      *server;
    ngx_http_upstream_srv_conf_t    *uscf;

    if (pacf->length != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    pacf->length = 4096;
    pacf->threshold = 10;
    pacf->format = NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO;

    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "length=", 7) == 0) {
            rv = ngx_http_prefix_aware_number(cf, &value[i], 7, 1024, 65536,
                                              &pacf->length);
            if (rv != NGX_CONF_OK) {
                return rv;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "threshold=", 10) == 0) {
            rv = ngx_http_prefix_aware_number(cf, &value[i], 10, 1, 1024,
                                              &pacf->threshold);
            if (rv != NGX_CONF_OK) {
                return rv;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "format=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            if (s.len == 4 && ngx_strncmp(s.data, "auto", 4) == 0) {
                pacf->format = NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO;

            } else if (s.len == 4 && ngx_strncmp(s.data, "body", 4) == 0) {
                pacf->format = NGX_HTTP_PREFIX_AWARE_FORMAT_BODY;

            } else if (s.len == 6 && ngx_strncmp(s.data, "openai", 6) == 0) {
                pacf->format = NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI;

            } else {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"format\" value \"%V\" in "
                                   "\"prefix_aware\", it must be \"auto\", "
                                   "\"body\" or \"openai\"", &s);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" in \"prefix_aware\", "
                           "it takes length=, threshold= and format=",
                           &value[i]);
        return NGX_CONF_ERROR;
    }

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (uscf->servers) {
        server = uscf->servers->elts;

        for (i = 0; i < uscf->servers->nelts; i++) {
            if (server[i].backup) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"prefix_aware\" does not support "
                                   "backup servers: every server is on "
                                   "the ring, use \"down\" or remove it");
                return NGX_CONF_ERROR;
            }
        }
    }

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "load balancing method redefined");
    }

    uscf->peer.init_upstream = ngx_http_prefix_aware_init_upstream;

    uscf->flags = NGX_HTTP_UPSTREAM_CREATE
                  |NGX_HTTP_UPSTREAM_WEIGHT
                  |NGX_HTTP_UPSTREAM_MAX_CONNS
                  |NGX_HTTP_UPSTREAM_MAX_FAILS
                  |NGX_HTTP_UPSTREAM_FAIL_TIMEOUT
                  |NGX_HTTP_UPSTREAM_DOWN;

    return NGX_CONF_OK;
}


static char *
ngx_http_prefix_aware_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_prefix_aware_status_handler;

    return NGX_CONF_OK;
}


static char *
ngx_http_prefix_aware_number(ngx_conf_t *cf, ngx_str_t *value, size_t skip,
    ngx_uint_t min, ngx_uint_t max, ngx_uint_t *n)
{
    ngx_int_t  v;
    ngx_str_t  name;

    name.data = value->data;
    name.len = skip - 1;

    v = ngx_atoi(value->data + skip, value->len - skip);

    if (v == NGX_ERROR || (ngx_uint_t) v < min || (ngx_uint_t) v > max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"%V\" value \"%s\" in \"prefix_aware\", "
                           "it must be a number from %ui to %ui",
                           &name, value->data + skip, min, max);
        return NGX_CONF_ERROR;
    }

    *n = (ngx_uint_t) v;

    return NGX_CONF_OK;
}
