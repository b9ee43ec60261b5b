
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * What the status pages write with: a chain of buffers from the
 * request's pool that grows as lines are added, so no size is estimated
 * in advance and every write is bounded by its buffer's end; names
 * escaped for JSON or Prometheus text; a Prometheus family's head.  The
 * status page, the engines', the models' and the feedback's figures all
 * write through it.
 */


#include "ngx_http_prefix_aware.h"


/* the first buffer; each later one is as large as the page before it */
#define NGX_HTTP_PREFIX_AWARE_STATUS_BUF  4096


static ngx_int_t ngx_http_prefix_aware_buf(ngx_http_prefix_aware_writer_t *w,
    size_t size);


ngx_int_t
ngx_http_prefix_aware_writer_init(ngx_http_prefix_aware_writer_t *w,
    ngx_pool_t *pool)
{
    w->size = 0;
    w->pool = pool;
    w->out = NULL;
    w->last = NULL;
    w->error = 0;

    return ngx_http_prefix_aware_buf(w, NGX_HTTP_PREFIX_AWARE_STATUS_BUF);
}


/* a new buffer at the end of the chain, or in place of an empty last one */

static ngx_int_t
ngx_http_prefix_aware_buf(ngx_http_prefix_aware_writer_t *w, size_t size)
{
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    b = ngx_create_temp_buf(w->pool, size);
    if (b == NULL) {
        return NGX_ERROR;
    }

    /* an empty buffer in the chain would be a "zero size buf" to nginx */

    if (w->last && w->last->buf->last == w->last->buf->pos) {
        ngx_pfree(w->pool, w->last->buf->start);
        w->last->buf = b;
        return NGX_OK;
    }

    cl = ngx_alloc_chain_link(w->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;

    if (w->last) {
        w->last->next = cl;

    } else {
        w->out = cl;
    }

    w->last = cl;

    return NGX_OK;
}


/*
 * ngx_vslprintf() stops at the buffer's end; output that reaches it may
 * have been cut, so it is written again in a new buffer, twice as large
 * each time until it fits: a line of any length, never past an end
 */

void
ngx_http_prefix_aware_printf(ngx_http_prefix_aware_writer_t *w,
    const char *fmt, ...)
{
    size_t      size;
    u_char     *p;
    va_list     args;
    ngx_buf_t  *b;

    if (w->error) {
        return;
    }

    size = ngx_max(w->size, NGX_HTTP_PREFIX_AWARE_STATUS_BUF);

    for ( ;; ) {
        b = w->last->buf;

        va_start(args, fmt);
        p = ngx_vslprintf(b->last, b->end, fmt, args);
        va_end(args);

        if (p < b->end) {
            w->size += p - b->last;
            b->last = p;
            return;
        }

        if (ngx_http_prefix_aware_buf(w, size) != NGX_OK) {
            w->error = 1;
            return;
        }

        size *= 2;
    }
}


/*
 * a name as the inside of a JSON string (ngx_escape_json), or of a
 * Prometheus label value, where the text format escapes backslash,
 * double quote and line feed; copied only if it needs escaping.  The
 * name is read twice, to size and to escape, and is not copied when it
 * needs no escaping: it must not change meanwhile nor after, so never a
 * string of shared memory that another process writes (copy it first,
 * as models_status.c does)
 */

void
ngx_http_prefix_aware_escape(ngx_http_prefix_aware_writer_t *w,
    ngx_str_t *dst, ngx_str_t *src, ngx_uint_t json)
{
    size_t   n;
    u_char  *p, *s, *end;

    *dst = *src;
    end = src->data + src->len;

    if (json) {
        n = ngx_escape_json(NULL, src->data, src->len);

    } else {
        n = 0;

        for (s = src->data; s < end; s++) {
            if (*s == '\\' || *s == '"' || *s == '\n') {
                n++;
            }
        }
    }

    if (n == 0) {
        return;
    }

    p = ngx_pnalloc(w->pool, src->len + n);
    if (p == NULL) {
        w->error = 1;
        return;
    }

    dst->data = p;
    dst->len = src->len + n;

    if (json) {
        (void) ngx_escape_json(p, src->data, src->len);
        return;
    }

    for (s = src->data; s < end; s++) {

        switch (*s) {
        case '\\':
        case '"':
            *p++ = '\\';
            *p++ = *s;
            break;

        case '\n':
            *p++ = '\\';
            *p++ = 'n';
            break;

        default:
            *p++ = *s;
        }
    }
}


void
ngx_http_prefix_aware_family(ngx_http_prefix_aware_writer_t *w,
    const char *name, const char *type, const char *help)
{
    ngx_http_prefix_aware_printf(w, "# HELP nginx_prefix_aware_%s %s\n"
                                    "# TYPE nginx_prefix_aware_%s %s\n",
                                 name, help, name, type);
}
