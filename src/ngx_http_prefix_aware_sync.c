
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * prefix_aware_sync: nginx hosts in front of the same engines tell each
 * other what each routed (issue 24).  Two things go out, as UDP datagrams
 * of src/pa_sync.c, to every configured peer:
 *
 *   - the blocks each request was recorded with, and on which server,
 *     queued in the worker as requests are routed and sent at the end of
 *     its event loop's turn (a posted event): a peer records them in its
 *     own index as if it had routed the request;
 *   - every "interval", by one worker of the host (a compare-and-swap of
 *     the time in the zone), each server's requests and work in flight
 *     from this host: a peer keeps them by host and adds them to its own
 *     counts in the work bound (and against "threshold" with load=on).
 *
 * This file is the directive and the sending side.  Sending never
 * blocks: a datagram that the socket does not take is lost, and counted;
 * a queue that is full drops records, counted; a peer that is gone costs
 * a send.  Datagrams arrive on a UDP listening socket that nginx opens as
 * it opens its others (kept over a reload); what is done with them is in
 * ngx_http_prefix_aware_sync_hosts.c.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_time.h"


#define NGX_HTTP_PREFIX_AWARE_SYNC_INTERVAL  20

/* how far the hosts' wall clocks may be apart, ms: default, range */
#define NGX_HTTP_PREFIX_AWARE_SYNC_SKEW      1000
#define NGX_HTTP_PREFIX_AWARE_SYNC_SKEW_MIN  10
#define NGX_HTTP_PREFIX_AWARE_SYNC_SKEW_MAX  60000

#define NGX_HTTP_PREFIX_AWARE_SYNC_KEY_MIN   16
#define NGX_HTTP_PREFIX_AWARE_SYNC_KEY_MAX   256


typedef struct {
    ngx_addr_t                          addr;
    ngx_socket_t                        fd;       /* per process */
} ngx_http_prefix_aware_sync_peer_t;


static ngx_int_t ngx_http_prefix_aware_sync_addr(ngx_conf_t *cf,
    ngx_str_t *value, ngx_addr_t *addr, const char *what);
static uint64_t ngx_http_prefix_aware_sync_nonce(ngx_log_t *log);
static void ngx_http_prefix_aware_sync_stop(void *data);
static void ngx_http_prefix_aware_sync_flush(ngx_event_t *ev);
static void ngx_http_prefix_aware_sync_tick(ngx_event_t *ev);
static ngx_int_t ngx_http_prefix_aware_sync_seal(
    ngx_http_prefix_aware_sync_t *sy);
static size_t ngx_http_prefix_aware_sync_close(
    ngx_http_prefix_aware_sync_t *sy, pa_sync_dgram_t *d);


/*
 * prefix_aware_sync ADDRESS:PORT key=SECRET peer=ADDRESS:PORT ...
 *                   [interval=TIME] [skew=TIME] [load=on|work|off];
 */

char *
ngx_http_prefix_aware_sync(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf = conf;

    ngx_str_t                          *value, s;
    ngx_uint_t                          i, key;
    ngx_http_prefix_aware_sync_t       *sy;
    ngx_http_prefix_aware_sync_peer_t  *peer;

    if (pacf->length == NGX_CONF_UNSET_UINT) {
        return "must come after \"prefix_aware\" in the upstream";
    }

    if (pacf->sync) {
        return "is duplicate";
    }

    sy = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_aware_sync_t));
    if (sy == NULL) {
        return NGX_CONF_ERROR;
    }

    if (ngx_array_init(&sy->peers, cf->pool, 4,
                       sizeof(ngx_http_prefix_aware_sync_peer_t))
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;
    key = 0;
    sy->interval = NGX_CONF_UNSET_MSEC;
    sy->skew = NGX_CONF_UNSET_MSEC;
    sy->load = NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_ALL;

    if (ngx_http_prefix_aware_sync_addr(cf, &value[1], &sy->listen,
                                        "address")
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "key=", 4) == 0) {
            s.data = value[i].data + 4;
            s.len = value[i].len - 4;

            if (s.len < NGX_HTTP_PREFIX_AWARE_SYNC_KEY_MIN
                || s.len > NGX_HTTP_PREFIX_AWARE_SYNC_KEY_MAX)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"key\" in "
                                   "\"prefix_aware_sync\", it must be %d "
                                   "to %d characters long",
                                   NGX_HTTP_PREFIX_AWARE_SYNC_KEY_MIN,
                                   NGX_HTTP_PREFIX_AWARE_SYNC_KEY_MAX);
                return NGX_CONF_ERROR;
            }

            pa_sync_key(&sy->key, s.data, s.len);
            key = 1;
            continue;
        }

        if (ngx_strncmp(value[i].data, "peer=", 5) == 0) {
            if (sy->peers.nelts == NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "too many \"peer\" in "
                                   "\"prefix_aware_sync\", at most %d",
                                   NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS);
                return NGX_CONF_ERROR;
            }

            peer = ngx_array_push(&sy->peers);
            if (peer == NULL) {
                return NGX_CONF_ERROR;
            }

            peer->fd = (ngx_socket_t) -1;

            s.data = value[i].data + 5;
            s.len = value[i].len - 5;

            if (ngx_http_prefix_aware_sync_addr(cf, &s, &peer->addr, "peer")
                != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "interval=", 9) == 0) {
            s.data = value[i].data + 9;
            s.len = value[i].len - 9;

            sy->interval = ngx_parse_time(&s, 0);

            if (sy->interval == (ngx_msec_t) NGX_ERROR
                || sy->interval < 1 || sy->interval > 1000)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"interval\" value \"%V\" in "
                                   "\"prefix_aware_sync\", it must be a "
                                   "time from 1ms to 1s", &s);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "skew=", 5) == 0) {
            s.data = value[i].data + 5;
            s.len = value[i].len - 5;

            sy->skew = ngx_parse_time(&s, 0);

            if (sy->skew == (ngx_msec_t) NGX_ERROR
                || sy->skew < NGX_HTTP_PREFIX_AWARE_SYNC_SKEW_MIN
                || sy->skew > NGX_HTTP_PREFIX_AWARE_SYNC_SKEW_MAX)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"skew\" value \"%V\" in "
                                   "\"prefix_aware_sync\", it must be a "
                                   "time from 10ms to 60s", &s);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strcmp(value[i].data, "load=on") == 0) {
            sy->load = NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_ALL;
            continue;
        }

        if (ngx_strcmp(value[i].data, "load=work") == 0) {
            sy->load = NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_WORK;
            continue;
        }

        if (ngx_strcmp(value[i].data, "load=off") == 0) {
            sy->load = NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_OFF;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" in "
                           "\"prefix_aware_sync\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    if (!key) {
        return "needs \"key=\", a secret the hosts share";
    }

    if (sy->peers.nelts == 0) {
        return "needs at least one \"peer=\"";
    }

    if (sy->interval == NGX_CONF_UNSET_MSEC) {
        sy->interval = NGX_HTTP_PREFIX_AWARE_SYNC_INTERVAL;
    }

    if (sy->skew == NGX_CONF_UNSET_MSEC) {
        sy->skew = NGX_HTTP_PREFIX_AWARE_SYNC_SKEW;
    }

    sy->pacf = pacf;
    pacf->sync = sy;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_prefix_aware_sync_addr(ngx_conf_t *cf, ngx_str_t *value,
    ngx_addr_t *addr, const char *what)
{
    ngx_url_t  u;

    ngx_memzero(&u, sizeof(ngx_url_t));

    u.url = *value;
    u.no_resolve = 0;

    if (ngx_parse_url(cf->pool, &u) != NGX_OK || u.naddrs == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid %s \"%V\" in \"prefix_aware_sync\"%s%s",
                           what, value, u.err ? ": " : "",
                           u.err ? u.err : "");
        return NGX_ERROR;
    }

    if (u.no_port || u.family == AF_UNIX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid %s \"%V\" in \"prefix_aware_sync\", it "
                           "must be an address and a UDP port", what,
                           value);
        return NGX_ERROR;
    }

    *addr = u.addrs[0];
    addr->name = *value;

    return NGX_OK;
}


/*
 * at the upstream's init: the index must be on (records are its blocks);
 * the listening socket, which nginx opens with its others; the servers by
 * the hash of their name, as the index knows them
 */

ngx_int_t
ngx_http_prefix_aware_sync_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf)
{
    ngx_uint_t                     i;
    ngx_listening_t               *ls;
    ngx_pool_cleanup_t            *cln;
    ngx_http_prefix_aware_sync_t  *sy;

    sy = pacf->sync;

    if (sy == NULL) {
        return NGX_OK;
    }

    if (pacf->index_size == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"prefix_aware_sync\" in upstream \"%V\" shares "
                           "the index, which is off", &pacf->upstream->host);
        return NGX_ERROR;
    }

    ls = cf->cycle->listening.elts;

    for (i = 0; i < cf->cycle->listening.nelts; i++) {
        if (ls[i].type == SOCK_DGRAM
            && ngx_cmp_sockaddr(ls[i].sockaddr, ls[i].socklen,
                                sy->listen.sockaddr, sy->listen.socklen, 1)
               == NGX_OK)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"prefix_aware_sync\" in upstream \"%V\": "
                               "address \"%V\" is taken by another upstream",
                               &pacf->upstream->host, &sy->listen.name);
            return NGX_ERROR;
        }
    }

    ls = ngx_create_listening(cf, sy->listen.sockaddr, sy->listen.socklen);
    if (ls == NULL) {
        return NGX_ERROR;
    }

    ls->type = SOCK_DGRAM;
    ls->addr_ntop = 1;
    ls->handler = ngx_http_prefix_aware_sync_receive;
    ls->pool_size = 256;
    ls->logp = &cf->cycle->new_log;
    ls->log.data = &ls->addr_text;
    ls->log.handler = ngx_accept_log_error;
    ls->wildcard = ngx_inet_wildcard(sy->listen.sockaddr);
    ls->servers = sy;

    sy->upstream = XXH3_64bits(pacf->upstream->host.data,
                               pacf->upstream->host.len);

    sy->by_hash = ngx_palloc(cf->pool, pacf->nservers * sizeof(uint64_t));
    sy->by_server = ngx_palloc(cf->pool,
                               pacf->nservers * sizeof(ngx_uint_t));
    sy->queue = ngx_palloc(cf->pool,
                           NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE * PA_SYNC_MTU);

    if (sy->by_hash == NULL || sy->by_server == NULL || sy->queue == NULL) {
        return NGX_ERROR;
    }

    ngx_http_prefix_aware_sync_servers(sy);

    pacf->sync_load = sy->load;

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ngx_http_prefix_aware_sync_stop;
    cln->data = sy;

    return NGX_OK;
}


/* in each worker: a socket to each peer, the tick, the host's id */

void
ngx_http_prefix_aware_sync_start(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf)
{
    uint64_t                             id;
    ngx_uint_t                           i, j;
    ngx_socket_t                         fd;
    ngx_http_prefix_aware_sync_t        *sy;
    ngx_http_prefix_aware_srv_conf_t   **pacf;
    ngx_http_prefix_aware_sync_peer_t   *peer;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return;
    }

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        sy = pacf[i]->sync;

        if (sy == NULL || pacf[i]->shm == NULL) {
            continue;
        }

        /*
         * the host's id: one per upstream record (each start of nginx),
         * kept over reloads; from the kernel's random numbers, as two
         * hosts started at once in containers have the same pids and
         * times, and nginx's random() is seeded with them
         */

        if (pacf[i]->shm->sync_id == 0) {
            id = ngx_http_prefix_aware_sync_nonce(cycle->log) | 1;
            (void) ngx_atomic_cmp_set(&pacf[i]->shm->sync_id, 0,
                                      (ngx_atomic_uint_t) id);
        }

        peer = sy->peers.elts;

        for (j = 0; j < sy->peers.nelts; j++) {
            fd = ngx_socket(peer[j].addr.sockaddr->sa_family, SOCK_DGRAM, 0);

            if (fd == (ngx_socket_t) -1) {
                ngx_log_error(NGX_LOG_ALERT, cycle->log, ngx_socket_errno,
                              "prefix_aware_sync: socket() for \"%V\" failed",
                              &peer[j].addr.name);
                continue;
            }

            if (ngx_nonblocking(fd) == -1
                || connect(fd, peer[j].addr.sockaddr, peer[j].addr.socklen)
                   == -1)
            {
                ngx_log_error(NGX_LOG_ALERT, cycle->log, ngx_socket_errno,
                              "prefix_aware_sync: socket to \"%V\" failed",
                              &peer[j].addr.name);
                (void) ngx_close_socket(fd);
                continue;
            }

            peer[j].fd = fd;
        }

        sy->flush.handler = ngx_http_prefix_aware_sync_flush;
        sy->flush.data = sy;
        sy->flush.log = cycle->log;

        sy->tick.handler = ngx_http_prefix_aware_sync_tick;
        sy->tick.data = sy;
        sy->tick.log = cycle->log;
        sy->tick.cancelable = 1;

        ngx_add_timer(&sy->tick, sy->interval);
    }
}


/* 64 random bits of the kernel's, or of nginx's where it has none */

static uint64_t
ngx_http_prefix_aware_sync_nonce(ngx_log_t *log)
{
    ssize_t    n;
    uint64_t   id;
    ngx_fd_t   fd;

    id = 0;
    n = -1;

    fd = ngx_open_file("/dev/urandom", NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);

    if (fd != NGX_INVALID_FILE) {
        n = read(fd, &id, sizeof(uint64_t));
        (void) ngx_close_file(fd);
    }

    if (n != (ssize_t) sizeof(uint64_t)) {
        ngx_log_error(NGX_LOG_WARN, log, ngx_errno,
                      "prefix_aware_sync: no random numbers from "
                      "/dev/urandom, the host's id made of nginx's");

        id = (uint64_t) ngx_random() << 32 ^ (uint64_t) ngx_random()
             ^ (uint64_t) ngx_pid << 16 ^ (uint64_t) ngx_current_msec;
    }

    return id;
}


static void
ngx_http_prefix_aware_sync_stop(void *data)
{
    ngx_http_prefix_aware_sync_t  *sy = data;

    ngx_uint_t                          j;
    ngx_http_prefix_aware_sync_peer_t  *peer;

    if (sy->tick.timer_set) {
        ngx_del_timer(&sy->tick);
    }

    if (sy->flush.posted) {
        ngx_delete_posted_event(&sy->flush);
    }

    peer = sy->peers.elts;

    for (j = 0; j < sy->peers.nelts; j++) {
        if (peer[j].fd != (ngx_socket_t) -1) {
            (void) ngx_close_socket(peer[j].fd);
            peer[j].fd = (ngx_socket_t) -1;
        }
    }
}


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


/* every datagram queued, to every peer; what a socket refuses is lost */

static void
ngx_http_prefix_aware_sync_flush(ngx_event_t *ev)
{
    ngx_http_prefix_aware_sync_t *sy = ev->data;

    ssize_t                              n;
    ngx_uint_t                           i, j, sent, errors;
    ngx_http_prefix_aware_sync_peer_t   *peer;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    (void) ngx_http_prefix_aware_sync_seal(sy);

    peer = sy->peers.elts;
    up = sy->pacf->shm;
    sent = 0;
    errors = 0;

    for (i = 0; i < sy->nqueued; i++) {
        for (j = 0; j < sy->peers.nelts; j++) {
            if (peer[j].fd == (ngx_socket_t) -1) {
                continue;
            }

            n = send(peer[j].fd, sy->queue + i * PA_SYNC_MTU, sy->qlen[i],
                     0);

            if (n == (ssize_t) sy->qlen[i]) {
                sent++;

            } else {
                errors++;
            }
        }
    }

    sy->nqueued = 0;

    ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_SENT], sent);

    if (errors) {
        ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_SEND_ERRORS],
                             errors);
    }
}


/*
 * every interval, in each worker: one of the host's workers sends each
 * server's requests and work in flight from this host, and hosts not
 * heard from for a while stop counting
 */

static void
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


