
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * A server as a request's choice sees it, below the balancer's get that
 * the entry file keeps and the choices (ring, index, strategies) that
 * ask: whether the request may go to it and its count in flight over all
 * workers (probe), with the index its work in flight, and a place taken
 * on it below threshold (reserve).  Both with what others put there:
 * other nginx hosts (prefix_aware_sync) and, with load=engine, the
 * requests its engine reports beyond all the hosts' own.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_work.h"


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


/*
 * the work in flight on a server: this host's, the other hosts' as they
 * last said (prefix_aware_sync), and with load=engine the requests its
 * engine reported (running and waiting, within two intervals) beyond
 * what the hosts know of, each at the mean work of those they know
 * ("unit" where they know none): other clients'; their work saturates
 * at PA_WORK_MAX (src/pa_work.h)
 */

uint64_t
ngx_http_prefix_aware_work(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_uint_t server, uint64_t unit)
{
    unsigned                             seen;
    uint64_t                             work, known, n;
    ngx_msec_t                           reported;
    ngx_atomic_int_t                     v;
    ngx_http_prefix_aware_shm_server_t  *s;

    s = pacf->shm_server[server];
    work = s->work;

    if (pacf->sync_load) {
        v = (ngx_atomic_int_t) s->sync_work;
        work += (v > 0) ? (uint64_t) v : 0;
    }

    if (!pacf->engine_load) {
        return work;
    }

    known = s->inflight;

    if (pacf->sync_load) {
        v = (ngx_atomic_int_t) s->sync_inflight;
        known += (v > 0) ? (uint64_t) v : 0;
    }

    reported = s->engine_reported;
    seen = (unsigned) s->engine_seen;

    /*
     * the report's age without wrapping: another worker, its cached
     * clock a few milliseconds ahead of this one's, may have stored it
     */

    if (s->engine_failing
        || !(seen & ((1u << PA_PROM_WAITING) | (1u << PA_PROM_RUNNING)))
        || !pa_work_fresh(ngx_current_msec, reported,
                          pacf->metrics_interval))
    {
        return work;
    }

    n = (uint64_t) s->engine_waiting + s->engine_running;

    /* saturating, at most PA_WORK_MAX with the engine's share */

    return pa_work_engine(work, known, n, unit);
}


/*
 * the request's work ("cost", its "decode" share of it) counts on
 * "server" from now on: its prefill until the first bytes of its answer
 * (prefill=first), all of it until it ends (the entry file's free)
 */

void
ngx_http_prefix_aware_work_add(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server)
{
    ngx_http_prefix_aware_srv_conf_t    *pacf;
    ngx_http_prefix_aware_shm_server_t  *s;

    pacf = pd->conf;
    s = pacf->shm_server[server];

    ngx_atomic_fetch_add(&s->work, (ngx_atomic_int_t) pd->cost);

    pd->prefill = pacf->prefill_end ? 0 : pd->cost - pd->decode;

    if (pacf->works) {
        pd->wcount = &pacf->works[server];
        ngx_atomic_fetch_add(pd->wcount, (ngx_atomic_int_t) pd->cost);
    }
}


/*
 * a request sent to a server the index did not choose (the server of the
 * stored response it follows, ngx_http_prefix_aware_state.c): its work
 * counts there as a request of no cached block would (what the server
 * holds of the conversation is not in its key)
 */

void
ngx_http_prefix_aware_work_uncached(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server)
{
    uint64_t  decode;

    decode = NGX_HTTP_PREFIX_AWARE_DECODE
             + pd->total_units * NGX_HTTP_PREFIX_AWARE_ACTIVE / 100;

    pd->cost = pa_choose_cost(pd->total_units ? pd->total_units : pd->units,
                              0, (uint32_t) pd->conf->block, decode);
    pd->decode = ngx_min(decode, pd->cost);

    ngx_http_prefix_aware_work_add(pd, server);
}
