
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * queue=: its parameters and its zone, at the configuration's reading;
 * src/ngx_http_prefix_aware_queue.c keeps the queue.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_queue.h"


static ngx_http_prefix_aware_queue_t *ngx_http_prefix_aware_queue_conf(
    ngx_conf_t *cf, ngx_http_prefix_aware_srv_conf_t *pacf);
static ngx_int_t ngx_http_prefix_aware_queue_var(ngx_conf_t *cf,
    ngx_str_t *value, size_t skip, const char *name, ngx_int_t *index,
    ngx_str_t *text);
static ngx_int_t ngx_http_prefix_aware_queue_init_zone(
    ngx_shm_zone_t *shm_zone, void *data);


static ngx_http_prefix_aware_queue_t *
ngx_http_prefix_aware_queue_conf(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_http_prefix_aware_queue_t  *qu;

    if (pacf->queue) {
        return pacf->queue;
    }

    qu = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_queue_t));
    if (qu == NULL) {
        return NULL;
    }

    qu->timeout = 10000;
    qu->poll = 5;
    qu->status = 429;
    qu->retry = 1;
    qu->priority = -1;
    qu->flow = -1;
    qu->pacf = pacf;

    pacf->queue = qu;

    return qu;
}


/* queue=, queue_timeout=, queue_poll=, queue_status=, queue_retry=, */
/* queue_reserve=, priority=, priority_reserve=, flow=: NGX_OK, */
/* NGX_DECLINED, NGX_ERROR */

ngx_int_t
ngx_http_prefix_aware_queue_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value)
{
    char                           *rv;
    ngx_int_t                       n;
    ngx_str_t                       s;
    ngx_http_prefix_aware_queue_t  *qu;

    if (ngx_strncmp(value->data, "queue", 5) != 0
        && ngx_strncmp(value->data, "priority", 8) != 0
        && ngx_strncmp(value->data, "flow=", 5) != 0)
    {
        return NGX_DECLINED;
    }

    qu = ngx_http_prefix_aware_queue_conf(cf, pacf);
    if (qu == NULL) {
        return NGX_ERROR;
    }

    if (value->len == 9 && ngx_strncmp(value->data, "queue=off", 9) == 0) {
        qu->off = 1;
        qu->size = 0;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "queue=", 6) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 6, 1, 65536, &qu->size);
        qu->off = 0;
        return (rv == NGX_CONF_OK) ? NGX_OK : NGX_ERROR;
    }

    if (ngx_strncmp(value->data, "queue_timeout=", 14) == 0) {
        return ngx_http_prefix_aware_time(cf, value, 14, "prefix_aware",
                                          1, "1ms", 3600000, "1h",
                                          &qu->timeout);
    }

    if (ngx_strncmp(value->data, "queue_poll=", 11) == 0) {
        return ngx_http_prefix_aware_time(cf, value, 11, "prefix_aware",
                                          1, "1ms", 1000, "1s", &qu->poll);
    }

    if (ngx_strncmp(value->data, "queue_retry=", 12) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 12, 0, 3600, &qu->retry);
        return (rv == NGX_CONF_OK) ? NGX_OK : NGX_ERROR;
    }

    if (ngx_strncmp(value->data, "queue_reserve=", 14) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 14, 0, 1023,
                                          &qu->reserve);
        return (rv == NGX_CONF_OK) ? NGX_OK : NGX_ERROR;
    }

    if (ngx_strncmp(value->data, "priority_reserve=", 17) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 17, 0, 1023, &qu->high);
        return (rv == NGX_CONF_OK) ? NGX_OK : NGX_ERROR;
    }

    if (ngx_strncmp(value->data, "queue_status=", 13) == 0) {
        s.data = value->data + 13;
        s.len = value->len - 13;

        n = ngx_atoi(s.data, s.len);

        if (n != 429 && n != 503) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"queue_status\" value \"%V\" in "
                               "\"prefix_aware\", it must be 429 or 503",
                               &s);
            return NGX_ERROR;
        }

        qu->status = (ngx_uint_t) n;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "priority=", 9) == 0) {
        return ngx_http_prefix_aware_queue_var(cf, value, 9, "priority",
                                               &qu->priority,
                                               &qu->priority_name);
    }

    if (ngx_strncmp(value->data, "flow=", 5) == 0) {
        return ngx_http_prefix_aware_queue_var(cf, value, 5, "flow",
                                               &qu->flow, &qu->flow_name);
    }

    return NGX_DECLINED;
}


static ngx_int_t
ngx_http_prefix_aware_queue_var(ngx_conf_t *cf, ngx_str_t *value,
    size_t skip, const char *name, ngx_int_t *index, ngx_str_t *text)
{
    u_char     *p;
    ngx_str_t   s;

    s.data = value->data + skip + 1;
    s.len = value->len - skip - 1;

    for (p = s.data; p < s.data + s.len; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '_'))
        {
            break;
        }
    }

    if (value->len <= skip || value->data[skip] != '$' || s.len == 0
        || p < s.data + s.len)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"%s\" value \"%*s\" in "
                           "\"prefix_aware\", it must be a $variable", name,
                           value->len - skip, value->data + skip);
        return NGX_ERROR;
    }

    *index = ngx_http_get_variable_index(cf, &s);
    if (*index == NGX_ERROR) {
        return NGX_ERROR;
    }

    text->data = value->data + skip;
    text->len = value->len - skip;

    return NGX_OK;
}


/* at the upstream's initialization: its zone, or the parameters' errors */

ngx_int_t
ngx_http_prefix_aware_queue_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    size_t                          size;
    ngx_shm_zone_t                 *shm_zone;
    ngx_http_prefix_aware_queue_t  *qu;

    static ngx_str_t  prefix =
        ngx_string("ngx_http_prefix_aware_module:queue:");

    qu = pacf->queue;

    if (qu == NULL) {
        return NGX_OK;
    }

    if (qu->off) {
        pacf->queue = NULL;
        return NGX_OK;
    }

    if (qu->size == 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: queue_timeout=, queue_poll=, "
                      "queue_status=, queue_retry=, queue_reserve=, "
                      "priority=, priority_reserve= and flow= need queue=N "
                      "in upstream \"%V\"",
                      &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (qu->reserve + qu->high >= pacf->threshold) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: queue_reserve=%ui and "
                      "priority_reserve=%ui together must be less than "
                      "threshold=%ui in upstream \"%V\"", qu->reserve,
                      qu->high, pacf->threshold, &pacf->upstream->host);
        return NGX_ERROR;
    }

    if (qu->high && qu->priority < 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: priority_reserve= needs priority=$var "
                      "in upstream \"%V\"", &pacf->upstream->host);
        return NGX_ERROR;
    }

    /*
     * with model sets, each place has the bits of the servers it may use
     * ("server ... resolve" has none: every place may use every server of
     * the worker's current view, counted at each look);
     * a page more a word, so that another number of words is another
     * size, another zone (a reload's new workers do not take the old one)
     */

    qu->nwords = pacf->models ? (pacf->nservers + 63) / 64 : 0;

    if (qu->nwords > PA_QUEUE_MAX_WORDS) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: queue= with model sets takes at most "
                      "%d servers, upstream \"%V\" has %ui",
                      64 * PA_QUEUE_MAX_WORDS, &pacf->upstream->host,
                      pacf->nservers);
        return NGX_ERROR;
    }

    size = ngx_align(pa_queue_size((uint32_t) qu->size,
                                   (uint32_t) qu->nwords), ngx_pagesize)
           + (8 + qu->nwords) * ngx_pagesize;

    shm_zone = ngx_http_prefix_aware_upstream_zone(cf, pacf, &prefix, size);
    if (shm_zone == NULL) {
        return NGX_ERROR;
    }

    shm_zone->init = ngx_http_prefix_aware_queue_init_zone;
    shm_zone->data = qu;

    qu->zone = shm_zone;

    return NGX_OK;
}


/* the table is kept across reloads while queue= is the same */

static ngx_int_t
ngx_http_prefix_aware_queue_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    size_t                          size;
    void                           *mem;
    ngx_slab_pool_t                *shpool;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    size = pa_queue_size((uint32_t) qu->size, (uint32_t) qu->nwords);
    mem = shpool->data;

    if (mem == NULL) {
        mem = ngx_slab_alloc(shpool, size);
        if (mem == NULL) {
            return NGX_ERROR;
        }

        shpool->data = mem;
    }

    if (pa_queue_attach(&qu->q, mem, size, (uint32_t) qu->size,
                        (uint32_t) qu->nwords)
        == -1)
    {
        return NGX_ERROR;
    }

    qu->shpool = shpool;
    qu->q.reserve = (uint32_t) qu->reserve;
    qu->q.high = (uint32_t) qu->high;

    return NGX_OK;
}
