
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of the key of the APIs besides chat and completions
 * (src/pa_openai*.c): Responses ("instructions", "input" items), Anthropic
 * Messages ("system", blocks), the tools of each; the key's text in the
 * order the engine renders it whatever the body's order; the same
 * conversation in each API's shape is the same key; the fallbacks, and
 * the memory bounds.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pa_xxhash.h"

#include "pa_openai.h"
#include "unit.h"


#define T_TEXT_MAX  (1 << 20)

#define T_TEXT_IS(body, d, text)  t_text_is(body, d, text, sizeof(text) - 1)


typedef struct {
    size_t          bytes;      /* allocated */
    void           *blocks[4096];
    size_t          n;
} t_mem_t;


typedef struct {
    pa_oai_result_t    res;
    pa_oai_rc_e        rc;
    size_t             bytes;   /* memory the reader took */
    size_t             len;     /* of the text the hook got */
    unsigned char     *text;
} t_key_t;


static void *t_alloc(void *ctx, size_t size);
static void t_free(t_mem_t *m);
static void t_hook(void *ctx, const unsigned char *p, size_t n,
    size_t chars);
static void t_key(const char *body, size_t len, pa_oai_dialect_e d,
    size_t length, size_t chunk, t_key_t *k);
static uint64_t t_hash(const char *body, pa_oai_dialect_e d, size_t length);
static int t_text_is(const char *body, pa_oai_dialect_e d,
    const char *text, size_t n);
static pa_oai_status_e t_status(const char *body, pa_oai_dialect_e d);

static void test_same(void);
static void test_tools(void);
static void test_orders(void);
static void test_items(void);
static void test_blocks(void);
static void test_fallbacks(void);
static void test_memory(void);
static void test_chat_unchanged(void);


static unsigned char  t_buf[T_TEXT_MAX];
static size_t         t_buf_len;


int
main(void)
{
    test_same();
    test_tools();
    test_orders();
    test_items();
    test_blocks();
    test_fallbacks();
    test_memory();
    test_chat_unchanged();

    return UNIT_DONE();
}


#define O  PA_OAI_OPENAI
#define A  PA_OAI_ANTHROPIC

#define T_SYS    "You are a terse assistant."
#define T_USER   "What is the capital of France?"
#define T_TOOL_CHAT                                                           \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","         \
    "\"description\":\"Weather of a city\",\"parameters\":"                 \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"  \
    "\"required\":[\"city\"]}}}"
#define T_TOOL_RESP                                                           \
    "{\"type\":\"function\",\"name\":\"get_weather\","                       \
    "\"description\":\"Weather of a city\",\"parameters\":"                 \
    "{ \"type\" : \"object\", \"properties\": {\"city\": "                  \
    "{\"type\":\"string\"}},\n \"required\":[\"city\"]},\"strict\":true}"
#define T_TOOL_ANTH                                                           \
    "{\"name\":\"get_weather\",\"description\":\"Weather of a city\","      \
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":"       \
    "{\"type\":\"string\"}},\"required\":[\"city\"]},"                      \
    "\"cache_control\":{\"type\":\"ephemeral\"}}"
#define T_TOOL_TEXT                                                           \
    "get_weather\x1fWeather of a city\x1f"                                   \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"  \
    "\"required\":[\"city\"]}\x1f\x1d"


/*
 * the same conversation, a system prompt and a user message, as chat,
 * Responses and Anthropic Messages: the same text, the same key
 */

static void
test_same(void)
{
    size_t       i;
    uint64_t     h;
    t_key_t      k;

    static const char  text[] = "system\x1e" T_SYS "\x1fuser\x1e" T_USER
                                "\x1f";

    static const struct {
        pa_oai_dialect_e   d;
        pa_oai_api_e       api;
        const char        *body;
    } same[] = {
        { O, PA_OAI_API_CHAT,
          "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
          "\"" T_SYS "\"},{\"role\":\"user\",\"content\":\"" T_USER "\"}]}" },
        { O, PA_OAI_API_CHAT,
          "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
          "[{\"type\":\"text\",\"text\":\"" T_SYS "\"}]},{\"role\":\"user\","
          "\"content\":[{\"type\":\"text\",\"text\":\"" T_USER "\"}]}]}" },
        { O, PA_OAI_API_RESPONSES,
          "{\"model\":\"m\",\"instructions\":\"" T_SYS "\",\"input\":\""
          T_USER "\"}" },
        { O, PA_OAI_API_RESPONSES,
          "{\"input\":\"" T_USER "\",\"model\":\"m\",\"instructions\":\""
          T_SYS "\",\"stream\":true}" },
        { O, PA_OAI_API_RESPONSES,
          "{\"model\":\"m\",\"instructions\":\"" T_SYS "\",\"input\":["
          "{\"role\":\"user\",\"content\":\"" T_USER "\"}]}" },
        { O, PA_OAI_API_RESPONSES,
          "{\"model\":\"m\",\"input\":[{\"type\":\"message\",\"role\":"
          "\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\""
          T_USER "\"}]}],\"instructions\":\"" T_SYS "\"}" },
        { O, PA_OAI_API_RESPONSES,
          "{\"model\":\"m\",\"input\":[{\"role\":\"system\",\"content\":\""
          T_SYS "\"},{\"role\":\"user\",\"content\":\"" T_USER "\"}]}" },
        { O, PA_OAI_API_RESPONSES,
          "{\"model\":\"m\",\"input\":[{\"role\":\"system\",\"content\":"
          "\"" T_SYS "\"},{\"content\":\"" T_USER "\",\"role\":\"user\"}]}" },
        { A, PA_OAI_API_MESSAGES,
          "{\"model\":\"m\",\"max_tokens\":100,\"system\":\"" T_SYS "\","
          "\"messages\":[{\"role\":\"user\",\"content\":\"" T_USER "\"}]}" },
        { A, PA_OAI_API_MESSAGES,
          "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
          "\"text\":\"" T_USER "\",\"cache_control\":{\"type\":"
          "\"ephemeral\"}}]}],\"model\":\"m\",\"system\":[{\"type\":\"text\","
          "\"text\":\"" T_SYS "\"}],\"metadata\":{\"user_id\":\"u1\"}}" },
    };

    h = 0;

    for (i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        t_key(same[i].body, strlen(same[i].body), same[i].d, 4096, 7, &k);

        CHECK_MSG(k.rc == PA_OAI_DONE && k.res.status == PA_OAI_OK,
                  "%zu: %s", i, pa_oai_status_name(k.res.status));
        CHECK_MSG(k.res.api == same[i].api, "%zu: api %s", i,
                  pa_oai_api_name(k.res.api));
        CHECK_MSG(k.len == sizeof(text) - 1
                  && memcmp(k.text, text, k.len) == 0,
                  "%zu: text \"%.*s\"", i, (int) k.len, k.text);

        if (i == 0) {
            h = k.res.hash;
        }

        CHECK_MSG(k.res.hash == h, "%zu: another key", i);
    }

    /* a developer message first is rendered before the tools */

    CHECK(T_TEXT_IS("{\"messages\":[{\"role\":\"developer\",\"content\":"
                    "\"a\"}],\"tools\":[{\"type\":\"function\",\"function\":"
                    "{\"name\":\"f\"}}]}", O,
                    "developer\x1e" "a\x1f" "f\x1f\x1d"));

    /* a system message that is not the first is where it is */

    CHECK(T_TEXT_IS("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                    "{\"role\":\"system\",\"content\":\"b\"}],\"tools\":["
                    T_TOOL_CHAT "]}", O,
                    T_TOOL_TEXT "user\x1e" "a\x1fsystem\x1e" "b\x1f"));
}


/* the same tool in each API's shape is the same text */

static void
test_tools(void)
{
    size_t    i;
    uint64_t  h;
    t_key_t   k;

    static const char  text[] = "system\x1e" T_SYS "\x1f" T_TOOL_TEXT
                                "user\x1e" T_USER "\x1f";

    static const struct {
        pa_oai_dialect_e   d;
        const char        *body;
    } same[] = {
        { O, "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
             "\"" T_SYS "\"},{\"role\":\"user\",\"content\":\"" T_USER "\"}],"
             "\"tools\":[" T_TOOL_CHAT "],\"tool_choice\":\"auto\"}" },
        { O, "{\"model\":\"m\",\"tools\":[" T_TOOL_CHAT "],\"messages\":["
             "{\"content\":\"" T_SYS "\",\"role\":\"system\"},{\"role\":"
             "\"user\",\"content\":\"" T_USER "\"}]}" },
        { O, "{\"model\":\"m\",\"tools\":[" T_TOOL_RESP "],\"input\":\""
             T_USER "\",\"instructions\":\"" T_SYS "\"}" },
        { O, "{\"input\":[{\"role\":\"user\",\"content\":\"" T_USER "\"}],"
             "\"model\":\"m\",\"instructions\":\"" T_SYS "\",\"tools\":["
             T_TOOL_RESP "]}" },
        { A, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"" T_USER "\"}],\"tools\":[" T_TOOL_ANTH "],\"system\":\""
             T_SYS "\"}" },
        { A, "{\"tools\":[" T_TOOL_ANTH "],\"system\":\"" T_SYS "\",\"model\":"
             "\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" T_USER
             "\"}]}" },
    };

    h = 0;

    for (i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        t_key(same[i].body, strlen(same[i].body), same[i].d, 4096, 3, &k);

        CHECK_MSG(k.res.status == PA_OAI_OK && k.res.has_tools,
                  "%zu: %s", i, pa_oai_status_name(k.res.status));
        CHECK_MSG(k.len == sizeof(text) - 1
                  && memcmp(k.text, text, k.len) == 0,
                  "%zu: text \"%.*s\"", i, (int) k.len, k.text);

        if (i == 0) {
            h = k.res.hash;
        }

        CHECK_MSG(k.res.hash == h, "%zu: another key", i);
    }

    /* tools without a system prompt come first; other types are text */

    CHECK(T_TEXT_IS("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                    "\"tools\":[{\"type\":\"web_search\"},{\"type\":"
                    "\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                    "{\"a\":[1,2.5e3,true,null,\"x\\\"y\"],\"b\":{}}}}]}", O,
                    "web_search\x1f\x1d" "f\x1f{\"a\":[1,2.5e3,true,null,"
                    "\"x\"y\"],\"b\":{}}\x1f\x1duser\x1ehi\x1f"));

    /* tools: null, [] are none; not a chat key's change */

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                 "\"tools\":null}", O, 4096)
          == t_hash("{\"tools\":[],\"messages\":[{\"role\":\"user\","
                    "\"content\":\"hi\"}]}", O, 4096));
    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                 "\"tools\":[]}", O, 4096)
          == t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                    O, 4096));

    /* the tools differ: the keys do */

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
                 "\"f\"}}]}", O, 4096)
          != t_hash("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
                    "\"g\"}}]}", O, 4096));

    /* no tools in a completions key, before or after the prompt */

    CHECK(t_hash("{\"tools\":[" T_TOOL_CHAT "],\"prompt\":\"abc\"}", O, 4096)
          == t_hash("{\"prompt\":\"abc\"}", O, 4096));
    CHECK(t_hash("{\"prompt\":\"abc\",\"tools\":[" T_TOOL_CHAT "]}", O, 4096)
          == t_hash("{\"prompt\":\"abc\"}", O, 4096));

    /* the first "tools" counts, as the first "instructions" */

    CHECK(t_hash("{\"tools\":[" T_TOOL_CHAT "],\"messages\":[{\"role\":\"u\","
                 "\"content\":\"x\"}],\"tools\":[]}", O, 4096)
          == t_hash("{\"tools\":[" T_TOOL_CHAT "],\"messages\":[{\"role\":"
                    "\"u\",\"content\":\"x\"}]}", O, 4096));
    CHECK(t_hash("{\"instructions\":\"a\",\"input\":\"x\",\"instructions\":"
                 "\"b\"}", O, 4096)
          == t_hash("{\"instructions\":\"a\",\"input\":\"x\"}", O, 4096));
}


/*
 * every order of the top-level fields, and of role and content, gives
 * the same key at every length, read whole or byte by byte
 */

static void
test_orders(void)
{
    char         body[1024];
    size_t       i, j, p, length, n;
    uint64_t     h[64];
    t_key_t      k;

    static const char  *fields[][4] = {
        { "\"messages\":[{\"content\":\"" T_SYS "\",\"role\":\"system\"},"
          "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
          "\"\\u4e2d\\u6587 \xe4\xb8\xad\"}]},{\"role\":\"assistant\","
          "\"content\":\"ok\"}]",
          "\"tools\":[" T_TOOL_CHAT ",{\"type\":\"function\",\"function\":"
          "{\"name\":\"g\",\"description\":\"\\u00e9t\\u00e9\"}}]",
          "\"model\":\"m\"", "\"temperature\":0.5" },
        { "\"input\":[{\"content\":\"" T_SYS "\",\"role\":\"system\"},"
          "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
          "\"\\u4e2d\\u6587 \xe4\xb8\xad\"}]},{\"role\":\"assistant\","
          "\"content\":\"ok\"}]",
          "\"tools\":[" T_TOOL_RESP ",{\"type\":\"function\",\"name\":\"g\","
          "\"description\":\"\\u00e9t\\u00e9\"}]",
          "\"model\":\"m\"", "\"instructions\":null" },
    };

    static const size_t  perms[][4] = {
        { 0, 1, 2, 3 }, { 1, 0, 2, 3 }, { 2, 1, 0, 3 }, { 3, 2, 1, 0 },
        { 1, 2, 3, 0 }, { 0, 3, 1, 2 }
    };

    for (i = 0; i < 2; i++) {
        for (length = 1; length < 140; length += (length < 40) ? 1 : 13) {
            for (p = 0; p < sizeof(perms) / sizeof(perms[0]); p++) {
                n = (size_t) sprintf(body, "{%s,%s,%s,%s}",
                                     fields[i][perms[p][0]],
                                     fields[i][perms[p][1]],
                                     fields[i][perms[p][2]],
                                     fields[i][perms[p][3]]);

                for (j = 1; j <= n + 1; j += (j < 9) ? 1 : 97) {
                    t_key(body, n, O, length, j, &k);
                    CHECK_MSG(k.res.status == PA_OAI_OK, "%s",
                              pa_oai_status_name(k.res.status));

                    if (p == 0 && j == 1) {
                        h[length % 64] = k.res.hash;
                    }

                    CHECK_MSG(k.res.hash == h[length % 64],
                              "shape %zu, length %zu, order %zu, chunk %zu",
                              i, length, p, j);
                    CHECK(k.res.chars <= length);
                }
            }

            /* the same conversation as chat and as Responses */

            if (i == 1) {
                n = (size_t) sprintf(body, "{%s,%s,%s}", fields[0][0],
                                     fields[0][1], fields[0][2]);
                t_key(body, n, O, length, n, &k);
                CHECK_MSG(k.res.hash == h[length % 64], "length %zu",
                          length);
            }
        }
    }
}


/* Responses items: messages, function calls and outputs, reasoning */

static void
test_items(void)
{
    uint64_t  h;

    /* a function call is the assistant's name and arguments */

    CHECK(T_TEXT_IS("{\"input\":[{\"role\":\"user\",\"content\":\"w?\"},"
                    "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":"
                    "\"get_weather\",\"arguments\":\"{\\\"city\\\":"
                    "\\\"Paris\\\"}\"},{\"type\":\"function_call_output\","
                    "\"call_id\":\"c1\",\"output\":\"sunny\"},{\"type\":"
                    "\"reasoning\",\"id\":\"r\",\"summary\":[{\"type\":"
                    "\"summary_text\",\"text\":\"think\"}],"
                    "\"encrypted_content\":\"zz\"}]}", O,
                    "user\x1ew?\x1f" "assistant\x1eget_weather\x1f"
                    "{\"city\":\"Paris\"}\x1ftool\x1esunny\x1f"
                    "assistant\x1ethink\x1f"));

    /* the type after the fields (in the same order): the same */

    h = t_hash("{\"input\":[{\"type\":\"function_call\",\"name\":\"f\","
               "\"arguments\":\"{}\"}]}", O, 4096);
    CHECK(h == t_hash("{\"input\":[{\"name\":\"f\",\"arguments\":\"{}\","
                      "\"call_id\":\"c\",\"type\":\"function_call\"}]}",
                      O, 4096));

    /* an output of parts, an image, an item reference (no role) */

    CHECK(T_TEXT_IS("{\"input\":[{\"type\":\"function_call_output\","
                    "\"output\":[{\"type\":\"input_text\",\"text\":\"a\"}]},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"input_image\","
                    "\"image_url\":\"data:x\"},{\"type\":\"input_file\","
                    "\"file_data\":\"f\"}]},{\"type\":\"item_reference\","
                    "\"id\":\"i\"}]}", O,
                    "tool\x1e" "a\x1fuser\x1e" "data:x\x1f" "f\x1f\x1e"));

    /* chat's tool_calls: the same text as Responses' function_call */

    CHECK(T_TEXT_IS("{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},"
                    "{\"role\":\"assistant\",\"content\":null,"
                    "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                    "\"function\":{\"name\":\"get_weather\",\"arguments\":"
                    "\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},{\"role\":\"tool\","
                    "\"tool_call_id\":\"c1\",\"content\":\"sunny\"}]}", O,
                    "user\x1ew?\x1f" "assistant\x1eget_weather\x1f"
                    "{\"city\":\"Paris\"}\x1ftool\x1esunny\x1f"));

    h = t_hash("{\"messages\":[{\"tool_calls\":[{\"function\":{\"arguments\":"
               "\"{}\",\"name\":\"f\"},\"type\":\"function\",\"id\":\"c\"}],"
               "\"role\":\"assistant\"}]}", O, 4096);
    CHECK(h == t_hash("{\"input\":[{\"type\":\"function_call\",\"arguments\":"
                      "\"{}\",\"name\":\"f\"}]}", O, 4096));
    CHECK(h != t_hash("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":"
                      "null}]}", O, 4096));

    /* tool_calls are chat's: not a Responses item's, not Anthropic's */

    CHECK(t_hash("{\"input\":[{\"role\":\"assistant\",\"content\":\"a\","
                 "\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}]}", O,
                 4096)
          == t_hash("{\"input\":[{\"role\":\"assistant\",\"content\":"
                    "\"a\"}]}", O, 4096));

    /* a chat image part and a Responses one are the same text */

    CHECK(t_hash("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"image_url\",\"image_url\":{\"url\":\"data:x\"}}]}]}", O,
                 4096)
          == t_hash("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
                    "\"input_image\",\"image_url\":\"data:x\"}]}]}", O, 4096));
}


/* Anthropic blocks: images, tool use and results; cache_control */

static void
test_blocks(void)
{
    CHECK(T_TEXT_IS("{\"messages\":[{\"role\":\"user\",\"content\":["
                    "{\"type\":\"image\",\"source\":{\"type\":\"base64\","
                    "\"media_type\":\"image/png\",\"data\":\"AAA\"}},"
                    "{\"type\":\"image\",\"source\":{\"type\":\"url\","
                    "\"url\":\"https://x/y.png\"}},{\"type\":\"text\","
                    "\"text\":\"w?\"}]},{\"role\":\"assistant\",\"content\":["
                    "{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"get\","
                    "\"input\":{\"city\":\"Paris\",\"n\":[1, 2]}}]},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
                    "\"tool_use_id\":\"t1\",\"content\":[{\"type\":\"text\","
                    "\"text\":\"sunny\"}],\"cache_control\":{\"type\":"
                    "\"ephemeral\"}},{\"type\":\"tool_result\",\"content\":"
                    "\"rain\"}]}]}", A,
                    "user\x1e" "AAA\x1fhttps://x/y.png\x1fw?\x1f"
                    "assistant\x1eget\x1f{\"city\":\"Paris\",\"n\":[1,2]}\x1f"
                    "user\x1esunny\x1frain\x1f"));

    /* the same body read as OpenAI: blocks' other fields are no text */

    CHECK(T_TEXT_IS("{\"messages\":[{\"role\":\"assistant\",\"content\":["
                    "{\"type\":\"tool_use\",\"name\":\"get\",\"input\":{}}]}],"
                    "\"system\":\"s\"}", O, "assistant\x1e"));

    /* tool_use input before the role: kept until it */

    CHECK(t_hash("{\"messages\":[{\"content\":[{\"type\":\"tool_use\","
                 "\"input\":{\"a\":1},\"name\":\"f\"}],\"role\":"
                 "\"assistant\"}]}", A, 4096)
          == t_hash("{\"messages\":[{\"role\":\"assistant\",\"content\":["
                    "{\"type\":\"tool_use\",\"input\":{\"a\":1},\"name\":"
                    "\"f\"}]}]}", A, 4096));
}


static void
test_fallbacks(void)
{
    char    *body;
    size_t   i, n;

    CHECK(t_status("{\"input\":5}", O) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":null}", O) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":{}}", O) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":[\"x\"]}", O) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":[[]]}", O) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":\"x\",\"instructions\":5}", O)
          == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":\"x\",\"instructions\":[]}", O)
          == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":\"x\",\"instructions\":null}", O)
          == PA_OAI_OK);
    CHECK(t_status("{\"input\":\"x\",\"tools\":\"t\"}", O)
          == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":\"x\",\"tools\":{}}", O) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"input\":\"x\",\"tools\":[1]}", O) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":[],\"tools\":[\"f\"]}", O)
          == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":[],\"tools\":null}", O) == PA_OAI_OK);
    CHECK(t_status("{\"instructions\":\"x\"}", O) == PA_OAI_NO_TEXT);
    CHECK(t_status("{\"tools\":[]}", O) == PA_OAI_NO_TEXT);

    CHECK(t_status("{\"messages\":[],\"system\":5}", A) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":[],\"system\":{}}", A) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":[],\"system\":null}", A) == PA_OAI_OK);
    CHECK(t_status("{\"messages\":5}", A) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"messages\":[1]}", A) == PA_OAI_BAD_TYPE);
    CHECK(t_status("{\"system\":\"s\"}", A) == PA_OAI_NO_TEXT);
    CHECK(t_status("{\"prompt\":\"p\"}", A) == PA_OAI_NO_TEXT);
    CHECK(t_status("{\"input\":\"p\"}", A) == PA_OAI_NO_TEXT);
    CHECK(t_status("{\"messages\":[],\"system\":\"s\",\"x\":tru}", A)
          == PA_OAI_NOT_JSON);

    /* deep nesting in a tool's parameters and in an input item */

    body = malloc(4096);

    for (i = 0; i < 2; i++) {
        n = (size_t) sprintf(body, i ? "{\"input\":[{\"content\":"
                                     : "{\"input\":\"x\",\"tools\":[{"
                                       "\"parameters\":");
        memset(body + n, '[', 100);
        memset(body + n + 100, ']', 100);
        n += 200;
        n += (size_t) sprintf(body + n, i ? "}]}" : "}]}");
        body[n] = '\0';
        CHECK(t_status(body, O) == PA_OAI_TOO_DEEP);
    }

    free(body);
}


/*
 * the memory bound: however many empty items or however long the text
 * in a section that waits, no more than "length" characters and 1 MiB of
 * separators are kept
 */

static void
test_memory(void)
{
    char        *body, *p;
    size_t       i, n, len;
    t_key_t      k, k2;

    static const char  *items[] = {
        "{},", "{\"role\":\"\",\"content\":\"\"},", "\"\",",
        "{\"type\":\"function_call\",\"name\":\"\",\"arguments\":\"\"},"
    };

    len = 64 + 100000 * 60;
    body = malloc(len + 8 * 1024 * 1024);

    for (i = 0; i < 4; i++) {
        p = body;
        p += sprintf(p, i == 2 ? "{\"system\":[],\"messages\":["
                               : "{\"model\":\"m\",\"input\":[");

        for (n = 0; n < 100000; n++) {
            p += sprintf(p, "%s", i == 2 ? "{\"role\":\"user\","
                                           "\"content\":[{\"text\":\"\"}]},"
                                         : items[i]);
        }

        p += sprintf(p, "{\"role\":\"u\",\"content\":\"end\"}],"
                        "\"instructions\":\"s\",\"tools\":[]}");
        n = p - body;

        t_key(body, n, (i == 2) ? A : O, 4096, 65536, &k);
        CHECK_MSG(k.res.status == PA_OAI_OK, "%zu: %s", i,
                  pa_oai_status_name(k.res.status));
        CHECK_MSG(k.bytes < 1100 * 1024 + 4096 * 8, "%zu: %zu bytes", i,
                  k.bytes);
    }

    /* 8 MB of text before the instructions: "length" characters kept */

    p = body;
    p += sprintf(p, "{\"input\":[{\"role\":\"user\",\"content\":\"");
    memset(p, 'a', 8 * 1024 * 1024);
    p += 8 * 1024 * 1024;
    p += sprintf(p, "\"}],\"tools\":[{\"name\":\"t\"}],\"instructions\":"
                    "\"s\"}");
    n = p - body;

    t_key(body, n, O, 4096, 65536, &k);
    CHECK(k.res.status == PA_OAI_OK && k.res.chars == 4096);
    CHECK_MSG(k.bytes < 4 * 4096 + 16384, "%zu bytes", k.bytes);
    CHECK(k.len > 20 && memcmp(k.text, "system\x1es\x1ft\x1f\x1duser\x1e"
                               "aaa", 20) == 0);

    t_key(body, n, O, 65536, 65536, &k2);
    CHECK(k2.res.status == PA_OAI_OK && k2.res.chars == 65536);
    CHECK_MSG(k2.bytes < 4 * 65536 + 16384, "%zu bytes", k2.bytes);

    free(body);
}


/*
 * a chat or completions body without tools keys as before: the text of
 * its messages in order, hashed as one
 */

static void
test_chat_unchanged(void)
{
    t_key_t  k;

    static const char  body[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
        "{\"content\":\"b\",\"role\":\"assistant\"}],\"instructions\":\"x\","
        "\"model\":\"m\"}";

    t_key(body, sizeof(body) - 1, O, 4096, 1, &k);
    CHECK(k.res.status == PA_OAI_OK && k.res.api == PA_OAI_API_CHAT);
    CHECK(!k.res.has_system && !k.res.has_tools);
    CHECK(k.len == 19 && memcmp(k.text, "user\x1e" "a\x1f" "assistant\x1e"
                                "b\x1f", 19) == 0);

    /* instructions before the messages: dropped too */

    CHECK(T_TEXT_IS("{\"instructions\":\"x\",\"messages\":[{\"role\":\"u\","
                    "\"content\":\"a\"}]}", O, "u\x1e" "a\x1f"));
}


static void
t_key(const char *body, size_t len, pa_oai_dialect_e d, size_t length,
    size_t chunk, t_key_t *k)
{
    size_t        pos, n;
    t_mem_t       m;
    pa_oai_t     *x;
    pa_alloc_t    a;

    memset(k, 0, sizeof(t_key_t));
    memset(&m, 0, sizeof(t_mem_t));

    a.alloc = t_alloc;
    a.ctx = &m;

    t_buf_len = 0;

    x = pa_oai_create(&a, length, 0);
    if (x == NULL) {
        k->rc = PA_OAI_FALLBACK;
        k->res.status = PA_OAI_NOMEM;
        t_free(&m);
        return;
    }

    pa_oai_text_hook(x, t_hook, NULL);
    pa_oai_dialect(x, d);

    k->rc = PA_OAI_MORE;

    for (pos = 0; pos < len && k->rc == PA_OAI_MORE; pos += n) {
        n = (len - pos < chunk) ? len - pos : chunk;
        k->rc = pa_oai_feed(x, (const unsigned char *) body + pos, n);
    }

    pa_oai_finish(x, &k->res);

    if (k->rc == PA_OAI_MORE) {
        k->rc = (k->res.status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;
    }

    k->bytes = m.bytes;
    k->text = t_buf;
    k->len = t_buf_len;

    t_free(&m);
}


static uint64_t
t_hash(const char *body, pa_oai_dialect_e d, size_t length)
{
    t_key_t  k;

    t_key(body, strlen(body), d, length, strlen(body), &k);

    CHECK_MSG(k.res.status == PA_OAI_OK, "not ok (%s): %s",
              pa_oai_status_name(k.res.status), body);

    return k.res.hash;
}


static int
t_text_is(const char *body, pa_oai_dialect_e d, const char *text, size_t n)
{
    t_key_t  k;

    t_key(body, strlen(body), d, 4096, 5, &k);

    if (k.res.status != PA_OAI_OK || k.len != n
        || memcmp(k.text, text, n) != 0)
    {
        fprintf(stderr, "%s: %s, text %zu \"%.*s\"\n", body,
                pa_oai_status_name(k.res.status), k.len, (int) k.len,
                k.text);
        return 0;
    }

    return 1;
}


static pa_oai_status_e
t_status(const char *body, pa_oai_dialect_e d)
{
    t_key_t  k;

    t_key(body, strlen(body), d, 1024, 3, &k);

    return k.res.status;
}


static void
t_hook(void *ctx, const unsigned char *p, size_t n, size_t chars)
{
    if (t_buf_len + n <= T_TEXT_MAX) {
        memcpy(t_buf + t_buf_len, p, n);
        t_buf_len += n;
    }
}


static void *
t_alloc(void *ctx, size_t size)
{
    t_mem_t  *m = ctx;
    void     *p;

    if (m->n == sizeof(m->blocks) / sizeof(m->blocks[0])) {
        return NULL;
    }

    p = malloc(size);
    if (p == NULL) {
        return NULL;
    }

    m->blocks[m->n++] = p;
    m->bytes += size;

    return p;
}


static void
t_free(t_mem_t *m)
{
    size_t  i;

    for (i = 0; i < m->n; i++) {
        free(m->blocks[i]);
    }

    m->n = 0;
}
