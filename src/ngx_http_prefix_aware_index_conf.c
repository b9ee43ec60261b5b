
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Routing v2's parameters of "prefix_aware" (index=, block=, cold=, cap=,
 * overload=, place=, ...), "length=" with and without the index, and
 * index=auto turned off where the index cannot follow the servers;
 * src/ngx_http_prefix_aware_index.c keeps the index's zone and choice.
 */


#include "ngx_http_prefix_aware.h"


/* length= with the index, and its bounds */
#define NGX_HTTP_PREFIX_AWARE_INDEX_LENGTH    524288
#define NGX_HTTP_PREFIX_AWARE_LENGTH_MAX      65536
#define NGX_HTTP_PREFIX_AWARE_INDEX_LENGTH_MAX  4194304


static ngx_int_t ngx_http_prefix_aware_index_word(ngx_conf_t *cf,
    ngx_str_t *value, size_t skip, const char **words, ngx_uint_t *index);


/* routing v2's parameters of "prefix_aware"; NGX_DECLINED: not one */

ngx_int_t
ngx_http_prefix_aware_index_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value)
{
    char        *rv;
    off_t        size;
    ngx_int_t    n;
    ngx_str_t    s;
    ngx_uint_t   v;

    /* in the order of their values: pa_cold_e, pa_place_e, pa_cap_e, on 0 */
    static const char  *colds[] = { "ring", "least", "auto", "two", NULL };
    static const char  *places[] = { "deepest", "cost", NULL };
    static const char  *caps[] = { "hard", "saved", "cost", NULL };
    static const char  *overloads[] = { "least", "holder", NULL };
    static const char  *switches[] = { "on", "off", NULL };
    static const char  *moments[] = { "first", "end", NULL };

    if (ngx_strncmp(value->data, "index=", 6) == 0) {
        s.data = value->data + 6;
        s.len = value->len - 6;

        pacf->index_auto = 0;

        if (s.len == 3 && ngx_strncmp(s.data, "off", 3) == 0) {
            pacf->index_size = 0;
            return NGX_OK;
        }

        if (s.len == 4 && ngx_strncmp(s.data, "auto", 4) == 0) {
            pacf->index_size = NGX_HTTP_PREFIX_AWARE_INDEX_AUTO_MIN;
            pacf->index_auto = 1;
            return NGX_OK;
        }

        size = ngx_parse_offset(&s);

        if (size == NGX_ERROR || size < 256 * 1024
            || size > 4096 * 1024 * 1024LL)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"index\" value \"%V\" in "
                               "\"prefix_aware\", it must be \"auto\", "
                               "\"off\" or a size from 256k to 4g", &s);
            return NGX_ERROR;
        }

        pacf->index_size = (size_t) size;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "block=", 6) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 6, 16, 4096,
                                          &pacf->block);
        if (rv != NGX_CONF_OK) {
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "stride=", 7) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 7, 1, 64,
                                          &pacf->stride);
        if (rv != NGX_CONF_OK) {
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "capacity=auto", 13) == 0) {

        /* capacity=auto[:N]: the engines' reports, N until they come */

        pacf->capacity_auto = 1;

        if (value->len == 13) {
            return NGX_OK;
        }

        if (value->data[13] != ':') {
            s.data = value->data + 9;
            s.len = value->len - 9;

            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"capacity\" value \"%V\" in "
                               "\"prefix_aware\", it must be a number from "
                               "1024 to 100000000, \"auto\" or \"auto:\" "
                               "and a number", &s);
            return NGX_ERROR;
        }

        rv = ngx_http_prefix_aware_number(cf, value, 14, 1024,
                                          100000000, &pacf->capacity);
        if (rv != NGX_CONF_OK) {
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "capacity=", 9) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 9, 1024,
                                          100000000, &pacf->capacity);
        if (rv != NGX_CONF_OK) {
            return NGX_ERROR;
        }

        pacf->capacity_auto = 0;

        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "balance=", 8) == 0) {
        s.data = value->data + 8;
        s.len = value->len - 8;

        if (s.len == 3 && ngx_strncmp(s.data, "off", 3) == 0) {
            pacf->balance = 0;
            return NGX_OK;
        }

        n = ngx_atofp(s.data, s.len, 2);

        if (n == NGX_ERROR || n < 100 || n > 1000) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"balance\" value \"%V\" in "
                               "\"prefix_aware\", it must be \"off\" "
                               "or a number from 1.00 to 10.00", &s);
            return NGX_ERROR;
        }

        pacf->balance = (ngx_uint_t) n;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "match=", 6) == 0) {
        rv = ngx_http_prefix_aware_number(cf, value, 6, 0, 100,
                                          &pacf->match);
        if (rv != NGX_CONF_OK) {
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "cold=", 5) == 0) {
        if (ngx_http_prefix_aware_index_word(cf, value, 5, colds, &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pacf->cold = (pa_cold_e) v;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "cap=", 4) == 0) {
        if (ngx_http_prefix_aware_index_word(cf, value, 4, caps, &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pacf->cap = (pa_cap_e) v;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "overload=", 9) == 0) {
        if (ngx_http_prefix_aware_index_word(cf, value, 9, overloads, &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pacf->overload = v;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "place=", 6) == 0) {
        if (ngx_http_prefix_aware_index_word(cf, value, 6, places, &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pacf->place = (pa_place_e) v;
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "feedback=", 9) == 0) {
        if (ngx_http_prefix_aware_index_word(cf, value, 9, switches, &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pacf->feedback = (v == 0);
        return NGX_OK;
    }

    if (ngx_strncmp(value->data, "prefill=", 8) == 0) {
        if (ngx_http_prefix_aware_index_word(cf, value, 8, moments, &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pacf->prefill_end = v;
        return NGX_OK;
    }

    return NGX_DECLINED;
}


/*
 * "name=word": the index of the word in "words" (NULL-terminated), or a
 * configuration error that names the parameter and every word
 */

static ngx_int_t
ngx_http_prefix_aware_index_word(ngx_conf_t *cf, ngx_str_t *value,
    size_t skip, const char **words, ngx_uint_t *index)
{
    u_char      *p, *last;
    size_t       len;
    ngx_str_t    name, s;
    ngx_uint_t   i;
    u_char       list[128];

    s.data = value->data + skip;
    s.len = value->len - skip;

    for (i = 0; words[i]; i++) {
        len = ngx_strlen(words[i]);

        if (s.len == len && ngx_strncmp(s.data, words[i], len) == 0) {
            *index = i;
            return NGX_OK;
        }
    }

    p = list;
    last = list + sizeof(list);

    for (i = 0; words[i]; i++) {
        p = ngx_slprintf(p, last, "%s\"%s\"",
                         i == 0 ? "" : words[i + 1] ? ", " : " or ",
                         words[i]);
    }

    name.data = value->data;
    name.len = skip - 1;

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid \"%V\" value \"%V\" in \"prefix_aware\", "
                       "it must be %*s", &name, &s, p - list, list);

    return NGX_ERROR;
}


/*
 * "length=" ("value", NULL if not given), once every parameter was read:
 * 1024..65536 units as SageMaker's PrefixLength, to 4194304 with the
 * index, which matches long prompts to their end; with the index, 524288
 * by default, and at least one block
 */

ngx_int_t
ngx_http_prefix_aware_index_length(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value)
{
    ngx_int_t  v, max;

    pacf->length_set = (value != NULL);

    if (value == NULL) {
        if (pacf->index_size) {
            pacf->length = NGX_HTTP_PREFIX_AWARE_INDEX_LENGTH;
        }

    } else {
        max = pacf->index_size ? NGX_HTTP_PREFIX_AWARE_INDEX_LENGTH_MAX
                               : NGX_HTTP_PREFIX_AWARE_LENGTH_MAX;

        v = ngx_atoi(value->data + 7, value->len - 7);

        if (v == NGX_ERROR || v < 1024 || v > max) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"length\" value \"%s\" in "
                               "\"prefix_aware\", it must be a number from "
                               "1024 to %d, or to %d with the index",
                               value->data + 7,
                               NGX_HTTP_PREFIX_AWARE_LENGTH_MAX,
                               NGX_HTTP_PREFIX_AWARE_INDEX_LENGTH_MAX);
            return NGX_ERROR;
        }

        pacf->length = (ngx_uint_t) v;
    }

    /* the index records whole blocks of the key's first "length" units */

    if (pacf->index_size && pacf->block > pacf->length) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"block=%ui\" in \"prefix_aware\" is larger "
                           "than \"length=%ui\": the index would hold no "
                           "block, lower \"block\" or raise \"length\"",
                           pacf->block, pacf->length);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * index=auto, the default, is off where the index cannot follow the
 * servers (servers with "resolve", over 1024 servers): the upstream routes
 * as with index=off, at index=off's default length unless one is given
 */

void
ngx_http_prefix_aware_index_off(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, char *why)
{
    ngx_log_error(NGX_LOG_NOTICE, cf->log, 0,
                  "prefix_aware: upstream \"%V\" routes with \"index=off\", "
                  "\"index=auto\" is off with %s",
                  &pacf->upstream->host, why);

    pacf->index_size = 0;
    pacf->index_auto = 0;

    if (!pacf->length_set) {
        pacf->length = NGX_HTTP_PREFIX_AWARE_LENGTH;

    } else if (pacf->length > NGX_HTTP_PREFIX_AWARE_LENGTH_MAX) {
        ngx_log_error(NGX_LOG_NOTICE, cf->log, 0,
                      "prefix_aware: upstream \"%V\" keys %d units, not "
                      "\"length=%ui\", without the index",
                      &pacf->upstream->host, NGX_HTTP_PREFIX_AWARE_LENGTH_MAX,
                      pacf->length);

        pacf->length = NGX_HTTP_PREFIX_AWARE_LENGTH_MAX;
    }
}
