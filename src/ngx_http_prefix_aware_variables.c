
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Variables for access logs: $prefix_aware_hash, $prefix_aware_route,
 * $prefix_aware_source, $prefix_aware_depth, $prefix_aware_strategy,
 * $prefix_aware_model, $prefix_aware_wait, $prefix_aware_flow.
 */


#include "ngx_http_prefix_aware.h"


static ngx_int_t ngx_http_prefix_aware_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);


static ngx_http_variable_t  ngx_http_prefix_aware_vars[] = {

    { ngx_string("prefix_aware_hash"), NULL, ngx_http_prefix_aware_variable,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_route"), NULL, ngx_http_prefix_aware_variable,
      1, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_source"), NULL, ngx_http_prefix_aware_variable,
      2, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_depth"), NULL, ngx_http_prefix_aware_variable,
      3, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_strategy"), NULL,
      ngx_http_prefix_aware_variable, 4, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_model"), NULL, ngx_http_prefix_aware_variable,
      5, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_wait"), NULL, ngx_http_prefix_aware_variable,
      6, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_aware_flow"), NULL, ngx_http_prefix_aware_variable,
      7, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


ngx_str_t  ngx_http_prefix_aware_sources[] = {
    ngx_string("none"),
    ngx_string("body"),
    ngx_string("openai")
};


ngx_str_t  ngx_http_prefix_aware_apis[] = {
    ngx_string("openai"),
    ngx_string("chat"),
    ngx_string("completions"),
    ngx_string("responses"),
    ngx_string("messages")
};


static ngx_int_t
ngx_http_prefix_aware_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char                             *p;
    uint64_t                            flow;
    const char                         *s;
    ngx_http_prefix_aware_peer_data_t  *pd;

    pd = ngx_http_get_module_ctx(r, ngx_http_prefix_aware_module);

    if (pd == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    switch (data) {

    case 0:
        if (!pd->keyed) {
            v->len = 0;
            v->data = (u_char *) "";
            return NGX_OK;
        }

        p = ngx_pnalloc(r->pool, 16);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v->len = ngx_sprintf(p, "%016uxL", pd->hash) - p;
        v->data = p;
        return NGX_OK;

    case 1:
        if (pd->route == PA_ROUTE_NONE) {
            v->len = 0;
            v->data = (u_char *) "";
            return NGX_OK;
        }

        s = pa_route_name(pd->route);
        v->len = ngx_strlen(s);
        v->data = (u_char *) s;
        return NGX_OK;

    case 3:
        if (pd->nblocks == 0 || pd->route == PA_ROUTE_NONE) {
            v->len = 0;
            v->data = (u_char *) "";
            return NGX_OK;
        }

        p = ngx_pnalloc(r->pool, NGX_INT32_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v->len = ngx_sprintf(p, "%uD", pd->depth) - p;
        v->data = p;
        return NGX_OK;

    case 4:
        v->len = ngx_http_prefix_aware_strategies[pd->strategy].len;
        v->data = ngx_http_prefix_aware_strategies[pd->strategy].data;
        return NGX_OK;

    case 6:
        p = ngx_pnalloc(r->pool, NGX_INT_T_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v->len = ngx_sprintf(p, "%M", ngx_http_prefix_aware_queue_waited(pd))
                 - p;
        v->data = p;
        return NGX_OK;

    case 7:
        flow = ngx_http_prefix_aware_queue_flow(r, pd);

        if (flow == 0) {
            v->len = 0;
            v->data = (u_char *) "";
            return NGX_OK;
        }

        p = ngx_pnalloc(r->pool, 16);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v->len = ngx_sprintf(p, "%016uxL", flow) - p;
        v->data = p;
        return NGX_OK;

    case 5:
        v->len = pd->model_name.len;
        v->data = pd->model_name.data ? pd->model_name.data : (u_char *) "";
        return NGX_OK;

    default: /* 2 */

        /* a key read from the JSON of an API: the API's name */

        if (pd->source == NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI) {
            v->len = ngx_http_prefix_aware_apis[pd->api].len;
            v->data = ngx_http_prefix_aware_apis[pd->api].data;
            return NGX_OK;
        }

        v->len = ngx_http_prefix_aware_sources[pd->source].len;
        v->data = ngx_http_prefix_aware_sources[pd->source].data;
        return NGX_OK;
    }
}


ngx_int_t
ngx_http_prefix_aware_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_prefix_aware_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}
