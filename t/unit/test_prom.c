
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * pa_prom_*(): what vLLM's and SGLang's /metrics pages say of the engine
 * (their lines as the engines print them), read whole and in every cut;
 * data-parallel series summed; lines too long, malformed or lying passed
 * over and counted.
 */


#include <math.h>
#include <string.h>

#include "unit.h"
#include "pa_prom.h"


/* vLLM 0.8 (V1 engine), one model; trimmed of most histograms */
static const char  vllm_page[] =
    "# HELP vllm:num_requests_running Number of requests in model "
    "execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"meta-llama/"
    "Llama-3.1-8B-Instruct\"} 3.0\n"
    "# HELP vllm:num_requests_waiting Number of requests waiting to be "
    "processed.\n"
    "# TYPE vllm:num_requests_waiting gauge\n"
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"meta-llama/"
    "Llama-3.1-8B-Instruct\"} 7.0\n"
    "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent "
    "usage.\n"
    "# TYPE vllm:kv_cache_usage_perc gauge\n"
    "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"meta-llama/"
    "Llama-3.1-8B-Instruct\"} 0.4217\n"
    "# HELP vllm:prefix_cache_queries_total Prefix cache queries.\n"
    "# TYPE vllm:prefix_cache_queries_total counter\n"
    "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} "
    "1.234e+06\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\","
    "model_name=\"m\"} 0.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\","
    "model_name=\"m\"} 12.0\n"
    "# HELP vllm:cache_config_info Information of the LLMEngine "
    "CacheConfig\n"
    "# TYPE vllm:cache_config_info gauge\n"
    "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\","
    "calculate_kv_scales=\"False\",cpu_offload_gb=\"0\","
    "enable_prefix_caching=\"True\",gpu_memory_utilization=\"0.9\","
    "is_attention_free=\"False\",num_cpu_blocks=\"None\","
    "num_gpu_blocks=\"81767\",num_gpu_blocks_override=\"None\","
    "sliding_window=\"None\",swap_space_bytes=\"4294967296\"} 1.0\n";

/* SGLang 0.4, tensor parallel rank 0 */
static const char  sglang_page[] =
    "# HELP sglang:num_running_reqs The number of running requests.\n"
    "# TYPE sglang:num_running_reqs gauge\n"
    "sglang:num_running_reqs{engine_type=\"unified\",model_name=\"m\","
    "tp_rank=\"0\"} 1.0\n"
    "sglang:num_queue_reqs{engine_type=\"unified\",tp_rank=\"0\"} 2.0\n"
    "sglang:token_usage{engine_type=\"unified\",tp_rank=\"0\"} 0.25\n"
    "sglang:prompt_tokens_total{engine_type=\"unified\"} 3.5e+07\n"
    "sglang:max_total_num_tokens{engine_type=\"unified\",tp_rank=\"0\"} "
    "144870.0\n";


static unsigned
read_whole(pa_prom_t *pp, const char *page, size_t len)
{
    pa_prom_init(pp);
    pa_prom_feed(pp, (const unsigned char *) page, len);

    return pa_prom_finish(pp);
}


static unsigned
read_cut(pa_prom_t *pp, const char *page, size_t len, size_t at)
{
    pa_prom_init(pp);
    pa_prom_feed(pp, (const unsigned char *) page, at);
    pa_prom_feed(pp, (const unsigned char *) page + at, len - at);

    return pa_prom_finish(pp);
}


static const unsigned  all = (1u << PA_PROM_CAPACITY) | (1u << PA_PROM_WAITING)
                             | (1u << PA_PROM_RUNNING) | (1u << PA_PROM_USAGE);


static void
test_vllm(void)
{
    size_t     at, len, bad;
    unsigned   seen;
    pa_prom_t  pp;

    len = sizeof(vllm_page) - 1;
    seen = read_whole(&pp, vllm_page, len);

    CHECK(seen == all);
    CHECK(pp.value[PA_PROM_CAPACITY] == 16.0 * 81767);
    CHECK(pp.value[PA_PROM_WAITING] == 7);
    CHECK(pp.value[PA_PROM_RUNNING] == 3);
    CHECK(fabs(pp.value[PA_PROM_USAGE] - 0.4217) < 1e-9);
    CHECK(pp.rejected == 0);
    CHECK(pp.longs == 0);
    CHECK(pp.lines == 7);

    /* every cut of the page reads the same, and so does byte by byte */

    bad = 0;

    for (at = 0; at <= len; at++) {
        seen = read_cut(&pp, vllm_page, len, at);

        if (seen != all || pp.value[PA_PROM_CAPACITY] != 16.0 * 81767
            || pp.value[PA_PROM_WAITING] != 7 || pp.lines != 7)
        {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%zu cuts read otherwise", bad);

    pa_prom_init(&pp);

    for (at = 0; at < len; at++) {
        pa_prom_feed(&pp, (const unsigned char *) vllm_page + at, 1);
    }

    CHECK(pa_prom_finish(&pp) == all);
    CHECK(pp.value[PA_PROM_RUNNING] == 3);
}


static void
test_vllm_tokens_label(void)
{
    static const char  hybrid[] =
        "vllm:cache_config_info{block_size=\"832\",mamba_cache_mode="
        "\"align\",cache_dtype=\"bfloat16\",kv_cache_size_tokens=\"619479\","
        "num_gpu_blocks=\"745\",gpu_memory_utilization=\"0.95\"} 1.0\n";
    static const char  none[] =
        "vllm:cache_config_info{block_size=\"16\",kv_cache_size_tokens="
        "\"None\",num_gpu_blocks=\"6000\"} 1.0\n";
    static const char  zero[] =
        "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"0\"} 1\n";
    static const char  nosize[] =
        "vllm:cache_config_info{block_size=\"16\"} 1.0\n";

    pa_prom_t  pp;

    /* the engine's own count of tokens, not 832 x 745 */

    CHECK(read_whole(&pp, hybrid, sizeof(hybrid) - 1)
          == 1u << PA_PROM_CAPACITY);
    CHECK(pp.value[PA_PROM_CAPACITY] == 619479);

    /* "None" for the tokens: the blocks */

    CHECK(read_whole(&pp, none, sizeof(none) - 1) == 1u << PA_PROM_CAPACITY);
    CHECK(pp.value[PA_PROM_CAPACITY] == 96000);

    /* no blocks yet (the engine still profiling), or none given */

    CHECK(read_whole(&pp, zero, sizeof(zero) - 1) == 0);
    CHECK(pp.rejected == 1);
    CHECK(read_whole(&pp, nosize, sizeof(nosize) - 1) == 0);
    CHECK(pp.rejected == 1);
}


static void
test_sglang(void)
{
    pa_prom_t  pp;

    CHECK(read_whole(&pp, sglang_page, sizeof(sglang_page) - 1) == all);
    CHECK(pp.value[PA_PROM_CAPACITY] == 144870);
    CHECK(pp.value[PA_PROM_WAITING] == 2);
    CHECK(pp.value[PA_PROM_RUNNING] == 1);
    CHECK(pp.value[PA_PROM_USAGE] == 0.25);
}


static void
test_data_parallel(void)
{
    /* two engines behind one address: queues and caches add, usage is
     * their mean; the older name of usage is read as well */

    static const char  page[] =
        "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 2\n"
        "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5\n"
        "vllm:gpu_cache_usage_perc{engine=\"0\"} 0.2\n"
        "vllm:gpu_cache_usage_perc{engine=\"1\"} 0.6\n"
        "vllm:cache_config_info{block_size=\"16\",engine=\"0\","
        "num_gpu_blocks=\"1000\"} 1.0\n"
        "vllm:cache_config_info{block_size=\"16\",engine=\"1\","
        "num_gpu_blocks=\"3000\"} 1.0\n";

    pa_prom_t  pp;

    CHECK(read_whole(&pp, page, sizeof(page) - 1)
          == ((1u << PA_PROM_WAITING) | (1u << PA_PROM_USAGE)
              | (1u << PA_PROM_CAPACITY)));
    CHECK(pp.value[PA_PROM_WAITING] == 7);
    CHECK(fabs(pp.value[PA_PROM_USAGE] - 0.4) < 1e-9);
    CHECK(pp.value[PA_PROM_CAPACITY] == 64000);
}


static void
test_format(void)
{
    /* CRLF, no labels, a timestamp, blanks, a last line without its
     * newline, escapes in a label, and "# EOF" */

    static const char  page[] =
        "\r\n"
        "  # a comment\r\n"
        "vllm:num_requests_running 4 1712345678000\r\n"
        "vllm:num_requests_waiting{model_name=\"a \\\"quoted\\\" }\\\\\","
        "} 1e1\r\n"
        "\t\r\n"
        "# EOF\n"
        "vllm:kv_cache_usage_perc 5E-1";

    /* a name that only begins as a read one is another metric */

    static const char  other[] =
        "vllm:num_requests_waiting_by_reason{reason=\"x\"} 3\n"
        "vllm:num_requests_running_total 3\n";

    pa_prom_t  pp;

    CHECK(read_whole(&pp, page, sizeof(page) - 1)
          == ((1u << PA_PROM_RUNNING) | (1u << PA_PROM_WAITING)
              | (1u << PA_PROM_USAGE)));
    CHECK(pp.value[PA_PROM_RUNNING] == 4);
    CHECK(pp.value[PA_PROM_WAITING] == 10);
    CHECK(pp.value[PA_PROM_USAGE] == 0.5);
    CHECK(pp.rejected == 0);

    CHECK(read_whole(&pp, other, sizeof(other) - 1) == 0);
    CHECK(pp.rejected == 0);
}


static void
test_lies(void)
{
    static const char  *bad[] = {
        "vllm:num_requests_waiting -1\n",
        "vllm:num_requests_waiting NaN\n",
        "vllm:num_requests_waiting +Inf\n",
        "vllm:num_requests_waiting 1e300\n",
        "vllm:num_requests_waiting 1e99999\n",
        "vllm:num_requests_waiting 3x\n",
        "vllm:num_requests_waiting\n",
        "vllm:num_requests_waiting{model=\"m\" 3\n",
        "vllm:num_requests_waiting{model=m} 3\n",
        "vllm:num_requests_waiting{=\"m\"} 3\n",
        "vllm:num_requests_waiting{a=\"unterminated} 3\n",
        "vllm:num_requests_waiting=3\n",
        "vllm:kv_cache_usage_perc 1.5\n",
        "vllm:kv_cache_usage_perc -0.1\n",
        "sglang:max_total_num_tokens 0\n",
        "sglang:max_total_num_tokens 1e13\n",
        "vllm:cache_config_info{block_size=\"0\",num_gpu_blocks=\"9\"} 1\n",
        "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"-9\"} 1\n",
        "vllm:cache_config_info{block_size=\"1e9\",num_gpu_blocks=\"9\"} 1\n",
        "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks="
        "\"1e300\"} 1\n",
        "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"9\"} x\n",
        NULL
    };

    /* a value refused leaves the good ones of the page */

    static const char  mixed[] =
        "vllm:num_requests_waiting{engine=\"0\"} 4\n"
        "vllm:num_requests_waiting{engine=\"1\"} -4\n";

    size_t      i;
    pa_prom_t   pp;

    for (i = 0; bad[i]; i++) {
        CHECK_MSG(read_whole(&pp, bad[i], strlen(bad[i])) == 0
                  && pp.rejected == 1, "taken: %s", bad[i]);
    }

    CHECK(read_whole(&pp, mixed, sizeof(mixed) - 1)
          == 1u << PA_PROM_WAITING);
    CHECK(pp.value[PA_PROM_WAITING] == 4);
    CHECK(pp.rejected == 1);
}


static void
test_long_lines(void)
{
    static char  page[3 * PA_PROM_LINE_MAX];

    size_t     n, at;
    unsigned   seen;
    pa_prom_t  pp;

    /* a line over the limit, then a good one: the first is passed over
     * whatever the cuts, the second read */

    n = 0;
    memcpy(page, "vllm:num_requests_waiting{x=\"", 29);
    n = 29;
    memset(page + n, 'a', PA_PROM_LINE_MAX);
    n += PA_PROM_LINE_MAX;
    memcpy(page + n, "\"} 99\nvllm:num_requests_running 2\n", 34);
    n += 34;

    for (at = 0; at <= n; at += 97) {
        seen = read_cut(&pp, page, n, at);
        CHECK(seen == 1u << PA_PROM_RUNNING);
        CHECK(pp.longs == 1);
    }

    /* a line of exactly the limit is kept */

    memset(page, ' ', PA_PROM_LINE_MAX);
    memcpy(page + PA_PROM_LINE_MAX - 28, "vllm:num_requests_running 5", 27);
    page[PA_PROM_LINE_MAX - 1] = ' ';
    page[PA_PROM_LINE_MAX] = '\n';

    CHECK(read_whole(&pp, page, PA_PROM_LINE_MAX + 1)
          == 1u << PA_PROM_RUNNING);
    CHECK(pp.value[PA_PROM_RUNNING] == 5);
    CHECK(pp.longs == 0);

    /* an endless line, then the page ends */

    pa_prom_init(&pp);

    for (at = 0; at < 100; at++) {
        pa_prom_feed(&pp, (const unsigned char *) page, PA_PROM_LINE_MAX);
    }

    CHECK(pa_prom_finish(&pp) == 0);
    CHECK(pp.longs == 1);
}


int
main(void)
{
    test_vllm();
    test_vllm_tokens_label();
    test_sglang();
    test_data_parallel();
    test_format();
    test_lies();
    test_long_lines();

    return UNIT_DONE();
}
