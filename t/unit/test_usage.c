
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * pa_usage_*(): the cached_tokens of an engine's answer (vLLM's and
 * SGLang's JSON answers and the last event of a stream), read whole and
 * in every cut; values that are no plain integer are not taken; a key
 * inside a string's text is not one.
 */


#include <string.h>

#include "unit.h"
#include "pa_usage.h"


/* vLLM 0.9, /v1/chat/completions, --enable-prompt-tokens-details */
static const char  vllm_json[] =
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,"
    "\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
    "\"assistant\",\"content\":\"say \\\"cached_tokens\\\": 99\","
    "\"tool_calls\":[]},\"logprobs\":null,\"finish_reason\":\"stop\"}],"
    "\"usage\":{\"prompt_tokens\":2048,\"total_tokens\":2058,"
    "\"completion_tokens\":10,\"prompt_tokens_details\":"
    "{\"cached_tokens\":1536}},\"prompt_logprobs\":null}";

/* SGLang, a stream with stream_options.include_usage: the last events */
static const char  sglang_sse[] =
    "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"choices\":"
    "[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n"
    "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"choices\":"
    "[],\"usage\":{\"prompt_tokens\":900,\"total_tokens\":910,"
    "\"completion_tokens\":10,\"prompt_tokens_details\":{"
    "\"cached_tokens\" : \r\n 768 }}}\n\n"
    "data: [DONE]\n\n";


static int
t_read(const char *s, size_t len, size_t cut, uint64_t *tokens,
    pa_usage_t *u)
{
    size_t  at, n;

    pa_usage_init(u);

    for (at = 0; at < len; at += n) {
        n = (len - at < cut) ? len - at : cut;
        pa_usage_feed(u, (const unsigned char *) s + at, n);
    }

    return pa_usage_finish(u, tokens);
}


static void
test_engines(void)
{
    size_t      cut;
    uint64_t    t;
    pa_usage_t  u;

    for (cut = 1; cut <= sizeof(vllm_json); cut++) {
        t = 0;
        CHECK_MSG(t_read(vllm_json, sizeof(vllm_json) - 1, cut, &t, &u) == 1
                  && t == 1536 && u.seen == 1 && u.rejected == 0,
                  "vllm, cut %zu: %llu", cut, (unsigned long long) t);
    }

    for (cut = 1; cut <= sizeof(sglang_sse); cut++) {
        t = 0;
        CHECK_MSG(t_read(sglang_sse, sizeof(sglang_sse) - 1, cut, &t, &u) == 1
                  && t == 768 && u.seen == 1,
                  "sglang, cut %zu: %llu", cut, (unsigned long long) t);
    }
}


static void
test_values(void)
{
    uint64_t    t;
    pa_usage_t  u;

    static const struct {
        const char  *s;
        int          rc;
        uint64_t     tokens;
    } cases[] = {
        { "{\"cached_tokens\":0}", 1, 0 },
        { "{\"cached_tokens\":12,\"x\":{\"cached_tokens\":34}}", 1, 34 },
        { "{\"cached_tokens\":null}", 0, 0 },
        { "{\"cached_tokens\":-3}", 0, 0 },
        { "{\"cached_tokens\":1.5}", 0, 0 },
        { "{\"cached_tokens\":2e3}", 0, 0 },
        { "{\"cached_tokens\":\"7\"}", 0, 0 },
        { "{\"cached_tokens\":99999999999999999999999}", 0, 0 },
        { "{\"cached_tokens\":1099511627776}", 1, 1099511627776ULL },
        { "{\"cached_tokens\":1099511627777}", 0, 0 },
        { "{\"prompt_tokens\":5}", 0, 0 },
        { "{\"cached_tokens_x\":5}", 0, 0 },
        { "{\"xcached_tokens\":5}", 0, 0 },
        { "{\"\"cached_tokens\":5}", 1, 5 },
        { "\"cached_tokens\" 5", 0, 0 },
        { "{\"text\":\"a \\\"cached_tokens\\\":5\"}", 0, 0 },
        { "{\"cached_tokens\":77", 1, 77 },
        { "", 0, 0 },
    };

    size_t  i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        t = 0;
        CHECK_MSG(t_read(cases[i].s, strlen(cases[i].s), 1, &t, &u)
                  == cases[i].rc && t == cases[i].tokens,
                  "case %zu \"%s\": %llu", i, cases[i].s,
                  (unsigned long long) t);
    }

    /* a taken value stays when a later one is not taken */

    CHECK(t_read("{\"cached_tokens\":8}{\"cached_tokens\":null}", 40, 3, &t,
                 &u) == 1 && t == 8 && u.seen == 1 && u.rejected == 1);
}


int
main(void)
{
    test_engines();
    test_values();

    return UNIT_DONE();
}
