
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * What an inference engine reports of itself in its Prometheus /metrics
 * page (text format 0.0.4, and OpenMetrics' text as far as these lines
 * go), read as the page streams in: its KV cache's size, the requests it
 * runs and queues, and how full its cache is.  Plain C, no nginx headers,
 * nothing allocated: one line at a time is held, in a fixed buffer.
 *
 * The lines read (the sum over a page's series of one name, as an engine
 * with data parallelism gives one series per engine):
 *
 *   vLLM    vllm:cache_config_info{block_size="16",num_gpu_blocks="N",...}
 *           (capacity: its kv_cache_size_tokens label where it has one,
 *           block_size x num_gpu_blocks tokens otherwise),
 *           vllm:num_requests_waiting, vllm:num_requests_running,
 *           vllm:kv_cache_usage_perc (vllm:gpu_cache_usage_perc before
 *           vLLM 0.10), 0..1
 *   SGLang  sglang:max_total_num_tokens (capacity in tokens),
 *           sglang:num_queue_reqs, sglang:num_running_reqs,
 *           sglang:token_usage, 0..1
 *
 * A value out of its range (a negative count, a usage above 1, a cache
 * of fewer than PA_PROM_CAPACITY_MIN or more than PA_PROM_CAPACITY_MAX
 * tokens, NaN, infinities) is not taken, and counted in "rejected".  A
 * sum over series is held at the same maximum as one series
 * (PA_PROM_COUNT_MAX requests, PA_PROM_CAPACITY_MAX tokens), and marked
 * in "clamped": a page of many series says no more than one could.
 *
 * A page costs what its bytes cost: a number is read in one pass over
 * its characters, its exponent clamped as its digits are read, and
 * scaled in at most PA_PROM_SCALE_MAX multiplications, whatever the
 * exponent says ("0e-9999" is 0, at once).  "work" counts the steps.
 */


#ifndef _PA_PROM_H_INCLUDED_
#define _PA_PROM_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


/* a longer line is passed over (and counted in "long") */
#define PA_PROM_LINE_MAX      2048

#define PA_PROM_CAPACITY_MIN  16
#define PA_PROM_CAPACITY_MAX  1000000000000.0
#define PA_PROM_COUNT_MAX     10000000.0

/* the most multiplications that scale a number by its exponent */
#define PA_PROM_SCALE_MAX     15


typedef enum {
    PA_PROM_CAPACITY = 0,     /* KV cache, in tokens */
    PA_PROM_WAITING,          /* requests queued */
    PA_PROM_RUNNING,          /* requests in the running batch */
    PA_PROM_USAGE,            /* KV cache used, 0..1 */
    PA_PROM_NFIELDS
} pa_prom_field_e;


typedef struct {
    double        value[PA_PROM_NFIELDS];
    unsigned      seen;             /* 1 << field, for each field read */
    unsigned      nusage;           /* series averaged into USAGE */
    unsigned      clamped;          /* 1 << field, for each sum held at
                                       its maximum */

    uint32_t      lines;            /* lines read */
    uint32_t      rejected;         /* values out of range */
    uint32_t      longs;            /* lines over PA_PROM_LINE_MAX */

    /* the parse's steps: bytes of the lines read, and scalings */
    uint64_t      work;

    size_t        len;
    unsigned      skip:1;           /* in a line too long to keep */
    char          line[PA_PROM_LINE_MAX + 1];
} pa_prom_t;


void pa_prom_init(pa_prom_t *pp);

/* reads "n" more bytes of the page, in any cut */
void pa_prom_feed(pa_prom_t *pp, const unsigned char *p, size_t n);

/*
 * the page's end: reads a last line without its newline, and turns the
 * sums into the report; returns "seen"
 */
unsigned pa_prom_finish(pa_prom_t *pp);

/* one line, without its newline: for the tests and the fuzzer */
void pa_prom_line(pa_prom_t *pp, const char *p, size_t n);


#endif /* _PA_PROM_H_INCLUDED_ */
