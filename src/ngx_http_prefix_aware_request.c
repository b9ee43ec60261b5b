
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * A request's headers read, and the module's own one-line answers (400,
 * 503) sent from within the upstream's initialization: what the key,
 * the model sets and the status page share of the HTTP request.
 */


#include "ngx_http_prefix_aware.h"


/* the first request header called "name", and how many there are */

ngx_table_elt_t *
ngx_http_prefix_aware_header(ngx_http_request_t *r, ngx_str_t *name,
    ngx_uint_t *n)
{
    ngx_uint_t        i, found;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h, *first;

    first = NULL;
    found = 0;

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len != name->len
            || ngx_strncasecmp(h[i].key.data, name->data, name->len) != 0)
        {
            continue;
        }

        if (first == NULL) {
            first = &h[i];
        }

        found++;
    }

    if (n) {
        *n = found;
    }

    return first;
}


/*
 * answers "status" (400, 503) with a one-line reason from within the
 * upstream's initialization: the upstream's cleanup is taken away so that
 * it only drops the reference taken here when it finalizes with NGX_DONE
 */

ngx_int_t
ngx_http_prefix_aware_answer(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *reason)
{
    ngx_int_t             rc;
    ngx_buf_t            *b;
    ngx_chain_t           out;
    ngx_http_upstream_t  *u;

    u = r->upstream;

    if (u->cleanup) {
        *u->cleanup = NULL;
        u->cleanup = NULL;
    }

    r->main->count++;

    b = ngx_create_temp_buf(r->pool, reason->len + 1);
    if (b == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return NGX_ERROR;
    }

    b->last = ngx_cpymem(b->last, reason->data, reason->len);
    *b->last++ = LF;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    r->headers_out.status = status;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "text/plain");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        ngx_http_finalize_request(r, rc);
        return NGX_ERROR;
    }

    ngx_http_finalize_request(r, ngx_http_output_filter(r, &out));

    return NGX_ERROR;
}


/* a 400 with its one-line reason, logged at info */

ngx_int_t
ngx_http_prefix_aware_reject(ngx_http_request_t *r, ngx_str_t *reason)
{
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "prefix_aware: bad request: %V", reason);

    return ngx_http_prefix_aware_answer(r, NGX_HTTP_BAD_REQUEST, reason);
}
