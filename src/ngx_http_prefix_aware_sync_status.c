
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * prefix_aware_sync on the status page and in Prometheus: the datagrams'
 * counts, the other hosts heard from, their load on each server, and the
 * kernel's figures of the listening socket (what arrives is
 * ngx_http_prefix_aware_sync_hosts.c).
 */


#include "ngx_http_prefix_aware.h"

#if (NGX_HTTP_PREFIX_AWARE_HAVE_SO_MEMINFO)
#include <linux/sock_diag.h>
#endif


static ngx_uint_t ngx_http_prefix_aware_sync_hosts(
    ngx_http_prefix_aware_shm_upstream_t *up);
static ngx_int_t ngx_http_prefix_aware_sync_meminfo(
    ngx_http_prefix_aware_sync_t *sy, ngx_uint_t *rcvbuf, ngx_uint_t *drops);


/* the other hosts heard from, those not yet gone quiet */

static ngx_uint_t
ngx_http_prefix_aware_sync_hosts(ngx_http_prefix_aware_shm_upstream_t *up)
{
    ngx_uint_t  h, hosts;

    hosts = 0;

    for (h = 0; h < NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS; h++) {
        hosts += (up->sync_peer[h].live != 0);
    }

    return hosts;
}


/* the other hosts' figures on the status page */

void
ngx_http_prefix_aware_sync_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                             h, hosts, senders;
    ngx_atomic_t                          *n;
    ngx_http_prefix_aware_sync_t          *sy;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    sy = pacf->sync;
    up = pacf->shm;

    if (sy == NULL || up == NULL) {
        return;
    }

    hosts = ngx_http_prefix_aware_sync_hosts(up);
    senders = 0;

    for (h = 0; h < NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS; h++) {
        senders += (up->sync_peer[h].sender != 0);
    }

    n = up->sync_count;

    ngx_http_prefix_aware_printf(w,
        "      \"sync\": { \"listen\": \"%V\", \"peers\": %ui, "
        "\"hosts\": %ui, \"senders\": %ui, \"interval_ms\": %M, "
        "\"skew_ms\": %M, \"load\": \"%s\", "
        "\"sent\": %uA, \"send_errors\": %uA, \"received\": %uA, "
        "\"refused\": %uA, \"replayed\": %uA, \"stale\": %uA, "
        "\"full\": %uA, \"busy\": %uA, \"malformed\": %uA, "
        "\"records\": %uA, \"loads\": %uA, "
        "\"dropped\": %uA, \"unknown\": %uA, \"drained\": %uA },\n",
        &sy->listen.name, sy->peers.nelts, hosts, senders, sy->interval,
        sy->skew,
        sy->load == NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_ALL ? "on"
        : sy->load == NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_WORK ? "work" : "off",
        n[NGX_HTTP_PA_SYNC_SENT], n[NGX_HTTP_PA_SYNC_SEND_ERRORS],
        n[NGX_HTTP_PA_SYNC_RECEIVED], n[NGX_HTTP_PA_SYNC_REFUSED],
        n[NGX_HTTP_PA_SYNC_REPLAYED], n[NGX_HTTP_PA_SYNC_STALE],
        n[NGX_HTTP_PA_SYNC_FULL], n[NGX_HTTP_PA_SYNC_BUSY],
        n[NGX_HTTP_PA_SYNC_MALFORMED],
        n[NGX_HTTP_PA_SYNC_RECORDS], n[NGX_HTTP_PA_SYNC_LOADS],
        n[NGX_HTTP_PA_SYNC_DROPPED], n[NGX_HTTP_PA_SYNC_UNKNOWN],
        n[NGX_HTTP_PA_SYNC_DRAINED]);
}


void
ngx_http_prefix_aware_sync_json_server(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_uint_t j, ngx_http_prefix_aware_writer_t *w)
{
    ngx_atomic_int_t                     in, work;
    ngx_http_prefix_aware_shm_server_t  *s;

    if (pacf->sync == NULL) {
        return;
    }

    s = pacf->shm_server[j];
    in = (ngx_atomic_int_t) s->sync_inflight;
    work = (ngx_atomic_int_t) s->sync_work;

    ngx_http_prefix_aware_printf(w,
        ", \"other_hosts\": { \"inflight\": %uA, \"work\": %uA }",
        (ngx_atomic_uint_t) ngx_max(in, 0),
        (ngx_atomic_uint_t) ngx_max(work, 0));
}


static const char  *ngx_http_prefix_aware_sync_names[] = {
    "sent", "send_error", "received", "refused", "record", "load",
    "dropped", "unknown_server", "replayed", "stale", "full", "busy",
    "malformed", "drained"
};


void
ngx_http_prefix_aware_sync_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                           i, j, k, f, any;
    ngx_atomic_int_t                     v;
    ngx_http_prefix_aware_srv_conf_t   **pacf, *c;
    ngx_http_prefix_aware_shm_server_t  *s;

    pacf = pamcf->upstreams.elts;
    any = 0;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->sync && pacf[i]->shm) {
            any = 1;
        }
    }

    if (!any) {
        return;
    }

    ngx_http_prefix_aware_family(w, "sync_datagrams_total", "counter",
        "Datagrams of prefix_aware_sync by what became of them (sent, "
        "received, refused; of the refused: replayed, stale, full, busy), "
        "entries (record, load, unknown_server, malformed), and datagrams "
        "read for a request (drained)");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        c = pacf[i];

        if (c->sync == NULL || c->shm == NULL) {
            continue;
        }

        for (k = 0; k < NGX_HTTP_PA_SYNC_N; k++) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_sync_datagrams_total{upstream=\"%V\","
                "kind=\"%s\"} %uA\n", &label[i][0],
                ngx_http_prefix_aware_sync_names[k], c->shm->sync_count[k]);
        }
    }

    ngx_http_prefix_aware_family(w, "sync_hosts", "gauge",
        "Other nginx hosts heard from in the last 5 intervals");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        c = pacf[i];

        if (c->sync == NULL || c->shm == NULL) {
            continue;
        }

        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_sync_hosts{upstream=\"%V\"} %ui\n",
            &label[i][0], ngx_http_prefix_aware_sync_hosts(c->shm));
    }

    for (f = 0; f < 2; f++) {
        ngx_http_prefix_aware_family(w,
            f ? "other_hosts_work" : "other_hosts_inflight", "gauge",
            f ? "Work in flight on the server from other nginx hosts, as "
                "they last said"
              : "Requests in flight on the server from other nginx hosts, "
                "as they last said");

        for (i = 0; i < pamcf->upstreams.nelts; i++) {
            c = pacf[i];

            if (c->sync == NULL || c->shm == NULL) {
                continue;
            }

            for (j = 0; j < c->nservers; j++) {
                s = c->shm_server[j];
                v = (ngx_atomic_int_t) (f ? s->sync_work : s->sync_inflight);

                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_%s{upstream=\"%V\",server=\"%V\"} "
                    "%uA\n", f ? "other_hosts_work" : "other_hosts_inflight",
                    &label[i][0], &label[i][1 + j],
                    (ngx_atomic_uint_t) ngx_max(v, 0));
            }
        }
    }
}


/*
 * the kernel's counts of the listening socket: the receive buffer it
 * has (twice "rcvbuf=", at most twice net.core.rmem_max) and the
 * datagrams it dropped, the buffer full: sk_drops, the "drops" of
 * /proc/net/udp, read in one call on the page's request rather than
 * parsed from /proc; SO_RXQ_OVFL would need the control messages of
 * each datagram, which nginx's UDP read (ngx_event_recvmsg()) does not
 * pass to a listening socket's handler
 */

static ngx_int_t
ngx_http_prefix_aware_sync_meminfo(ngx_http_prefix_aware_sync_t *sy,
    ngx_uint_t *rcvbuf, ngx_uint_t *drops)
{
#if (NGX_HTTP_PREFIX_AWARE_HAVE_SO_MEMINFO)

    uint32_t   mem[SK_MEMINFO_VARS];
    socklen_t  len;

    if (sy->listen_fd == (ngx_socket_t) -1) {
        return NGX_DECLINED;
    }

    len = sizeof(mem);

    if (getsockopt(sy->listen_fd, SOL_SOCKET, SO_MEMINFO, mem, &len) == -1
        || len < (SK_MEMINFO_DROPS + 1) * sizeof(uint32_t))
    {
        return NGX_DECLINED;
    }

    *rcvbuf = mem[SK_MEMINFO_RCVBUF];
    *drops = mem[SK_MEMINFO_DROPS];

    return NGX_OK;

#else

    return NGX_DECLINED;

#endif
}


void
ngx_http_prefix_aware_sync_json_socket(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t  rcvbuf, drops;

    if (pacf->sync == NULL || pacf->shm == NULL) {
        return;
    }

    if (ngx_http_prefix_aware_sync_meminfo(pacf->sync, &rcvbuf, &drops)
        != NGX_OK)
    {
        ngx_http_prefix_aware_printf(w,
            "      \"sync_socket\": { \"rcvbuf\": null, "
            "\"kernel_drops\": null },\n");
        return;
    }

    ngx_http_prefix_aware_printf(w,
        "      \"sync_socket\": { \"rcvbuf\": %ui, \"kernel_drops\": %ui },\n",
        rcvbuf, drops);
}


void
ngx_http_prefix_aware_sync_prometheus_socket(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                          i, f, any, v[2];
    ngx_http_prefix_aware_srv_conf_t  **pacf, *c;

    pacf = pamcf->upstreams.elts;

    for (f = 0; f < 2; f++) {
        any = 0;

        for (i = 0; i < pamcf->upstreams.nelts; i++) {
            c = pacf[i];

            if (c->sync == NULL || c->shm == NULL
                || ngx_http_prefix_aware_sync_meminfo(c->sync, &v[0], &v[1])
                   != NGX_OK)
            {
                continue;
            }

            if (!any) {
                ngx_http_prefix_aware_family(w,
                    f ? "sync_kernel_drops_total" : "sync_rcvbuf_bytes",
                    f ? "counter" : "gauge",
                    f ? "Datagrams to prefix_aware_sync's listening socket "
                        "that the kernel dropped, its receive buffer full"
                      : "The receive buffer of prefix_aware_sync's "
                        "listening socket, as the kernel has it");
                any = 1;
            }

            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_%s{upstream=\"%V\"} %ui\n",
                f ? "sync_kernel_drops_total" : "sync_rcvbuf_bytes",
                &label[i][0], v[f]);
        }
    }
}
