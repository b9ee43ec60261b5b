
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The answers as they pass, in the body filter: their first bytes take
 * a request's prefill off its server (prefill=first), the engine's usage
 * is read for feedback=on (feedback.c), and a stored response's id is
 * learned (state.c) and told to the other hosts (sync_send.c).  Nothing
 * is held back: each reader keeps its own bounded state.
 */


#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);


static ngx_http_output_body_filter_pt  ngx_http_prefix_aware_next_body_filter;


void
ngx_http_prefix_aware_filter_init(void)
{
    ngx_http_prefix_aware_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_prefix_aware_body_filter;
}


static ngx_int_t
ngx_http_prefix_aware_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    uint64_t                            id;
    ngx_http_prefix_aware_peer_data_t  *pd;

    pd = ngx_http_get_module_ctx(r, ngx_http_prefix_aware_module);

    if (pd != NULL && pd->prefill) {
        ngx_http_prefix_aware_feedback_first_byte(pd, in);
    }

    if (pd != NULL && pd->feedback) {
        ngx_http_prefix_aware_feedback_body(r, pd, in);
    }

    /* a stored response's id learned: the other hosts are told */

    if (pd != NULL && pd->learn) {
        id = ngx_http_prefix_aware_state_body(r, pd, in);

        if (id && pd->conf->sync) {
            ngx_http_prefix_aware_sync_state(pd->conf, pd->learn_server, id);
        }
    }

    return ngx_http_prefix_aware_next_body_filter(r, in);
}
