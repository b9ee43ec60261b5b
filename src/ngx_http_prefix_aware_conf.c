
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * What the parsers and the zones of every concern share at configuration
 * time: a number or a time parameter checked against its range, and a
 * shared memory zone of an upstream's own, named after the upstream.
 */


#include "ngx_http_prefix_aware.h"


/* "name=N", N within min..max; "skip" is the length of "name=" */

char *
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


/*
 * "name=TIME" of "directive", within min..max ms, which "from" and "to"
 * say as the configuration would ("10ms", "60s"); "skip" is the length
 * of "name="
 */

ngx_int_t
ngx_http_prefix_aware_time(ngx_conf_t *cf, ngx_str_t *value, size_t skip,
    const char *directive, ngx_msec_t min, const char *from,
    ngx_msec_t max, const char *to, ngx_msec_t *t)
{
    ngx_str_t   s;
    ngx_msec_t  ms;

    s.data = value->data + skip;
    s.len = value->len - skip;

    ms = ngx_parse_time(&s, 0);

    if (ms == (ngx_msec_t) NGX_ERROR || ms < min || ms > max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"%*s\" value \"%V\" in \"%s\", it "
                           "must be a time from %s to %s",
                           (size_t) (skip - 1), value->data, &s, directive,
                           from, to);
        return NGX_ERROR;
    }

    *t = ms;

    return NGX_OK;
}


/*
 * the zone "prefix" followed by the upstream's name: one per upstream and
 * use, kept over a reload while its size stays (nginx reuses a zone of the
 * same name, size and tag); NULL and a message if another upstream's
 * zone has the name already
 */

ngx_shm_zone_t *
ngx_http_prefix_aware_upstream_zone(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *prefix, size_t size)
{
    ngx_str_t        name, *host;
    ngx_shm_zone_t  *shm_zone;

    host = &pacf->upstream->host;

    name.len = prefix->len + host->len;
    name.data = ngx_pnalloc(cf->pool, name.len);
    if (name.data == NULL) {
        return NULL;
    }

    ngx_memcpy(ngx_cpymem(name.data, prefix->data, prefix->len), host->data,
               host->len);

    shm_zone = ngx_shared_memory_add(cf, &name, size,
                                     &ngx_http_prefix_aware_module);
    if (shm_zone == NULL) {
        return NULL;
    }

    if (shm_zone->data) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: duplicate zone \"%V\"", &name);
        return NULL;
    }

    return shm_zone;
}
