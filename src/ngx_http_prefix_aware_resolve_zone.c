
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The shared zone's side of "server ... resolve" (see
 * ngx_http_prefix_aware_resolve.c): the room it is sized for, and the
 * blocks of counts a worker keeps for each view of such an upstream:
 * freed once drained, given back when the worker is reaped.
 */


#include "ngx_http_prefix_aware.h"


/* addresses an upstream with "resolve" is sized for in the shared zone */
#define NGX_HTTP_PREFIX_AWARE_RESOLVE_ROOM  256


/* room in the shared zone for the records and counts of resolved servers */

size_t
ngx_http_prefix_aware_resolve_size(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_uint_t workers)
{
    size_t                              size;
    ngx_uint_t                          i;
    ngx_http_prefix_aware_srv_conf_t  **pacf;

    pacf = pamcf->upstreams.elts;
    size = 0;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->resolve == NULL) {
            continue;
        }

        size += NGX_HTTP_PREFIX_AWARE_RESOLVE_ROOM
                * (2 * (sizeof(ngx_http_prefix_aware_shm_server_t)
                        + NGX_SOCKADDR_STRLEN)
                   + 4 * workers * (sizeof(void *)
                                    + 2 * sizeof(ngx_atomic_t)))
                + 4 * workers * sizeof(ngx_http_prefix_aware_shm_block_t);
    }

    return size;
}


/* frees this worker's blocks of older views whose requests all ended */

void
ngx_http_prefix_aware_resolve_drain(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_worker_t *w)
{
    ngx_uint_t                           i;
    ngx_http_prefix_aware_shm_block_t   *b, **pb;

    for (pb = &w->blocks; *pb; /* void */) {
        b = *pb;

        if (!b->current) {
            for (i = 0; i < b->nservers; i++) {
                if (b->count[i] || b->work[i]) {
                    break;
                }
            }

            if (i == b->nservers) {
                *pb = b->next;
                ngx_slab_free_locked(shpool, b);
                continue;
            }
        }

        pb = &b->next;
    }
}


/*
 * under the zone's lock, a worker record is freed: the counts of its
 * blocks given back, the references of its view dropped
 */

void
ngx_http_prefix_aware_resolve_reap(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_worker_t *w)
{
    ngx_uint_t                          i;
    ngx_atomic_uint_t                   n;
    ngx_http_prefix_aware_shm_block_t  *b, *next;

    for (b = w->blocks; b; b = next) {
        next = b->next;

        for (i = 0; i < b->nservers; i++) {
            n = b->count[i];

            if (n) {
                ngx_atomic_fetch_add(&b->server[i]->inflight,
                                     - (ngx_atomic_int_t) n);
            }

            n = b->work[i];

            if (n) {
                ngx_atomic_fetch_add(&b->server[i]->work,
                                     - (ngx_atomic_int_t) n);
            }

            if (b->current) {
                b->server[i]->refs--;
            }
        }

        ngx_slab_free_locked(shpool, b);
    }

    w->blocks = NULL;
}


/* 1 if a worker record has requests in flight on resolved servers */

ngx_uint_t
ngx_http_prefix_aware_resolve_busy(ngx_http_prefix_aware_shm_worker_t *w)
{
    ngx_uint_t                          i;
    ngx_http_prefix_aware_shm_block_t  *b;

    for (b = w->blocks; b; b = b->next) {
        for (i = 0; i < b->nservers; i++) {
            if (b->count[i]) {
                return 1;
            }
        }
    }

    return 0;
}
