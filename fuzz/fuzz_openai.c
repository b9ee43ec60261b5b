
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target of src/pa_openai.c: each input is fed whole, split in
 * two at a position derived from its first byte, and (if small) byte by
 * byte, with lengths 1024 and 16; all must agree, and chars <= length.
 * A small scan cap and failing allocations are tried as well.  Counting
 * the text past the key (pa_oai_count_past) keeps the key, and counts
 * the whole text's characters past the key's, in 1 to 4 bytes each.
 * The text hook is given pieces whose "chars" is their count of
 * characters (the scanner's ASCII runs are not counted again), and as
 * many characters in all as the key has.  All of it twice: read as an
 * OpenAI body (chat, completions, Responses) and as an Anthropic one.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pa_openai.h"
#include "arena.h"


#define F_CHECK(cond)                                                         \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: invariant failed: %s\n",                  \
                    __FILE__, __LINE__, #cond);                               \
            abort();                                                          \
        }                                                                     \
    } while (0)


typedef struct {
    pa_oai_rc_e      rc;
    pa_oai_result_t  res;
} f_run_t;


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void f_one(const uint8_t *data, size_t size);

static void f_run(const uint8_t *data, size_t size, size_t length,
    size_t cap, size_t split, long fail_at, f_run_t *run);
static void f_same(const f_run_t *a, const f_run_t *b);
static void f_hook(void *ctx, const unsigned char *p, size_t n,
    size_t chars);


static ta_arena_t  f_arena = { NULL, -1, 0 };
static int         f_past;
static size_t      f_chars;     /* the characters the hook was given */
static int         f_dialect;   /* pa_oai_dialect_e of the runs */


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (f_dialect = PA_OAI_OPENAI; f_dialect <= PA_OAI_ANTHROPIC;
         f_dialect++)
    {
        f_one(data, size);
    }

    return 0;
}


static void
f_one(const uint8_t *data, size_t size)
{
    size_t          i, pos, cap;
    f_run_t         whole, split, bytes, past, all;
    static size_t   lengths[] = { 1024, 16 };

    pos = size ? (size_t) data[0] * size / 256 : 0;

    f_run(data, size, (size_t) 1 << 30, 0, 0, -1, &all);

    for (i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {

        f_run(data, size, lengths[i], 0, 0, -1, &whole);
        f_run(data, size, lengths[i], 0, pos, -1, &split);
        f_same(&whole, &split);

        f_past = 1;
        f_run(data, size, lengths[i], 0, pos, -1, &past);
        f_past = 0;

        F_CHECK(past.res.status == all.res.status);

        /* the characters past the key, in 1 to 4 bytes each */

        if (past.res.status == PA_OAI_OK) {
            F_CHECK(past.res.chars <= all.res.chars);
            F_CHECK(past.res.past >= all.res.chars - past.res.chars);
            F_CHECK(past.res.past <= 4 * (all.res.chars - past.res.chars));
        }

        /*
         * the same key, unless the key was complete before the end (a
         * text, model, cache_salt and prompt_cache_key) and what came
         * after it, which counting reads, changed it (a second "model")
         */

        if (past.res.status == PA_OAI_OK && whole.res.status == PA_OAI_OK
            && whole.res.scanned == past.res.scanned)
        {
            F_CHECK(past.res.hash == whole.res.hash);
            F_CHECK(past.res.chars == whole.res.chars);
        }

        if (size <= 512) {
            f_run(data, size, lengths[i], 0, 1, -1, &bytes);
            f_same(&whole, &bytes);
        }
    }

    /* a small scan cap */

    if (size > 1) {
        cap = 1 + data[1] % 128;

        f_run(data, size, 16, cap, 0, -1, &whole);
        f_run(data, size, 16, cap, pos, -1, &split);
        f_same(&whole, &split);

        F_CHECK(whole.res.scanned <= cap);
    }

    /* an allocation fails */

    if (size > 0) {
        f_run(data, size, 1024, 0, pos, data[size - 1] % 24, &split);

        F_CHECK(split.res.status != PA_OAI_NOMEM
                || split.rc == PA_OAI_FALLBACK);
    }

    ta_reset(&f_arena);
}


/* split 0: one buffer; 1: byte by byte; else two buffers */

static void
f_run(const uint8_t *data, size_t size, size_t length, size_t cap,
    size_t split, long fail_at, f_run_t *run)
{
    size_t           pos, n;
    pa_oai_t        *x;
    pa_alloc_t       a;
    pa_oai_rc_e      rc;
    unsigned char   *p;
    pa_oai_result_t  again;

    ta_reset(&f_arena);
    f_arena.fail_at = fail_at;

    a.alloc = ta_alloc;
    a.ctx = &f_arena;

    memset(run, 0, sizeof(f_run_t));

    x = pa_oai_create(&a, length, cap);
    if (x == NULL) {
        F_CHECK(fail_at >= 0);
        run->rc = PA_OAI_FALLBACK;
        run->res.status = PA_OAI_NOMEM;
        f_arena.fail_at = -1;
        return;
    }

    if (f_past) {
        pa_oai_count_past(x);
    }

    pa_oai_dialect(x, (pa_oai_dialect_e) f_dialect);

    f_chars = 0;
    pa_oai_text_hook(x, f_hook, NULL);

    if (cap == 0) {
        cap = size;
    }

    rc = PA_OAI_MORE;
    pos = 0;

    while (pos < size && rc == PA_OAI_MORE) {

        if (split == 0) {
            n = size;

        } else if (split == 1) {
            n = 1;

        } else {
            n = (pos < split) ? split - pos : size - pos;
        }

        /* a copy, so that ASan sees reads past the buffer */

        p = malloc(n);
        memcpy(p, data + pos, n);

        rc = pa_oai_feed(x, p, n);

        free(p);

        F_CHECK(rc == PA_OAI_MORE || rc == PA_OAI_DONE
                || rc == PA_OAI_FALLBACK);

        pos += n;
    }

    pa_oai_finish(x, &run->res);

    if (rc == PA_OAI_MORE) {
        rc = (run->res.status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;
    }

    run->rc = rc;

    /* once finished, it stays so */

    F_CHECK(pa_oai_feed(x, (const unsigned char *) "{", 1) == rc);

    pa_oai_finish(x, &again);

    F_CHECK(memcmp(&again, &run->res, sizeof(pa_oai_result_t)) == 0);

    F_CHECK((rc == PA_OAI_DONE) == (run->res.status == PA_OAI_OK));
    F_CHECK(run->res.status <= PA_OAI_NOMEM);
    F_CHECK(run->res.chars <= length);
    F_CHECK(run->res.scanned <= cap);
    F_CHECK(run->res.scanned <= size + 1);
    F_CHECK(run->res.pck_len <= sizeof(run->res.pck));
    F_CHECK(!(run->res.has_pck && run->res.pck_invalid));
    F_CHECK(run->res.has_pck || run->res.pck_len == 0);
    F_CHECK(pa_oai_status_name(run->res.status) != NULL);

    if (run->res.status != PA_OAI_OK) {
        F_CHECK(run->res.hash == 0 && run->res.chars == 0);
        F_CHECK(!run->res.has_pck && !run->res.pck_invalid);

    } else {
        F_CHECK(f_chars == run->res.chars);
    }

    if (fail_at < 0) {
        F_CHECK(run->res.status != PA_OAI_NOMEM);
    }

    f_arena.fail_at = -1;
}


static void
f_same(const f_run_t *a, const f_run_t *b)
{
    F_CHECK(a->rc == b->rc);
    F_CHECK(a->res.status == b->res.status);
    F_CHECK(a->res.hash == b->res.hash);
    F_CHECK(a->res.chars == b->res.chars);
    F_CHECK(a->res.has_pck == b->res.has_pck);
    F_CHECK(a->res.pck_invalid == b->res.pck_invalid);
    F_CHECK(a->res.pck_len == b->res.pck_len);
    F_CHECK(memcmp(a->res.pck, b->res.pck, a->res.pck_len) == 0);

    if (a->res.status == PA_OAI_OK) {
        F_CHECK(a->res.scanned == b->res.scanned);
    }
}


/* a piece of the key's text: "chars" is its count of characters */

static void
f_hook(void *ctx, const unsigned char *p, size_t n, size_t chars)
{
    size_t  i, leads;

    F_CHECK(n > 0);

    if (chars == 0) {
        /* separators */
        return;
    }

    for (leads = 0, i = 0; i < n; i++) {
        leads += ((p[i] & 0xc0) != 0x80);
    }

    F_CHECK(chars == leads);

    f_chars += chars;
}
