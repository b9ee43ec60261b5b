
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
 * This file is the directive, its key, and the sockets of each worker;
 * the sending is in ngx_http_prefix_aware_sync_send.c.  Datagrams arrive
 * on a UDP listening socket that nginx opens as it opens its others
 * (kept over a reload); what is done with them is in
 * ngx_http_prefix_aware_sync_hosts.c.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_time.h"


#define NGX_HTTP_PREFIX_AWARE_SYNC_INTERVAL  20

/* how far the hosts' wall clocks may be apart, ms: default, range */
#define NGX_HTTP_PREFIX_AWARE_SYNC_SKEW      1000
#define NGX_HTTP_PREFIX_AWARE_SYNC_SKEW_MIN  10
#define NGX_HTTP_PREFIX_AWARE_SYNC_SKEW_MAX  60000

/*
 * each worker wakes every interval: 10 ms is 100 times a second, and
 * half the default (5 ms bought nothing over 20 ms, docs/benchmarks.md)
 */
#define NGX_HTTP_PREFIX_AWARE_SYNC_INTERVAL_MIN  10

#define NGX_HTTP_PREFIX_AWARE_SYNC_KEY_MIN   16
#define NGX_HTTP_PREFIX_AWARE_SYNC_KEY_MAX   256

/* key_file=: 128 bits at least, a file of 1 KB at most */
#define NGX_HTTP_PREFIX_AWARE_SYNC_KEY_BYTES 16
#define NGX_HTTP_PREFIX_AWARE_SYNC_KEY_FILE  1024



static ngx_int_t ngx_http_prefix_aware_sync_addr(ngx_conf_t *cf,
    ngx_str_t *value, ngx_addr_t *addr, const char *what);
static uint64_t ngx_http_prefix_aware_sync_nonce(ngx_log_t *log);
static ngx_int_t ngx_http_prefix_aware_sync_key_file(ngx_conf_t *cf,
    ngx_http_prefix_aware_sync_t *sy, ngx_str_t *name);
static ngx_int_t ngx_http_prefix_aware_sync_key_decode(u_char *text,
    size_t len, u_char *key, size_t *n);
static void ngx_http_prefix_aware_sync_stop(void *data);

/*
 * prefix_aware_sync ADDRESS:PORT key_file=PATH|key=SECRET
 *                   peer=ADDRESS:PORT ... [interval=TIME] [skew=TIME]
 *                   [load=on|work|off] [rcvbuf=SIZE];
 */

char *
ngx_http_prefix_aware_sync(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf = conf;

    ssize_t                             size;
    ngx_str_t                          *value, s;
    ngx_uint_t                          i, key, file;
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
    sy->rcvbuf = -1;
    sy->listen_fd = (ngx_socket_t) -1;
    sy->send_fd[0] = (ngx_socket_t) -1;
    sy->send_fd[1] = (ngx_socket_t) -1;

    if (ngx_http_prefix_aware_sync_addr(cf, &value[1], &sy->listen,
                                        "address")
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "key=", 4) == 0
            || ngx_strncmp(value[i].data, "key_file=", 9) == 0)
        {
            file = (value[i].data[3] == '_');

            if (key) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"%s\" in \"prefix_aware_sync\" is "
                                   "duplicate: the key is given once, by "
                                   "\"key_file=\" or \"key=\"",
                                   file ? "key_file=" : "key=");
                return NGX_CONF_ERROR;
            }

            key = 1;

            if (file) {
                s.data = value[i].data + 9;
                s.len = value[i].len - 9;

                if (ngx_http_prefix_aware_sync_key_file(cf, sy, &s)
                    != NGX_OK)
                {
                    return NGX_CONF_ERROR;
                }

                continue;
            }

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
            if (ngx_http_prefix_aware_time(cf, &value[i], 9,
                    "prefix_aware_sync",
                    NGX_HTTP_PREFIX_AWARE_SYNC_INTERVAL_MIN, "10ms",
                    1000, "1s", &sy->interval)
                != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "skew=", 5) == 0) {
            if (ngx_http_prefix_aware_time(cf, &value[i], 5,
                    "prefix_aware_sync", NGX_HTTP_PREFIX_AWARE_SYNC_SKEW_MIN,
                    "10ms", NGX_HTTP_PREFIX_AWARE_SYNC_SKEW_MAX, "60s",
                    &sy->skew)
                != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "rcvbuf=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            size = ngx_parse_size(&s);

            if (size < 4096 || size > 1024 * 1024 * 1024) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"rcvbuf\" value \"%V\" in "
                                   "\"prefix_aware_sync\", it must be a "
                                   "size from 4k to 1g", &s);
                return NGX_CONF_ERROR;
            }

            sy->rcvbuf = (int) size;
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
        return "needs \"key_file=\" (or \"key=\"), a secret the hosts "
               "share";
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
 * key_file=: 128 bits or more of randomness, read once as the
 * configuration is (by the master, before any worker runs): hex digits
 * ("openssl rand -hex 32") or base64, blanks and line breaks ignored.
 * 16 bytes are SipHash's key as they are; more are reduced to 16 with
 * XXH3-128.  Neither the text nor the key is logged
 */

static ngx_int_t
ngx_http_prefix_aware_sync_key_file(ngx_conf_t *cf,
    ngx_http_prefix_aware_sync_t *sy, ngx_str_t *name)
{
    u_char           *p, *q, *last;
    u_char            buf[NGX_HTTP_PREFIX_AWARE_SYNC_KEY_FILE + 1];
    u_char            key[NGX_HTTP_PREFIX_AWARE_SYNC_KEY_FILE];
    size_t            n;
    ssize_t           len;
    ngx_fd_t          fd;
    ngx_err_t         err;
    ngx_str_t         file;
    ngx_uint_t        i;
    ngx_file_info_t   fi;

    file = *name;

    if (file.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "empty \"key_file\" in \"prefix_aware_sync\"");
        return NGX_ERROR;
    }

    if (ngx_conf_full_name(cf->cycle, &file, 1) != NGX_OK) {
        return NGX_ERROR;
    }

    fd = ngx_open_file(file.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);

    if (fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "\"key_file\" \"%s\" of \"prefix_aware_sync\" "
                           "cannot be opened", file.data);
        return NGX_ERROR;
    }

    len = -1;
    err = 0;

    if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR) {
        err = ngx_errno;

    } else {
        len = ngx_read_fd(fd, buf, sizeof(buf));

        if (len == -1) {
            err = ngx_errno;
        }
    }

    (void) ngx_close_file(fd);

    if (len == -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, err,
                           "\"key_file\" \"%s\" of \"prefix_aware_sync\" "
                           "cannot be read", file.data);
        return NGX_ERROR;
    }

    if (len > NGX_HTTP_PREFIX_AWARE_SYNC_KEY_FILE) {
        ngx_explicit_memzero(buf, sizeof(buf));
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"key_file\" \"%s\" of \"prefix_aware_sync\" "
                           "is longer than %d bytes", file.data,
                           NGX_HTTP_PREFIX_AWARE_SYNC_KEY_FILE);
        return NGX_ERROR;
    }

    /* blanks and line breaks out ("openssl rand -base64 64" wraps) */

    last = buf + len;
    q = buf;

    for (p = buf; p < last; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            *q++ = *p;
        }
    }

    n = 0;

    if (ngx_http_prefix_aware_sync_key_decode(buf, q - buf, key, &n)
        != NGX_OK
        || n < NGX_HTTP_PREFIX_AWARE_SYNC_KEY_BYTES)
    {
        ngx_explicit_memzero(buf, sizeof(buf));
        ngx_explicit_memzero(key, sizeof(key));
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"key_file\" \"%s\" of "
                           "\"prefix_aware_sync\", it must hold at least "
                           "128 bits: 32 or more hex digits, or the base64 "
                           "of 16 or more bytes", file.data);
        return NGX_ERROR;
    }

    if (n == NGX_HTTP_PREFIX_AWARE_SYNC_KEY_BYTES) {
        sy->key.k0 = 0;
        sy->key.k1 = 0;

        for (i = 0; i < 8; i++) {
            sy->key.k0 |= (uint64_t) key[i] << (8 * i);
            sy->key.k1 |= (uint64_t) key[8 + i] << (8 * i);
        }

    } else {
        pa_sync_key(&sy->key, key, n);
    }

    ngx_explicit_memzero(buf, sizeof(buf));
    ngx_explicit_memzero(key, sizeof(key));

    if (fi.st_mode & S_IROTH) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "\"key_file\" \"%s\" of \"prefix_aware_sync\" "
                           "can be read by every user of the machine",
                           file.data);
    }

    return NGX_OK;
}


/*
 * hex when every character is a hex digit (an even number of them),
 * else base64 (or base64url); "key" has room for "len" bytes
 */

static ngx_int_t
ngx_http_prefix_aware_sync_key_decode(u_char *text, size_t len, u_char *key,
    size_t *n)
{
    u_char     c;
    size_t     i;
    ngx_int_t  hi, lo;
    ngx_str_t  src, dst;

    for (i = 0; i < len; i++) {
        c = (u_char) (text[i] | 0x20);

        if (!(text[i] >= '0' && text[i] <= '9') && !(c >= 'a' && c <= 'f')) {
            break;
        }
    }

    if (len && i == len) {
        if (len % 2) {
            return NGX_ERROR;
        }

        for (i = 0; i < len; i += 2) {
            hi = ngx_hextoi(&text[i], 1);
            lo = ngx_hextoi(&text[i + 1], 1);
            key[i / 2] = (u_char) (hi << 4 | lo);
        }

        *n = len / 2;
        return NGX_OK;
    }

    src.data = text;
    src.len = len;
    dst.data = key;

    if (ngx_decode_base64(&dst, &src) != NGX_OK
        && ngx_decode_base64url(&dst, &src) != NGX_OK)
    {
        return NGX_ERROR;
    }

    *n = dst.len;
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
    ls->rcvbuf = sy->rcvbuf;

    sy->upstream = XXH3_64bits(pacf->upstream->host.data,
                               pacf->upstream->host.len);

    sy->by_hash = ngx_palloc(cf->pool, pacf->nservers * sizeof(uint64_t));
    sy->by_server = ngx_palloc(cf->pool,
                               pacf->nservers * sizeof(ngx_uint_t));
    sy->queue = ngx_palloc(cf->pool,
                           NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE * PA_SYNC_MTU);

    /* the messages of a flush: every datagram queued to every peer */

    sy->msgs = ngx_pcalloc(cf->pool,
                           NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE * sy->peers.nelts
                           * sizeof(ngx_http_prefix_aware_sync_msg_t));
    sy->iov = ngx_pcalloc(cf->pool, NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE
                                    * sizeof(struct iovec));

    if (sy->by_hash == NULL || sy->by_server == NULL || sy->queue == NULL
        || sy->msgs == NULL || sy->iov == NULL)
    {
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


/*
 * in each worker: a socket for the peers of each address family
 * (unconnected, so that one sendmmsg() takes a flush to every peer),
 * the listening socket (its kernel counts), the tick, the host's id
 */

void
ngx_http_prefix_aware_sync_start(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf)
{
    uint64_t                             id;
    ngx_uint_t                           i, j, f;
    ngx_socket_t                         fd;
    ngx_listening_t                     *ls;
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

        ls = cycle->listening.elts;

        for (j = 0; j < cycle->listening.nelts; j++) {
            if (ls[j].type == SOCK_DGRAM && ls[j].servers == (void *) sy) {
                sy->listen_fd = ls[j].fd;
                break;
            }
        }

        peer = sy->peers.elts;

        for (j = 0; j < sy->peers.nelts; j++) {
            f = (peer[j].addr.sockaddr->sa_family == AF_INET6);

            if (sy->send_fd[f] != (ngx_socket_t) -1) {
                peer[j].fd = sy->send_fd[f];
                continue;
            }

            fd = ngx_socket(peer[j].addr.sockaddr->sa_family, SOCK_DGRAM, 0);

            if (fd == (ngx_socket_t) -1) {
                ngx_log_error(NGX_LOG_ALERT, cycle->log, ngx_socket_errno,
                              "prefix_aware_sync: socket() for \"%V\" failed",
                              &peer[j].addr.name);
                continue;
            }

            if (ngx_nonblocking(fd) == -1) {
                ngx_log_error(NGX_LOG_ALERT, cycle->log, ngx_socket_errno,
                              "prefix_aware_sync: socket to \"%V\" failed",
                              &peer[j].addr.name);
                (void) ngx_close_socket(fd);
                continue;
            }

            sy->send_fd[f] = fd;
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
        peer[j].fd = (ngx_socket_t) -1;
    }

    for (j = 0; j < 2; j++) {
        if (sy->send_fd[j] != (ngx_socket_t) -1) {
            (void) ngx_close_socket(sy->send_fd[j]);
            sy->send_fd[j] = (ngx_socket_t) -1;
        }
    }

    sy->listen_fd = (ngx_socket_t) -1;
}
