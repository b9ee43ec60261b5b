
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The private header of the module's nginx glue: types shared by
 * ngx_http_prefix_aware_module.c (directives, balancer) and
 * src/ngx_http_prefix_aware_{key,zone,status,variables}.c.
 */


#ifndef _NGX_HTTP_PREFIX_AWARE_H_INCLUDED_
#define _NGX_HTTP_PREFIX_AWARE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "pa_key.h"
#include "pa_ring.h"
#include "pa_openai.h"


#define NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO     0
#define NGX_HTTP_PREFIX_AWARE_FORMAT_BODY     1
#define NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI   2

#define NGX_HTTP_PREFIX_AWARE_SOURCE_NONE     0
#define NGX_HTTP_PREFIX_AWARE_SOURCE_BODY     1
#define NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI   2

/* worker processes that can hold requests at once, reloads included */
#define NGX_HTTP_PREFIX_AWARE_SLOTS           64

/* the ring has 160 points per unit of weight: bound what it may cost */
#define NGX_HTTP_PREFIX_AWARE_MAX_WEIGHT      100
#define NGX_HTTP_PREFIX_AWARE_MAX_POINTS      4194304

/* in flight at the first choice: 0, 1, 2, 4, ... 1024, +inf */
#define NGX_HTTP_PREFIX_AWARE_HIST            13

#define NGX_HTTP_PREFIX_AWARE_ID_HEADER  "X-Amzn-SageMaker-Prefix-Aware-Id"

/* a body in a temp file is read through a buffer of this size */
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
    NGX_HTTP_PA_UP_INVALID_PCK,
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
    /* per process: smooth weighted round robin among least-loaded ties */
    int64_t                               *current;
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


/* a server's name and its index, sorted to find equal names */
typedef struct {
    ngx_str_t                             *name;
    ngx_uint_t                             index;
} ngx_http_prefix_aware_name_t;


typedef struct {
    const char                            *name;
    const char                            *help;
    ngx_uint_t                             counter;
} ngx_http_prefix_aware_metric_t;


/* ngx_http_prefix_aware_key.c */
ngx_int_t ngx_http_prefix_aware_key(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_str_t *reason);
ngx_int_t ngx_http_prefix_aware_reject(ngx_http_request_t *r,
    ngx_str_t *reason);
ngx_table_elt_t *ngx_http_prefix_aware_header(ngx_http_request_t *r,
    ngx_str_t *name, ngx_uint_t *n);

/* ngx_http_prefix_aware_zone.c */
ngx_int_t ngx_http_prefix_aware_zone_add(ngx_conf_t *cf,
    ngx_http_prefix_aware_main_conf_t *pamcf);
void ngx_http_prefix_aware_set_peers(ngx_http_prefix_aware_srv_conf_t *pacf);
ngx_int_t ngx_http_prefix_aware_init_process(ngx_cycle_t *cycle);
void ngx_http_prefix_aware_exit_process(ngx_cycle_t *cycle);

/* ngx_http_prefix_aware_status.c */
ngx_int_t ngx_http_prefix_aware_status_handler(ngx_http_request_t *r);

/* ngx_http_prefix_aware_variables.c */
ngx_int_t ngx_http_prefix_aware_add_variables(ngx_conf_t *cf);


/* this worker's row in the zone's per-worker in-flight counts */
extern ngx_int_t     ngx_http_prefix_aware_slot;

/* key-source names, indexed by NGX_HTTP_PREFIX_AWARE_SOURCE_* */
extern ngx_str_t     ngx_http_prefix_aware_sources[];

extern ngx_module_t  ngx_http_prefix_aware_module;


#endif /* _NGX_HTTP_PREFIX_AWARE_H_INCLUDED_ */
