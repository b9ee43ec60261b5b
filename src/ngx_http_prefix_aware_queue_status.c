
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * queue=: what the status page shows of the queue (JSON, Prometheus),
 * read from its table without the lock; src/ngx_http_prefix_aware_queue.c
 * keeps the queue.
 */


#include "ngx_http_prefix_aware.h"
#include "pa_queue.h"


/* the flows with the most requests waiting that the page shows */
#define NGX_HTTP_PREFIX_AWARE_QUEUE_FLOWS  8


static void ngx_http_prefix_aware_queue_json_left(
    ngx_http_prefix_aware_writer_t *w, uint64_t *left);
static void ngx_http_prefix_aware_queue_prom_bands(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w, const char *name, size_t field);
static void ngx_http_prefix_aware_queue_band_label(u_char *buf,
    pa_queue_head_t *h, ngx_uint_t k);


static void
ngx_http_prefix_aware_queue_json_left(ngx_http_prefix_aware_writer_t *w,
    uint64_t *left)
{
    ngx_uint_t  k;

    ngx_http_prefix_aware_printf(w, "\"released\": %uL, \"shed\": {", left[0]);

    for (k = 1; k < PA_QUEUE_NREASONS; k++) {
        ngx_http_prefix_aware_printf(w, "%s\"%s\": %uL", k > 1 ? ", " : " ",
                                     pa_queue_reasons[k], left[k]);
    }

    ngx_http_prefix_aware_printf(w, " }");
}


/* the status page's "queue" of an upstream (a read without the lock) */

void
ngx_http_prefix_aware_queue_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w)
{
    uint32_t                        n;
    uint32_t                        top[NGX_HTTP_PREFIX_AWARE_QUEUE_FLOWS];
    ngx_str_t                       s;
    ngx_uint_t                      k, first;
    pa_queue_flow_t                *f;
    pa_queue_band_t                *b;
    pa_queue_head_t                *h;
    ngx_http_prefix_aware_queue_t  *qu;

    qu = pacf->queue;

    if (qu == NULL || qu->q.head == NULL) {
        return;
    }

    h = qu->q.head;

    ngx_http_prefix_aware_printf(w,
        "      \"queue\": { \"size\": %ui, \"timeout_ms\": %M, "
        "\"poll_ms\": %M, \"status\": %ui, \"retry_after\": %ui, "
        "\"reserve\": %ui, \"priority_reserve\": %ui, ",
        qu->size, qu->timeout, qu->poll, qu->status, qu->retry, qu->reserve,
        qu->high);

    if (qu->priority >= 0) {
        ngx_http_prefix_aware_escape(w, &s, &qu->priority_name, 1);
        ngx_http_prefix_aware_printf(w, "\"priority\": \"%V\", ", &s);
    }

    if (qu->flow >= 0) {
        ngx_http_prefix_aware_escape(w, &s, &qu->flow_name, 1);
        ngx_http_prefix_aware_printf(w, "\"flow\": \"%V\", ", &s);
    }

    ngx_http_prefix_aware_printf(w,
        "\"waiting\": %uL, \"max_waiting\": %uL, \"passed\": %uL, ",
        h->waiting, h->max_waiting, h->passed);

    ngx_http_prefix_aware_queue_json_left(w, h->left);

    ngx_http_prefix_aware_printf(w, ",\n        \"wait_ms\": { \"counts\": [");

    for (k = 0; k < PA_QUEUE_HIST; k++) {
        ngx_http_prefix_aware_printf(w, "%s%uL", k ? ", " : " ", h->hist[k]);
    }

    ngx_http_prefix_aware_printf(w, " ], \"le\": [");

    for (k = 0; k < PA_QUEUE_HIST - 1; k++) {
        ngx_http_prefix_aware_printf(w, "%s%uL", k ? ", " : " ",
                                     pa_queue_hist_ms[k]);
    }

    ngx_http_prefix_aware_printf(w, ", \"+Inf\" ], \"sum\": %uL },\n"
                                    "        \"bands\": [", h->wait_sum);

    first = 1;

    for (k = 0; k <= PA_QUEUE_BANDS; k++) {
        b = &h->bands[k];

        if (k < PA_QUEUE_BANDS && !b->used) {
            continue;
        }

        if (k == PA_QUEUE_BANDS) {
            if (b->waiting == 0 && b->released == 0 && b->passed == 0
                && b->left[1] == 0
                && b->left[2] == 0 && b->left[3] == 0 && b->left[4] == 0
                && b->left[5] == 0)
            {
                continue;
            }

            ngx_http_prefix_aware_printf(w, "%s\n          { \"priority\": "
                                         "\"other\", ", first ? "" : ",");

        } else {
            ngx_http_prefix_aware_printf(w, "%s\n          { \"priority\": "
                                         "%D, ", first ? "" : ",",
                                         b->priority);
        }

        first = 0;

        ngx_http_prefix_aware_printf(w, "\"waiting\": %uL, \"passed\": %uL, "
                                     "\"work\": %uL, ", b->waiting,
                                     b->passed, b->work);
        ngx_http_prefix_aware_queue_json_left(w, b->left);
        ngx_http_prefix_aware_printf(w, " }");
    }

    ngx_http_prefix_aware_printf(w, "%s],\n        \"flows\": [",
                                 first ? " " : "\n        ");

    /* the flows with the most waiting now */

    n = pa_queue_top_flows(&qu->q, NGX_HTTP_PREFIX_AWARE_QUEUE_FLOWS, top);

    for (k = 0; k < n; k++) {
        f = &qu->q.flows[top[k]];

        ngx_http_prefix_aware_printf(w, "%s\n          { \"flow\": "
                                     "\"%016uxL\", \"priority\": %D, "
                                     "\"waiting\": %uD }", k ? "," : "",
                                     f->hash, f->priority, f->waiting);
    }

    ngx_http_prefix_aware_printf(w, "%s] },\n", n ? "\n        " : " ");
}


static void
ngx_http_prefix_aware_queue_band_label(u_char *buf, pa_queue_head_t *h,
    ngx_uint_t k)
{
    if (k == PA_QUEUE_BANDS) {
        ngx_sprintf(buf, "other%Z");

    } else {
        ngx_sprintf(buf, "%D%Z", h->bands[k].priority);
    }
}


void
ngx_http_prefix_aware_queue_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w)
{
    u_char                             band[NGX_INT32_LEN + 8];
    uint64_t                           cum;
    ngx_uint_t                         i, k, r, any;
    pa_queue_head_t                   *h;
    ngx_http_prefix_aware_srv_conf_t **pacf;

    pacf = pamcf->upstreams.elts;
    any = 0;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue && pacf[i]->queue->q.head) {
            any = 1;
        }
    }

    if (!any) {
        return;
    }

    ngx_http_prefix_aware_family(w, "queue_waiting", "gauge",
        "Requests waiting now for a server under its bounds, by priority.");

    ngx_http_prefix_aware_queue_prom_bands(pamcf, label, w,
        "nginx_prefix_aware_queue_waiting",
        offsetof(pa_queue_band_t, waiting));

    ngx_http_prefix_aware_family(w, "queue_left_total", "counter",
        "Requests that left the queue, by priority and why: released to "
        "a server, or shed (full, timeout, sheddable), or gone (the "
        "client), or lost (their worker died).");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue == NULL || pacf[i]->queue->q.head == NULL) {
            continue;
        }

        h = pacf[i]->queue->q.head;

        for (k = 0; k <= PA_QUEUE_BANDS; k++) {
            if (k < PA_QUEUE_BANDS && !h->bands[k].used) {
                continue;
            }

            ngx_http_prefix_aware_queue_band_label(band, h, k);

            for (r = 0; r < PA_QUEUE_NREASONS; r++) {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_queue_left_total"
                    "{upstream=\"%V\",priority=\"%s\",reason=\"%s\"} %uL\n",
                    &label[i][0], band, pa_queue_reasons[r],
                    h->bands[k].left[r]);
            }
        }
    }

    ngx_http_prefix_aware_family(w, "queue_passed_total", "counter",
        "Requests that went past the queue to their prefix holder while "
        "every server was at its bounds (queue_reserve=), by priority.");

    ngx_http_prefix_aware_queue_prom_bands(pamcf, label, w,
        "nginx_prefix_aware_queue_passed_total",
        offsetof(pa_queue_band_t, passed));

    ngx_http_prefix_aware_family(w, "queue_wait_seconds", "histogram",
        "Time the requests released to a server waited in the queue.");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue == NULL || pacf[i]->queue->q.head == NULL) {
            continue;
        }

        h = pacf[i]->queue->q.head;
        cum = 0;

        for (k = 0; k < PA_QUEUE_HIST; k++) {
            cum += h->hist[k];

            if (k < PA_QUEUE_HIST - 1) {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_queue_wait_seconds_bucket"
                    "{upstream=\"%V\",le=\"%uL.%03uL\"} %uL\n",
                    &label[i][0], pa_queue_hist_ms[k] / 1000,
                    pa_queue_hist_ms[k] % 1000, cum);

            } else {
                ngx_http_prefix_aware_printf(w,
                    "nginx_prefix_aware_queue_wait_seconds_bucket"
                    "{upstream=\"%V\",le=\"+Inf\"} %uL\n", &label[i][0], cum);
            }
        }

        ngx_http_prefix_aware_printf(w,
            "nginx_prefix_aware_queue_wait_seconds_sum{upstream=\"%V\"} "
            "%uL.%03uL\n"
            "nginx_prefix_aware_queue_wait_seconds_count{upstream=\"%V\"} "
            "%uL\n",
            &label[i][0], h->wait_sum / 1000, h->wait_sum % 1000,
            &label[i][0], cum);
    }

    ngx_http_prefix_aware_family(w, "queue_max_waiting", "gauge",
        "The most requests that waited at once, since the queue's zone "
        "was made.");

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue && pacf[i]->queue->q.head) {
            ngx_http_prefix_aware_printf(w,
                "nginx_prefix_aware_queue_max_waiting{upstream=\"%V\"} %uL\n",
                &label[i][0], pacf[i]->queue->q.head->max_waiting);
        }
    }
}


/* a sample of each upstream's bands: the band's uint64_t at "field" */

static void
ngx_http_prefix_aware_queue_prom_bands(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w, const char *name, size_t field)
{
    u_char                             band[NGX_INT32_LEN + 8];
    ngx_uint_t                         i, k;
    pa_queue_head_t                   *h;
    ngx_http_prefix_aware_srv_conf_t **pacf;

    pacf = pamcf->upstreams.elts;

    for (i = 0; i < pamcf->upstreams.nelts; i++) {
        if (pacf[i]->queue == NULL || pacf[i]->queue->q.head == NULL) {
            continue;
        }

        h = pacf[i]->queue->q.head;

        for (k = 0; k <= PA_QUEUE_BANDS; k++) {
            if (k < PA_QUEUE_BANDS && !h->bands[k].used) {
                continue;
            }

            ngx_http_prefix_aware_queue_band_label(band, h, k);

            ngx_http_prefix_aware_printf(w,
                "%s{upstream=\"%V\",priority=\"%s\"} %uL\n",
                name, &label[i][0], band,
                *(uint64_t *) ((u_char *) &h->bands[k] + field));
        }
    }
}
