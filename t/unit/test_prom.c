
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * pa_prom_*(): what vLLM's and SGLang's /metrics pages say of the engine
 * (their lines as the engines print them), read whole and in every cut;
 * data-parallel series summed; lines too long, malformed or lying passed
 * over and counted; numbers read at the cost of their bytes, whatever
 * their exponents say, and sums over many series held at their bounds.
 */


#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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


/* one value of sglang:num_queue_reqs: 1 and the value taken, 0 refused */

static int
read_number(const char *num, double *v, uint64_t *work)
{
    char       line[PA_PROM_LINE_MAX];
    size_t     n;
    pa_prom_t  pp;

    n = (size_t) snprintf(line, sizeof(line), "sglang:num_queue_reqs %s",
                          num);

    pa_prom_init(&pp);
    pa_prom_line(&pp, line, n);

    *v = pp.value[PA_PROM_WAITING];
    *work = pp.work - n;

    return pa_prom_finish(&pp) == 1u << PA_PROM_WAITING && pp.rejected == 0;
}


static void
test_numbers(void)
{
    static const struct {
        const char  *num;
        double       v;
    } good[] = {
        { "0e9999", 0 },
        { "0e-9999", 0 },
        { "0.0e99999999999999999999", 0 },
        { "0E+9999", 0 },
        { "1e-400", 0 },
        { "1e-9999", 0 },
        { "7e-99999999999999999999", 0 },
        { "1.463693e+06", 1463693 },
        { "3.5e+06", 3500000 },
        { "144870.0", 144870 },
        { "5E-1", 0.5 },
        { ".5e1", 5 },
        { "1.", 1 },
        { "+2", 2 },
        { "9999999", 9999999 },
        { "10000000", 10000000 },
        { "1e7", 10000000 },
        { "100000000e-1", 10000000 },
        { NULL, 0 }
    };

    static const char  *bad[] = {
        "1e9999",
        "1e301",
        "1e99999999999999999999",
        "0.1e302",
        "1e",
        "e5",
        "1e+",
        ".",
        "1.2.3",
        "0x10",
        NULL
    };

    char       num[PA_PROM_LINE_MAX];
    double     v;
    size_t     i;
    uint64_t   work;

    for (i = 0; good[i].num; i++) {
        CHECK_MSG(read_number(good[i].num, &v, &work) && v == good[i].v,
                  "%s read as %.17g", good[i].num, v);
        CHECK_MSG(work <= PA_PROM_SCALE_MAX, "%s: %llu steps", good[i].num,
                  (unsigned long long) work);
    }

    for (i = 0; bad[i]; i++) {
        CHECK_MSG(!read_number(bad[i], &v, &work), "taken: %s", bad[i]);
        CHECK_MSG(work <= PA_PROM_SCALE_MAX, "%s: %llu steps", bad[i],
                  (unsigned long long) work);
    }

    /* the longest scalings: at most PA_PROM_SCALE_MAX steps */

    CHECK(read_number("1e-299", &v, &work) && v > 0 && v < 1e-298);
    CHECK_MSG(work <= PA_PROM_SCALE_MAX, "1e-299: %llu steps",
              (unsigned long long) work);
    CHECK(read_number("9999999999999999999e-318", &v, &work) && v > 0);
    CHECK(work <= PA_PROM_SCALE_MAX);

    /* 1e300 is read, and refused as too many requests */

    CHECK(!read_number("1e300", &v, &work));
    CHECK(work <= PA_PROM_SCALE_MAX);

    /* digits past a mantissa's 19 only move the point */

    CHECK(read_number("1234567890123456789012345e-19", &v, &work));
    CHECK(fabs(v - 123456.7890123456789) < 1e-9);

    /* a huge digit string: 2000 zeros after 7, and before it */

    memset(num, '0', 2001);
    num[0] = '7';
    num[2001] = '\0';
    CHECK(!read_number(num, &v, &work));
    CHECK(work <= PA_PROM_SCALE_MAX);

    memcpy(num + 2001, "e-2000", 7);
    CHECK(read_number(num, &v, &work) && v == 7);

    num[0] = '0';
    num[2000] = '7';
    num[2001] = '\0';
    CHECK(read_number(num, &v, &work) && v == 7);

    /* 0.(1998 zeros)7 */

    memcpy(num, "0.", 2);
    memcpy(num + 2001, "e1999", 6);
    CHECK(read_number(num, &v, &work) && v == 7);

    memcpy(num + 2001, "e-9999", 7);
    CHECK(read_number(num, &v, &work) && v == 0 && work == 0);
}


/*
 * an engine's page of N lines of "sglang:num_queue_reqs 0e-9999": 10.6 s
 * of a worker's CPU for 8 MB when a number cost its exponent's value
 * (up to 9999 divisions each); now what a page of "1" costs, and the
 * steps are its bytes
 */

static double
cpu_time(void)
{
    return (double) clock() / CLOCKS_PER_SEC;
}


static size_t
page_of(char *page, size_t size, const char *line)
{
    size_t  n, len;

    len = strlen(line);

    for (n = 0; n + len <= size; n += len) {
        memcpy(page + n, line, len);
    }

    return n;
}


static void
test_hostile_page(void)
{
    static const char  *lines[] = {
        "sglang:num_queue_reqs 0e-9999\n",
        "sglang:num_queue_reqs 0e9999\n",
        "sglang:num_queue_reqs 1e-299\n",
        "sglang:num_queue_reqs 1e-400\n",
        "sglang:num_queue_reqs 9e300\n",
        "vllm:cache_config_info{block_size=\"0e-9999\",num_gpu_blocks="
        "\"0e-9999\",kv_cache_size_tokens=\"0e-9999\"} 0e-9999\n",
        NULL
    };

    char       *page;
    size_t      i, n, size, nlines;
    double      t, normal, hostile;
    unsigned    seen;
    pa_prom_t   pp;

    size = 2 * 1024 * 1024;

    page = malloc(size);
    if (page == NULL) {
        CHECK(page != NULL);
        return;
    }

    n = page_of(page, size, lines[0]);
    nlines = n / strlen(lines[0]);

    t = cpu_time();
    seen = read_whole(&pp, page, n);
    hostile = cpu_time() - t;

    CHECK(seen == 1u << PA_PROM_WAITING);
    CHECK(pp.value[PA_PROM_WAITING] == 0);
    CHECK(pp.lines == nlines);
    CHECK(pp.rejected == 0);

    /* the bytes of its lines, not a step more */

    CHECK_MSG(pp.work == n - nlines, "%llu steps for %zu bytes",
              (unsigned long long) pp.work, n);

    /* every line of the worst: its bytes and PA_PROM_SCALE_MAX at most */

    for (i = 0; lines[i]; i++) {
        n = page_of(page, size, lines[i]);
        nlines = n / strlen(lines[i]);

        read_whole(&pp, page, n);

        CHECK_MSG(pp.lines == nlines
                  && pp.work <= n + 4 * nlines * PA_PROM_SCALE_MAX,
                  "%s: %llu steps for %zu bytes", lines[i],
                  (unsigned long long) pp.work, n);
    }

    /*
     * and in time: as a page of "1" of the same size, with room for a
     * busy machine (it took 1000 times as long)
     */

    n = page_of(page, size, "sglang:num_queue_reqs 1e0\n");

    t = cpu_time();
    read_whole(&pp, page, n);
    normal = cpu_time() - t;

    CHECK(pp.value[PA_PROM_WAITING] == (double) pp.lines);

    CHECK_MSG(hostile < 10 * normal + 0.05,
              "0e-9999: %.3f s, 1e0: %.3f s", hostile, normal);

    free(page);
}


/*
 * sums over many series are held at a series' bound: an 8 MB page of
 * "vllm:num_requests_waiting 1" said 299,593 requests, one of 9000000
 * said 2.2e12
 */

static void
test_sums(void)
{
    static const char  big[] = "vllm:num_requests_waiting 9000000\n"
                               "vllm:num_requests_running 9999999\n"
                               "sglang:max_total_num_tokens 999999999999\n";
    static const char  one[] = "vllm:num_requests_waiting 1\n";

    char       *page;
    size_t      n, at, size;
    unsigned    seen;
    pa_prom_t   pp;

    size = 1024 * 1024;

    page = malloc(size);
    if (page == NULL) {
        CHECK(page != NULL);
        return;
    }

    n = page_of(page, size, big);

    seen = read_whole(&pp, page, n);
    CHECK(seen == ((1u << PA_PROM_WAITING) | (1u << PA_PROM_RUNNING)
                   | (1u << PA_PROM_CAPACITY)));
    CHECK(pp.value[PA_PROM_WAITING] == PA_PROM_COUNT_MAX);
    CHECK(pp.value[PA_PROM_RUNNING] == PA_PROM_COUNT_MAX);
    CHECK(pp.value[PA_PROM_CAPACITY] == PA_PROM_CAPACITY_MAX);
    CHECK(pp.clamped == seen);
    CHECK(pp.rejected == 0);

    /* the same whatever the cuts */

    for (at = 1; at < n; at += n / 7) {
        read_cut(&pp, page, n, at);
        CHECK(pp.value[PA_PROM_WAITING] == PA_PROM_COUNT_MAX);
        CHECK(pp.value[PA_PROM_CAPACITY] == PA_PROM_CAPACITY_MAX);
    }

    /* two series: each within the bound, their sum held at it */

    CHECK(read_whole(&pp, big, 34 * 2) != 0);
    CHECK(pp.value[PA_PROM_WAITING] == 9000000);
    CHECK(pp.value[PA_PROM_RUNNING] == 9999999);
    CHECK(pp.clamped == 0);

    n = page_of(page, 2 * 34, "vllm:num_requests_waiting 6000000\n");
    read_whole(&pp, page, n);
    CHECK(pp.value[PA_PROM_WAITING] == PA_PROM_COUNT_MAX);
    CHECK(pp.clamped == 1u << PA_PROM_WAITING);

    /* many small series within the bound are their sum */

    n = page_of(page, size, one);
    read_whole(&pp, page, n);
    CHECK(pp.value[PA_PROM_WAITING] == (double) (n / (sizeof(one) - 1)));
    CHECK(pp.clamped == 0);

    /* a mean stays a mean */

    n = page_of(page, size, "sglang:token_usage 1\n");
    read_whole(&pp, page, n);
    CHECK(pp.value[PA_PROM_USAGE] == 1);

    free(page);
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
    test_numbers();
    test_hostile_page();
    test_sums();

    return UNIT_DONE();
}
