
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * pa_respid_*(): the id of a stored response in vLLM-shaped JSON and
 * streamed answers, read whole and cut at every byte; ids over the
 * bound, escaped or not strings are not taken; "id" keys elsewhere
 * (an output item's, a string's text) are not the response's.  The path
 * of GET/DELETE/cancel.  pa_store_*(): the table of (id, server): found,
 * moved, the oldest forgotten first, its chains intact after many
 * evictions.
 */


#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "arena.h"
#include "pa_openai.h"
#include "pa_respid.h"
#include "pa_store.h"


/* vLLM 0.12, POST /v1/responses, "store": true */
static const char  vllm_json[] =
    "{\"id\":\"resp_0a1b2c3d4e5f60718293a4b5c6d7e8f9\",\"created_at\":1,"
    "\"instructions\":null,\"metadata\":null,\"model\":\"m\","
    "\"object\":\"response\",\"output\":[{\"id\":\"msg_1\",\"content\":"
    "[{\"annotations\":[],\"text\":\"hi\",\"type\":\"output_text\"}],"
    "\"role\":\"assistant\",\"status\":\"completed\",\"type\":"
    "\"message\"}],\"status\":\"completed\"}";

/* the same with "id" last, after an output whose items have ids */
static const char  id_last[] =
    "{ \"output\" : [ { \"id\" : \"msg_1\", \"text\" : \"\\\"id\\\": "
    "\\\"fake\\\"\" } ], \"nested\": {\"id\": \"inner\"},\r\n"
    "  \"id\" : \"resp_last\" }";

/* a stream: response.created (its "type" last, as pydantic writes it) */
static const char  vllm_sse[] =
    ": a comment\n"
    "event: response.created\n"
    "data: {\"response\":{\"background\":false,\"id\":\"resp_stream1\","
    "\"output\":[]},\"sequence_number\":0,\"type\":\"response.created\"}\n"
    "\n"
    "event: response.in_progress\n"
    "data: {\"response\":{\"id\":\"resp_stream1\"},\"sequence_number\":1,"
    "\"type\":\"response.in_progress\"}\n\n"
    "data: [DONE]\n\n";

/* CRLF lines, an item event with an "id" before the response's */
static const char  crlf_sse[] =
    "event: response.output_item.added\r\n"
    "data:{\"item\":{\"id\":\"msg_9\"},\"type\":\"x\"}\r\n"
    "\r\n"
    "event: response.created\r\n"
    "data: {\"type\":\"response.created\",\r\n"
    "data:  \"response\" : { \"object\":\"response\", "
    "\"id\":\"resp_crlf\" }}\r\n"
    "\r\n";


static pa_respid_rc_e
t_id(const char *s, size_t len, size_t cut, pa_respid_t *r)
{
    size_t          at, n;
    pa_respid_rc_e  rc;

    pa_respid_init(r);
    rc = PA_RESPID_MORE;

    for (at = 0; at < len && rc == PA_RESPID_MORE; at += n) {
        n = (len - at < cut) ? len - at : cut;
        rc = pa_respid_feed(r, (const unsigned char *) s + at, n);
    }

    return pa_respid_finish(r);
}


static int
t_is(const char *s, size_t cut, const char *want)
{
    pa_respid_t     r;
    pa_respid_rc_e  rc;

    rc = t_id(s, strlen(s), cut, &r);

    if (want == NULL) {
        return rc != PA_RESPID_FOUND;
    }

    return rc == PA_RESPID_FOUND && r.len == strlen(want)
           && memcmp(r.id, want, r.len) == 0;
}


static void
t_every_cut(const char *s, const char *want)
{
    size_t  cut, len, fails;

    len = strlen(s);
    fails = 0;

    for (cut = 1; cut <= len; cut++) {
        fails += !t_is(s, cut, want);
    }

    CHECK_MSG(fails == 0, "%zu cuts of \"%.40s...\" wrong", fails, s);
}


static void
t_respid(void)
{
    pa_respid_t     r;
    char           *big;
    size_t          i;
    pa_respid_rc_e  rc;
    char            buf[256];

    t_every_cut(vllm_json, "resp_0a1b2c3d4e5f60718293a4b5c6d7e8f9");
    t_every_cut(id_last, "resp_last");
    t_every_cut(vllm_sse, "resp_stream1");
    t_every_cut(crlf_sse, "resp_crlf");

    /* no id, an id of another type, an empty one: not taken */

    CHECK(t_is("{\"object\":\"response\"}", 5, NULL));
    CHECK(t_is("{\"id\":12345,\"x\":1}", 3, NULL));
    CHECK(t_is("{\"id\":null}", 3, NULL));
    CHECK(t_is("{\"id\":\"\"}", 3, NULL));
    CHECK(t_is("[{\"id\":\"resp_in_array\"}]", 3, NULL));
    CHECK(t_is("", 1, NULL));
    CHECK(t_is("garbage \x01\x02 {{{{", 2, NULL));

    /* a top-level "id" in a stream's event is no response's */

    CHECK(t_is("data: {\"id\":\"chatcmpl-1\"}\n\n", 4, NULL));

    /* escaped, not ASCII, a space: BAD */

    rc = t_id("{\"id\":\"resp_\\u0041\"}", 21, 64, &r);
    CHECK(rc == PA_RESPID_BAD);
    rc = t_id("{\"id\":\"resp_\xc3\xa9\"}", 16, 64, &r);
    CHECK(rc == PA_RESPID_BAD);
    rc = t_id("{\"id\":\"resp a\"}", 15, 64, &r);
    CHECK(rc == PA_RESPID_BAD);

    /* the bound: 64 bytes taken, 65 not */

    memset(buf, 'a', sizeof(buf));
    memcpy(buf, "{\"id\":\"", 7);
    memcpy(buf + 7 + 64, "\"}", 3);
    rc = t_id(buf, strlen(buf), 5, &r);
    CHECK(rc == PA_RESPID_FOUND && r.len == 64);

    memset(buf, 'a', sizeof(buf));
    memcpy(buf, "{\"id\":\"", 7);
    memcpy(buf + 7 + 65, "\"}", 3);
    rc = t_id(buf, strlen(buf), 5, &r);
    CHECK(rc == PA_RESPID_BAD);

    /* a huge id: BAD, nothing kept past the bound */

    big = malloc(1024 * 1024 + 16);
    if (big == NULL) {
        CHECK(big != NULL);
        return;
    }

    memcpy(big, "{\"id\":\"", 7);
    memset(big + 7, 'x', 1024 * 1024);
    memcpy(big + 7 + 1024 * 1024, "\"}", 3);
    rc = t_id(big, strlen(big), 4096, &r);
    CHECK(rc == PA_RESPID_BAD && r.len == PA_RESPID_MAX);
    free(big);

    /* deep nesting is a count: the id after it is found */

    big = malloc(2 * 100000 + 64);
    if (big == NULL) {
        CHECK(big != NULL);
        return;
    }

    i = 0;
    memcpy(big, "{\"x\":", 5);
    i = 5;
    memset(big + i, '[', 100000);
    i += 100000;
    memset(big + i, ']', 100000);
    i += 100000;
    memcpy(big + i, ",\"id\":\"resp_deep\"}", 19);
    CHECK(t_is(big, 777, "resp_deep"));
    free(big);

    /* a stream without the id stops after PA_RESPID_EVENTS events */

    pa_respid_init(&r);

    for (i = 0; i < PA_RESPID_EVENTS; i++) {
        rc = pa_respid_feed(&r, (const unsigned char *) "data: {}\n\n", 10);
    }

    CHECK(rc == PA_RESPID_NONE);

    /* after FOUND, nothing more is read */

    pa_respid_init(&r);
    rc = pa_respid_feed(&r, (const unsigned char *) "{\"id\":\"a\",", 10);
    CHECK(rc == PA_RESPID_FOUND);
    rc = pa_respid_feed(&r, (const unsigned char *) "\"id\":\"b\"}", 9);
    CHECK(rc == PA_RESPID_FOUND && r.len == 1 && r.id[0] == 'a');
}


static void
t_path(void)
{
    size_t                len;
    const unsigned char  *id;

#define T_PATH(s, want)                                                       \
    do {                                                                      \
        int  ok_;                                                             \
        ok_ = pa_respid_path((const unsigned char *) s, sizeof(s) - 1,        \
                             &id, &len);                                      \
        CHECK_MSG(want == NULL ? !ok_                                         \
                  : (ok_ && len == strlen(want ? want : "")                   \
                     && memcmp(id, want ? want : "", len) == 0), "%s", s);    \
    } while (0)

    T_PATH("/v1/responses/resp_1", "resp_1");
    T_PATH("/v1/responses/resp_1/cancel", "resp_1");
    T_PATH("/v1/responses/resp_1/input_items", "resp_1");
    T_PATH("/a/v1/responses/resp_2", "resp_2");
    T_PATH("/v1/responses", (const char *) NULL);
    T_PATH("/v1/responses/", (const char *) NULL);
    T_PATH("/v1/responses//cancel", (const char *) NULL);
    T_PATH("/v1/chat/completions", (const char *) NULL);
    T_PATH("/v1/responses/a b", (const char *) NULL);
    T_PATH("/v1/responses/"
           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
           (const char *) NULL);

#undef T_PATH
}


static void
t_store(void)
{
    void        *mem;
    uint32_t     i, cap, lost;
    uint64_t     id;
    pa_store_t  *t;

    CHECK(pa_store_init(&lost, 15) == NULL);

    cap = 100;
    mem = malloc(pa_store_size(cap));
    if (mem == NULL) {
        CHECK(mem != NULL);
        return;
    }

    t = pa_store_init(mem, cap);
    CHECK(t != NULL && t->capacity == 100 && t->mask == 127);

    CHECK(pa_store_hash((const unsigned char *) "", 0) != 0);

    id = pa_store_hash((const unsigned char *) "resp_1", 6);

    CHECK(pa_store_get(t, id) == 0);
    CHECK(pa_store_put(t, id, 7) == 0);
    CHECK(pa_store_get(t, id) == 7);
    CHECK(t->size == 1);

    /* a known id is moved, not added */

    CHECK(pa_store_put(t, id, 9) == 0);
    CHECK(pa_store_get(t, id) == 9 && t->size == 1);

    /* 0 is no id and no server */

    CHECK(pa_store_put(t, 0, 1) == 0 && pa_store_put(t, 5, 0) == 0);
    CHECK(t->size == 1);

    /* fill: the first forgotten first */

    for (i = 2; i <= cap; i++) {
        CHECK(pa_store_put(t, i * 1000003ULL, i) == 0);
    }

    CHECK(t->size == cap && t->evicted == 0);
    CHECK(pa_store_put(t, 42ULL << 20, 42) == 1);
    CHECK(pa_store_get(t, id) == 0);
    CHECK(pa_store_get(t, 2 * 1000003ULL) == 2);
    CHECK(pa_store_get(t, 42ULL << 20) == 42);
    CHECK(t->size == cap && t->evicted == 1);

    /* many rounds of colliding ids: the chains stay whole */

    lost = 0;

    for (i = 0; i < 100000; i++) {
        (void) pa_store_put(t, ((uint64_t) i << 7) | 3, i + 1);

        if (i >= cap && pa_store_get(t, ((uint64_t) (i - cap + 1) << 7) | 3)
                        != i - cap + 2)
        {
            lost++;
        }

        if (i >= cap && pa_store_get(t, ((uint64_t) (i - cap) << 7) | 3)) {
            lost++;
        }
    }

    CHECK_MSG(lost == 0, "%u wrong", lost);
    CHECK(t->size == cap);

    free(mem);
}


/* the key's reader gives a Responses body's previous_response_id */

static int
t_prev(const char *body, size_t length, const char *want)
{
    int              ok;
    size_t           i;
    pa_oai_t        *x;
    pa_alloc_t       alloc;
    ta_arena_t       arena = { NULL, -1, 0 };
    pa_oai_result_t  res;

    alloc.alloc = ta_alloc;
    alloc.ctx = &arena;

    x = pa_oai_create(&alloc, length, 0);
    if (x == NULL) {
        return 0;
    }

    /* a byte at a time: the id split everywhere */

    for (i = 0; body[i]; i++) {
        if (pa_oai_feed(x, (const unsigned char *) body + i, 1)
            != PA_OAI_MORE)
        {
            break;
        }
    }

    pa_oai_finish(x, &res);

    ok = res.status == PA_OAI_OK
         && (want ? (res.prev_len == strlen(want)
                     && memcmp(res.prev, want, res.prev_len) == 0)
                  : res.prev_len == 0);

    ta_reset(&arena);

    return ok;
}


static void
t_prev_ids(void)
{
    CHECK(t_prev("{\"model\":\"m\",\"previous_response_id\":\"resp_1\","
                 "\"input\":\"hello there\"}", 4096, "resp_1"));

    /* after an input that completes the key (length 4): still read */

    CHECK(t_prev("{\"model\":\"m\",\"input\":\"hello there\","
                 "\"store\":true,\"previous_response_id\":\"resp_2\"}", 4,
                 "resp_2"));

    /* null, a number, too long, not ASCII: none */

    CHECK(t_prev("{\"input\":\"hi\",\"previous_response_id\":null}", 4096,
                 NULL));
    CHECK(t_prev("{\"input\":\"hi\",\"previous_response_id\":7}", 4096,
                 NULL));
    CHECK(t_prev("{\"input\":\"hi\",\"previous_response_id\":\""
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                 "aaaaaaaaaaaa\"}", 4096, NULL));
    CHECK(t_prev("{\"input\":\"hi\",\"previous_response_id\":\"r\u00e9\"}",
                 4096, NULL));

    /* a nested one is not it; a chat body has none */

    CHECK(t_prev("{\"input\":[{\"role\":\"user\",\"content\":\"x\","
                 "\"previous_response_id\":\"resp_3\"}]}", 4096, NULL));
    CHECK(t_prev("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 4096, NULL));
}


int
main(void)
{
    t_respid();
    t_prev_ids();
    t_path();
    t_store();

    return UNIT_DONE();
}
