
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of src/pa_openai.c, the key of an OpenAI-compatible body.
 * Also replays the fuzz corpus fuzz/corpus/openai (crash regressions
 * included) when run from the top of the repository.
 */


#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pa_xxhash.h"

#include "pa_openai.h"
#include "pa_json_plain.h"
#include "arena.h"
#include "unit.h"


/* the Makefile gives the absolute path, so any directory runs it */
#ifndef T_CORPUS
#define T_CORPUS  "fuzz/corpus/openai"
#endif
#define T_MSG10                                                               \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"0123456789\"}]}"

/* the long strings, and the start of each, which holds > 1024 characters */
#define T_LONG_MAX  (8 * 1024 * 1024)
#define T_PREFIX    4000


typedef struct {
    unsigned char  *text;       /* what the hook got, up to "size" */
    size_t          len;
    size_t          size;
    size_t          calls;
    size_t          split;      /* calls that began inside a character */
    size_t          seps;       /* separator bytes, given as such */
    size_t          mixed;      /* calls that mixed them with characters */
    size_t          miscount;   /* calls whose "chars" was not the count */
    XXH3_state_t    state;      /* all of it */
} t_hook_t;


static int  t_hook_only;        /* t_run_hook: pa_oai_hook_only() too */
static int  t_past;             /* t_run_arena: pa_oai_count_past() */


static pa_oai_rc_e t_run(const char *body, size_t len, size_t length,
    size_t cap, size_t chunk, pa_oai_result_t *res);
static pa_oai_rc_e t_run_arena(ta_arena_t *a, const unsigned char *body,
    size_t len, size_t length, size_t cap, size_t chunk,
    pa_oai_result_t *res);
static int t_ok(const char *body, size_t length, pa_oai_result_t *res);
static uint64_t t_hash(const char *body, size_t length);
static pa_oai_status_e t_status(const char *body);
static uint32_t t_rand(void);

static void test_fields(void);
static void test_cut(void);
static void test_multibyte(void);
static void test_cut_random(void);
static size_t t_utf8(char *p, size_t nchars, char *offs[]);
static void test_completions(void);
static void test_splits(void);
static void test_pck(void);
static void test_fallbacks(void);
static void test_early_stop(void);
static void test_past(void);
static void test_nomem(void);
static void test_long(void);
static void test_long_size(char *body, char *text, size_t size);
static size_t t_text(char *p, size_t size, unsigned seed);
static size_t t_body(char *body, const char *fmt, const char *text);
static pa_oai_rc_e t_run_long(const char *body, size_t len, size_t chunk,
    pa_oai_result_t *res);
static void test_hook(void);
static void test_golden(void);
static void t_hook(void *ctx, const unsigned char *p, size_t n,
    size_t chars);
static pa_oai_rc_e t_run_hook(const char *body, size_t length, size_t chunk,
    t_hook_t *h, pa_oai_result_t *res);
static void test_corpus(void);
static void test_plain(void);


static ta_arena_t  t_arena = { NULL, -1, 0 };
static uint32_t   t_seed = 12345;


static const char *t_chat =
    "{\"model\":\"llama-3\",\"temperature\":0.2,\"messages\":["
    "{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
    "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}"
    "],\"max_tokens\":100,\"stream\":false}";


int
main(void)
{
    test_fields();
    test_cut();
    test_multibyte();
    test_cut_random();
    test_completions();
    test_splits();
    test_pck();
    test_fallbacks();
    test_early_stop();
    test_past();
    test_nomem();
    test_long();
    test_hook();
    test_golden();
    test_corpus();
    test_plain();

    ta_reset(&t_arena);

    return UNIT_DONE();
}


/*
 * pa_oai_count_past(): the same key, the body read to its end, and the
 * text past the key is what a key of the whole text has more, in UTF-8
 * bytes; separators are none
 */

static void
test_past(void)
{
    size_t            i, j, k, len;
    pa_oai_rc_e       rc;
    pa_oai_result_t   r, key, all;

    static const char  *bodies[] = {
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\","
        "\"content\":\"You are a helpful assistant.\"},{\"role\":"
        "\"user\",\"content\":[{\"type\":\"text\",\"text\":"
        "\"caf\u00e9 \\\"quoted\\\" \u4e2d\u6587\"}]}],"
        "\"cache_salt\":\"s\",\"prompt_cache_key\":\"k\"}",
        "{\"messages\":[{\"content\":\"before the role, long enough\","
        "\"role\":\"user\"},{\"role\":\"assistant\",\"content\":"
        "\"\xc3\xa9t\xc3\xa9 \xe2\x82\xac\"}],\"model\":\"m\"}",
        "{\"prompt\":[\"one \",\"\",\"two three\",\"\",\"four\"],"
        "\"model\":\"m\",\"cache_salt\":\"x\",\"prompt_cache_key\":\"y\"}",
        "{\"model\":\"m\",\"prompt\":[[101,2023,2003,1037],[7592]]}",
        "{\"model\":\"m\",\"prompt\":[\"\",\"\",\"\",\"\",\"\"]}",
        NULL
    };

    static const size_t  lengths[] = { 1, 2, 5, 7, 16, 40, 1024 };

    /* the bytes over one a character of their non-ASCII text */
    static const size_t  extra[] = { 5, 4, 0, 0, 0 };
    static const size_t  chunks[] = { 1, 3, 64 };

    for (i = 0; bodies[i]; i++) {
        len = strlen(bodies[i]);

        rc = t_run(bodies[i], len, 1 << 20, 0, len, &all);
        CHECK(rc == PA_OAI_DONE || all.status == PA_OAI_NO_TEXT);

        for (j = 0; j < sizeof(lengths) / sizeof(lengths[0]); j++) {
            for (k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {

                t_past = 0;
                (void) t_run(bodies[i], len, lengths[j], 0, chunks[k], &key);

                t_past = 1;
                (void) t_run(bodies[i], len, lengths[j], 0, chunks[k], &r);
                t_past = 0;

                CHECK(r.status == key.status);

                if (r.status != PA_OAI_OK) {
                    continue;
                }

                CHECK(r.hash == key.hash && r.chars == key.chars);
                CHECK(r.scanned == len);
                /*
                 * the characters past the key, in UTF-8 bytes: as many
                 * for ASCII text, at most "extra" more for the others
                 */

                CHECK(r.chars + r.past >= all.chars);
                CHECK(r.chars + r.past <= all.chars + extra[i]);
                CHECK(extra[i] != 0 || r.chars + r.past == all.chars);
                CHECK(lengths[j] < all.chars || r.past == 0);
                CHECK(key.past == 0);
            }
        }
    }

    /* separators are no characters: a body of empty strings has none */

    t_past = 1;
    len = strlen(bodies[4]);
    (void) t_run(bodies[4], len, 1, 0, len, &r);
    t_past = 0;

    CHECK(r.chars + r.past == 0);
}


/* same messages, other fields, order and whitespace; model and salt */

static void
test_fields(void)
{
    uint64_t         h;
    pa_oai_result_t  r;

    CHECK(t_ok(t_chat, 1024, &r));
    CHECK(r.chars == strlen("system" "You are a helpful assistant."
                            "user" "What is the capital of France?"));
    CHECK(r.has_pck == 0 && r.pck_invalid == 0);

    h = r.hash;

    /* other temperature, max_tokens, stream; other order; whitespace */

    CHECK(t_hash(
        "{ \"stream\" : true ,\n \"max_tokens\": 7,\n"
        "  \"messages\" : [ { \"content\" : \"You are a helpful assistant.\","
        " \"role\" : \"system\" } ,\n\t{\"content\":"
        "\"What is the capital of France?\", \"name\": \"bob\","
        " \"role\":\"user\"}],\r\n \"temperature\": 1.5e0,"
        " \"n\": null, \"model\": \"llama-3\", \"x\": {\"model\": \"m\"}}",
        1024) == h);

    CHECK(t_hash(
        "{\"messages\":[{\"role\":\"system\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"You are a helpful assistant.\"}]},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}"
        "],\"model\":\"llama-3\",\"seed\":12345678901234567890123}",
        1024) == h);

    /* model after the messages, a nested model does not count */

    CHECK(t_hash(
        "{\"messages\":[{\"role\":\"system\",\"content\":"
        "\"You are a helpful assistant.\",\"model\":\"other\"},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}"
        "],\"model\":\"llama-3\"}", 1024) == h);

    CHECK(t_hash(
        "{\"messages\":[{\"role\":\"system\",\"content\":"
        "\"You are a helpful assistant.\"},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}"
        "]}", 1024) != h);

    CHECK(t_hash(
        "{\"model\":\"llama-3\",\"messages\":[{\"role\":\"system\","
        "\"content\":\"You are a helpful assistant.\",\"model\":\"x\"},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\","
        "\"cache_salt\":\"y\",\"prompt_cache_key\":7}],"
        "\"x\":{\"model\":\"z\",\"cache_salt\":\"z\"}}", 1024) == h);

    /* a different model or cache_salt */

    CHECK(t_hash(
        "{\"model\":\"llama-4\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}"
        "]}", 1024) != h);

    CHECK(t_hash(
        "{\"model\":\"llama-3\",\"cache_salt\":\"tenant-a\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
        "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}"
        "]}", 1024) != h);

    CHECK(t_hash(
        "{\"model\":\"llama-3\",\"cache_salt\":\"tenant-a\",\"messages\":["
        "{\"role\":\"user\",\"content\":\"hi\"}]}", 1024)
          != t_hash(
        "{\"model\":\"llama-3\",\"cache_salt\":\"tenant-b\",\"messages\":["
        "{\"role\":\"user\",\"content\":\"hi\"}]}", 1024));

    CHECK(t_hash(
        "{\"model\":\"llama-3\",\"messages\":["
        "{\"role\":\"user\",\"content\":\"hi\"}],\"cache_salt\":\"s\"}", 1024)
          == t_hash(
        "{\"cache_salt\":\"s\",\"messages\":["
        "{\"role\":\"user\",\"content\":\"hi\"}],\"model\":\"llama-3\"}",
        1024));

    /* the separators: "ab"+"c" is not "a"+"bc", roles are not contents */

    CHECK(t_hash("{\"messages\":[{\"role\":\"ab\",\"content\":\"c\"}]}", 16)
          != t_hash("{\"messages\":[{\"role\":\"a\",\"content\":\"bc\"}]}",
                    16));

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\",\"content\":"
                 "[{\"text\":\"ab\"},{\"text\":\"c\"}]}]}", 16)
          != t_hash("{\"messages\":[{\"role\":\"u\",\"content\":"
                    "[{\"text\":\"a\"},{\"text\":\"bc\"}]}]}", 16));

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\",\"content\":\"ab\"},"
                 "{\"role\":\"u\",\"content\":\"c\"}]}", 16)
          != t_hash("{\"messages\":[{\"role\":\"u\",\"content\":\"abc\"}]}",
                    16));

    /* parts: text, image_url (object or string), input_audio count */

    CHECK(t_ok("{\"messages\":[{\"role\":\"user\",\"content\":["
               "{\"type\":\"text\",\"text\":\"look\"},"
               "{\"type\":\"image_url\",\"image_url\":"
               "{\"url\":\"data:image/png;base64,AAAA\",\"detail\":\"low\"}},"
               "{\"type\":\"input_audio\",\"input_audio\":"
               "{\"data\":\"UklG\",\"format\":\"wav\"}},"
               "{\"type\":\"image_url\",\"image_url\":\"http://x/a.png\"}"
               "]}]}", 1024, &r));
    CHECK(r.chars == strlen("user" "look" "data:image/png;base64,AAAA"
                            "UklG" "http://x/a.png"));

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":["
                 "{\"type\":\"image_url\",\"image_url\":{\"url\":\"A\"}}]}]}",
                 1024)
          != t_hash("{\"messages\":[{\"role\":\"user\",\"content\":["
                    "{\"type\":\"image_url\",\"image_url\":{\"url\":\"B\"}}"
                    "]}]}", 1024));

    /* content before role: the same key; a message without a role */

    CHECK(t_hash("{\"messages\":[{\"content\":[{\"text\":\"hello\"},"
                 "{\"text\":\"world\"}],\"role\":\"user\"},"
                 "{\"content\":\"x\",\"role\":\"assistant\"}]}", 1024)
          == t_hash("{\"messages\":[{\"role\":\"user\",\"content\":"
                    "[{\"text\":\"hello\"},{\"text\":\"world\"}]},"
                    "{\"role\":\"assistant\",\"content\":\"x\"}]}", 1024));

    CHECK(t_hash("{\"messages\":[{\"content\":\"hello world\","
                 "\"role\":\"user\"}]}", 8)
          == t_hash("{\"messages\":[{\"role\":\"user\","
                    "\"content\":\"hello wXXXX\"}]}", 8));

    CHECK(t_ok("{\"messages\":[{\"content\":\"hi\"},"
               "{\"role\":\"assistant\",\"content\":null,"
               "\"tool_calls\":[{\"id\":\"1\"}]}]}", 1024, &r));
    CHECK(r.chars == 2 + 9);

    /* a fresh message forgets the previous one's pending content */

    CHECK(t_hash("{\"messages\":[{\"content\":\"a\"},{\"content\":\"b\","
                 "\"role\":\"r\"}]}", 1024)
          == t_hash("{\"messages\":[{\"content\":\"a\"},{\"role\":\"r\","
                    "\"content\":\"b\"}]}", 1024));
}


/* the cut at "length" characters */

static void
test_cut(void)
{
    pa_oai_result_t  r;

    /* "user" is 4 characters, content 0123456789: length 10 ends at '5' */

    CHECK(t_ok(T_MSG10, 10, &r));
    CHECK(r.chars == 10);

    /* a change inside the first 10 characters */

    CHECK(t_hash(T_MSG10, 10)
          != t_hash("{\"messages\":[{\"role\":\"user\","
                    "\"content\":\"012X456789\"}]}", 10));

    CHECK(t_hash(T_MSG10, 10)
          != t_hash("{\"messages\":[{\"role\":\"user\","
                    "\"content\":\"01234X6789\"}]}", 10));

    CHECK(t_hash(T_MSG10, 10)
          != t_hash("{\"messages\":[{\"role\":\"usex\","
                    "\"content\":\"0123456789\"}]}", 10));

    /* a change at character 10 (0-based) and after */

    CHECK(t_hash(T_MSG10, 10)
          == t_hash("{\"messages\":[{\"role\":\"user\","
                    "\"content\":\"012345X789\"}]}", 10));

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"012345\"}]}",
                 10)
          == t_hash("{\"messages\":[{\"role\":\"user\","
                    "\"content\":\"0123456789\"}]}", 10));

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"012345\"}]}",
                 10)
          == t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"012345\"},"
                    "{\"role\":\"user\",\"content\":\"more\"}]}", 10));

    /* the 11th character differs, the 10th is the same: 10 vs 11 */

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"012345a\"}]}",
                 10)
          == t_hash("{\"messages\":[{\"role\":\"user\","
                    "\"content\":\"012345b\"}]}", 10));

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"012345a\"}]}",
                 11)
          != t_hash("{\"messages\":[{\"role\":\"user\","
                    "\"content\":\"012345b\"}]}", 11));

    /* the role counts: length 4 is the role only */

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 4)
          == t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}",
                    4));

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 5)
          != t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}",
                    5));

    /* the character at "length" in a later message */

    CHECK(t_hash("{\"messages\":[{\"role\":\"s\",\"content\":\"abc\"},"
                 "{\"role\":\"u\",\"content\":\"defX\"}]}", 8)
          == t_hash("{\"messages\":[{\"role\":\"s\",\"content\":\"abc\"},"
                    "{\"role\":\"u\",\"content\":\"defY\"}]}", 8));

    CHECK(t_hash("{\"messages\":[{\"role\":\"s\",\"content\":\"abc\"},"
                 "{\"role\":\"u\",\"content\":\"deXY\"}]}", 8)
          != t_hash("{\"messages\":[{\"role\":\"s\",\"content\":\"abc\"},"
                    "{\"role\":\"u\",\"content\":\"defY\"}]}", 8));

    /* length 1: the first character only */

    CHECK(t_ok("{\"messages\":[{\"role\":\"user\",\"content\":\"abc\"}]}",
               1, &r));
    CHECK(r.chars == 1);
    CHECK(r.hash == t_hash("{\"messages\":[{\"role\":\"uXXX\"}]}", 1));
}


/* characters are code points, also when escaped */

static void
test_multibyte(void)
{
    pa_oai_result_t  r;

    /* 中文字 is 3 characters of 3 bytes; role "u" is 1 */

    CHECK(t_ok("{\"messages\":[{\"role\":\"u\","
               "\"content\":\"\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\"}]}",
               1024, &r));
    CHECK(r.chars == 4);

    CHECK(t_ok("{\"messages\":[{\"role\":\"u\","
               "\"content\":\"\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\"}]}",
               3, &r));
    CHECK(r.chars == 3);

    /* the boundary: 3 characters take u中文, the 4th differs */

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\","
                 "\"content\":\"\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\"}]}", 3)
          == t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xe4\xb8\xad\xe6\x96\x87X\"}]}", 3));

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\","
                 "\"content\":\"\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\"}]}", 4)
          != t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xe4\xb8\xad\xe6\x96\x87X\"}]}", 4));

    /* the 2nd character differs in its last byte only */

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\","
                 "\"content\":\"\xe4\xb8\xad\xe6\x96\x87\"}]}", 3)
          != t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xe4\xb8\xad\xe6\x96\x88\"}]}", 3));

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\","
                 "\"content\":\"\xe4\xb8\xad\xe6\x96\x87\"}]}", 2)
          == t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xe4\xb8\xad\xe6\x96\x88\"}]}", 2));

    /* an emoji is 4 bytes, 1 character */

    CHECK(t_ok("{\"messages\":[{\"role\":\"u\","
               "\"content\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x81!\"}]}",
               1024, &r));
    CHECK(r.chars == 4);

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\","
                 "\"content\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x81\"}]}", 2)
          == t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x82\"}]}", 2));

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\","
                 "\"content\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x81\"}]}", 3)
          != t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x82\"}]}", 3));

    /* escapes are decoded: \u4e2d is 中, \ud83d\ude00 is the emoji */

    CHECK(t_ok("{\"messages\":[{\"role\":\"u\","
               "\"content\":\"\\u4e2d\\ud83d\\ude00\\n\"}]}", 1024, &r));
    CHECK(r.chars == 4);

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\",\"content\":\"\\u4e2d\"}]}",
                 1024)
          == t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xe4\xb8\xad\"}]}", 1024));

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\","
                 "\"content\":\"\\ud83d\\ude00\"}]}", 1024)
          == t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xf0\x9f\x98\x80\"}]}", 1024));

    CHECK(t_hash("{\"messages\":[{\"role\":\"\\u0075\","
                 "\"content\":\"\\u4e2d\\ud83d\\ude00x\"}]}", 3)
          == t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xe4\xb8\xad\xf0\x9f\x98\x80y\"}]}", 3));

    CHECK(t_hash("{\"messages\":[{\"role\":\"u\","
                 "\"content\":\"\\u4e2d\\ud83d\\ude00x\"}]}", 4)
          != t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xe4\xb8\xad\xf0\x9f\x98\x80y\"}]}", 4));

    /* pending content (before the role) is cut at code points too */

    CHECK(t_hash("{\"messages\":[{\"content\":\"\xe4\xb8\xad\xe6\x96\x87\","
                 "\"role\":\"u\"}]}", 2)
          == t_hash("{\"messages\":[{\"role\":\"u\","
                    "\"content\":\"\xe4\xb8\xadX\"}]}", 2));
}


/* random 1..4-byte characters: the cut is exact at every length */

static void
test_cut_random(void)
{
    int              round;
    char            *offs[201], text[1024], body[2048], alt[2048];
    size_t           len, nchars, k, bad;
    uint64_t         h;
    pa_oai_result_t  r;

    bad = 0;

    for (round = 0; round < 20; round++) {
        nchars = 1 + t_rand() % 200;
        len = t_utf8(text, nchars, offs);

        snprintf(body, sizeof(body), "{\"prompt\":\"%s\"}", text);

        for (k = 1; k <= nchars + 2; k++) {
            if (!t_ok(body, k, &r)) {
                bad++;
                continue;
            }

            h = r.hash;

            if (r.chars != (k < nchars ? k : nchars)) {
                bad++;
            }

            /* the text cut at k characters by hand: the same */

            snprintf(alt, sizeof(alt), "{\"prompt\":\"%.*s\"}",
                     (int) (k < nchars ? offs[k] - text : (long) len), text);

            if (t_hash(alt, k) != h) {
                bad++;
            }

            /* character k changed: the same; character k - 1: not */

            if (k < nchars) {
                snprintf(alt, sizeof(alt), "{\"prompt\":\"%.*s#%s\"}",
                         (int) (offs[k] - text), text, offs[k + 1]);

                if (t_hash(alt, k) != h) {
                    bad++;
                }
            }

            if (k <= nchars) {
                snprintf(alt, sizeof(alt), "{\"prompt\":\"%.*s#%s\"}",
                         (int) (offs[k - 1] - text), text, offs[k]);

                if (t_hash(alt, k) == h) {
                    bad++;
                }
            }
        }
    }

    CHECK_MSG(bad == 0, "%zu mismatches", bad);
}


/* "nchars" random characters of 1 to 4 bytes, none of them '#' */

static size_t
t_utf8(char *p, size_t nchars, char *offs[])
{
    char      *start;
    size_t     i;
    uint32_t   r;

    start = p;

    for (i = 0; i < nchars; i++) {
        offs[i] = p;
        r = t_rand();

        switch (r % 4) {
        case 0:
            *p++ = 'a' + (r >> 8) % 26;
            break;
        case 1:
            *p++ = (char) 0xc3;
            *p++ = (char) (0x80 + (r >> 8) % 64);
            break;
        case 2:
            *p++ = (char) 0xe4;
            *p++ = (char) (0x80 + (r >> 8) % 64);
            *p++ = (char) (0x80 + (r >> 16) % 64);
            break;
        default:
            *p++ = (char) 0xf0;
            *p++ = (char) 0x9f;
            *p++ = (char) (0x80 + (r >> 8) % 64);
            *p++ = (char) (0x80 + (r >> 16) % 64);
            break;
        }
    }

    offs[nchars] = p;
    *p = '\0';

    return p - start;
}


static void
test_completions(void)
{
    uint64_t         h;
    pa_oai_result_t  r;

    CHECK(t_ok("{\"model\":\"m\",\"prompt\":\"Once upon a time\"}", 1024, &r));
    CHECK(r.chars == 16);
    h = r.hash;

    CHECK(t_hash("{\"prompt\":\"Once upon a time\",\"max_tokens\":5,"
                 "\"model\":\"m\",\"echo\":true}", 1024) == h);
    CHECK(t_hash("{\"model\":\"m2\",\"prompt\":\"Once upon a time\"}", 1024)
          != h);
    CHECK(t_hash("{\"model\":\"m\",\"prompt\":\"Once upon a tiMe\"}", 1024)
          != h);
    CHECK(t_hash("{\"model\":\"m\",\"prompt\":\"Once upon a tiMe\"}", 14)
          == t_hash("{\"model\":\"m\",\"prompt\":\"Once upon a time\"}", 14));

    /* an array of strings */

    CHECK(t_ok("{\"model\":\"m\",\"prompt\":[\"Once upon\",\" a time\"]}",
               1024, &r));
    CHECK(r.chars == 16);
    CHECK(r.hash != h);

    CHECK(t_hash("{\"model\":\"m\",\"prompt\":[\"Once upon\",\" a time\"]}",
                 1024)
          != t_hash("{\"model\":\"m\",\"prompt\":[\"Once upon \",\"a time\"]}",
                    1024));

    /* token ids: their decimal text */

    CHECK(t_ok("{\"model\":\"m\",\"prompt\":[1, 23, 456]}", 1024, &r));
    CHECK(r.chars == 6);
    h = r.hash;

    CHECK(t_hash("{\"model\":\"m\",\"prompt\":[1,23,456]}", 1024) == h);
    CHECK(t_hash("{\"model\":\"m\",\"prompt\":[12,3,456]}", 1024) != h);
    CHECK(t_hash("{\"model\":\"m\",\"prompt\":[1,23,457]}", 1024) != h);
    CHECK(t_hash("{\"model\":\"m\",\"prompt\":[1,23,457]}", 5)
          == t_hash("{\"model\":\"m\",\"prompt\":[1,23,458]}", 5));
    CHECK(t_hash("{\"model\":\"m\",\"prompt\":[1,23,457]}", 5)
          == t_hash("{\"model\":\"m\",\"prompt\":[1,23,45]}", 5));
    CHECK(t_hash("{\"model\":\"m\",\"prompt\":[1,23,457]}", 5)
          != t_hash("{\"model\":\"m\",\"prompt\":[1,23,4]}", 5));
    CHECK(t_hash("{\"model\":\"m\",\"prompt\":[1,23,457]}", 6)
          != t_hash("{\"model\":\"m\",\"prompt\":[1,23,458]}", 6));

    /* arrays of token ids */

    CHECK(t_ok("{\"model\":\"m\",\"prompt\":[[1,2],[3]]}", 1024, &r));
    CHECK(r.chars == 3);
    CHECK(r.hash != t_hash("{\"model\":\"m\",\"prompt\":[[1],[2,3]]}", 1024));
    CHECK(r.hash == t_hash("{\"model\":\"m\",\"prompt\":[[1,2],[3]]}", 1024));
    CHECK(t_hash("{\"prompt\":[[1,23]]}", 1024)
          != t_hash("{\"prompt\":[[12,3]]}", 1024));
    CHECK(t_hash("{\"prompt\":[[1,2,3]]}", 1024)
          != t_hash("{\"prompt\":[1,2,3]}", 1024));

    /* huge numbers are text as well */

    CHECK(t_ok("{\"prompt\":[1e999999,-0.5E-999999,"
               "1234567890123456789012345678901234567890123456789012345678"
               "901234567890123456789012345678901234567890]}", 1024, &r));
    CHECK(r.chars == 8 + 12 + 100);

    CHECK(t_ok("{\"prompt\":\"x\",\"seed\":1e999999,\"n\":"
               "123456789012345678901234567890123456789012345678901234567890"
               "123456789012345678901234567890123456789012345678901234567890"
               "123456789012345678901234567890123456789012345678901234567890"
               "123456789012345678901234567890123456789012345678901234567890"
               "123456789012345678901234567890123456789012345678901234567890"
               "123456789012345678901234567890123456789012345678901234567890"
               "123456789012345678901234567890123456789012345678901234567890"
               "}", 1024, &r));
    CHECK(r.chars == 1);

    /* an empty prompt or messages is a key all the same */

    CHECK(t_ok("{\"prompt\":\"\"}", 1024, &r));
    CHECK(r.chars == 0);
    CHECK(t_ok("{\"messages\":[]}", 1024, &r));
    CHECK(r.chars == 0);
}


/* any split of the body gives the same result */

static void
test_splits(void)
{
    size_t           i, len, pos, chunk;
    uint64_t         h;
    pa_oai_rc_e      rc;
    pa_oai_result_t  r;
    unsigned char   *p;
    pa_oai_t        *x;
    pa_alloc_t       a;

    static const char  *bodies[] = {
        "{\"model\":\"llama-3\",\"temperature\":0.2,\"messages\":["
        "{\"role\":\"system\",\"content\":\"You are \\u4e2d helpful.\"},"
        "{\"content\":[{\"type\":\"text\",\"text\":\"\xf0\x9f\x98\x80 w\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:AAAA\"}}],"
        "\"role\":\"user\"}],\"cache_salt\":\"s\",\"max_tokens\":12345,"
        "\"prompt_cache_key\":\"user-42\",\"stream\":true}",

        ("{\"prompt\":[[101,2023,2003],[101,1037]],\"model\":\"m\","
         "\"logprobs\":-1.5e+10,\"echo\":false,\"suffix\":null}"),

        "{\"prompt\":[\"abc\", \"\\ud83d\\ude00\\ud83d\\ude01\", \"xyz\"]}"
    };

    a.alloc = ta_alloc;
    a.ctx = &t_arena;

    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        len = strlen(bodies[i]);

        CHECK(t_ok(bodies[i], 1024, &r));
        h = r.hash;

        CHECK(t_run(bodies[i], len, 1024, 0, 1, &r) == PA_OAI_DONE);
        CHECK(r.status == PA_OAI_OK && r.hash == h);
        CHECK(r.scanned == len);

        CHECK(t_ok(bodies[i], 7, &r));
        CHECK(t_run(bodies[i], len, 7, 0, 1, &r) == PA_OAI_DONE);
        CHECK(r.status == PA_OAI_OK
              && r.hash == t_hash(bodies[i], 7) && r.chars == 7);

        /* random splits, each in its own buffer */

        for (chunk = 0; chunk < 200; chunk++) {
            x = pa_oai_create(&a, 1024, 0);
            CHECK(x != NULL);
            if (x == NULL) {
                break;
            }

            rc = PA_OAI_MORE;
            pos = 0;

            while (pos < len && rc == PA_OAI_MORE) {
                size_t  n = 1 + t_rand() % 13;

                if (n > len - pos) {
                    n = len - pos;
                }

                p = malloc(n);
                memcpy(p, bodies[i] + pos, n);
                rc = pa_oai_feed(x, p, n);
                memset(p, 'Z', n);
                free(p);

                pos += n;
            }

            pa_oai_finish(x, &r);
            CHECK_MSG(r.status == PA_OAI_OK && r.hash == h,
                      "body %zu, split %zu", i, chunk);

            ta_reset(&t_arena);
        }
    }
}


static void
test_pck(void)
{
    char             buf[256];
    pa_oai_result_t  r;

    CHECK(t_ok("{\"prompt\":\"x\",\"prompt_cache_key\":\"user-42\"}", 16,
               &r));
    CHECK(r.has_pck == 1 && r.pck_invalid == 0);
    CHECK(r.pck_len == 7 && memcmp(r.pck, "user-42", 7) == 0);

    /* it does not change the hash */

    CHECK(r.hash == t_hash("{\"prompt\":\"x\"}", 16));

    /* 64 characters: valid; 65: not */

    snprintf(buf, sizeof(buf), "{\"prompt\":\"x\",\"prompt_cache_key\":"
             "\"%s\"}",
             "0123456789012345678901234567890123456789012345678901234567 !~");
    CHECK(t_ok(buf, 16, &r));
    CHECK(r.has_pck == 1 && r.pck_invalid == 0 && r.pck_len == 61);

    snprintf(buf, sizeof(buf), "{\"prompt\":\"x\",\"prompt_cache_key\":"
             "\"%s\"}",
             "01234567890123456789012345678901234567890123456789"
             "01234567890123");
    CHECK(t_ok(buf, 16, &r));
    CHECK(r.has_pck == 1 && r.pck_invalid == 0 && r.pck_len == 64);
    CHECK(memcmp(r.pck, "01234567890123456789012345678901234567890123456789"
                 "01234567890123", 64) == 0);

    snprintf(buf, sizeof(buf), "{\"prompt\":\"x\",\"prompt_cache_key\":"
             "\"%s\"}",
             "01234567890123456789012345678901234567890123456789"
             "012345678901234");
    CHECK(t_ok(buf, 16, &r));
    CHECK(r.has_pck == 0 && r.pck_invalid == 1);

    CHECK(t_ok("{\"prompt\":\"x\",\"prompt_cache_key\":12}", 16, &r));
    CHECK(r.has_pck == 0 && r.pck_invalid == 1);

    CHECK(t_ok("{\"prompt\":\"x\",\"prompt_cache_key\":\"\"}", 16, &r));
    CHECK(r.has_pck == 0 && r.pck_invalid == 1);

    CHECK(t_ok("{\"prompt\":\"x\",\"prompt_cache_key\":\"caf\xc3\xa9\"}", 16,
               &r));
    CHECK(r.has_pck == 0 && r.pck_invalid == 1);

    CHECK(t_ok("{\"prompt\":\"x\",\"prompt_cache_key\":\"a\\u0001\"}", 16,
               &r));
    CHECK(r.has_pck == 0 && r.pck_invalid == 1);

    /* null is what clients send for an optional field left out */
    CHECK(t_ok("{\"prompt\":\"x\",\"prompt_cache_key\":null}", 16, &r));
    CHECK(r.has_pck == 0 && r.pck_invalid == 0);

    CHECK(t_ok("{\"prompt\":\"x\",\"prompt_cache_key\":[\"a\"]}", 16, &r));
    CHECK(r.has_pck == 0 && r.pck_invalid == 1);

    /* escapes decoded: \u0041 is A */

    CHECK(t_ok("{\"prompt\":\"x\",\"prompt_cache_key\":\"\\u0041b\"}", 16,
               &r));
    CHECK(r.has_pck == 1 && r.pck_len == 2 && memcmp(r.pck, "Ab", 2) == 0);

    /* a nested one does not count */

    CHECK(t_ok("{\"messages\":[{\"role\":\"u\",\"content\":\"x\","
               "\"prompt_cache_key\":5}]}", 16, &r));
    CHECK(r.has_pck == 0 && r.pck_invalid == 0);
}


static void
test_fallbacks(void)
{
    int              i;
    char            *deep;
    size_t           n;
    pa_oai_rc_e      rc;
    pa_oai_result_t  r;

    CHECK(t_status("") == PA_OAI_NOT_JSON);
    CHECK(t_status("   ") == PA_OAI_NOT_JSON);
    CHECK(t_status("hello") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\",}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\"} x") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\"}{}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":'x'}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{/* c */\"prompt\":\"x\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\"") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"messages\":[{\"role\":\"u\",\"content\":\"hi\"}") ==
          PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"\xff\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"\xc3\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"\xe4\xb8\"}") == PA_OAI_NOT_JSON);

    /* what yajl lets pass: overlong forms, surrogates, above U+10FFFF */
    CHECK(t_status("{\"prompt\":\"a\xc0\xaf\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xc1\xbf\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xe0\x80\xaf\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xe0\x9f\xbf\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xf0\x80\x80\xaf\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xf0\x8f\xbf\xbf\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xed\xa0\x80\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xed\xbf\xbf\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\\udc00\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xf4\x90\x80\x80\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\xf5\x80\x80\x80\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\",\"k\xc0\xaf\":1}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\",\"k\":\"\xed\xa0\x80\"}")
          == PA_OAI_NOT_JSON);

    /* the edges that are valid: U+0080, U+07FF, U+0800, U+D7FF, U+E000,
       U+FFFF, U+10000, U+10FFFF */
    CHECK(t_status("{\"prompt\":\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf"
                   "\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"
                   "\"}") == PA_OAI_OK);
    CHECK(t_status("{\"prompt\":\"\\x\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"a\nb\"}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\",\"n\":-}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\",\"n\":01}") == PA_OAI_NOT_JSON);
    CHECK(t_status("{\"prompt\":\"x\",\"n\":tru}") == PA_OAI_NOT_JSON);

    CHECK(t_status("[]") == PA_OAI_NOT_OBJECT);
    CHECK(t_status("[{\"prompt\":\"x\"}]") == PA_OAI_NOT_OBJECT);
    CHECK(t_status("\"prompt\"") == PA_OAI_NOT_OBJECT);
    CHECK(t_status("42") == PA_OAI_NOT_OBJECT);
    CHECK(t_status("1e999999") == PA_OAI_NOT_OBJECT);
    CHECK(t_status("null") == PA_OAI_NOT_OBJECT);
    CHECK(t_status("true") == PA_OAI_NOT_OBJECT);

    CHECK(t_status("{\"messages\":\"hi\"}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":{\"role\":\"u\"}}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":null}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":[\"hi\"]}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":[{\"role\":\"u\",\"content\":\"x\"},1]}")
          == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":[[]]}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"prompt\":5}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"prompt\":null}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"prompt\":{\"text\":\"x\"}}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"prompt\":[true]}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"prompt\":[{}]}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"prompt\":[[1,\"a\"]]}") == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"prompt\":[[1,[2]]]}") == PA_OAI_BAD_TYPE);

    CHECK(t_status("{}") == PA_OAI_NO_TEXT);
    CHECK(t_status("{\"model\":\"m\",\"inputs\":\"x\"}") == PA_OAI_NO_TEXT);
    CHECK(t_status("{\"x\":{\"messages\":[{\"role\":\"u\"}]}}")
          == PA_OAI_NO_TEXT);

    /* content of other types is no text, but no error either */

    CHECK(t_status("{\"messages\":[{\"role\":\"u\",\"content\":5},"
                   "{\"role\":7,\"content\":[1,null,\"s\",{\"text\":3}]}]}")
          == PA_OAI_OK);

    /* nesting: 64 levels are fine, 65 are not */

    deep = malloc(16384);

    n = 0;
    n += sprintf(deep + n, "{\"prompt\":\"x\",\"y\":");
    for (i = 0; i < PA_OAI_MAX_DEPTH - 1; i++) {
        deep[n++] = '[';
    }
    for (i = 0; i < PA_OAI_MAX_DEPTH - 1; i++) {
        deep[n++] = ']';
    }
    n += sprintf(deep + n, "}");
    CHECK(t_status(deep) == PA_OAI_OK);

    n = 0;
    n += sprintf(deep + n, "{\"prompt\":\"x\",\"y\":");
    for (i = 0; i < PA_OAI_MAX_DEPTH; i++) {
        deep[n++] = '[';
    }
    for (i = 0; i < PA_OAI_MAX_DEPTH; i++) {
        deep[n++] = ']';
    }
    n += sprintf(deep + n, "}");
    CHECK(t_status(deep) == PA_OAI_TOO_DEEP);

    /* too deep and unterminated: the depth is seen first */

    n = 0;
    for (i = 0; i < 2000; i++) {
        deep[n++] = '[';
    }
    deep[n] = '\0';
    CHECK(t_status(deep) == PA_OAI_NOT_OBJECT);

    n = 0;
    n += sprintf(deep + n, "{\"a\":");
    for (i = 0; i < 2000; i++) {
        n += sprintf(deep + n, "{\"a\":");
    }
    CHECK(t_status(deep) == PA_OAI_TOO_DEEP);

    free(deep);

    /* feed says FALLBACK, and keeps saying it */

    rc = t_run("{\"messages\":7,\"prompt\":\"x\"}", 28, 16, 0, 28, &r);
    CHECK(rc == PA_OAI_FALLBACK && r.status == PA_OAI_BAD_TYPE);
    CHECK(r.hash == 0 && r.chars == 0);

    rc = t_run("[1,2,3,4,5,6,7,8,9]", 19, 16, 0, 1, &r);
    CHECK(rc == PA_OAI_FALLBACK && r.status == PA_OAI_NOT_OBJECT);
    CHECK(r.scanned == 1);

    CHECK(strcmp(pa_oai_status_name(PA_OAI_BAD_TYPE), "bad type") == 0);
    CHECK(strcmp(pa_oai_status_name(PA_OAI_NOMEM), "no memory") == 0);
}


static void
test_early_stop(void)
{
    char             *body, *p;
    size_t            len, cap;
    const char       *text;
    pa_oai_rc_e       rc;
    pa_oai_result_t   r, r2;

    static const char  head[] =
        "{\"model\":\"llama-3\",\"messages\":["
        "{\"role\":\"user\",\"content\":\"Describe this.\"}],"
        "\"big\":\"";

    /*
     * messages, then a 5 MB string, then a salt: there is no scan cap
     * any more, the salt after the 5 MB counts (with the cap of earlier
     * releases, 256 KiB + 4 x length, it did not)
     */

    len = sizeof(head) - 1 + 5 * 1024 * 1024 + 64;
    body = malloc(len + 1);

    p = body;
    memcpy(p, head, sizeof(head) - 1);
    p += sizeof(head) - 1;
    memset(p, 'A', 5 * 1024 * 1024);
    p += 5 * 1024 * 1024;
    p += sprintf(p, "\",\"cache_salt\":\"s\"}");
    len = p - body;

    rc = t_run(body, len, 1024, 0, 16384, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK);
    CHECK(r.scanned == len);
    CHECK(r.hash == t_hash("{\"messages\":[{\"role\":\"user\","
                           "\"content\":\"Describe this.\"}],"
                           "\"model\":\"llama-3\",\"cache_salt\":\"s\"}",
                           1024));

    /* in one buffer */

    rc = t_run(body, len, 1024, 0, len, &r2);
    CHECK(rc == PA_OAI_DONE && r2.status == PA_OAI_OK);
    CHECK(r2.scanned == len && r2.hash == r.hash);

    /* an explicit cap: the salt after it is not seen */

    cap = 256 * 1024;

    rc = t_run(body, len, 1024, cap, 16384, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK && r.scanned == cap);
    CHECK(r.hash == t_hash("{\"messages\":[{\"role\":\"user\","
                           "\"content\":\"Describe this.\"}],"
                           "\"model\":\"llama-3\"}", 1024));

    rc = t_run(body, len, 1024, 1000, 100, &r2);
    CHECK(rc == PA_OAI_DONE && r2.scanned == 1000 && r2.hash == r.hash);

    /*
     * a huge first message: its first characters are the key (earlier
     * releases fell back to the raw bytes, "no text", at the cap)
     */

    p = body;
    p += sprintf(p, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    memset(p, 'A', 5 * 1024 * 1024);
    p += 5 * 1024 * 1024;
    p += sprintf(p, "\"}]}");
    len = p - body;

    rc = t_run(body, len, 16, 0, 16384, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK);
    CHECK(r.scanned == len && r.chars == 16);
    CHECK(r.hash == t_hash("{\"messages\":[{\"role\":\"user\","
                           "\"content\":\"AAAAAAAAAAAA\"}]}", 16));

    /* an explicit cap within it: what was read of it is the key */

    rc = t_run(body, len, 16, 300000, 16384, &r2);
    CHECK(rc == PA_OAI_DONE && r2.status == PA_OAI_OK);
    CHECK(r2.scanned == 300000 && r2.chars == 16 && r2.hash == r.hash);

    /* an explicit cap before any text: a fallback */

    rc = t_run(body, len, 16, 20, 7, &r2);
    CHECK(rc == PA_OAI_FALLBACK && r2.status == PA_OAI_NO_TEXT);
    CHECK(r2.scanned == 20);

    free(body);

    /* all seen and the text long enough: DONE before the end */

    text = "{\"model\":\"m\",\"cache_salt\":\"s\",\"prompt_cache_key\":\"k\","
           "\"prompt\":\"0123456789\",\"big\":\"xxxxxxxxxxxxxxxxxxxxx";
    len = strlen(text);

    rc = t_run(text, len, 5, 0, 1, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK);
    CHECK(r.scanned == (size_t) (strstr(text, "9\"") + 2 - text));
    CHECK(r.chars == 5 && r.has_pck == 1);
    CHECK(r.hash == t_hash("{\"model\":\"m\",\"cache_salt\":\"s\","
                           "\"prompt\":\"01234\"}", 5));

    /* not all seen: to the end */

    text = "{\"model\":\"m\",\"cache_salt\":\"s\","
           "\"prompt\":\"0123456789\",\"big\":\"xxxxxxxxxxxxxxxxxxxxx\"}";
    len = strlen(text);

    rc = t_run(text, len, 5, 0, 1, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK && r.scanned == len);
    CHECK(r.hash == t_hash("{\"model\":\"m\",\"cache_salt\":\"s\","
                           "\"prompt\":\"01234\"}", 5));

    /* the salt alone missing keeps it going: the truncated body fails */

    text = "{\"model\":\"m\",\"prompt_cache_key\":\"k\","
           "\"prompt\":\"0123456789\",\"big\":\"xxxxxxxxxxxxxxxxxxxxx";
    rc = t_run(text, strlen(text), 5, 0, 1, &r);
    CHECK(rc == PA_OAI_FALLBACK && r.status == PA_OAI_NOT_JSON);
}


/* every allocation in turn fails: NOMEM, never a crash */

static void
test_nomem(void)
{
    long              i, nomem, ok;
    size_t            len;
    pa_oai_rc_e       rc;
    pa_oai_result_t   r;
    char             *body;

    static const char  text[] =
        "{\"model\":\"m\",\"messages\":[{\"content\":\"%s\",\"role\":\"u\"},"
        "{\"role\":\"u\",\"content\":\"%s\"}],\"x\":[[[[[[[[1]]]]]]]]}";

    len = 200000;
    body = malloc(len);

    {
        char  *a = malloc(60000);

        memset(a, 'q', 59999);
        a[59999] = '\0';
        snprintf(body, len, text, a, a);
        free(a);
    }

    len = strlen(body);
    nomem = 0;
    ok = 0;

    for (i = 0; i < 200; i++) {
        t_arena.fail_at = i;
        rc = t_run_arena(&t_arena, (unsigned char *) body, len, 100000, 0,
                         1000, &r);
        t_arena.fail_at = -1;

        if (rc == PA_OAI_DONE) {
            CHECK(r.status == PA_OAI_OK);
            ok++;
            break;
        }

        CHECK(rc == PA_OAI_FALLBACK && r.status == PA_OAI_NOMEM);
        nomem++;
    }

    CHECK(ok == 1);
    CHECK(nomem > 5);

    free(body);
}


/*
 * One string of 300 KB, 1 MB and 8 MB: a message's content (first,
 * middle, last message), the model, the prompt_cache_key or the
 * cache_salt, first in the body or later.  Nothing of it is seen before
 * it ends, so earlier releases, which stopped at 256 KiB + 4 x length,
 * lost what came after it: the key must not depend on its length.
 */

static void
test_long(void)
{
    char    *body, *text;
    size_t   sizes[3], i;

    sizes[0] = 300 * 1024;
    sizes[1] = 1024 * 1024;
    sizes[2] = T_LONG_MAX;

    body = malloc(T_LONG_MAX + 4096);
    text = malloc(T_LONG_MAX + 1);

    if (body == NULL || text == NULL) {
        CHECK(0);
        return;
    }

    for (i = 0; i < 3; i++) {
        test_long_size(body, text, sizes[i]);
    }

    free(text);
    free(body);
}


static void
test_long_size(char *body, char *text, size_t size)
{
    int               i;
    char             *prefix;
    size_t            len, n, chunk;
    uint64_t          h;
    pa_oai_rc_e       rc;
    pa_oai_result_t   r, r2;

    static const char  *contents[3][2] = {
        /* the long message first, in the middle, last; the same ones
           with other fields, order and white space */
        { "{\"model\":\"llama-3\",\"prompt_cache_key\":\"tenantA\","
          "\"messages\":[{\"role\":\"user\",\"content\":\"%s\"},"
          "{\"role\":\"assistant\",\"content\":\"Noted.\"},"
          "{\"role\":\"user\",\"content\":\"Summarise it.\"}],"
          "\"temperature\":0.7}",
          "{ \"messages\" : [ { \"content\" : \"%s\" , \"role\" : \"user\" }"
          " ,\n {\"role\":\"assistant\",\"content\":\"Noted.\"},\n"
          " {\"content\":[{\"type\":\"text\",\"text\":\"Summarise it.\"}],"
          "\"role\":\"user\"} ] , \"stream\" : true , \"max_tokens\" : 9 ,"
          " \"prompt_cache_key\" : \"tenantA\" , \"model\" : \"llama-3\" }" },

        { "{\"model\":\"llama-3\",\"prompt_cache_key\":\"tenantA\","
          "\"messages\":[{\"role\":\"system\",\"content\":\"Be terse.\"},"
          "{\"role\":\"user\",\"content\":\"%s\"},"
          "{\"role\":\"user\",\"content\":\"Summarise it.\"}]}",
          "{\"messages\":[{\"role\":\"system\",\"content\":\"Be terse.\"},"
          "{\"content\":\"%s\",\"role\":\"user\",\"name\":\"bob\"},"
          "{\"role\":\"user\",\"content\":\"Summarise it.\"}],"
          "\"temperature\":0,\"prompt_cache_key\":\"tenantA\","
          "\"model\":\"llama-3\"}" },

        { "{\"model\":\"llama-3\",\"prompt_cache_key\":\"tenantA\","
          "\"messages\":[{\"role\":\"system\",\"content\":\"Be terse.\"},"
          "{\"role\":\"assistant\",\"content\":\"Noted.\"},"
          "{\"role\":\"user\",\"content\":\"%s\"}]}",
          "{\"temperature\":1.5,\"messages\":[{\"role\":\"system\","
          "\"content\":\"Be terse.\"},{\"role\":\"assistant\",\"content\":"
          "\"Noted.\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
          "\"text\":\"%s\"}]}],\"model\":\"llama-3\","
          "\"prompt_cache_key\":\"tenantA\"}" }
    };

    n = t_text(text, size, 7);
    text[n] = '\0';

    /* the first T_PREFIX bytes: more than 1024 characters */

    prefix = malloc(T_PREFIX + 1);
    memcpy(prefix, text, T_PREFIX);
    prefix[T_PREFIX] = '\0';

    for (i = 0; i < 3; i++) {

        /* the key is that of the first 1024 characters, the id is seen */

        len = t_body(body, contents[i][0], text);
        rc = t_run_long(body, len, len, &r);
        CHECK_MSG(rc == PA_OAI_DONE && r.status == PA_OAI_OK
                  && r.chars == 1024 && r.scanned == len,
                  "%zu bytes, message %d: %s", size, i,
                  pa_oai_status_name(r.status));
        CHECK(r.has_pck == 1 && r.pck_len == 7
              && memcmp(r.pck, "tenantA", 7) == 0);

        h = r.hash;

        len = t_body(body, contents[i][0], prefix);
        rc = t_run_long(body, len, len, &r2);
        CHECK_MSG(rc == PA_OAI_DONE && r2.hash == h,
                  "%zu bytes, message %d, cut", size, i);

        /* other fields, order, white space, a text part */

        len = t_body(body, contents[i][1], text);
        rc = t_run_long(body, len, 65536, &r2);
        CHECK_MSG(rc == PA_OAI_DONE && r2.hash == h && r2.has_pck == 1
                  && memcmp(r2.pck, "tenantA", 7) == 0,
                  "%zu bytes, message %d, other order", size, i);

        /* any split gives the same */

        len = t_body(body, contents[i][0], text);

        for (chunk = 7; chunk <= 65536; chunk *= 96) {
            rc = t_run_long(body, len, chunk, &r2);
            CHECK_MSG(rc == PA_OAI_DONE && r2.hash == h
                      && r2.scanned == len && r2.has_pck,
                      "%zu bytes, message %d, by %zu", size, i, chunk);
        }

        if (size <= 1024 * 1024 || i == 1) {
            rc = t_run_long(body, len, 1, &r2);
            CHECK_MSG(rc == PA_OAI_DONE && r2.hash == h && r2.has_pck,
                      "%zu bytes, message %d, by 1", size, i);
        }

        rc = t_run_long(body, len, 0, &r2);
        CHECK_MSG(rc == PA_OAI_DONE && r2.hash == h && r2.has_pck,
                  "%zu bytes, message %d, random", size, i);
    }

    /* tenantB: the same text key, the other id, after the long message */

    len = t_body(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                 "\"prompt_cache_key\":\"tenantB\",\"model\":\"llama-3\"}",
                 text);
    rc = t_run_long(body, len, 65536, &r);
    CHECK(rc == PA_OAI_DONE && r.has_pck == 1 && r.pck_len == 7
          && memcmp(r.pck, "tenantB", 7) == 0);

    h = r.hash;

    len = t_body(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                 "\"prompt_cache_key\":\"tenantA\",\"model\":\"llama-3\"}",
                 text);
    rc = t_run_long(body, len, 65536, &r);
    CHECK(rc == PA_OAI_DONE && r.hash == h && r.has_pck == 1
          && memcmp(r.pck, "tenantA", 7) == 0);

    /* an invalid id after the long message: too long, non-ASCII, null */

    len = t_body(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                 "\"prompt_cache_key\":\"caf\xc3\xa9\"}", text);
    rc = t_run_long(body, len, 8192, &r);
    CHECK(rc == PA_OAI_DONE && r.has_pck == 0 && r.pck_invalid == 1);

    len = t_body(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                 "\"prompt_cache_key\":\"tenant\\u00e9\"}", text);
    rc = t_run_long(body, len, 8192, &r);
    CHECK(rc == PA_OAI_DONE && r.has_pck == 0 && r.pck_invalid == 1);

    len = t_body(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                 "\"prompt_cache_key\":null}", text);
    rc = t_run_long(body, len, 8192, &r);
    CHECK(rc == PA_OAI_DONE && r.has_pck == 0 && r.pck_invalid == 0);

    /* the model: long, first or last, the same key; not that of another */

    len = t_body(body, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"hi\"}],\"prompt_cache_key\":\"tenantA\"}",
                 text);
    rc = t_run_long(body, len, 65536, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK && r.chars == 6
          && r.has_pck == 1);

    h = r.hash;

    len = t_body(body, "{\"prompt_cache_key\":\"tenantA\",\"messages\":["
                 "{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0,"
                 "\"model\":\"%s\"}", text);
    rc = t_run_long(body, len, 7, &r);
    CHECK(rc == PA_OAI_DONE && r.hash == h && r.has_pck == 1);

    CHECK(h != t_hash("{\"model\":\"llama-3\",\"messages\":[{\"role\":"
                      "\"user\",\"content\":\"hi\"}]}", 1024));

    len = t_body(body, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"hi\"}]}", prefix);
    rc = t_run_long(body, len, len, &r);
    CHECK(rc == PA_OAI_DONE && r.hash != h);

    /* the cache_salt likewise */

    len = t_body(body, "{\"cache_salt\":\"%s\",\"model\":\"llama-3\","
                 "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                 text);
    rc = t_run_long(body, len, 65536, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK && r.chars == 6);

    h = r.hash;

    len = t_body(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                 "\"model\":\"llama-3\",\"cache_salt\":\"%s\"}", text);
    rc = t_run_long(body, len, 0, &r);
    CHECK(rc == PA_OAI_DONE && r.hash == h);

    CHECK(h != t_hash("{\"model\":\"llama-3\",\"messages\":[{\"role\":"
                      "\"user\",\"content\":\"hi\"}]}", 1024));

    /* the prompt_cache_key: long, first, invalid, the key as without it */

    len = t_body(body, "{\"prompt_cache_key\":\"%s\",\"model\":\"llama-3\","
                 "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                 text);
    rc = t_run_long(body, len, 65536, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK && r.has_pck == 0
          && r.pck_invalid == 1);
    CHECK(r.hash == t_hash("{\"model\":\"llama-3\",\"messages\":[{\"role\":"
                           "\"user\",\"content\":\"hi\"}]}", 1024));

    /* a later valid one wins, as any later field does */

    len = t_body(body, "{\"prompt_cache_key\":\"%s\",\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"hi\"}],\"prompt_cache_key\":\"t1\"}",
                 text);
    rc = t_run_long(body, len, 1000, &r);
    CHECK(rc == PA_OAI_DONE && r.has_pck == 1 && r.pck_len == 2);

    /* long, then broken: not JSON, however long it was */

    len = t_body(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                 "\"model\":\"m\",}", text);
    rc = t_run_long(body, len, 65536, &r);
    CHECK(rc == PA_OAI_FALLBACK && r.status == PA_OAI_NOT_JSON);

    len = t_body(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s"
                 "\xed\xa0\x80\"}]}", text);
    rc = t_run_long(body, len, 65536, &r);
    CHECK(rc == PA_OAI_FALLBACK && r.status == PA_OAI_NOT_JSON);

    free(prefix);
}


/* "size" bytes of JSON string text: words, escapes, some UTF-8 */

static size_t
t_text(char *p, size_t size, unsigned seed)
{
    size_t       n, w;
    const char  *word;

    static const char  *words[] = {
        "the", "model", "returns", "a", "response", "for", "each",
        "request", "with", "cached", "prefix", "tokens", "and", "keys",
        "\\n", "\\\"quoted\\\"", "caf\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87",
        "\\u4e2d", "\\ud83d\\ude00", "\xf0\x9f\x98\x80", "tab\\tbed"
    };

    n = 0;

    for ( ;; ) {
        seed = seed * 1103515245 + 12345;
        word = words[(seed >> 16) % (sizeof(words) / sizeof(words[0]))];
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


/* "fmt" with its one %s replaced by "text" */

static size_t
t_body(char *body, const char *fmt, const char *text)
{
    size_t       n, t;
    const char  *s;

    s = strstr(fmt, "%s");
    n = s - fmt;
    t = strlen(text);

    memcpy(body, fmt, n);
    memcpy(body + n, text, t);
    strcpy(body + n + t, s + 2);

    return n + t + strlen(s + 2);
}


/* length 1024, in buffers of "chunk" bytes, 0: of random sizes */

static pa_oai_rc_e
t_run_long(const char *body, size_t len, size_t chunk, pa_oai_result_t *res)
{
    size_t       pos, n;
    pa_oai_t    *x;
    pa_alloc_t   a;
    pa_oai_rc_e  rc;

    if (chunk > 1) {
        return t_run(body, len, 1024, 0, chunk, res);
    }

    /* no copies: 8 MB byte by byte */

    a.alloc = ta_alloc;
    a.ctx = &t_arena;

    ta_reset(&t_arena);

    x = pa_oai_create(&a, 1024, 0);
    if (x == NULL) {
        memset(res, 0, sizeof(pa_oai_result_t));
        return PA_OAI_FALLBACK;
    }

    rc = PA_OAI_MORE;

    for (pos = 0; pos < len && rc == PA_OAI_MORE; pos += n) {
        n = (chunk == 1) ? 1 : 1 + t_rand() % 70000;

        if (n > len - pos) {
            n = len - pos;
        }

        rc = pa_oai_feed(x, (const unsigned char *) body + pos, n);
    }

    pa_oai_finish(x, res);

    if (rc == PA_OAI_MORE) {
        rc = (res->status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;
    }

    return rc;
}


/*
 * the text hook: what it gets, in order, is the text that is hashed;
 * never part of a character
 */

static void
test_hook(void)
{
    int               i;
    char             *body;
    size_t            len, chunk, k;
    uint64_t          v[4];
    t_hook_t          h, h2;
    pa_oai_rc_e       rc;
    pa_oai_result_t   r;

    static const char  chat[] =
        "{\"model\":\"llama-3\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"Be \\u4e2d terse.\"},"
        "{\"content\":[{\"text\":\"a\xf0\x9f\x98\x80\"},{\"text\":\"\"},"
        "{\"text\":\"b\"}],\"role\":\"user\"},"
        "{\"role\":\"assistant\",\"content\":\"\xc3\xa9\\ud83d\\ude01\"}]}";

    static const char  text[] =
        "system\x1e" "Be \xe4\xb8\xad terse.\x1f"
        "user\x1e" "a\xf0\x9f\x98\x80\x1f\x1f" "b\x1f"
        "assistant\x1e" "\xc3\xa9\xf0\x9f\x98\x81\x1f";

    /* all of it, then cut at each length: the text is cut there too */

    rc = t_run_hook(chat, 1024, sizeof(chat), &h, &r);
    CHECK(rc == PA_OAI_DONE && r.status == PA_OAI_OK);
    CHECK(h.len == sizeof(text) - 1
          && memcmp(h.text, text, sizeof(text) - 1) == 0);
    CHECK(h.seps == 8 && h.mixed == 0);

    v[0] = XXH3_64bits(h.text, h.len);
    v[1] = XXH3_64bits("llama-3", 7);
    v[2] = 0;
    v[3] = 1;
    CHECK(r.hash == XXH3_64bits(v, sizeof(v)));

    free(h.text);

    for (k = 1; k <= r.chars + 1; k++) {
        for (chunk = 1; chunk <= sizeof(chat); chunk += 13) {
            rc = t_run_hook(chat, k, chunk, &h2, &r);

            v[0] = XXH3_64bits_digest(&h2.state);

            CHECK_MSG(rc == PA_OAI_DONE && h2.split == 0
                      && h2.miscount == 0 && r.hash == XXH3_64bits(v, sizeof(v))
                      && memcmp(h2.text, text, h2.len) == 0,
                      "length %zu, by %zu", k, chunk);

            free(h2.text);
        }
    }

    /* a 1 MB message, byte by byte and at random: whole characters */

    body = malloc(T_LONG_MAX + 4096);
    {
        char  *t = malloc(1024 * 1024 + 1);

        t[t_text(t, 1024 * 1024, 3)] = '\0';
        len = t_body(body, "{\"model\":\"llama-3\",\"messages\":[{\"content\":"
                     "\"%s\",\"role\":\"user\"}]}", t);
        free(t);
    }

    for (i = 0; i < 3; i++) {
        chunk = (i == 0) ? len : (i == 1) ? 1 : 3;
        body[len] = '\0';

        rc = t_run_hook(body, 65536, chunk, &h, &r);

        v[0] = XXH3_64bits_digest(&h.state);

        CHECK(rc == PA_OAI_DONE && r.chars == 65536 && h.split == 0
              && h.miscount == 0);
        CHECK(r.hash == XXH3_64bits(v, sizeof(v)));
        CHECK(h.len > 65536 && memcmp(h.text, "user\x1e", 5) == 0);

        free(h.text);
    }

    free(body);

    /*
     * a run of separators is hashed at once: 100,000 empty strings are
     * 100,000 separators in about 1,600 calls (one per string before),
     * and the key is that of the bytes as one text
     */

    body = malloc(4 * 100000 + 64);
    len = (size_t) sprintf(body, "{\"model\":\"m\",\"prompt\":[\"\"");

    for (k = 1; k < 100000; k++) {
        memcpy(body + len, ",\"\"", 3);
        len += 3;
    }

    len += (size_t) sprintf(body + len, ",\"ab\",\"\"]}");

    for (chunk = 7; chunk <= len; chunk *= 50) {
        rc = t_run_hook(body, 1024, chunk, &h, &r);

        v[0] = XXH3_64bits_digest(&h.state);
        v[1] = XXH3_64bits("m", 1);
        v[2] = 0;
        v[3] = 1;

        CHECK(rc == PA_OAI_DONE && r.hash == XXH3_64bits(v, sizeof(v)));
        CHECK(h.seps == 100002 && h.mixed == 0 && r.chars == 2);
        CHECK_MSG(h.calls <= 100000 / 64 + 4, "%zu calls", h.calls);
        CHECK(h.len == 100004 && memcmp(h.text + 100000, "ab\x1f\x1f", 4)
                                 == 0);

        free(h.text);
    }

    free(body);

    /*
     * pa_oai_hook_only(): the hook gets the same text, which is not
     * hashed here: the hash is the model's and cache_salt's alone, the
     * meta is unchanged
     */

    rc = t_run_hook(chat, 1024, 7, &h, &r);
    CHECK(rc == PA_OAI_DONE);
    free(h.text);

    t_hook_only = 1;

    {
        pa_oai_result_t  r2;

        rc = t_run_hook(chat, 1024, 7, &h, &r2);
        CHECK(rc == PA_OAI_DONE && r2.status == PA_OAI_OK);
        CHECK(h.len == sizeof(text) - 1
              && memcmp(h.text, text, sizeof(text) - 1) == 0);
        CHECK(r2.meta == r.meta && r2.chars == r.chars);

        v[0] = 0;
        v[1] = XXH3_64bits("llama-3", 7);
        v[2] = 0;
        v[3] = 1;
        CHECK(r2.hash == XXH3_64bits(v, sizeof(v)) && r2.hash != r.hash);
        free(h.text);
    }

    t_hook_only = 0;

    /* not OK: what the hook got is no key */

    rc = t_run_hook("{\"prompt\":\"abc\",\"x\":tru}", 1024, 1, &h, &r);
    CHECK(rc == PA_OAI_FALLBACK && h.len == 4);
    free(h.text);
}


static void
t_hook(void *ctx, const unsigned char *p, size_t n, size_t chars)
{
    size_t     i, m, c;
    unsigned   sep;
    t_hook_t  *h = ctx;

    h->calls++;
    sep = (chars == 0);

    for (c = 0, i = 0; i < n; i++) {
        c += ((p[i] & 0xc0) != 0x80);
    }

    if (!sep && c != chars) {
        h->miscount++;
    }

    /* the texts of these tests have no U+001D..U+001F of their own */

    for (i = 0; i < n; i++) {
        if ((p[i] >= 0x1d && p[i] <= 0x1f) != (sep != 0)) {
            h->mixed++;
            break;
        }
    }

    h->seps += sep ? n : 0;

    if (n == 0 || (p[0] & 0xc0) == 0x80 || (p[n - 1] & 0x80)) {

        /* empty, or begins within a character, or may end within one */

        if (n == 0 || (p[0] & 0xc0) == 0x80
            || ((p[n - 1] & 0xc0) == 0xc0)
            || (n >= 2 && (p[n - 2] & 0xe0) == 0xe0)
            || (n >= 3 && (p[n - 3] & 0xf0) == 0xf0))
        {
            h->split++;
        }
    }

    XXH3_64bits_update(&h->state, p, n);

    m = (h->size - h->len < n) ? h->size - h->len : n;
    memcpy(h->text + h->len, p, m);
    h->len += m;
}


static pa_oai_rc_e
t_run_hook(const char *body, size_t length, size_t chunk, t_hook_t *h,
    pa_oai_result_t *res)
{
    size_t        pos, n, len;
    pa_oai_t     *x;
    pa_alloc_t    a;
    pa_oai_rc_e   rc;

    memset(h, 0, sizeof(t_hook_t));

    h->size = 4 * 65536 + 4096;
    h->text = malloc(h->size);
    XXH3_INITSTATE(&h->state);
    XXH3_64bits_reset(&h->state);

    a.alloc = ta_alloc;
    a.ctx = &t_arena;

    ta_reset(&t_arena);
    memset(res, 0, sizeof(pa_oai_result_t));

    x = pa_oai_create(&a, length, 0);
    if (x == NULL) {
        return PA_OAI_FALLBACK;
    }

    pa_oai_text_hook(x, t_hook, h);

    if (t_hook_only) {
        pa_oai_hook_only(x);
    }

    len = strlen(body);
    rc = PA_OAI_MORE;

    for (pos = 0; pos < len && rc == PA_OAI_MORE; pos += n) {
        n = (len - pos < chunk) ? len - pos : chunk;
        rc = pa_oai_feed(x, (const unsigned char *) body + pos, n);
    }

    pa_oai_finish(x, res);

    if (rc == PA_OAI_MORE) {
        rc = (res->status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;
    }

    return rc;
}


/*
 * keys as the yajl-based extractor (before the streaming scanner) gave
 * them: routes must not move on an upgrade.  yajl's ways are kept: \v
 * and \f as white space, "?" for an unpaired high surrogate, a string
 * left open after the top value at the end of the body.
 */

static void
test_golden(void)
{
    size_t           i;
    pa_oai_result_t  r;

    static const struct {
        const char  *body;
        size_t       length;
        uint64_t     hash;
        size_t       chars;
    } golden[] = {

        { "{\"model\":\"llama-3\",\"temperature\":0.2,\"messages\":["
          "{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
          "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}"
          "],\"max_tokens\":100,\"stream\":false}",
          1024, 0x50a81346efb0e7c7ULL, 68 },

        { "{\"model\":\"llama-3\",\"temperature\":0.2,\"messages\":["
          "{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
          "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}"
          "],\"max_tokens\":100,\"stream\":false}",
          16, 0xb4a61e1f4abc97bdULL, 16 },

        { "{\"messages\":[{\"content\":[{\"text\":\"\"},"
          "{\"text\":\"a\\u4e2d\"},{\"text\":\"\"},"
          "{\"image_url\":{\"url\":\"u\"}}],\"role\":\"user\"},"
          "{\"content\":\"x\"}],\"cache_salt\":\"s\",\"model\":\"m\"}",
          1024, 0xeaecdfa41dd4b759ULL, 8 },

        { "{\"prompt\":[[101,2023,-1.5e3],[7]],\"model\":\"m\","
          "\"cache_salt\":null}",
          1024, 0x08ad48b64c70243dULL, 14 },

        { "{\"prompt\":[\"\\ud83d\\ude00\xf0\x9f\x98\x80\",\"\\ud83dabc\","
          "\"\\ud83d\\u0041\"]}",
          1024, 0x4df6fe68e953d0e3ULL, 7 },

        { "{\x0b\"prompt\"\x0c:\"x\",\"model\":7}\"trailing",
          1024, 0xbbbf10e25d05c27eULL, 1 },

        { "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":["
          "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"UklG\","
          "\"format\":\"wav\"}},{\"type\":\"image_url\","
          "\"image_url\":\"http://x/a.png\"}]}]}",
          5, 0x1e2dc84245864793ULL, 5 }
    };

    for (i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
        CHECK_MSG(t_ok(golden[i].body, golden[i].length, &r)
                  && r.hash == golden[i].hash && r.chars == golden[i].chars,
                  "golden %zu: %016llx", i, (unsigned long long) r.hash);

        CHECK(t_run(golden[i].body, strlen(golden[i].body), golden[i].length,
                    0, 1, &r) == PA_OAI_DONE
              && r.hash == golden[i].hash);
    }
}


/* the fuzz corpus, with the crash regressions */

static void
test_corpus(void)
{
    int               n;
    DIR              *dir;
    FILE             *f;
    char              path[1024];
    long              size;
    size_t            len, pos;
    unsigned char    *data;
    pa_oai_rc_e       rc1, rc2;
    struct dirent    *de;
    pa_oai_result_t   r1, r2;

    dir = opendir(T_CORPUS);
    if (dir == NULL) {
        CHECK_MSG(0, "cannot open the corpus %s", T_CORPUS);
        return;
    }

    n = 0;

    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.') {
            continue;
        }

        snprintf(path, sizeof(path), "%s/%s", T_CORPUS, de->d_name);

        f = fopen(path, "rb");
        if (f == NULL) {
            continue;
        }

        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fseek(f, 0, SEEK_SET);

        data = malloc(size + 1);
        len = fread(data, 1, size, f);
        fclose(f);

        pos = len ? (size_t) data[0] * len / 256 : 0;

        rc1 = t_run_arena(&t_arena, data, len, 1024, 0, len, &r1);
        rc2 = t_run_arena(&t_arena, data, len, 1024, 0, pos ? pos : 1, &r2);

        CHECK_MSG(rc1 == rc2 && r1.status == r2.status && r1.hash == r2.hash
                  && r1.chars == r2.chars && r1.chars <= 1024, "%s", path);

        rc1 = t_run_arena(&t_arena, data, len, 16, 0, len, &r1);
        rc2 = t_run_arena(&t_arena, data, len, 16, 0, 1, &r2);

        CHECK_MSG(rc1 == rc2 && r1.status == r2.status && r1.hash == r2.hash
                  && r1.chars == r2.chars && r1.chars <= 16, "%s", path);

        free(data);
        n++;
    }

    closedir(dir);

    CHECK(n >= 10);
    printf("corpus: %d inputs replayed\n", n);
}


/* feeds "body" in buffers of "chunk" bytes, each a copy */

static pa_oai_rc_e
t_run_arena(ta_arena_t *ar, const unsigned char *body, size_t len,
    size_t length, size_t cap, size_t chunk, pa_oai_result_t *res)
{
    size_t          pos, n;
    pa_oai_t       *x;
    pa_alloc_t      a;
    pa_oai_rc_e     rc;
    unsigned char  *p;

    a.alloc = ta_alloc;
    a.ctx = ar;

    ta_reset(ar);

    memset(res, 0, sizeof(pa_oai_result_t));

    x = pa_oai_create(&a, length, cap);
    if (x == NULL) {
        res->status = PA_OAI_NOMEM;
        return PA_OAI_FALLBACK;
    }

    if (t_past) {
        pa_oai_count_past(x);
    }

    rc = PA_OAI_MORE;

    for (pos = 0; pos < len && rc == PA_OAI_MORE; pos += n) {
        n = (len - pos < chunk) ? len - pos : chunk;

        p = malloc(n);
        memcpy(p, body + pos, n);

        rc = pa_oai_feed(x, p, n);

        free(p);
    }

    pa_oai_finish(x, res);

    if (rc == PA_OAI_MORE) {
        rc = (res->status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;

    } else {
        CHECK((rc == PA_OAI_DONE) == (res->status == PA_OAI_OK));
    }

    CHECK(res->chars <= length);

    return rc;
}


static pa_oai_rc_e
t_run(const char *body, size_t len, size_t length, size_t cap, size_t chunk,
    pa_oai_result_t *res)
{
    return t_run_arena(&t_arena, (const unsigned char *) body, len, length,
                       cap, chunk, res);
}


static int
t_ok(const char *body, size_t length, pa_oai_result_t *res)
{
    pa_oai_rc_e  rc;

    rc = t_run(body, strlen(body), length, 0, strlen(body) + 1, res);

    CHECK_MSG(rc == PA_OAI_DONE && res->status == PA_OAI_OK,
              "not ok (%s): %s", pa_oai_status_name(res->status), body);

    return rc == PA_OAI_DONE && res->status == PA_OAI_OK;
}


static uint64_t
t_hash(const char *body, size_t length)
{
    pa_oai_result_t  r;

    if (!t_ok(body, length, &r)) {
        return (uint64_t) t_rand() << 32 | t_rand();
    }

    return r.hash;
}


static pa_oai_status_e
t_status(const char *body)
{
    pa_oai_result_t  r;

    (void) t_run(body, strlen(body), 1024, 0, strlen(body) + 1, &r);

    return r.status;
}


static uint32_t
t_rand(void)
{
    t_seed = t_seed * 1103515245 + 12345;
    return t_seed >> 8;
}


/*
 * the scanner's fast path finds the first byte a string cannot go on
 * with ('"', '\\', a control character, one over 0x7f) as a byte loop
 * does, with AVX2 (where the CPU has it) and without, at every length
 * and alignment
 */

static void
test_plain(void)
{
    int                   avx2, saved, bad;
    size_t                i, n, off, k, ref;
    unsigned char         buf[400];
    const unsigned char  *p, *last, *got;

    static const unsigned char  special[] = { '"', '\\', 0x00, 0x1f, 0x80,
                                              0xc3, 0xff };

    saved = pa_oai_avx2;
    bad = 0;

    for (i = 0; i < 20000; i++) {
        off = t_rand() % 32;
        n = t_rand() % (sizeof(buf) - 32);

        for (k = 0; k < n; k++) {
            buf[off + k] = (unsigned char) (0x20 + t_rand() % 0x5f);

            if (buf[off + k] == '"' || buf[off + k] == '\\') {
                buf[off + k] = 'a';
            }
        }

        /* none, or up to three special bytes anywhere */

        for (k = t_rand() % 4; k > 0 && n > 0; k--) {
            buf[off + t_rand() % n] =
                special[t_rand() % sizeof(special)];
        }

        p = buf + off;
        last = p + n;

        for (ref = 0; ref < n; ref++) {
            if (p[ref] == '"' || p[ref] == '\\' || p[ref] < 0x20
                || p[ref] > 0x7f)
            {
                break;
            }
        }

        for (avx2 = 0; avx2 <= pa_cpu_has_avx2(); avx2++) {
            pa_oai_avx2 = avx2;
            got = pa_oai_plain(p, last);

            if ((size_t) (got - p) != ref) {
                bad++;
            }
        }
    }

    pa_oai_avx2 = saved;

    CHECK(bad == 0);
    printf("plain: AVX2 %s\n",
           pa_cpu_has_avx2() ? "compared" : "absent");
}
