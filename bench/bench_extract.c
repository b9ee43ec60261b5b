
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Throughput of the OpenAI extractor (src/pa_openai.c) on 4 KB and 64 KB
 * prompts, chat and completions, beside XXH3_64bits over the same bytes.
 * "length" is 4096 characters for 4 KB and 65536 for 64 KB, so that the
 * whole prompt is read.  Then bodies with one long string (300 KB, 1 MB,
 * 8 MB of text with escapes and some UTF-8): a message's content, the
 * model or the prompt_cache_key, first, in the middle or last in the
 * body, with "length" 4096; none has a cache_salt, so each is read to its
 * end.  Each case repeats for about 0.5 s, in 5 slices of 0.1 s, and the
 * best slice is given, as the machine may be shared; markdown tables are
 * printed.  "8 KB buffers" feeds the body as nginx reads a temporary file,
 * 8 KB at a time.  Memory comes from a bump arena reset per body, as a
 * request pool would give it: "memory" is what one body took of it.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pa_xxhash.h"

#include "pa_openai.h"


#define B_ARENA_SIZE  (8 * 1024 * 1024)
#define B_SLICES      5
#define B_SLICE       0.1
#define B_LONG_MAX    (8 * 1024 * 1024)


typedef struct {
    const unsigned char  *body;
    size_t                len;
    size_t                length;
    size_t                chunk;
} b_case_t;


typedef void (*b_run_pt)(const b_case_t *c);


typedef struct {
    unsigned char  *start;
    size_t          used;
    size_t          size;
} b_arena_t;


static void *b_alloc(void *ctx, size_t size);
static double b_now(void);
static size_t b_text(char *p, size_t size, unsigned seed);
static size_t b_body(char *body, int chat, size_t prompt);
static size_t b_long(char *body, int field, int pos, size_t size);
static void b_table_long(char *body);
static void b_run_extract(const b_case_t *c);
static void b_run_xxh3(const b_case_t *c);
static double b_rate(b_run_pt run, const b_case_t *c);


static b_arena_t          b_arena;
static size_t             b_memory;
static volatile uint64_t  b_sink;

static const char *b_fields[] = { "content", "model", "prompt_cache_key" };
static const char *b_positions[] = { "first", "middle", "last" };

static const char *b_words[] = {
    "the", "model", "returns", "a", "response", "for", "each", "request",
    "with", "cached", "prefix", "tokens", "and", "attention", "keys",
    "values", "are", "kept", "in", "GPU", "memory", "so", "that", "later",
    "requests", "sharing", "this", "system", "prompt", "skip", "prefill,",
    "which", "cuts", "latency.", "Please", "summarise", "following",
    "document:", "\\n", "\\\"quoted\\\"", "caf\xc3\xa9",
    "\xe4\xb8\xad\xe6\x96\x87"
};


int
main(void)
{
    int        chat, i;
    char      *body;
    size_t     sizes[2], lengths[2];
    double     x, h, c;
    b_case_t   bc;

    b_arena.size = B_ARENA_SIZE;
    b_arena.start = malloc(B_ARENA_SIZE);
    body = malloc(B_LONG_MAX + 4096);

    if (b_arena.start == NULL || body == NULL) {
        return 1;
    }

    sizes[0] = 4 * 1024;
    sizes[1] = 64 * 1024;
    lengths[0] = 4096;
    lengths[1] = 65536;

    printf("| body | bytes | extract, 1 buffer MB/s "
           "| extract, 8 KB buffers MB/s | XXH3_64bits MB/s "
           "| XXH3 / extract | memory |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|\n");

    for (chat = 1; chat >= 0; chat--) {
        for (i = 0; i < 2; i++) {
            bc.body = (unsigned char *) body;
            bc.len = b_body(body, chat, sizes[i]);
            bc.length = lengths[i];

            bc.chunk = bc.len;
            x = b_rate(b_run_extract, &bc);

            bc.chunk = 8192;
            c = b_rate(b_run_extract, &bc);

            h = b_rate(b_run_xxh3, &bc);

            printf("| %s %zu KB | %zu | %.0f | %.0f | %.0f | %.1f | %zu |\n",
                   chat ? "chat" : "completions", sizes[i] / 1024, bc.len,
                   x, c, h, h / x, b_memory);
        }
    }

    b_table_long(body);

    free(body);
    free(b_arena.start);

    return 0;
}


static void *
b_alloc(void *ctx, size_t size)
{
    void       *p;
    b_arena_t  *a = ctx;

    size = (size + 15) & ~(size_t) 15;

    if (size > a->size - a->used) {
        return NULL;
    }

    p = a->start + a->used;
    a->used += size;

    return p;
}


static double
b_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


/* "size" bytes of JSON string text: words, escapes, some UTF-8 */

static size_t
b_text(char *p, size_t size, unsigned seed)
{
    size_t       n, w;
    const char  *word;

    n = 0;

    for ( ;; ) {
        seed = seed * 1103515245 + 12345;
        word = b_words[(seed >> 16) % (sizeof(b_words) / sizeof(b_words[0]))];
        w = strlen(word);

        if (n + w + 1 > size) {
            break;
        }

        memcpy(p + n, word, w);
        n += w;
        p[n++] = ' ';
    }

    while (n < size) {
        p[n++] = '.';
    }

    return n;
}


static size_t
b_body(char *body, int chat, size_t prompt)
{
    size_t  n;

    if (chat) {
        n = sprintf(body, "{\"model\":\"meta-llama/Llama-3.1-8B-Instruct\","
                    "\"messages\":[{\"role\":\"system\",\"content\":"
                    "\"You are a helpful assistant.\"},"
                    "{\"role\":\"user\",\"content\":\"");

    } else {
        n = sprintf(body, "{\"model\":\"meta-llama/Llama-3.1-8B\","
                    "\"prompt\":\"");
    }

    n += b_text(body + n, prompt, 7);

    n += sprintf(body + n, chat ? "\"}],\"temperature\":0.7,"
                                  "\"max_tokens\":256,\"stream\":true}"
                                : "\",\"temperature\":0.7,"
                                  "\"max_tokens\":256,\"stream\":true}");

    return n;
}


/*
 * a chat body of about "size" bytes, most of them one string: the
 * content of the first, second or last of three messages, the model, or
 * the prompt_cache_key, before the messages, after them, or last
 */

static size_t
b_long(char *body, int field, int pos, size_t size)
{
    int          i;
    char        *p;
    const char  *contents[3];

    static const char  *model = "meta-llama/Llama-3.1-8B-Instruct";
    static const char  *pck = "tenantA";
    static const char  *rest = "\"temperature\":0.7,\"max_tokens\":256,"
                               "\"stream\":true";

    contents[0] = "You are a helpful assistant.";
    contents[1] = "Noted.";
    contents[2] = "Summarise the document above.";

    p = body;
    p += sprintf(p, "{");

    if (field == 1 && pos == 0) {
        p += sprintf(p, "\"model\":\"");
        p += b_text(p, size, 11);
        p += sprintf(p, "\",\"prompt_cache_key\":\"%s\",", pck);

    } else if (field == 2 && pos == 0) {
        p += sprintf(p, "\"prompt_cache_key\":\"");
        p += b_text(p, size, 11);
        p += sprintf(p, "\",\"model\":\"%s\",", model);

    } else if (pos == 0 || field == 0) {
        p += sprintf(p, "\"model\":\"%s\",\"prompt_cache_key\":\"%s\",",
                     model, pck);
    }

    p += sprintf(p, "\"messages\":[");

    for (i = 0; i < 3; i++) {
        p += sprintf(p, "%s{\"role\":\"%s\",\"content\":\"", i ? "," : "",
                     (i == 0) ? "system" : (i == 1) ? "user" : "assistant");

        if (field == 0 && i == pos) {
            p += b_text(p, size, 11);

        } else {
            p += sprintf(p, "%s", contents[i]);
        }

        p += sprintf(p, "\"}");
    }

    p += sprintf(p, "],");

    if (field != 0 && pos == 1) {
        p += sprintf(p, "\"%s\":\"", b_fields[field]);
        p += b_text(p, size, 11);
        p += sprintf(p, "\",\"%s\":\"%s\",", b_fields[3 - field],
                     (field == 1) ? pck : model);
    }

    p += sprintf(p, "%s", rest);

    if (field != 0 && pos == 2) {
        p += sprintf(p, ",\"%s\":\"%s\",\"%s\":\"",
                     b_fields[3 - field], (field == 1) ? pck : model,
                     b_fields[field]);
        p += b_text(p, size, 11);
        p += sprintf(p, "\"");
    }

    p += sprintf(p, "}");

    return p - body;
}


static void
b_table_long(char *body)
{
    int        field, pos, k;
    double     x, c;
    size_t     sizes[3];
    b_case_t   bc;

    sizes[0] = 300 * 1024;
    sizes[1] = 1024 * 1024;
    sizes[2] = B_LONG_MAX;

    printf("\n| long string | where | bytes | 1 buffer ns/B | 1 buffer MB/s "
           "| 8 KB buffers ns/B | 8 KB buffers MB/s | memory |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---:|\n");

    for (k = 0; k < 3; k++) {
        for (field = 0; field < 3; field++) {
            for (pos = 0; pos < 3; pos++) {
                bc.body = (unsigned char *) body;
                bc.len = b_long(body, field, pos, sizes[k]);
                bc.length = 4096;

                bc.chunk = bc.len;
                x = b_rate(b_run_extract, &bc);

                bc.chunk = 8192;
                c = b_rate(b_run_extract, &bc);

                printf("| %s %zu KB | %s | %zu | %.2f | %.0f | %.2f | %.0f "
                       "| %zu |\n", b_fields[field], sizes[k] / 1024,
                       b_positions[pos], bc.len, 1e3 / x, x, 1e3 / c, c,
                       b_memory);
            }
        }
    }
}


/* one body through the extractor */

static void
b_run_extract(const b_case_t *c)
{
    size_t           pos, n;
    pa_oai_t        *x;
    pa_alloc_t       a;
    pa_oai_rc_e      rc;
    pa_oai_result_t  res;

    a.alloc = b_alloc;
    a.ctx = &b_arena;

    b_arena.used = 0;

    x = pa_oai_create(&a, c->length, 0);
    if (x == NULL) {
        fprintf(stderr, "pa_oai_create() failed\n");
        exit(1);
    }

    rc = PA_OAI_MORE;

    for (pos = 0; pos < c->len && rc == PA_OAI_MORE; pos += n) {
        n = (c->len - pos < c->chunk) ? c->len - pos : c->chunk;
        rc = pa_oai_feed(x, c->body + pos, n);
    }

    pa_oai_finish(x, &res);

    if (res.status != PA_OAI_OK || res.scanned != c->len) {
        fprintf(stderr, "unexpected: %s, %zu of %zu bytes\n",
                pa_oai_status_name(res.status), res.scanned, c->len);
        exit(1);
    }

    b_memory = b_arena.used;
    b_sink ^= res.hash;
}


static void
b_run_xxh3(const b_case_t *c)
{
    b_sink ^= XXH3_64bits(c->body, c->len);
}


/* the best MB/s of B_SLICES slices of B_SLICE seconds */

static double
b_rate(b_run_pt run, const b_case_t *c)
{
    int     slice, k;
    size_t  iter;
    double  start, t, rate, best;

    best = 0;

    for (slice = 0; slice < B_SLICES; slice++) {
        iter = 0;
        start = b_now();

        do {
            for (k = 0; k < 16; k++) {
                run(c);
            }

            iter += 16;
            t = b_now() - start;

        } while (t < B_SLICE);

        rate = (double) c->len * iter / t / 1e6;

        if (rate > best) {
            best = rate;
        }
    }

    return best;
}
