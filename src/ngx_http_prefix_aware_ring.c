/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The ring of an upstream with configured servers: each server's name on
 * the ring (the name of its "server" line, with the address appended if
 * the name resolved to several), its weight, the duplicate check and the
 * ring itself, built once at configuration time from cf->pool.  Servers
 * found by "resolve" are placed in each worker instead (resolve.c).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_name_cmp(const void *one,
    const void *two);


ngx_int_t
ngx_http_prefix_aware_ring_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_http_upstream_srv_conf_t *us)
{
    u_char                              *p;
    size_t                               len, total;
    ngx_uint_t                           i, j, n;
    pa_ring_point_t                     *points;
    pa_ring_server_t                    *servers;
    ngx_http_upstream_rr_peer_t         *peer;
    ngx_http_prefix_aware_name_t        *byname;
    ngx_http_upstream_rr_peers_t        *peers;

    peers = us->peer.data;

    n = peers->number;

    servers = ngx_palloc(cf->pool, n * sizeof(pa_ring_server_t));
    pacf->names = ngx_palloc(cf->pool, n * sizeof(ngx_str_t));
    pacf->weights = ngx_palloc(cf->pool, n * sizeof(uint32_t));
    pacf->current = ngx_pcalloc(cf->pool, n * sizeof(int64_t));
    pacf->shm_server = ngx_pcalloc(cf->pool,
                              n * sizeof(ngx_http_prefix_aware_shm_server_t *));
    pacf->peer = ngx_pcalloc(cf->pool,
                             n * sizeof(ngx_http_upstream_rr_peer_t *));

    if (servers == NULL || pacf->names == NULL || pacf->weights == NULL
        || pacf->current == NULL || pacf->shm_server == NULL
        || pacf->peer == NULL)
    {
        return NGX_ERROR;
    }

    /*
     * a server's place on the ring depends on its configured name only,
     * so that every nginx with the same servers routes alike; a name that
     * resolved to several addresses is told apart by the address
     */

    byname = ngx_palloc(cf->pool, n * sizeof(ngx_http_prefix_aware_name_t));
    if (byname == NULL) {
        return NGX_ERROR;
    }

    for (peer = peers->peer, i = 0; peer; peer = peer->next, i++) {
        byname[i].name = &peer->server;
        byname[i].index = i;
        pacf->peer[i] = peer;
    }

    /* sorted, equal names are neighbours: n log n for 5,000 servers too */

    ngx_sort(byname, n, sizeof(ngx_http_prefix_aware_name_t),
             ngx_http_prefix_aware_name_cmp);

    for (i = 0; i < n; i++) {
        j = byname[i].index;
        peer = pacf->peer[j];

        if ((i > 0 && ngx_http_prefix_aware_name_cmp(&byname[i],
                                                     &byname[i - 1]) == 0)
            || (i + 1 < n && ngx_http_prefix_aware_name_cmp(&byname[i],
                                                     &byname[i + 1]) == 0))
        {
            len = peer->server.len + 1 + peer->name.len;

            p = ngx_pnalloc(cf->pool, len);
            if (p == NULL) {
                return NGX_ERROR;
            }

            pacf->names[j].data = p;
            p = ngx_cpymem(p, peer->server.data, peer->server.len);
            *p++ = ' ';
            ngx_memcpy(p, peer->name.data, peer->name.len);
            pacf->names[j].len = len;

        } else {
            pacf->names[j] = peer->server;
        }

        servers[j].weight = (uint32_t) peer->weight;
        pacf->weights[j] = (uint32_t) peer->weight;

        if (peer->weight > NGX_HTTP_PREFIX_AWARE_MAX_WEIGHT) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "prefix_aware: invalid \"weight\" value %ui of "
                          "server \"%V\" in upstream \"%V\", it must be "
                          "a number from 1 to %d", peer->weight,
                          &peer->server, &us->host,
                          NGX_HTTP_PREFIX_AWARE_MAX_WEIGHT);
            return NGX_ERROR;
        }
    }

    for (i = 0; i < n; i++) {
        byname[i].name = &pacf->names[i];
        byname[i].index = i;
        servers[i].name = pacf->names[i].data;
        servers[i].len = pacf->names[i].len;
    }

    ngx_sort(byname, n, sizeof(ngx_http_prefix_aware_name_t),
             ngx_http_prefix_aware_name_cmp);

    for (i = 1; i < n; i++) {
        if (ngx_http_prefix_aware_name_cmp(&byname[i], &byname[i - 1]) == 0) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "prefix_aware: duplicate server \"%V\" in "
                          "upstream \"%V\", use \"weight=\" instead",
                          &pacf->peer[byname[i].index]->server, &us->host);
            return NGX_ERROR;
        }
    }

    /* the peers are found again in each process: see set_peers() */

    ngx_memzero(pacf->peer, n * sizeof(ngx_http_upstream_rr_peer_t *));

    total = pa_ring_points(servers, n);

    if (total == 0 || total > NGX_HTTP_PREFIX_AWARE_MAX_POINTS) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "prefix_aware: the ring of upstream \"%V\" would "
                      "have more than %d points (%d per unit of weight), "
                      "lower the weights or split the upstream",
                      &us->host, NGX_HTTP_PREFIX_AWARE_MAX_POINTS,
                      PA_RING_POINTS_PER_WEIGHT);
        return NGX_ERROR;
    }

    points = ngx_palloc(cf->pool, total * sizeof(pa_ring_point_t));
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

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_name_cmp(const void *one, const void *two)
{
    const ngx_http_prefix_aware_name_t  *a = one;
    const ngx_http_prefix_aware_name_t  *b = two;

    return ngx_memn2cmp(a->name->data, b->name->data, a->name->len,
                        b->name->len);
}
