
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The rules of the OpenAI key (src/pa_openai.c tells what the key is):
 * what the scanner (src/pa_json.c) reads, a container opened or closed,
 * a value begun or ended, an object key, is placed here in the body's
 * grammar (a message, its role and content, "prompt", "model",
 * "cache_salt", "prompt_cache_key"; Responses' "instructions" and
 * "input" items; Anthropic's "system" and blocks; the tools) and decides
 * where the value's bytes go and in which section of the key's text
 * (src/pa_openai_text.c); what a section, a message, an item, a tool
 * and a JSON text do as they begin and end is in src/pa_openai_items.c.
 */


#include <string.h>

#include "pa_openai_int.h"


static void pa_oai_next(pa_oai_t *x);
static pa_oai_slot_e pa_oai_key_slot(pa_oai_t *x, pa_oai_frame_e kind,
    const unsigned char *s, size_t n);


/* the object keys the key reads, by the object they are in */

#define pa_oai_name(kind, shapes, lit, slot)                                  \
    { kind, shapes, sizeof(lit) - 1, lit, slot }

#define PA_SH_TOP   (PA_SH_OPENAI | PA_SH_ANTHROPIC)
#define PA_SH_MSG   (PA_SH_CHAT | PA_SH_RESP | PA_SH_ANTH)

static const struct {
    pa_oai_frame_e       kind;
    unsigned             shapes;    /* PA_SH_*: where the key counts */
    size_t               len;
    const char          *name;
    pa_oai_slot_e        slot;
} pa_oai_keys[] = {
    pa_oai_name(PA_F_TOP, PA_SH_TOP, "messages", PA_S_MESSAGES),
    pa_oai_name(PA_F_TOP, PA_SH_TOP, "model", PA_S_MODEL),
    pa_oai_name(PA_F_TOP, PA_SH_OPENAI, "prompt", PA_S_PROMPT),
    pa_oai_name(PA_F_TOP, PA_SH_TOP, "cache_salt", PA_S_SALT),
    pa_oai_name(PA_F_TOP, PA_SH_TOP, "prompt_cache_key", PA_S_PCK),
    pa_oai_name(PA_F_TOP, PA_SH_OPENAI, "previous_response_id", PA_S_PREV),
    pa_oai_name(PA_F_TOP, PA_SH_OPENAI, "input", PA_S_INPUT),
    pa_oai_name(PA_F_TOP, PA_SH_OPENAI, "instructions", PA_S_INSTR),
    pa_oai_name(PA_F_TOP, PA_SH_ANTHROPIC, "system", PA_S_SYSTEM),
    pa_oai_name(PA_F_TOP, PA_SH_TOP, "tools", PA_S_TOOLS),
    pa_oai_name(PA_F_MESSAGE, PA_SH_MSG, "role", PA_S_ROLE),
    pa_oai_name(PA_F_MESSAGE, PA_SH_MSG, "content", PA_S_CONTENT),
    pa_oai_name(PA_F_MESSAGE, PA_SH_CHAT, "tool_calls", PA_S_CALLS),
    pa_oai_name(PA_F_CALL, PA_SH_CHAT, "function", PA_S_CALL_FUNC),
    pa_oai_name(PA_F_CALL, PA_SH_CHAT, "name", PA_S_CONTENT),
    pa_oai_name(PA_F_CALL, PA_SH_CHAT, "arguments", PA_S_CONTENT),
    pa_oai_name(PA_F_ITEM, PA_SH_RESP, "role", PA_S_ROLE),
    pa_oai_name(PA_F_ITEM, PA_SH_RESP, "content", PA_S_CONTENT),
    pa_oai_name(PA_F_ITEM, PA_SH_RESP, "type", PA_S_ITEM_TYPE),
    pa_oai_name(PA_F_ITEM, PA_SH_RESP, "name", PA_S_CONTENT),
    pa_oai_name(PA_F_ITEM, PA_SH_RESP, "arguments", PA_S_CONTENT),
    pa_oai_name(PA_F_ITEM, PA_SH_RESP, "output", PA_S_CONTENT),
    pa_oai_name(PA_F_ITEM, PA_SH_RESP, "summary", PA_S_CONTENT),
    pa_oai_name(PA_F_PART, PA_SH_MSG, "text", PA_S_PART_TEXT),
    pa_oai_name(PA_F_PART, PA_SH_CHAT | PA_SH_RESP, "image_url",
                PA_S_IMAGE_URL),
    pa_oai_name(PA_F_PART, PA_SH_CHAT, "input_audio", PA_S_INPUT_AUDIO),
    pa_oai_name(PA_F_PART, PA_SH_RESP, "file_data", PA_S_PART_TEXT),
    pa_oai_name(PA_F_PART, PA_SH_ANTH, "source", PA_S_SOURCE),
    pa_oai_name(PA_F_PART, PA_SH_ANTH, "name", PA_S_PART_TEXT),
    pa_oai_name(PA_F_PART, PA_SH_ANTH, "input", PA_S_JSON),
    pa_oai_name(PA_F_PART, PA_SH_ANTH, "content", PA_S_CONTENT),
    pa_oai_name(PA_F_IMAGE_URL, PA_SH_CHAT | PA_SH_RESP, "url",
                PA_S_PART_TEXT),
    pa_oai_name(PA_F_INPUT_AUDIO, PA_SH_CHAT, "data", PA_S_PART_TEXT),
    pa_oai_name(PA_F_SOURCE, PA_SH_ANTH, "data", PA_S_PART_TEXT),
    pa_oai_name(PA_F_SOURCE, PA_SH_ANTH, "url", PA_S_PART_TEXT),
    pa_oai_name(PA_F_TOOL, PA_SH_TOOLS, "type", PA_S_TOOL_TYPE),
    pa_oai_name(PA_F_TOOL, PA_SH_TOOLS, "function", PA_S_TOOL_FUNC),
    pa_oai_name(PA_F_TOOL, PA_SH_TOOLS, "name", PA_S_PART_TEXT),
    pa_oai_name(PA_F_TOOL, PA_SH_TOOLS, "description", PA_S_PART_TEXT),
    pa_oai_name(PA_F_TOOL, PA_SH_TOOLS, "parameters", PA_S_JSON),
    pa_oai_name(PA_F_TOOL, PA_SH_TOOLS, "input_schema", PA_S_JSON)
};


/* "{" or "[": what the container is, by where it is */

void
pa_oai_open(pa_oai_t *x, pa_oai_type_e type)
{
    pa_oai_slot_e    slot;
    pa_oai_frame_e   kind;
    pa_oai_frame_t  *f;

    slot = (x->depth == 0) ? PA_S_ROOT : x->frames[x->depth - 1].slot;
    kind = PA_F_SKIP;

    switch (slot) {

    case PA_S_ROOT:
        if (type != PA_T_MAP) {
            pa_oai_fail(x, PA_OAI_NOT_OBJECT);
            return;
        }

        kind = PA_F_TOP;
        break;

    case PA_S_MESSAGES:
        if (type != PA_T_ARRAY) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        x->has_text = 1;
        pa_oai_set_api(x, (x->dialect == PA_OAI_ANTHROPIC)
                          ? PA_OAI_API_MESSAGES : PA_OAI_API_CHAT);
        kind = PA_F_MESSAGES;
        break;

    case PA_S_INPUT:
        if (type != PA_T_ARRAY) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        x->has_text = 1;
        pa_oai_set_api(x, PA_OAI_API_RESPONSES);
        kind = PA_F_INPUT;
        break;

    case PA_S_MESSAGE:
    case PA_S_ITEM:
        if (type != PA_T_MAP) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        pa_oai_message_open(x);
        kind = (slot == PA_S_ITEM) ? PA_F_ITEM : PA_F_MESSAGE;
        break;

    case PA_S_CONTENT:
        if (type == PA_T_ARRAY) {
            kind = PA_F_PARTS;
        }

        break;

    case PA_S_PART:
        if (type == PA_T_MAP) {
            kind = PA_F_PART;
        }

        break;

    case PA_S_IMAGE_URL:
        if (type == PA_T_MAP) {
            kind = PA_F_IMAGE_URL;
        }

        break;

    case PA_S_INPUT_AUDIO:
        if (type == PA_T_MAP) {
            kind = PA_F_INPUT_AUDIO;
        }

        break;

    case PA_S_SOURCE:
        if (type == PA_T_MAP) {
            kind = PA_F_SOURCE;
        }

        break;

    case PA_S_PROMPT:
        if (type != PA_T_ARRAY) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        x->has_text = 1;
        pa_oai_set_api(x, PA_OAI_API_COMPLETIONS);
        pa_oai_sec_close(x, PA_SEC_FIRST);
        kind = PA_F_PROMPT;
        break;

    case PA_S_PROMPT_ITEM:
        if (type != PA_T_ARRAY) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        kind = PA_F_TOKENS;
        break;

    case PA_S_TOKEN:
    case PA_S_INSTR:
        pa_oai_fail(x, PA_OAI_BAD_TYPE);
        return;

    case PA_S_TOOL:
        if (type != PA_T_MAP) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        x->has_tools = 1;
        kind = PA_F_TOOL;
        break;

    case PA_S_SYSTEM:

        /* Anthropic's "system": a string or text blocks */

        if (type != PA_T_ARRAY) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        x->has_system = 1;
        pa_oai_role(x, "system", 6);
        kind = PA_F_PARTS;
        break;

    case PA_S_TOOLS:
        if (type != PA_T_ARRAY) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        /* no role: a tool's name and description are text at once */

        x->role_seen = 1;
        kind = PA_F_TOOLS;
        break;

    case PA_S_TOOL_FUNC:
        if (type == PA_T_MAP) {
            kind = PA_F_TOOL;
        }

        break;

    /*
     * chat's "tool_calls": each function's name and arguments are the
     * assistant's text, as a Responses "function_call" item's are
     */

    case PA_S_CALLS:
        if (type == PA_T_ARRAY) {
            kind = PA_F_CALLS;
        }

        break;

    case PA_S_CALL:
    case PA_S_CALL_FUNC:
        if (type == PA_T_MAP) {
            kind = PA_F_CALL;
        }

        break;

    case PA_S_JSON:
        pa_oai_json_value(x);
        pa_oai_json_put(x, (type == PA_T_MAP) ? "{" : "[", 1);
        kind = PA_F_JSON;
        break;

    case PA_S_MODEL:
        x->model_seen = 1;
        x->model_str = 0;
        x->model = 0;
        break;

    case PA_S_SALT:
        x->salt_seen = 1;
        x->salt_str = 0;
        x->salt = 0;
        break;

    case PA_S_PCK:
        x->pck_seen = 1;
        x->has_pck = 0;
        x->pck_invalid = 1;
        break;

    case PA_S_PREV:
        x->prev_seen = 1;
        x->prev_len = 0;
        break;

    default: /* PA_S_SKIP, PA_S_ROLE, PA_S_PART_TEXT, the types */
        break;
    }

    if (x->depth == PA_OAI_MAX_DEPTH) {
        pa_oai_fail(x, PA_OAI_TOO_DEEP);
        return;
    }

    f = &x->frames[x->depth++];

    f->kind = (unsigned char) kind;
    f->array = (type == PA_T_ARRAY);
    f->count = 0;

    switch (kind) {
    case PA_F_MESSAGES:
        f->slot = PA_S_MESSAGE;
        break;
    case PA_F_INPUT:
        f->slot = PA_S_ITEM;
        break;
    case PA_F_PARTS:
        f->slot = PA_S_PART;
        break;
    case PA_F_PROMPT:
        f->slot = PA_S_PROMPT_ITEM;
        break;
    case PA_F_TOKENS:
        f->slot = PA_S_TOKEN;
        break;
    case PA_F_TOOLS:
        f->slot = PA_S_TOOL;
        break;
    case PA_F_CALLS:
        f->slot = PA_S_CALL;
        break;
    case PA_F_JSON:
        f->slot = PA_S_JSON;
        break;
    default:
        f->slot = PA_S_SKIP;
        break;
    }

    x->state = f->array ? PA_L_FIRST : PA_L_KEY_FIRST;

    pa_oai_next(x);
}


/* "}" or "]" */

void
pa_oai_close(pa_oai_t *x)
{
    pa_oai_frame_t  *f;

    x->depth--;

    f = &x->frames[x->depth];

    switch (f->kind) {

    case PA_F_MESSAGE:
    case PA_F_ITEM:
        pa_oai_message_end(x);
        break;

    case PA_F_TOKENS:
        pa_oai_sep(x, PA_OAI_SEP_PIECE, 1);
        break;

    case PA_F_TOOL:

        /* a tool, not chat's "function" in it, ends with 0x1d */

        if (x->frames[x->depth - 1].slot == PA_S_TOOL) {
            pa_oai_sep(x, PA_OAI_SEP_TOKEN, 1);
        }

        break;

    case PA_F_JSON:
        pa_oai_json_put(x, f->array ? "]" : "}", 1);

        if (x->frames[x->depth - 1].kind != PA_F_JSON) {
            pa_oai_json_end(x);
        }

        break;

    default:
        break;
    }

    if (x->depth == 1) {
        pa_oai_top_end(x, x->frames[0].slot);
    }

    x->state = x->depth ? PA_L_NEXT : PA_L_END;

    pa_oai_next(x);
}


/*
 * a string, number or literal begins: where its bytes go.  Whether it
 * is of the right type is told at its end, as yajl told it: a string
 * that turns out not to be JSON is "not json" before it is "bad type".
 */

void
pa_oai_begin(pa_oai_t *x, pa_oai_type_e type)
{
    pa_oai_slot_e  slot;

    slot = (x->depth == 0) ? PA_S_ROOT : x->frames[x->depth - 1].slot;

    x->sink = PA_K_SKIP;
    x->val = PA_V_NONE;

    switch (slot) {

    case PA_S_ROLE:
        if (type == PA_T_STRING && !x->role_seen) {
            x->sink = PA_K_TEXT;
            x->val = PA_V_ROLE;
        }

        break;

    case PA_S_CONTENT:
    case PA_S_PART_TEXT:
    case PA_S_IMAGE_URL:
        if (type == PA_T_STRING) {
            pa_oai_piece(x);
        }

        break;

    case PA_S_PROMPT:
        if (type == PA_T_STRING) {
            pa_oai_set_api(x, PA_OAI_API_COMPLETIONS);
            pa_oai_sec_close(x, PA_SEC_FIRST);
            x->pieces++;
            x->sink = PA_K_TEXT;
            x->val = PA_V_PIECE;
        }

        break;

    case PA_S_INPUT:

        /* a string "input" is a user message */

        if (type == PA_T_STRING) {
            x->has_text = 1;
            pa_oai_set_api(x, PA_OAI_API_RESPONSES);
            pa_oai_sec_close(x, PA_SEC_FIRST);
            pa_oai_role(x, "user", 4);
            pa_oai_piece(x);
        }

        break;

    case PA_S_INSTR:
    case PA_S_SYSTEM:
        if (type == PA_T_STRING) {
            x->has_system = 1;
            pa_oai_role(x, "system", 6);
            pa_oai_piece(x);
        }

        break;

    case PA_S_PROMPT_ITEM:
    case PA_S_TOKEN:
        if (type == PA_T_NUMBER
            || (type == PA_T_STRING && slot == PA_S_PROMPT_ITEM))
        {
            x->pieces++;
            x->sink = PA_K_TEXT;
            x->val = PA_V_PIECE;
        }

        break;

    case PA_S_MODEL:
    case PA_S_SALT:
        if (type == PA_T_STRING) {
            XXH3_64bits_reset(x->field);
            x->sink = PA_K_FIELD;
        }

        break;

    case PA_S_PCK:
    case PA_S_PREV:
    case PA_S_ITEM_TYPE:
    case PA_S_TOOL_TYPE:
        if (type == PA_T_STRING) {
            x->buf_len = 0;
            x->buf_bad = 0;
            x->sink = PA_K_BUF;
        }

        break;

    case PA_S_JSON:
        pa_oai_json_value(x);

        if (type == PA_T_STRING) {
            pa_oai_json_put(x, "\"", 1);
        }

        x->sink = x->json_sink;
        return;

    default:
        break;
    }

    if (x->sink == PA_K_TEXT && pa_oai_used(x) >= x->length) {
        x->sink = x->count_past ? PA_K_PAST : PA_K_SKIP;
    }
}


/* a string, number or literal ends */

void
pa_oai_end(pa_oai_t *x, pa_oai_type_e type)
{
    pa_oai_slot_e  slot;

    slot = (x->depth == 0) ? PA_S_ROOT : x->frames[x->depth - 1].slot;

    if (slot == PA_S_JSON) {
        x->json_sink = x->sink;
    }

    x->sink = PA_K_SKIP;

    switch (slot) {

    case PA_S_ROOT:
        pa_oai_fail(x, PA_OAI_NOT_OBJECT);
        return;

    case PA_S_MESSAGES:
    case PA_S_MESSAGE:
    case PA_S_ITEM:
    case PA_S_TOOL:
        pa_oai_fail(x, PA_OAI_BAD_TYPE);
        return;

    case PA_S_TOOLS:
    case PA_S_INSTR:
    case PA_S_SYSTEM:
    case PA_S_INPUT:

        /* null is no tools, no instructions; "input" is never null */

        if (type == PA_T_NULL && slot != PA_S_INPUT) {
            break;
        }

        if (type != PA_T_STRING || slot == PA_S_TOOLS) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        if (x->val == PA_V_PIECE) {
            pa_oai_sep(x, PA_OAI_SEP_PIECE, 1);

        } else if (x->val == PA_V_PEND) {
            pa_oai_pend_close(x);
        }

        break;

    case PA_S_ROLE:
        if (x->val == PA_V_ROLE) {
            x->role_seen = 1;
            pa_oai_sep(x, PA_OAI_SEP_ROLE, 1);
            pa_oai_flush(x);
        }

        break;

    case PA_S_CONTENT:
    case PA_S_PART_TEXT:
    case PA_S_IMAGE_URL:
        if (x->val == PA_V_PIECE) {
            pa_oai_sep(x, PA_OAI_SEP_PIECE, 1);

        } else if (x->val == PA_V_PEND) {
            pa_oai_pend_close(x);
        }

        break;

    case PA_S_PROMPT:
        if (type != PA_T_STRING) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        pa_oai_sep(x, PA_OAI_SEP_PIECE, 1);
        x->has_text = 1;
        break;

    case PA_S_PROMPT_ITEM:
    case PA_S_TOKEN:
        if (x->val != PA_V_PIECE) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        pa_oai_sep(x, (type == PA_T_NUMBER) ? PA_OAI_SEP_TOKEN
                                            : PA_OAI_SEP_PIECE, 1);
        break;

    case PA_S_MODEL:
        x->model_seen = 1;
        x->model_str = (type == PA_T_STRING);
        x->model = x->model_str ? XXH3_64bits_digest(x->field) : 0;
        break;

    case PA_S_SALT:
        x->salt_seen = 1;
        x->salt_str = (type == PA_T_STRING);
        x->salt = x->salt_str ? XXH3_64bits_digest(x->field) : 0;
        break;

    case PA_S_PCK:
        x->pck_seen = 1;

        if (type == PA_T_STRING) {
            pa_oai_pck(x);

        } else {
            /* clients that send every optional field give null: absent */
            x->has_pck = 0;
            x->pck_invalid = (type != PA_T_NULL);
        }

        break;

    case PA_S_PREV:
        x->prev_seen = 1;
        x->prev_len = 0;

        /* an id of 1 to PA_OAI_BUF printable bytes; any other: none */

        if (type == PA_T_STRING && x->buf_len && x->buf_len <= PA_OAI_BUF
            && !x->buf_bad)
        {
            memcpy(x->prev, x->buf, x->buf_len);
            x->prev_len = x->buf_len;
        }

        break;

    case PA_S_ITEM_TYPE:
        if (type == PA_T_STRING) {
            pa_oai_item_type(x);
        }

        break;

    case PA_S_TOOL_TYPE:
        if (type == PA_T_STRING) {
            pa_oai_tool_type(x);
        }

        break;

    case PA_S_JSON:
        if (type == PA_T_STRING) {
            pa_oai_json_put(x, "\"", 1);

        } else if (type != PA_T_NUMBER) {
            pa_oai_json_put(x, x->lit, x->lit_pos);
        }

        if (x->frames[x->depth - 1].kind != PA_F_JSON) {
            pa_oai_json_end(x);
        }

        break;

    default:
        break;
    }

    x->val = PA_V_NONE;

    if (x->depth == 1) {
        pa_oai_top_end(x, slot);
    }

    x->state = x->depth ? PA_L_NEXT : PA_L_END;

    pa_oai_next(x);
}


/* an object key begins: its bytes are kept, or are text in a JSON text */

void
pa_oai_key_begin(pa_oai_t *x)
{
    pa_oai_frame_t  *f;

    f = &x->frames[x->depth - 1];

    x->val = PA_V_NONE;

    if (f->kind != PA_F_JSON) {
        x->sink = PA_K_BUF;
        return;
    }

    pa_oai_json_put(x, f->count ? ",\"" : "\"", f->count ? 2 : 1);
    f->count = 1;

    x->sink = x->json_sink;
}


/* an object key ends: what its value is */

void
pa_oai_key(pa_oai_t *x)
{
    size_t           n;
    pa_oai_frame_t  *f;

    f = &x->frames[x->depth - 1];

    if (f->kind == PA_F_JSON) {
        x->json_sink = x->sink;
        x->sink = PA_K_SKIP;
        pa_oai_json_put(x, "\":", 2);

        f->slot = PA_S_JSON;
        x->state = PA_L_COLON;
        return;
    }

    n = (x->buf_len <= PA_OAI_BUF) ? x->buf_len : 0;

    f->slot = (unsigned char) pa_oai_key_slot(x, f->kind, x->buf, n);

    if (f->kind == PA_F_TOP) {
        pa_oai_top_key(x, f);
    }

    x->sink = PA_K_SKIP;
    x->state = PA_L_COLON;
}


/* after each value and each end of a container: is the key complete? */

static void
pa_oai_next(pa_oai_t *x)
{
    if (x->status == PA_OAI_OK && x->live == PA_SEC_CONV
        && x->chars >= x->length && !x->count_past
        && x->model_seen && x->salt_seen && x->pck_seen
        && (x->prev_seen || x->api != PA_OAI_API_RESPONSES))
    {
        x->done = 1;
    }
}


static pa_oai_slot_e
pa_oai_key_slot(pa_oai_t *x, pa_oai_frame_e kind, const unsigned char *s,
    size_t n)
{
    size_t    i;
    unsigned  shape;

    if (kind == PA_F_TOP) {
        shape = (x->dialect == PA_OAI_ANTHROPIC) ? PA_SH_ANTHROPIC
                                                 : PA_SH_OPENAI;

    } else {
        shape = x->shape;
    }

    for (i = 0; i < sizeof(pa_oai_keys) / sizeof(pa_oai_keys[0]); i++) {
        if (pa_oai_keys[i].kind == kind && (pa_oai_keys[i].shapes & shape)
            && pa_oai_keys[i].len == n
            && memcmp(s, pa_oai_keys[i].name, n) == 0)
        {
            return pa_oai_keys[i].slot;
        }
    }

    return PA_S_SKIP;
}
