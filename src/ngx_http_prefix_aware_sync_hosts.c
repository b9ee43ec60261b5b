
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * prefix_aware_sync, what the other hosts say (the sending side is
 * ngx_http_prefix_aware_sync.c): the datagrams that arrive on the
 * upstream's UDP listening socket, checked (src/pa_sync.c) and taken:
 * records into this host's index, load reports into the upstream's
 * table of hosts (16, by the sender's id) and each server's sums of
 * their requests and work in flight; hosts gone quiet for 5 intervals
 * (100 ms at least) taken out; the figures of the status page.
 */


#include "ngx_http_prefix_aware.h"


#define NGX_HTTP_PREFIX_AWARE_SYNC_HOLD      5
#define NGX_HTTP_PREFIX_AWARE_SYNC_HOLD_MIN  100


static void ngx_http_prefix_aware_sync_records(
    ngx_http_prefix_aware_sync_t *sy, pa_sync_msg_t *m);
static void ngx_http_prefix_aware_sync_load(ngx_http_prefix_aware_sync_t *sy,
    pa_sync_msg_t *m);
static void ngx_http_prefix_aware_sync_expire(
    ngx_http_prefix_aware_sync_t *sy, ngx_uint_t h);
static ngx_int_t ngx_http_prefix_aware_sync_lock(
    ngx_http_prefix_aware_shm_upstream_t *up);
static ngx_int_t ngx_http_prefix_aware_sync_server(
    ngx_http_prefix_aware_sync_t *sy, uint64_t hash);
static ngx_uint_t ngx_http_prefix_aware_sync_hosts(
    ngx_http_prefix_aware_shm_upstream_t *up);
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


/* a datagram from a peer, read by whichever worker the kernel woke */

void
ngx_http_prefix_aware_sync_receive(ngx_connection_t *c)
{
    int                                    rc;
    ngx_buf_t                             *b;
    ngx_pool_t                            *pool;
    pa_sync_msg_t                          m;
    ngx_http_prefix_aware_sync_t          *sy;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    sy = c->listening->servers;
    up = sy->pacf->shm;
    b = c->buffer;

    if (up == NULL || b == NULL) {
        goto done;
    }

    rc = pa_sync_open(&m, b->pos, b->last - b->pos, &sy->key, sy->upstream);

    if (rc != PA_SYNC_OK) {
        ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_REFUSED], 1);

        if (!(sy->warned & (1 << rc))) {
            sy->warned |= 1 << rc;
            ngx_log_error(NGX_LOG_WARN, c->log, 0,
                          "prefix_aware_sync of upstream \"%V\": a datagram "
                          "from %V refused: %s (logged once a worker, "
                          "a reason)",
                          &sy->pacf->upstream->host, &c->addr_text,
                          pa_sync_error(rc));
        }

        goto done;
    }

    if (m.sender == up->sync_id) {
        goto done;                              /* this host's own */
    }

    ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_RECEIVED], 1);

    if (m.type == PA_SYNC_RECORDS) {
        ngx_http_prefix_aware_sync_records(sy, &m);

    } else {
        ngx_http_prefix_aware_sync_load(sy, &m);
    }

done:

    /* as the stream module closes a UDP session: its count too */

#if (NGX_STAT_STUB)
    (void) ngx_atomic_fetch_add(ngx_stat_active, -1);
#endif

    pool = c->pool;
    ngx_close_connection(c);
    ngx_destroy_pool(pool);
}


/* another host's records: into this host's index, as its own would go */

static void
ngx_http_prefix_aware_sync_records(ngx_http_prefix_aware_sync_t *sy,
    pa_sync_msg_t *m)
{
    ngx_int_t                          k;
    ngx_uint_t                         server, records;
    uint64_t                           hashes[PA_SYNC_MAX_HASHES];
    pa_sync_record_t                   r;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = sy->pacf;
    records = 0;

    while (pa_sync_next_record(m, &r, hashes) == 1) {
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

    ngx_atomic_fetch_add(&pacf->shm->sync_count[NGX_HTTP_PA_SYNC_RECORDS],
                         records);
}


/*
 * another host's load: kept by host in each server's record (the place
 * of the host in the upstream's table of hosts), and summed in
 * sync_inflight and sync_work, which the choice reads
 */

static void
ngx_http_prefix_aware_sync_load(ngx_http_prefix_aware_sync_t *sy,
    pa_sync_msg_t *m)
{
    ngx_int_t                              k;
    ngx_uint_t                             h, free;
    ngx_atomic_int_t                       in, work;
    pa_sync_load_t                         l;
    ngx_http_prefix_aware_srv_conf_t      *pacf;
    ngx_http_prefix_aware_shm_server_t    *s;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    pacf = sy->pacf;
    up = pacf->shm;

    if (ngx_http_prefix_aware_sync_lock(up) != NGX_OK) {
        ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_DROPPED], 1);
        return;
    }

    free = NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS;

    for (h = 0; h < NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS; h++) {
        if (up->sync_host[h] == m->sender) {
            break;
        }

        if (up->sync_host[h] == 0 && free == NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS)
        {
            free = h;
        }
    }

    if (h == NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS) {
        if (free == NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS) {
            ngx_unlock(&up->sync_lock);
            ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_DROPPED],
                                 1);
            return;
        }

        h = free;
        up->sync_host[h] = m->sender;
    }

    up->sync_heard[h] = ngx_current_msec;

    while (pa_sync_next_load(m, &l) == 1) {
        k = ngx_http_prefix_aware_sync_server(sy, l.server);

        if (k < 0) {
            ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_UNKNOWN],
                                 1);
            continue;
        }

        s = pacf->shm_server[sy->by_server[k]];

        in = (ngx_atomic_int_t) ngx_min(l.inflight, NGX_MAX_INT32_VALUE);
        work = (ngx_atomic_int_t) ngx_min(l.work, NGX_MAX_INT32_VALUE);

        ngx_atomic_fetch_add(&s->sync_inflight,
                             in - s->sync_host_inflight[h]);
        ngx_atomic_fetch_add(&s->sync_work, work - s->sync_host_work[h]);

        s->sync_host_inflight[h] = (int32_t) in;
        s->sync_host_work[h] = (int32_t) work;
    }

    ngx_unlock(&up->sync_lock);

    ngx_atomic_fetch_add(&up->sync_count[NGX_HTTP_PA_SYNC_LOADS], 1);
}


/* every tick: hosts gone quiet no longer count */

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
        if (up->sync_host[h]
            && ngx_current_msec - up->sync_heard[h] > hold
            && ngx_http_prefix_aware_sync_lock(up) == NGX_OK)
        {
            if (up->sync_host[h]
                && ngx_current_msec - up->sync_heard[h] > hold)
            {
                ngx_http_prefix_aware_sync_expire(sy, h);
            }

            ngx_unlock(&up->sync_lock);
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

        ngx_atomic_fetch_add(&s->sync_inflight, -s->sync_host_inflight[h]);
        ngx_atomic_fetch_add(&s->sync_work, -s->sync_host_work[h]);

        s->sync_host_inflight[h] = 0;
        s->sync_host_work[h] = 0;
    }

    pacf->shm->sync_host[h] = 0;
}


/*
 * the table of hosts' lock: a try, a short spin, and taken over from a
 * process that no longer exists; NGX_BUSY if not taken
 */

static ngx_int_t
ngx_http_prefix_aware_sync_lock(ngx_http_prefix_aware_shm_upstream_t *up)
{
    ngx_uint_t         i;
    ngx_atomic_uint_t  owner;

    for (i = 0; i < 1024; i++) {
        owner = up->sync_lock;

        if (owner == 0) {
            if (ngx_atomic_cmp_set(&up->sync_lock, 0, ngx_pid)) {
                return NGX_OK;
            }

        } else if (kill((ngx_pid_t) owner, 0) == -1 && ngx_errno == ESRCH) {
            if (ngx_atomic_cmp_set(&up->sync_lock, owner, ngx_pid)) {
                return NGX_OK;
            }
        }

        ngx_cpu_pause();
    }

    return NGX_BUSY;
}


/* the other hosts heard from, those not yet gone quiet */

static ngx_uint_t
ngx_http_prefix_aware_sync_hosts(ngx_http_prefix_aware_shm_upstream_t *up)
{
    ngx_uint_t  h, hosts;

    hosts = 0;

    for (h = 0; h < NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS; h++) {
        hosts += (up->sync_host[h] != 0);
    }

    return hosts;
}


/* the other hosts' figures on the status page */

void
ngx_http_prefix_aware_sync_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                             hosts;
    ngx_atomic_t                          *n;
    ngx_http_prefix_aware_sync_t          *sy;
    ngx_http_prefix_aware_shm_upstream_t  *up;

    sy = pacf->sync;
    up = pacf->shm;

    if (sy == NULL || up == NULL) {
        return;
    }

    hosts = ngx_http_prefix_aware_sync_hosts(up);

    n = up->sync_count;

    ngx_http_prefix_aware_printf(w,
        "      \"sync\": { \"listen\": \"%V\", \"peers\": %ui, "
        "\"hosts\": %ui, \"interval_ms\": %M, \"load\": \"%s\", "
        "\"sent\": %uA, \"send_errors\": %uA, \"received\": %uA, "
        "\"refused\": %uA, \"records\": %uA, \"loads\": %uA, "
        "\"dropped\": %uA, \"unknown\": %uA },\n",
        &sy->listen.name, sy->peers.nelts, hosts, sy->interval,
        sy->load == NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_ALL ? "on"
        : sy->load == NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_WORK ? "work" : "off",
        n[NGX_HTTP_PA_SYNC_SENT], n[NGX_HTTP_PA_SYNC_SEND_ERRORS],
        n[NGX_HTTP_PA_SYNC_RECEIVED], n[NGX_HTTP_PA_SYNC_REFUSED],
        n[NGX_HTTP_PA_SYNC_RECORDS], n[NGX_HTTP_PA_SYNC_LOADS],
        n[NGX_HTTP_PA_SYNC_DROPPED], n[NGX_HTTP_PA_SYNC_UNKNOWN]);
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
    "dropped", "unknown_server"
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
        "received, refused), and entries (record, load, unknown_server)");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        c = pacf[i];

        if (c->sync == NULL || c->shm == NULL) {
            continue;
        }

        for (k = 0; k < 8; k++) {
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
