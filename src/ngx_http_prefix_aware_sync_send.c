
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * prefix_aware_sync, the sending side (the directive and the sockets are
 * ngx_http_prefix_aware_sync.c): each request's record queued as it is
 * routed and sent at the end of the worker's event loop turn; every
 * "interval", by one worker of the host, each server's load.  Each
 * datagram is sealed with the wall clock and the next number of the
 * host's sequence.  A flush goes to every peer in one sendmmsg() a
 * socket (one unconnected socket for the IPv4 peers, one for the IPv6
 * ones).  Sending never blocks: a datagram that the socket does not take
 * is lost, counted, and logged at most once in 10 s; a queue that is
 * full drops records, counted; a peer that is gone costs its datagrams.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_time.h"


/* a send error is logged at most once in 10 s by a worker and upstream */
#define NGX_HTTP_PREFIX_AWARE_SYNC_LOG_EVERY 10000


static ngx_int_t ngx_http_prefix_aware_sync_seal(
    ngx_http_prefix_aware_sync_t *sy);
static size_t ngx_http_prefix_aware_sync_close(
    ngx_http_prefix_aware_sync_t *sy, pa_sync_dgram_t *d);
static void ngx_http_prefix_aware_sync_send(ngx_http_prefix_aware_sync_t *sy,
    ngx_uint_t *sent, ngx_uint_t *errors);
#if !(NGX_HTTP_PREFIX_AWARE_HAVE_SENDMMSG)
static int ngx_http_prefix_aware_sync_sendmmsg(ngx_socket_t fd,
    ngx_http_prefix_aware_sync_msg_t *m, ngx_uint_t n);
#endif
static void ngx_http_prefix_aware_sync_send_failed(
    ngx_http_prefix_aware_sync_t *sy, ngx_uint_t n, ngx_err_t err,
    ngx_str_t *peer);


/*
 * a request was recorded on "server": its record is queued, and goes out
 * at the end of this turn of the event loop with the others of the turn
 */

void
ngx_http_prefix_aware_sync_record(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_uint_t server, uint64_t *blocks, uint32_t n, uint32_t cached,
    uint32_t size)
{
    uint32_t                       from;
    ngx_http_prefix_aware_sync_t  *sy;

    sy = pacf->sync;

    if (sy->flush.handler == NULL || n == 0) {
        return;                               /* not started: no zone */
    }

    from = 0;

    if (sy->cur.len && sy->cur.type != PA_SYNC_RECORDS) {
        (void) ngx_http_prefix_aware_sync_seal(sy);
    }

    for ( ;; ) {
        if (sy->cur.len == 0) {
            if (sy->nqueued == NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE) {
                ngx_atomic_fetch_add(
                    &pacf->shm->sync_count[NGX_HTTP_PA_SYNC_DROPPED], 1);
                break;
            }

            pa_sync_begin(&sy->cur, sy->queue + sy->nqueued * PA_SYNC_MTU,
                          PA_SYNC_RECORDS, pacf->shm->sync_id, sy->upstream);
        }

        if (pa_sync_put_record(&sy->cur, pacf->id_hash[server], blocks, n,
                               cached, size, &from))
        {
            break;
        }

        (void) ngx_http_prefix_aware_sync_seal(sy);
    }

    if (!sy->flush.posted) {
        ngx_post_event(&sy->flush, &ngx_posted_events);
    }
}


/*
 * a stored response's id was learned: queued as records are, in a
 * datagram of its own type
 */

void
ngx_http_prefix_aware_sync_state(ngx_http_prefix_aware_srv_conf_t *pacf,
    uint64_t server, uint64_t id)
{
    ngx_uint_t                     tries;
    ngx_http_prefix_aware_sync_t  *sy;

    sy = pacf->sync;

    if (sy->flush.handler == NULL) {
        return;                               /* not started: no zone */
    }

    for (tries = 0; tries < 2; tries++) {
        if (sy->cur.len && sy->cur.type != PA_SYNC_STATE) {
            (void) ngx_http_prefix_aware_sync_seal(sy);
        }

        if (sy->cur.len == 0) {
            if (sy->nqueued == NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE) {
                ngx_atomic_fetch_add(
                    &pacf->shm->sync_count[NGX_HTTP_PA_SYNC_DROPPED], 1);
                return;
            }

            pa_sync_begin(&sy->cur, sy->queue + sy->nqueued * PA_SYNC_MTU,
                          PA_SYNC_STATE, pacf->shm->sync_id, sy->upstream);
        }

        if (pa_sync_put_state(&sy->cur, server, id) == 0) {
            break;
        }

        (void) ngx_http_prefix_aware_sync_seal(sy);
    }

    /*
     * sent at once, not at the end of this cycle of events: the id leaves
     * before the answer that holds it is written to the client, which
     * may send its follow-up to another host
     */

    if (sy->flush.posted) {
        ngx_delete_posted_event(&sy->flush);
    }

    ngx_http_prefix_aware_sync_flush(&sy->flush);
}


static ngx_int_t
ngx_http_prefix_aware_sync_seal(ngx_http_prefix_aware_sync_t *sy)
{
    if (sy->cur.len == 0) {
        return NGX_DECLINED;
    }

    sy->qlen[sy->nqueued++] = ngx_http_prefix_aware_sync_close(sy, &sy->cur);
    sy->cur.len = 0;

    return NGX_OK;
}


/*
 * a datagram's time and number, at its sealing: the wall clock (other
 * hosts compare it with theirs) and the next of the host's sequence,
 * one for all its workers (the receivers' windows take the little
 * reordering of workers sending at the ends of their turns)
 */

static size_t
ngx_http_prefix_aware_sync_close(ngx_http_prefix_aware_sync_t *sy,
    pa_sync_dgram_t *d)
{
    uint64_t  seq;

    seq = (uint64_t) ngx_atomic_fetch_add(&sy->pacf->shm->sync_seq, 1) + 1;

    return pa_sync_seal(d, &sy->key, ngx_http_prefix_aware_sync_wall(), seq);
}


/*
 * every datagram queued, to every peer, in one sendmmsg() a socket: what
 * a socket refuses is lost, counted, and logged at most once in 10 s
 */

void
ngx_http_prefix_aware_sync_flush(ngx_event_t *ev)
{
    ngx_http_prefix_aware_sync_t *sy = ev->data;

    ngx_uint_t                             sent, errors;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    (void) ngx_http_prefix_aware_sync_seal(sy);

    up = sy->pacf->shm;
    sent = 0;
    errors = 0;

    if (sy->nqueued) {
        ngx_http_prefix_aware_sync_send(sy, &sent, &errors);
        sy->nqueued = 0;
    }

    ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_SENT], sent);

    if (errors) {
        ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_SEND_ERRORS],
                             errors);
    }

    if (sy->send_failed
        && (sy->send_logged == 0
            || ngx_current_msec - sy->send_logged
               >= NGX_HTTP_PREFIX_AWARE_SYNC_LOG_EVERY))
    {
        ngx_log_error(NGX_LOG_WARN, ev->log, sy->send_err,
                      "prefix_aware_sync of upstream \"%V\": %ui "
                      "datagram%s not sent since %s, the last to \"%V\"",
                      &sy->pacf->upstream->host, sy->send_failed,
                      sy->send_failed == 1 ? "" : "s",
                      sy->send_logged ? "the last such message"
                                      : "the worker started",
                      sy->send_peer);

        sy->send_failed = 0;
        sy->send_logged = ngx_current_msec;
    }
}


#if !(NGX_HTTP_PREFIX_AWARE_HAVE_SENDMMSG)

/* sendmmsg() of a system without it: the messages one by one */

static int
ngx_http_prefix_aware_sync_sendmmsg(ngx_socket_t fd,
    ngx_http_prefix_aware_sync_msg_t *m, ngx_uint_t n)
{
    ngx_uint_t  i;

    for (i = 0; i < n; i++) {
        if (sendmsg(fd, &m[i].msg_hdr, 0) == -1) {
            return i ? (int) i : -1;
        }
    }

    return (int) n;
}

#endif


/*
 * the peers one after another, each with every datagram queued: the
 * peers of one socket (of one address family) in one call.  a peer's
 * datagram refused, its others are not tried (they would be refused
 * alike: no route, a firewall); a socket that takes nothing more
 * (EAGAIN, ENOBUFS), nothing more is tried on it this turn
 */

static void
ngx_http_prefix_aware_sync_send(ngx_http_prefix_aware_sync_t *sy,
    ngx_uint_t *sent, ngx_uint_t *errors)
{
    int                                  rc;
    ngx_err_t                            err;
    ngx_str_t                           *name;
    ngx_uint_t                           i, j, k, n, nq, last, npeers;
    ngx_uint_t                           who[NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS];
    ngx_socket_t                         fd;
    ngx_http_prefix_aware_sync_msg_t    *m;
    ngx_http_prefix_aware_sync_peer_t   *peer;

    m = sy->msgs;
    peer = sy->peers.elts;
    nq = sy->nqueued;

    for (i = 0; i < nq; i++) {
        sy->iov[i].iov_base = sy->queue + i * PA_SYNC_MTU;
        sy->iov[i].iov_len = sy->qlen[i];
    }

    j = 0;

    while (j < sy->peers.nelts) {
        fd = peer[j].fd;

        if (fd == (ngx_socket_t) -1) {
            j++;
            continue;
        }

        /* the peers from "j" on that are sent to from "fd" */

        n = 0;
        npeers = 0;

        for ( /* void */ ; j < sy->peers.nelts; j++) {
            if (peer[j].fd == (ngx_socket_t) -1) {
                continue;
            }

            if (peer[j].fd != fd) {
                break;
            }

            who[npeers++] = j;

            for (i = 0; i < nq; i++) {
                m[n].msg_hdr.msg_name = peer[j].addr.sockaddr;
                m[n].msg_hdr.msg_namelen = peer[j].addr.socklen;
                m[n].msg_hdr.msg_iov = &sy->iov[i];
                m[n].msg_hdr.msg_iovlen = 1;
                n++;
            }
        }

        k = 0;

        while (k < n) {
#if (NGX_HTTP_PREFIX_AWARE_HAVE_SENDMMSG)
            rc = sendmmsg(fd, &m[k], n - k, 0);
#else
            rc = ngx_http_prefix_aware_sync_sendmmsg(fd, &m[k], n - k);
#endif

            if (rc > 0) {
                *sent += rc;
                k += rc;
                continue;
            }

            err = ngx_socket_errno;

            if (rc == -1 && err == NGX_EINTR) {
                continue;
            }

            if (rc == 0 || err == NGX_EAGAIN || err == ENOBUFS) {
                last = n;

            } else {
                last = (k / nq + 1) * nq;
            }

            name = &peer[who[k / nq]].addr.name;

            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, sy->flush.log, err,
                           "prefix_aware_sync: %ui datagrams to \"%V\" "
                           "and after not sent, of %ui", last - k, name, n);

            ngx_http_prefix_aware_sync_send_failed(sy, last - k, err, name);
            *errors += last - k;
            k = last;
        }
    }
}


static void
ngx_http_prefix_aware_sync_send_failed(ngx_http_prefix_aware_sync_t *sy,
    ngx_uint_t n, ngx_err_t err, ngx_str_t *peer)
{
    sy->send_failed += n;
    sy->send_err = err;
    sy->send_peer = peer;
}


/*
 * every interval, in each worker: one of the host's workers sends each
 * server's requests and work in flight from this host, and hosts not
 * heard from for a while stop counting
 */

void
ngx_http_prefix_aware_sync_tick(ngx_event_t *ev)
{
    ngx_http_prefix_aware_sync_t *sy = ev->data;

    ngx_msec_t                              last;
    ngx_uint_t                              j;
    pa_sync_dgram_t                         d;
    ngx_http_prefix_aware_srv_conf_t       *pacf;
    ngx_http_prefix_aware_shm_server_t     *s;
    ngx_http_prefix_aware_shm_upstream_t   *up;

    pacf = sy->pacf;
    up = pacf->shm;

    if (!ngx_exiting && !ngx_terminate && !ngx_quit) {
        ngx_add_timer(&sy->tick, sy->interval);
    }

    last = up->sync_ticked;

    if (pa_age(ngx_current_msec, last) < sy->interval
        || !ngx_atomic_cmp_set(&up->sync_ticked, last, ngx_current_msec))
    {
        return;
    }

    /* the load, in as many datagrams as the servers need */

    (void) ngx_http_prefix_aware_sync_seal(sy);

    d.len = 0;

    for (j = 0; j < pacf->nservers; j++) {
        if (d.len == 0) {
            if (sy->nqueued == NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE) {
                ngx_atomic_fetch_add(
                    &up->sync_count[NGX_HTTP_PA_SYNC_DROPPED], 1);
                break;
            }

            pa_sync_begin(&d, sy->queue + sy->nqueued * PA_SYNC_MTU,
                          PA_SYNC_LOAD, up->sync_id, sy->upstream);
        }

        s = pacf->shm_server[j];

        if (pa_sync_put_load(&d, pacf->id_hash[j],
                             (uint32_t) ngx_min(s->inflight, 0xffffffff),
                             s->work)
            != 0)
        {
            sy->qlen[sy->nqueued++] = ngx_http_prefix_aware_sync_close(sy,
                                                                       &d);
            d.len = 0;
            j--;
        }
    }

    if (d.len) {
        sy->qlen[sy->nqueued++] = ngx_http_prefix_aware_sync_close(sy, &d);
    }

    ngx_http_prefix_aware_sync_flush(&sy->flush);

    ngx_http_prefix_aware_sync_quiet(sy);
}
