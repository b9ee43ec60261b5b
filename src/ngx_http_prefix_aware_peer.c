
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * A server as a request's choice sees it, below the balancer's get that
 * the entry file keeps and the choices (ring, index, strategies) that
 * ask: whether the request may go to it and its count in flight over all
 * workers (probe), and a place taken on it below threshold (reserve).
 */


#include "ngx_http_prefix_aware.h"


/*
 * PA_SERVER_ABSENT: not in the request's model set; PA_SERVER_UNUSABLE:
 * tried already, down, failed within fail_timeout, or at max_conns
 */

int
ngx_http_prefix_aware_probe(void *ctx, uint32_t server, uint64_t *inflight)
{
    ngx_http_prefix_aware_peer_data_t  *pd = ctx;

    uintptr_t                            m;
    ngx_uint_t                           n;
    ngx_http_upstream_rr_peer_t         *peer;
    ngx_http_prefix_aware_shm_server_t  *s;

    peer = pd->conf->peer[server];

    s = pd->conf->shm_server[server];
    *inflight = s->inflight;

    /* load=on of prefix_aware_sync: the other hosts' requests count too */

    if (pd->conf->sync_load == NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_ALL
        && (ngx_atomic_int_t) s->sync_inflight > 0)
    {
        *inflight += s->sync_inflight;
    }

    n = server / (8 * sizeof(uintptr_t));
    m = (uintptr_t) 1 << server % (8 * sizeof(uintptr_t));

    if (pd->set && !(pd->set[n] & m)) {
        return PA_SERVER_ABSENT;
    }

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


/* takes a place on a server below threshold, or fails if there is none */

ngx_int_t
ngx_http_prefix_aware_reserve(ngx_http_prefix_aware_shm_server_t *s,
    ngx_uint_t threshold)
{
    ngx_atomic_uint_t  v;

    for ( ;; ) {
        v = s->inflight;

        if (v >= threshold) {
            return NGX_BUSY;
        }

        if (ngx_atomic_cmp_set(&s->inflight, v, v + 1)) {
            return NGX_OK;
        }
    }
}
