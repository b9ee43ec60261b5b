
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * feedback=on: what the engine says it reused of a prompt
 * (usage.prompt_tokens_details.cached_tokens in its answer) against the
 * depth the index predicted on that server; a shortfall cuts the
 * server's cache life in the index (pa_index_feedback()).  The answer is
 * read as it passes, in the body filter: nothing is buffered or held
 * back.  And the counts on the status pages.  Also what the first bytes
 * of every answer say (prefill=first): the prefill is done.
 */


#include "ngx_http_prefix_aware.h"



/*
 * the first bytes of the response body: a streamed completion has its
 * first token, the engine has done the request's prefill, and the server
 * is busy with it only as long as it decodes.  the prefill leaves the
 * server's work in flight now; the decode share stays until the request
 * ends.  a response that is not streamed (or is buffered: proxy_buffering
 * on sends it on as buffers fill) comes at the end: its prefill counts
 * until then
 */

void
ngx_http_prefix_aware_feedback_first_byte(
    ngx_http_prefix_aware_peer_data_t *pd, ngx_chain_t *in)
{
    ngx_chain_t  *cl;

    for (cl = in; cl; cl = cl->next) {
        if (!ngx_buf_special(cl->buf) && ngx_buf_size(cl->buf) > 0) {
            break;
        }
    }

    if (cl == NULL) {
        return;
    }

    if (pd->held) {
        ngx_atomic_fetch_add(&pd->held->work,
                             - (ngx_atomic_int_t) pd->prefill);

        if (pd->wcount) {
            ngx_atomic_fetch_add(pd->wcount,
                                 - (ngx_atomic_int_t) pd->prefill);
        }

        pd->cost -= pd->prefill;
    }

    pd->prefill = 0;
}


/*
 * the request is recorded on "server" with "age" the age of its deepest
 * held block (-1: none): its answer is read if the index predicted a
 * depth there
 */

void
ngx_http_prefix_aware_feedback_start(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server, int64_t age)
{
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    pacf = pd->conf;

    if (!pacf->feedback || pd->depth == 0 || age < 0) {
        pd->feedback = 0;
        return;
    }

    pd->feedback = 1;
    pd->fb_id = pacf->id[server];
    pd->age = age;

    pa_usage_init(&pd->usage);
}


void
ngx_http_prefix_aware_feedback_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_chain_t *in)
{
    uint64_t                           tokens, reused;
    ngx_buf_t                         *b;
    ngx_chain_t                       *cl;
    ngx_http_prefix_aware_srv_conf_t  *pacf;

    /* an error, or an answer compressed by the engine, says nothing */

    if (r->headers_out.status != NGX_HTTP_OK
        || r->headers_out.content_encoding != NULL)
    {
        pd->feedback = 0;
        return;
    }

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b) && b->last > b->pos) {
            pa_usage_feed(&pd->usage, b->pos, b->last - b->pos);
        }

        if (!b->last_buf) {
            continue;
        }

        pd->feedback = 0;

        if (!pa_usage_finish(&pd->usage, &tokens)) {
            return;
        }

        /* tokens of about 4 units, in blocks */

        pacf = pd->conf;
        reused = ngx_min(tokens, PA_USAGE_MAX) * 4 / pacf->block;

        ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "prefix_aware feedback: %uL cached tokens, %uL of "
                       "%uD blocks predicted %L old",
                       tokens, reused, pd->depth, pd->age);

        pa_index_feedback(&pacf->index, pd->fb_id, pd->depth, pd->age,
                          reused);
        return;
    }
}


/* the status page: what the answers told of a server */

void
ngx_http_prefix_aware_feedback_json_server(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t j,
    ngx_http_prefix_aware_writer_t *w)
{
    pa_index_learned_t  l;

    if (!pacf->feedback || pacf->index_size == 0
        || pacf->id[j] == PA_INDEX_NO_SERVER)
    {
        return;
    }

    pa_index_learned(&pacf->index, pacf->id[j], &l);

    ngx_http_prefix_aware_printf(w,
        ",\n          \"feedback\": { \"confirmed\": %uL, \"shortfall\": %uL, "
        "\"forgotten_blocks\": %uL",
        l.confirmed, l.shortfall, l.forgotten);

    if (l.learned) {
        ngx_http_prefix_aware_printf(w, ", \"learned_capacity\": %uL",
                                     (uint64_t) l.learned * pacf->block / 4);
    }

    ngx_http_prefix_aware_printf(w, " }");
}


static ngx_http_prefix_aware_family_t
    ngx_http_prefix_aware_feedback_families[] = {
    { "feedback_total", "counter",
      "Answers with cached_tokens by result: confirmed (the engine reused "
      "at least half the depth the index predicted) or shortfall." },
    { "feedback_forgotten_blocks_total", "counter",
      "Blocks of the server's cache life that shortfalls took away." },
    { "feedback_learned_capacity_tokens", "gauge",
      "The cache life the engine's answers showed, in tokens, where it is "
      "less than the capacity." },
    { NULL, NULL, NULL }
};


void
ngx_http_prefix_aware_feedback_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    ngx_uint_t                          i, j, f, any;
    pa_index_learned_t                  l;
    ngx_http_prefix_aware_family_t     *fam;
    ngx_http_prefix_aware_srv_conf_t  **pacf, *c;

    pacf = pamcf->upstreams.elts;
    any = 0;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->feedback && pacf[i]->index_size && pacf[i]->shm) {
            any = 1;
        }
    }

    if (!any) {
        return;
    }

    for (f = 0; ngx_http_prefix_aware_feedback_families[f].name; f++) {
        fam = &ngx_http_prefix_aware_feedback_families[f];

        ngx_http_prefix_aware_family(w, fam->name, fam->type, fam->help);

        for (i = 0; i < pamcf->upstreams.nelts; i++) {
            c = pacf[i];

            if (!c->feedback || c->index_size == 0 || c->shm == NULL) {
                continue;
            }

            for (j = 0; j < c->nservers; j++) {
                if (c->id[j] == PA_INDEX_NO_SERVER) {
                    continue;
                }

                pa_index_learned(&c->index, c->id[j], &l);

                if (f == 0) {
                    ngx_http_prefix_aware_printf(w,
                        "nginx_prefix_aware_%s{upstream=\"%V\",server="
                        "\"%V\",result=\"confirmed\"} %uL\n"
                        "nginx_prefix_aware_%s{upstream=\"%V\",server="
                        "\"%V\",result=\"shortfall\"} %uL\n",
                        fam->name, &label[i][0], &label[i][1 + j],
                        l.confirmed, fam->name, &label[i][0],
                        &label[i][1 + j], l.shortfall);

                } else if (f == 1) {
                    ngx_http_prefix_aware_printf(w,
                        "nginx_prefix_aware_%s{upstream=\"%V\",server="
                        "\"%V\"} %uL\n", fam->name, &label[i][0],
                        &label[i][1 + j], l.forgotten);

                } else if (l.learned) {
                    ngx_http_prefix_aware_printf(w,
                        "nginx_prefix_aware_%s{upstream=\"%V\",server="
                        "\"%V\"} %uL\n", fam->name, &label[i][0],
                        &label[i][1 + j], (uint64_t) l.learned * c->block / 4);
                }
            }
        }
    }
}
