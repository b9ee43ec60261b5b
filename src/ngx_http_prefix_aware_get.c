
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The rounds of polls of models=discover and metrics=: every interval,
 * one worker asks the round's servers at once (models=discover: every
 * server of the upstream; metrics=: one server, each on its own
 * schedule, so that a slow server delays only itself).  One GET of a
 * server's page (its /metrics, its /v1/models) on nginx's event loop:
 * HTTP/1.0, so that the answer ends when the server closes and is never
 * chunked; the head kept in a fixed buffer, the body given
 * to the caller as it arrives, through a read buffer of fixed size, up
 * to a limit; a timeout over the whole exchange.  Nothing blocks, and
 * nothing grows with the answer.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_time.h"


static void ngx_http_prefix_aware_get_write(ngx_event_t *wev);
static void ngx_http_prefix_aware_get_read(ngx_event_t *rev);
static void ngx_http_prefix_aware_get_dummy(ngx_event_t *ev);
static ngx_int_t ngx_http_prefix_aware_get_head(ngx_http_prefix_aware_get_t *g,
    u_char *p, size_t n, size_t *used);
static void ngx_http_prefix_aware_get_end(ngx_http_prefix_aware_get_t *g,
    const char *error);
static void ngx_http_prefix_aware_round_timer(ngx_event_t *ev);


/* each worker's timer; the first whose turn it is polls for all */

void
ngx_http_prefix_aware_round_start(ngx_http_prefix_aware_round_t *rd,
    ngx_log_t *log)
{
    if (rd->timer.timer_set) {
        return;
    }

    rd->timer.handler = ngx_http_prefix_aware_round_timer;
    rd->timer.data = rd;
    rd->timer.log = log;
    rd->timer.cancelable = 1;

    ngx_add_timer(&rd->timer, 1);
}


/*
 * a round starts an interval after the last one, by whichever worker's
 * timer fires first then: each sets its timer to the next round's time,
 * read from the zone, and a compare-and-swap of the round's time there
 * lets one of them through; with "busy", not while another worker's round
 * is in progress (unless it outlived its time-out by an interval: that
 * worker died).  The times are the workers' cached clocks, a few
 * milliseconds apart: their differences are ages (pa_time.h)
 */

static void
ngx_http_prefix_aware_round_timer(ngx_event_t *ev)
{
    ngx_uint_t                      j;
    ngx_msec_t                      now, age, early, next;
    ngx_atomic_uint_t               last, busy;
    ngx_http_prefix_aware_round_t  *rd;

    rd = ev->data;

    if (ngx_exiting || ngx_quit || ngx_terminate) {
        return;
    }

    now = ngx_current_msec;
    last = *rd->polled;
    busy = rd->busy ? *rd->busy : 0;

    /* a timer may fire a few milliseconds early as nginx rounds them */

    early = ngx_min(5, rd->interval / 4);

    if (rd->pending == 0
        && (last == 0 || pa_age(now, last) + early >= rd->interval)
        && (busy == 0 || pa_older(now, busy, rd->timeout + rd->interval))
        && ngx_atomic_cmp_set(rd->polled, last, now ? now : 1))
    {
        rd->pool = ngx_create_pool(4096, ev->log);

        if (rd->pool) {
            rd->gets = ngx_pcalloc(rd->pool, rd->n * sizeof(void *));

            if (rd->gets == NULL) {
                ngx_destroy_pool(rd->pool);
                rd->pool = NULL;
            }
        }

        if (rd->pool) {
            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ev->log, 0,
                           "prefix_aware %s: polling the %ui server%s",
                           rd->name, rd->n, rd->n == 1 ? "" : "s");

            rd->pending = rd->n;
            rd->started = now ? now : 1;

            if (rd->busy) {
                *rd->busy = rd->started;
            }

            for (j = 0; j < rd->n && rd->pool; j++) {
                rd->poll(rd, j);
            }
        }
    }

    age = pa_age(now, *rd->polled);
    next = (age >= rd->interval) ? rd->interval : rd->interval - age;

    ngx_add_timer(ev, ngx_max(next, 1));
}


/*
 * the configuration's pool goes (a process exits, or a single process
 * reloads): the timer and the GETs of a round in progress go with it.
 * "busy" is left: the zone's records may be freed by now (the process
 * left the zone), and it lapses
 */

void
ngx_http_prefix_aware_round_stop(ngx_http_prefix_aware_round_t *rd)
{
    ngx_uint_t  j;

    if (rd->timer.timer_set) {
        ngx_del_timer(&rd->timer);
    }

    if (rd->pool == NULL) {
        return;
    }

    for (j = 0; j < rd->n; j++) {
        if (rd->gets[j]) {
            ngx_http_prefix_aware_get_close(rd->gets[j]);
        }
    }

    ngx_destroy_pool(rd->pool);
    rd->pool = NULL;
    rd->pending = 0;
}


/*
 * a server's poll has ended: the round's pool goes when all have, and
 * "busy" is cleared, unless another worker took the round over
 */

void
ngx_http_prefix_aware_round_done(ngx_http_prefix_aware_round_t *rd)
{
    if (--rd->pending != 0) {
        return;
    }

    ngx_destroy_pool(rd->pool);
    rd->pool = NULL;

    if (rd->busy) {
        (void) ngx_atomic_cmp_set(rd->busy, rd->started, 0);
    }
}


/*
 * starts the GET; "g" (from the caller's pool) has its "uri", "limit" (and
 * "over", the reason an answer over it fails), "timeout", "body", "done"
 * and "data" set.  "done" is called once, at
 * the end, with NULL or the reason it failed (it may be called before
 * this returns)
 */

void
ngx_http_prefix_aware_get(ngx_http_prefix_aware_get_t *g, ngx_pool_t *pool,
    ngx_http_upstream_rr_peer_t *peer, ngx_log_t *log)
{
    ngx_int_t          rc;
    ngx_buf_t         *b;
    ngx_connection_t  *c;

    static u_char  get[] = "GET ";
    static u_char  host[] = " HTTP/1.0" CRLF "Host: ";
    static u_char  end[] = CRLF "Accept: */*" CRLF
                           "User-Agent: nginx-prefix-aware" CRLF CRLF;

    g->log = log;

    if (g->over == NULL) {
        g->over = "answer over its limit";
    }

    if (peer == NULL) {
        ngx_http_prefix_aware_get_end(g, "no peer");
        return;
    }

    g->buf = ngx_palloc(pool, NGX_HTTP_PREFIX_AWARE_GET_BUF);
    b = ngx_create_temp_buf(pool, sizeof(get) + g->uri.len + sizeof(host)
                                  + peer->server.len + sizeof(end));

    if (b == NULL || g->buf == NULL) {
        ngx_http_prefix_aware_get_end(g, "no memory");
        return;
    }

    b->last = ngx_cpymem(b->last, get, sizeof(get) - 1);
    b->last = ngx_cpymem(b->last, g->uri.data, g->uri.len);
    b->last = ngx_cpymem(b->last, host, sizeof(host) - 1);
    b->last = ngx_cpymem(b->last, peer->server.data, peer->server.len);
    b->last = ngx_cpymem(b->last, end, sizeof(end) - 1);
    g->request = b;

    g->pc.sockaddr = peer->sockaddr;
    g->pc.socklen = peer->socklen;
    g->pc.name = &peer->name;
    g->pc.get = ngx_event_get_peer;
    g->pc.log = log;
    g->pc.log_error = NGX_ERROR_INFO;

    rc = ngx_event_connect_peer(&g->pc);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        ngx_http_prefix_aware_get_end(g, "cannot connect");
        return;
    }

    c = g->pc.connection;
    c->data = g;
    c->log_error = NGX_ERROR_INFO;
    c->read->handler = ngx_http_prefix_aware_get_read;
    c->write->handler = ngx_http_prefix_aware_get_write;

    ngx_add_timer(c->read, g->timeout);

    if (rc == NGX_OK) {
        ngx_http_prefix_aware_get_write(c->write);
    }
}


/* the caller's pool goes: a GET in progress ends without its "done" */

void
ngx_http_prefix_aware_get_close(ngx_http_prefix_aware_get_t *g)
{
    if (g->pc.connection) {
        ngx_close_connection(g->pc.connection);
        g->pc.connection = NULL;
    }

    g->ended = 1;
}


static void
ngx_http_prefix_aware_get_write(ngx_event_t *wev)
{
    ssize_t                       n;
    ngx_buf_t                    *b;
    ngx_connection_t             *c;
    ngx_http_prefix_aware_get_t  *g;

    c = wev->data;
    g = c->data;
    b = g->request;

    if (wev->timedout) {
        ngx_http_prefix_aware_get_end(g, "timed out");
        return;
    }

    n = c->send(c, b->pos, b->last - b->pos);

    if (n == NGX_ERROR) {
        ngx_http_prefix_aware_get_end(g, "cannot send");
        return;
    }

    if (n > 0) {
        b->pos += n;
    }

    if (b->pos < b->last) {
        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_prefix_aware_get_end(g, "cannot send");
        }

        return;
    }

    wev->handler = ngx_http_prefix_aware_get_dummy;

    if (ngx_handle_write_event(wev, 0) != NGX_OK) {
        ngx_http_prefix_aware_get_end(g, "cannot send");
    }
}


static void
ngx_http_prefix_aware_get_read(ngx_event_t *rev)
{
    size_t                        used;
    ssize_t                       n;
    ngx_connection_t             *c;
    ngx_http_prefix_aware_get_t  *g;

    c = rev->data;
    g = c->data;

    if (rev->timedout) {
        ngx_http_prefix_aware_get_end(g, "timed out");
        return;
    }

    for ( ;; ) {
        n = c->recv(c, g->buf, NGX_HTTP_PREFIX_AWARE_GET_BUF);

        if (n == NGX_AGAIN) {
            if (ngx_handle_read_event(rev, 0) != NGX_OK) {
                ngx_http_prefix_aware_get_end(g, "cannot read");
            }

            return;
        }

        if (n == NGX_ERROR) {
            ngx_http_prefix_aware_get_end(g, "cannot read");
            return;
        }

        if (n == 0) {
            break;
        }

        used = 0;

        if (!g->in_body) {
            if (ngx_http_prefix_aware_get_head(g, g->buf, n, &used)
                != NGX_OK)
            {
                return;
            }

            if (!g->in_body) {
                continue;
            }
        }

        n -= used;

        if (n == 0) {
            continue;
        }

        if ((size_t) n > g->limit - g->received) {
            ngx_http_prefix_aware_get_end(g, g->over);
            return;
        }

        g->received += n;

        if (g->body(g, g->buf + used, n) != NGX_OK) {
            ngx_http_prefix_aware_get_end(g, "not the expected answer");
            return;
        }
    }

    /* HTTP/1.0 was asked: the answer ends when the server closes */

    if (!g->in_body) {
        ngx_http_prefix_aware_get_end(g, "no answer");
        return;
    }

    if (g->length >= 0 && g->received != (size_t) g->length) {
        ngx_http_prefix_aware_get_end(g, "answer cut short");
        return;
    }

    ngx_http_prefix_aware_get_end(g, NULL);
}


/*
 * the answer's head, kept in "head" until its blank line: the status must
 * be 200, the body neither chunked nor compressed; "*used" is what of
 * "p" the head took
 */

static ngx_int_t
ngx_http_prefix_aware_get_head(ngx_http_prefix_aware_get_t *g, u_char *p,
    size_t n, size_t *used)
{
    u_char  *end, *h, *v, *eol;
    size_t   room, len, old;

    old = g->hlen;
    room = NGX_HTTP_PREFIX_AWARE_GET_HEAD - g->hlen;
    len = ngx_min(n, room);

    ngx_memcpy(g->head + g->hlen, p, len);
    g->hlen += len;

    end = ngx_strlcasestrn(g->head, g->head + g->hlen,
                           (u_char *) CRLF CRLF, 4 - 1);

    if (end == NULL) {
        if (g->hlen == NGX_HTTP_PREFIX_AWARE_GET_HEAD) {
            ngx_http_prefix_aware_get_end(g, "head of the answer too long");
            return NGX_ERROR;
        }

        *used = n;
        return NGX_OK;
    }

    *used = (end + 4 - g->head) - old;
    g->in_body = 1;
    g->length = -1;

    if (g->hlen < 12 || ngx_strncmp(g->head, "HTTP/1.", 7) != 0
        || ngx_strncmp(g->head + 8, " 200", 4) != 0)
    {
        ngx_http_prefix_aware_get_end(g, "status is not 200");
        return NGX_ERROR;
    }

    /* the header lines: "name: value" CRLF */

    h = ngx_strlchr(g->head, end, LF);

    while (h && h < end) {
        h++;
        eol = ngx_strlchr(h, end + 2, CR);

        if (eol == NULL) {
            break;
        }

        v = ngx_strlchr(h, eol, ':');

        if (v) {
            len = v - h;

            do {
                v++;
            } while (v < eol && (*v == ' ' || *v == '\t'));

            if (len == 17
                && ngx_strncasecmp(h, (u_char *) "transfer-encoding", 17)
                   == 0)
            {
                ngx_http_prefix_aware_get_end(g,
                           "a transfer coding in an answer to HTTP/1.0");
                return NGX_ERROR;
            }

            if (len == 16
                && ngx_strncasecmp(h, (u_char *) "content-encoding", 16)
                   == 0
                && !(eol - v == 8
                     && ngx_strncasecmp(v, (u_char *) "identity", 8) == 0))
            {
                ngx_http_prefix_aware_get_end(g, "answer is compressed");
                return NGX_ERROR;
            }

            if (len == 14
                && ngx_strncasecmp(h, (u_char *) "content-length", 14) == 0)
            {
                g->length = ngx_atoof(v, eol - v);

                if (g->length == NGX_ERROR) {
                    ngx_http_prefix_aware_get_end(g, "bad content-length");
                    return NGX_ERROR;
                }

                if ((size_t) g->length > g->limit) {
                    ngx_http_prefix_aware_get_end(g, g->over);
                    return NGX_ERROR;
                }
            }
        }

        h = eol + 1;
    }

    return NGX_OK;
}


static void
ngx_http_prefix_aware_get_dummy(ngx_event_t *ev)
{
}


static void
ngx_http_prefix_aware_get_end(ngx_http_prefix_aware_get_t *g,
    const char *error)
{
    if (g->ended) {
        return;
    }

    if (g->pc.connection) {
        ngx_close_connection(g->pc.connection);
        g->pc.connection = NULL;
    }

    g->ended = 1;
    g->done(g, error);
}
