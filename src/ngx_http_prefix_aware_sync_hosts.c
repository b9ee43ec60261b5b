
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * prefix_aware_sync, what the other hosts say (the sending side is
 * ngx_http_prefix_aware_sync.c): the datagrams that arrive on the
 * upstream's UDP listening socket, checked (src/pa_sync.c: the tag,
 * then against the table of hosts, under its lock: fresh, and not taken
 * before) and taken: records into this host's index, load reports into
 * the table of hosts (16, by the sender's id) and each server's sums of
 * their requests and work in flight, made again from the 16 each time;
 * hosts gone quiet for 5 intervals (100 ms at least) taken out (the
 * figures of the status page: ngx_http_prefix_aware_sync_status.c).
 */


#include "ngx_http_prefix_aware.h"
#include "pa_time.h"


#define NGX_HTTP_PREFIX_AWARE_SYNC_HOLD      5
#define NGX_HTTP_PREFIX_AWARE_SYNC_HOLD_MIN  100

/* refusals are logged at most once in this many ms an upstream */
#define NGX_HTTP_PREFIX_AWARE_SYNC_LOG_MS    10000

/* at most this many datagrams read at once for a request (drain) */
#define NGX_HTTP_PREFIX_AWARE_SYNC_DRAIN     64

/* a lock held this long (ms) by the same taking is of a lost holder */
#define NGX_HTTP_PREFIX_AWARE_SYNC_LOCK_MS   1000


static void ngx_http_prefix_aware_sync_drain(ngx_http_prefix_aware_sync_t *sy,
    ngx_log_t *log);
static void ngx_http_prefix_aware_sync_take(ngx_http_prefix_aware_sync_t *sy,
    u_char *p, size_t len, ngx_log_t *log, ngx_str_t *addr);
static void ngx_http_prefix_aware_sync_refused(
    ngx_http_prefix_aware_sync_t *sy, ngx_log_t *log, ngx_str_t *addr,
    int rc);
static void ngx_http_prefix_aware_sync_states(
    ngx_http_prefix_aware_sync_t *sy, pa_sync_msg_t *m);
static void ngx_http_prefix_aware_sync_records(
    ngx_http_prefix_aware_sync_t *sy, pa_sync_msg_t *m);
static void ngx_http_prefix_aware_sync_load(ngx_http_prefix_aware_sync_t *sy,
    pa_sync_msg_t *m, ngx_uint_t h);
static void ngx_http_prefix_aware_sync_sum(ngx_http_prefix_aware_shm_server_t *s);
static void ngx_http_prefix_aware_sync_expire(
    ngx_http_prefix_aware_sync_t *sy, ngx_uint_t h);
static ngx_int_t ngx_http_prefix_aware_sync_lock(
    ngx_http_prefix_aware_shm_upstream_t *up);
static void ngx_http_prefix_aware_sync_unlock(
    ngx_http_prefix_aware_shm_upstream_t *up);
static ngx_int_t ngx_http_prefix_aware_sync_server(
    ngx_http_prefix_aware_sync_t *sy, uint64_t hash);
static int ngx_libc_cdecl ngx_http_prefix_aware_sync_cmp(const void *a,
    const void *b);


/* the servers by the hash of their name: what the datagrams name them by */

void
ngx_http_prefix_aware_sync_servers(ngx_http_prefix_aware_sync_t *sy)
{
    ngx_uint_t                         i;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = sy->pacf;

    for (i = 0; i < pacf->nservers; i++) {
        sy->by_hash[i] = pacf->id_hash[i];
    }

    ngx_qsort(sy->by_hash, pacf->nservers, sizeof(uint64_t),
              ngx_http_prefix_aware_sync_cmp);

    /* a name twice in the upstream: its last place */

    for (i = 0; i < pacf->nservers; i++) {
        sy->by_server[ngx_http_prefix_aware_sync_server(sy,
                                                        pacf->id_hash[i])]
            = i;
    }
}


static int ngx_libc_cdecl
ngx_http_prefix_aware_sync_cmp(const void *a, const void *b)
{
    uint64_t  x = *(const uint64_t *) a, y = *(const uint64_t *) b;

    return (x > y) - (x < y);
}


/* the place of "hash" in by_hash, or -1 */

static ngx_int_t
ngx_http_prefix_aware_sync_server(ngx_http_prefix_aware_sync_t *sy,
    uint64_t hash)
{
    ngx_uint_t  lo, hi, mid;

    lo = 0;
    hi = sy->pacf->nservers;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;

        if (sy->by_hash[mid] < hash) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    if (lo < sy->pacf->nservers && sy->by_hash[lo] == hash) {
        return (ngx_int_t) lo;
    }

    return -1;
}


/* the wall clock in milliseconds, as this worker last read it */

uint64_t
ngx_http_prefix_aware_sync_wall(void)
{
    ngx_time_t  *tp;

    tp = ngx_timeofday();

    return (uint64_t) tp->sec * 1000 + tp->msec;
}


/* a datagram from a peer, read by whichever worker the kernel woke */

void
ngx_http_prefix_aware_sync_receive(ngx_connection_t *c)
{
    ngx_buf_t                     *b;
    ngx_pool_t                    *pool;
    ngx_http_prefix_aware_sync_t  *sy;

    sy = c->listening->servers;
    b = c->buffer;

    if (b != NULL) {
        ngx_http_prefix_aware_sync_take(sy, b->pos, b->last - b->pos, c->log,
                                        &c->addr_text);
    }

    /* as the stream module closes a UDP session: its count too */

#if (NGX_STAT_STUB)
    (void) ngx_atomic_fetch_add(ngx_stat_active, -1);
#endif

    pool = c->pool;
    ngx_close_connection(c);
    ngx_destroy_pool(pool);
}


/*
 * a request that names a stored response this host does not know (with
 * prefix_aware_sync): the datagrams waiting read first, then the response
 * looked up again (ngx_http_prefix_aware_state.c)
 */

void
ngx_http_prefix_aware_sync_unknown(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd)
{
    if (pd->state_id == 0 || pd->state_server != 0 || pd->conf->sync == NULL)
    {
        return;
    }

    ngx_http_prefix_aware_sync_drain(pd->conf->sync, r->connection->log);
    ngx_http_prefix_aware_state_lookup(r, pd, 1);
}


/*
 * the datagrams waiting on the socket, read now by this worker: before a
 * request that names a stored response not known here goes by its key,
 * as another host that learned the response sends its id before it
 * writes the answer, so the id is most often in this socket already when
 * the follow-up arrives, but the worker the kernel woke for it may be
 * busy; at most NGX_HTTP_PREFIX_AWARE_SYNC_DRAIN, so that a flood does
 * not hold the request; whoever was woken for them finds nothing (EAGAIN)
 */

static void
ngx_http_prefix_aware_sync_drain(ngx_http_prefix_aware_sync_t *sy,
    ngx_log_t *log)
{
    ssize_t          n;
    ngx_uint_t       i;
    ngx_str_t        addr;
    ngx_sockaddr_t   sa;
    socklen_t        socklen;
    u_char           text[NGX_SOCKADDR_STRLEN];

    /* one byte more than a datagram can have: a longer one is refused */
    static u_char    buf[PA_SYNC_MTU + 1];

    if (sy->listen_fd == (ngx_socket_t) -1) {
        return;
    }

    for (i = 0; i < NGX_HTTP_PREFIX_AWARE_SYNC_DRAIN; i++) {
        socklen = sizeof(ngx_sockaddr_t);

        n = recvfrom(sy->listen_fd, buf, sizeof(buf), 0, &sa.sockaddr,
                     &socklen);

        if (n == -1) {
            if (ngx_socket_errno != NGX_EAGAIN
                && ngx_socket_errno != NGX_EINTR)
            {
                ngx_log_error(NGX_LOG_INFO, log, ngx_socket_errno,
                              "prefix_aware_sync: recvfrom() failed");
            }

            return;
        }

        ngx_atomic_fetch_add(&sy->pacf->shm->sync_count[
                                            NGX_HTTP_PA_SYNC_DRAINED], 1);

        addr.data = text;
        addr.len = ngx_sock_ntop(&sa.sockaddr, socklen, text,
                                 NGX_SOCKADDR_STRLEN, 1);

        ngx_http_prefix_aware_sync_take(sy, buf, (size_t) n, log, &addr);
    }
}


/*
 * a datagram: the tag first (no lock), then under the lock of the table
 * of hosts whether it is fresh and new, and a load report taken; records
 * go to the index, which has locks of its own
 */

static void
ngx_http_prefix_aware_sync_take(ngx_http_prefix_aware_sync_t *sy, u_char *p,
    size_t len, ngx_log_t *log, ngx_str_t *addr)
{
    int                                    rc;
    unsigned                               slot;
    pa_sync_msg_t                          m;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    up = sy->pacf->shm;

    if (up == NULL) {
        return;
    }

    rc = pa_sync_open(&m, p, len, &sy->key, sy->upstream);

    if (rc != PA_SYNC_OK) {
        ngx_http_prefix_aware_sync_refused(sy, log, addr, rc);
        return;
    }

    if (m.sender == up->sync_id) {
        return;                                 /* this host's own */
    }

    if (ngx_http_prefix_aware_sync_lock(up) != NGX_OK) {
        ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_REFUSED], 1);
        ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_BUSY], 1);
        return;
    }

    rc = pa_sync_admit(up->sync_peer, NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS, &m,
                       ngx_http_prefix_aware_sync_wall(), sy->skew, &slot);

    if (rc == PA_SYNC_OK && m.type == PA_SYNC_LOAD) {
        ngx_http_prefix_aware_sync_load(sy, &m, slot);
    }

    ngx_http_prefix_aware_sync_unlock(up);

    if (rc != PA_SYNC_OK) {
        ngx_http_prefix_aware_sync_refused(sy, log, addr, rc);
        return;
    }

    ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_RECEIVED], 1);

    if (m.type == PA_SYNC_RECORDS) {
        ngx_http_prefix_aware_sync_records(sy, &m);

    } else if (m.type == PA_SYNC_STATE) {
        ngx_http_prefix_aware_sync_states(sy, &m);
    }
}


/*
 * a datagram not taken: counted by why, and logged at most once in 10 s
 * an upstream and a reason (by whichever worker's turn it is), with how
 * many were refused for it since the last message: an attack that starts
 * later, or from elsewhere, is seen
 */

static void
ngx_http_prefix_aware_sync_refused(ngx_http_prefix_aware_sync_t *sy,
    ngx_log_t *log, ngx_str_t *addr, int rc)
{
    ngx_uint_t                             k;
    ngx_msec_t                             now;
    ngx_atomic_uint_t                      last, more;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    up = sy->pacf->shm;

    ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_REFUSED], 1);

    switch (rc) {
    case PA_SYNC_EREPLAY:
        k = NGX_HTTP_PA_SYNC_REPLAYED;
        break;
    case PA_SYNC_ESTALE:
        k = NGX_HTTP_PA_SYNC_STALE;
        break;
    case PA_SYNC_EFULL:
        k = NGX_HTTP_PA_SYNC_FULL;
        break;
    default:
        k = NGX_HTTP_PA_SYNC_N;
    }

    if (k != NGX_HTTP_PA_SYNC_N) {
        ngx_atomic_fetch_add(&up->sync_count[k], 1);
    }

    if (rc < 0 || rc >= PA_SYNC_NERRORS) {
        return;
    }

    now = ngx_current_msec ? ngx_current_msec : 1;
    last = up->sync_logged[rc];

    if ((last && !pa_older(now, last, NGX_HTTP_PREFIX_AWARE_SYNC_LOG_MS))
        || !ngx_atomic_cmp_set(&up->sync_logged[rc], last, now))
    {
        ngx_atomic_fetch_add(&up->sync_unlogged[rc], 1);
        return;
    }

    more = up->sync_unlogged[rc];
    (void) ngx_atomic_fetch_add(&up->sync_unlogged[rc], -more);

    ngx_log_error(NGX_LOG_WARN, log, 0,
                  "prefix_aware_sync of upstream \"%V\": a datagram from %V "
                  "refused: %s; %uA more refused for it since the last "
                  "message (one in %d s at most)",
                  &sy->pacf->upstream->host, addr,
                  pa_sync_error(rc), more,
                  NGX_HTTP_PREFIX_AWARE_SYNC_LOG_MS / 1000);
}


/*
 * another host's stored responses: into this host's table (state.c), by
 * the hash of the server's name, which a follow-up finds if this host's
 * upstream has the server
 */

static void
ngx_http_prefix_aware_sync_states(ngx_http_prefix_aware_sync_t *sy,
    pa_sync_msg_t *m)
{
    int               rc;
    pa_sync_state_t   s;

    while ((rc = pa_sync_next_state(m, &s)) == 1) {
        ngx_http_prefix_aware_state_put(sy->pacf, s.id, s.server, 1);
    }

    if (rc < 0) {
        ngx_atomic_fetch_add(
            &sy->pacf->shm->sync_count[NGX_HTTP_PA_SYNC_MALFORMED], 1);
    }
}


/* another host's records: into this host's index, as its own would go */

static void
ngx_http_prefix_aware_sync_records(ngx_http_prefix_aware_sync_t *sy,
    pa_sync_msg_t *m)
{
    int                                rc;
    ngx_int_t                          k;
    ngx_uint_t                         server, records;
    uint64_t                           hashes[PA_SYNC_MAX_HASHES];
    pa_sync_record_t                   r;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = sy->pacf;
    records = 0;

    while ((rc = pa_sync_next_record(m, &r, hashes)) == 1) {
        k = ngx_http_prefix_aware_sync_server(sy, r.server);

        if (k < 0) {
            ngx_atomic_fetch_add(
                &pacf->shm->sync_count[NGX_HTTP_PA_SYNC_UNKNOWN], 1);
            continue;
        }

        server = sy->by_server[k];

        if (pacf->id[server] == PA_INDEX_NO_SERVER) {
            continue;
        }

        (void) pa_index_record_held(&pacf->index, pacf->id[server], hashes,
                                    r.n, r.cached,
                                    pa_blocks_span(r.cached,
                                                   (uint32_t) pacf->head,
                                                   (uint32_t) pacf->stride),
                                    r.size);
        records++;
    }

    if (rc < 0) {
        ngx_atomic_fetch_add(
            &pacf->shm->sync_count[NGX_HTTP_PA_SYNC_MALFORMED], 1);
    }

    ngx_atomic_fetch_add(&pacf->shm->sync_count[NGX_HTTP_PA_SYNC_RECORDS],
                         records);
}


/*
 * another host's load, under the table's lock, its place "h" in the
 * table: kept by host in each server's record, and each server's sums,
 * sync_inflight and sync_work, which the choice reads, made again from
 * the 16 hosts' values (a sum kept by deltas would keep for ever what a
 * worker killed between the two writes left)
 */

static void
ngx_http_prefix_aware_sync_load(ngx_http_prefix_aware_sync_t *sy,
    pa_sync_msg_t *m, ngx_uint_t h)
{
    int                                    rc;
    ngx_int_t                              k;
    pa_sync_load_t                         l;
    ngx_http_prefix_aware_srv_conf_t      *pacf;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    pacf = sy->pacf;
    up = pacf->shm;

    up->sync_peer[h].live = 1;
    up->sync_heard[h] = ngx_current_msec;

    while ((rc = pa_sync_next_load(m, &l)) == 1) {
        k = ngx_http_prefix_aware_sync_server(sy, l.server);

        if (k < 0) {
            ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_UNKNOWN],
                                 1);
            continue;
        }

        s = pacf->shm_server[sy->by_server[k]];

        s->sync_host_inflight[h] = (int32_t) ngx_min(l.inflight,
                                                     NGX_MAX_INT32_VALUE);
        s->sync_host_work[h] = (int32_t) ngx_min(l.work,
                                                 NGX_MAX_INT32_VALUE);

        ngx_http_prefix_aware_sync_sum(s);
    }

    if (rc < 0) {
        ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_MALFORMED], 1);
    }

    ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_LOADS], 1);
}


/* a server's other hosts' sums, from the 16 values: 16 x 2^31 fits */

static void
ngx_http_prefix_aware_sync_sum(ngx_http_prefix_aware_shm_server_t *s)
{
    ngx_uint_t  h;
    int64_t     in, work;

    in = 0;
    work = 0;

    for (h = 0; h < NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS; h++) {
        in += ngx_max(s->sync_host_inflight[h], 0);
        work += ngx_max(s->sync_host_work[h], 0);
    }

    s->sync_inflight = (ngx_atomic_uint_t) in;
    s->sync_work = (ngx_atomic_uint_t) work;
}


/*
 * every tick: hosts gone quiet no longer count; their places keep their
 * replay windows until pa_sync_admit() gives them to new senders
 */

void
ngx_http_prefix_aware_sync_quiet(ngx_http_prefix_aware_sync_t *sy)
{
    ngx_msec_t                             hold;
    ngx_uint_t                             h;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    up = sy->pacf->shm;
    hold = ngx_max(NGX_HTTP_PREFIX_AWARE_SYNC_HOLD * sy->interval,
                   NGX_HTTP_PREFIX_AWARE_SYNC_HOLD_MIN);

    for (h = 0; h < NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS; h++) {
        if (up->sync_peer[h].live
            && pa_older(ngx_current_msec, up->sync_heard[h], hold)
            && ngx_http_prefix_aware_sync_lock(up) == NGX_OK)
        {
            if (up->sync_peer[h].live
                && pa_older(ngx_current_msec, up->sync_heard[h], hold))
            {
                ngx_http_prefix_aware_sync_expire(sy, h);
            }

            ngx_http_prefix_aware_sync_unlock(up);
        }
    }
}


/* host "h" went quiet: what it had in flight counts no more */

static void
ngx_http_prefix_aware_sync_expire(ngx_http_prefix_aware_sync_t *sy,
    ngx_uint_t h)
{
    ngx_uint_t                           j;
    ngx_http_prefix_aware_srv_conf_t    *pacf;
    ngx_http_prefix_aware_shm_server_t  *s;

    pacf = sy->pacf;

    for (j = 0; j < pacf->nservers; j++) {
        s = pacf->shm_server[j];

        s->sync_host_inflight[h] = 0;
        s->sync_host_work[h] = 0;

        ngx_http_prefix_aware_sync_sum(s);
    }

    pacf->shm->sync_peer[h].live = 0;
}


/*
 * the table of hosts' lock, as the index's buckets are locked: a word
 * that is odd while held and moves by one at each taking and giving
 * back (the holder's generation), and the holder's pid beside it.  a
 * try and a short spin; then, if the same taking still holds it, taken
 * over in one compare-and-swap when its holder is gone (kill() once, not
 * at each spin), or when the same taking was seen holding it a second
 * ago (a pid used again by another process; nothing is held that long:
 * no call under the lock blocks).  NGX_BUSY if not taken
 */

static ngx_int_t
ngx_http_prefix_aware_sync_lock(ngx_http_prefix_aware_shm_upstream_t *up)
{
    ngx_uint_t         i;
    ngx_pid_t          pid;
    ngx_atomic_uint_t  w;

    for (i = 0; i < 1024; i++) {
        w = up->sync_lock;

        if ((w & 1) == 0 && ngx_atomic_cmp_set(&up->sync_lock, w, w + 1)) {
            up->sync_lock_pid = ngx_pid;
            return NGX_OK;
        }

        ngx_cpu_pause();
    }

    w = up->sync_lock;

    if ((w & 1) == 0) {
        return NGX_BUSY;
    }

    pid = (ngx_pid_t) up->sync_lock_pid;

    if (up->sync_lock_seen != w) {
        up->sync_lock_seen = w;
        up->sync_lock_since = ngx_current_msec;

        if (pid == 0 || pid == ngx_pid || kill(pid, 0) == 0
            || ngx_errno != NGX_ESRCH)
        {
            return NGX_BUSY;
        }

    } else if (!pa_older(ngx_current_msec, up->sync_lock_since,
                         NGX_HTTP_PREFIX_AWARE_SYNC_LOCK_MS))
    {
        return NGX_BUSY;
    }

    if (!ngx_atomic_cmp_set(&up->sync_lock, w, w + 2)) {
        return NGX_BUSY;
    }

    up->sync_lock_pid = ngx_pid;

    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "prefix_aware_sync: the table of hosts' lock taken over "
                  "from process %P", pid);

    return NGX_OK;
}


static void
ngx_http_prefix_aware_sync_unlock(ngx_http_prefix_aware_shm_upstream_t *up)
{
    up->sync_lock_pid = 0;
    ngx_memory_barrier();
    (void) ngx_atomic_fetch_add(&up->sync_lock, 1);
}
