
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The pieces of the OpenAI key's text that the rules (src/pa_openai_rules.c)
 * meet as they read: a top-level section (its place in the render order:
 * the system prompt, the tools, the conversation) begun and ended, the
 * API the body is of, a message and its role, a piece of content, a
 * Responses item's or a tool's "type", and a JSON text (a tool's
 * parameters, a tool_use's input) written as text.  Plain C, no nginx
 * headers.
 */


#include <string.h>

#include "pa_openai_int.h"


static int pa_oai_buf_is(pa_oai_t *x, const char *s);


/* a top-level key: the section its text goes to, which keys count in it */

void
pa_oai_top_key(pa_oai_t *x, pa_oai_frame_t *f)
{
    if (f->slot == PA_S_INPUT || f->slot == PA_S_INSTR
        || f->slot == PA_S_SYSTEM || f->slot == PA_S_TOOLS)
    {
        x->newer = 1;
    }

    switch (f->slot) {

    case PA_S_MESSAGES:
        x->sec = PA_SEC_CONV;
        x->shape = (x->dialect == PA_OAI_ANTHROPIC) ? PA_SH_ANTH
                                                    : PA_SH_CHAT;
        break;

    case PA_S_PROMPT:
        x->sec = PA_SEC_CONV;
        x->shape = PA_SH_CHAT;
        break;

    case PA_S_INPUT:
        x->sec = PA_SEC_CONV;
        x->shape = PA_SH_RESP;
        break;

    case PA_S_INSTR:
    case PA_S_SYSTEM:

        /*
         * the first of them counts; "instructions" only in a Responses
         * body (it is not known yet if its "input" is to come)
         */

        if ((x->closed & (1 << PA_SEC_SYSTEM))
            || (f->slot == PA_S_INSTR && x->api != PA_OAI_API_NONE
                && x->api != PA_OAI_API_RESPONSES))
        {
            f->slot = PA_S_SKIP;
            break;
        }

        x->sec = PA_SEC_SYSTEM;
        x->shape = PA_SH_ANTH;
        break;

    case PA_S_TOOLS:
        if ((x->closed & (1 << PA_SEC_TOOLS))
            || x->api == PA_OAI_API_COMPLETIONS)
        {
            f->slot = PA_S_SKIP;
            break;
        }

        x->sec = PA_SEC_TOOLS;
        x->shape = PA_SH_TOOLS;
        break;

    default:
        break;
    }
}


/* a top-level value ends: is its section complete? */

void
pa_oai_top_end(pa_oai_t *x, pa_oai_slot_e slot)
{
    switch (slot) {

    case PA_S_INSTR:
    case PA_S_SYSTEM:
        pa_oai_sec_close(x, PA_SEC_SYSTEM);
        break;

    case PA_S_TOOLS:
        pa_oai_sec_close(x, PA_SEC_TOOLS);
        break;

    case PA_S_MESSAGES:
    case PA_S_INPUT:
    case PA_S_PROMPT:
        pa_oai_sec_close(x, PA_SEC_FIRST);
        break;

    default:
        break;
    }
}


/*
 * the body's API, by its first "messages", "prompt" or "input": only a
 * Responses body has "instructions", only chat and Responses "tools":
 * what was kept of them in others is dropped
 */

void
pa_oai_set_api(pa_oai_t *x, pa_oai_api_e api)
{
    if (x->api != PA_OAI_API_NONE) {
        return;
    }

    x->api = (unsigned char) api;
    x->wait_api = 0;

    if (api == PA_OAI_API_CHAT || api == PA_OAI_API_COMPLETIONS) {
        pa_oai_sec_drop(x, PA_SEC_SYSTEM);
        x->has_system = 0;
    }

    /* a prompt is the whole text: no tools are rendered before it */

    if (api == PA_OAI_API_COMPLETIONS) {
        pa_oai_sec_drop(x, PA_SEC_TOOLS);
        x->has_tools = 0;
    }

    pa_oai_advance(x);
}


void
pa_oai_message_open(pa_oai_t *x)
{
    x->role_seen = 0;
    x->role_len = 0;
    x->pend_len = 0;
    x->pend_chars = 0;
    x->pend_last = 0;

    /*
     * the conversation's first message: its text is kept apart until its
     * role tells if it is rendered before the tools
     */

    if (!(x->closed & (1 << PA_SEC_FIRST))) {
        x->first = 1;
        x->sec = PA_SEC_FIRST;
    }
}


void
pa_oai_message_end(pa_oai_t *x)
{
    if (!x->role_seen) {

        /* no role: an empty one */

        x->role_seen = 1;

        pa_oai_sep(x, PA_OAI_SEP_ROLE, 1);
        pa_oai_flush(x);
    }

    if (!x->first) {
        return;
    }

    x->first = 0;

    if (!((x->role_len == 6 && memcmp(x->role, "system", 6) == 0)
          || (x->role_len == 9 && memcmp(x->role, "developer", 9) == 0)))
    {
        pa_oai_sec_move(x, PA_SEC_FIRST, PA_SEC_CONV);
    }

    pa_oai_sec_close(x, PA_SEC_FIRST);

    x->sec = PA_SEC_CONV;
}


/*
 * a role the body does not spell: "system" before "instructions", "user"
 * before a string "input", "assistant" for a function call
 */

void
pa_oai_role(pa_oai_t *x, const char *role, size_t len)
{
    x->role_seen = 1;
    x->val = PA_V_NONE;

    if (pa_oai_used(x) < x->length) {
        x->sink = PA_K_TEXT;

    } else {
        x->sink = x->count_past ? PA_K_PAST : PA_K_SKIP;
    }

    pa_oai_data_text(x, (const unsigned char *) role, len, 1);

    x->sink = PA_K_SKIP;

    pa_oai_sep(x, PA_OAI_SEP_ROLE, 1);
    pa_oai_flush(x);
}


/* a piece of content begins: text, or kept until its message's role */

void
pa_oai_piece(pa_oai_t *x)
{
    if (x->role_seen) {
        x->pieces++;
        x->sink = PA_K_TEXT;
        x->val = PA_V_PIECE;

    } else if (pa_oai_used(x) + x->pend_chars < x->length) {
        pa_oai_pend_open(x);

    } else if (x->count_past) {
        x->sink = PA_K_PAST;
    }
}


/* a Responses item's "type": the role of one that has none */

void
pa_oai_item_type(pa_oai_t *x)
{
    if (x->role_seen) {
        return;
    }

    if (pa_oai_buf_is(x, "function_call") || pa_oai_buf_is(x, "reasoning")) {
        pa_oai_role(x, "assistant", 9);

    } else if (pa_oai_buf_is(x, "function_call_output")) {
        pa_oai_role(x, "tool", 4);
    }
}


/*
 * a tool's "type": text unless a function's (chat, Responses) or a
 * custom tool's (Anthropic), so that the same function in each API's
 * shape is the same text; a type of over 64 bytes is not
 */

void
pa_oai_tool_type(pa_oai_t *x)
{
    if (x->buf_len > PA_OAI_BUF || pa_oai_buf_is(x, "function")
        || pa_oai_buf_is(x, "custom"))
    {
        return;
    }

    x->val = PA_V_NONE;

    if (pa_oai_used(x) < x->length) {
        x->pieces++;
        x->sink = PA_K_TEXT;

    } else {
        x->sink = x->count_past ? PA_K_PAST : PA_K_SKIP;
    }

    pa_oai_data_text(x, x->buf, x->buf_len, 0);

    x->sink = PA_K_SKIP;

    pa_oai_sep(x, PA_OAI_SEP_PIECE, 1);
}


static int
pa_oai_buf_is(pa_oai_t *x, const char *s)
{
    size_t  n;

    n = strlen(s);

    return x->buf_len == n && memcmp(x->buf, s, n) == 0;
}


/*
 * a value begins in a JSON text (a tool's "parameters", a tool_use's
 * "input"), which is a piece of text: the JSON without white space, in
 * the body's order, strings decoded and in quotes
 */

void
pa_oai_json_value(pa_oai_t *x)
{
    pa_oai_frame_t  *f;

    f = &x->frames[x->depth - 1];

    if (f->kind == PA_F_JSON) {
        if (f->array) {
            if (f->count) {
                pa_oai_json_put(x, ",", 1);
            }

            f->count = 1;
        }

        return;
    }

    /* the JSON text begins */

    x->sink = PA_K_SKIP;
    x->val = PA_V_NONE;

    pa_oai_piece(x);

    if (x->sink == PA_K_TEXT && pa_oai_used(x) >= x->length) {
        x->sink = x->count_past ? PA_K_PAST : PA_K_SKIP;
    }

    x->json_sink = x->sink;
    x->json_val = x->val;

    x->sink = PA_K_SKIP;
    x->val = PA_V_NONE;
}


void
pa_oai_json_end(pa_oai_t *x)
{
    if (x->json_val == PA_V_PIECE) {
        pa_oai_sep(x, PA_OAI_SEP_PIECE, 1);

    } else if (x->json_val == PA_V_PEND) {
        pa_oai_pend_close(x);
    }

    x->json_sink = PA_K_SKIP;
    x->json_val = PA_V_NONE;
}


/* the punctuation of a JSON text goes where its strings go */

void
pa_oai_json_put(pa_oai_t *x, const char *s, size_t n)
{
    unsigned char  sink, val;

    if (x->json_sink == PA_K_SKIP) {
        return;
    }

    sink = x->sink;
    val = x->val;

    x->sink = x->json_sink;
    x->val = PA_V_NONE;

    pa_oai_data_text(x, (const unsigned char *) s, n, 1);

    x->json_sink = x->sink;
    x->sink = sink;
    x->val = val;
}
