
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The rules of the OpenAI key (src/pa_openai.c tells what the key is):
 * what the scanner (src/pa_json.c) reads, a container opened or closed,
 * a value begun or ended, an object key, is placed here in the body's
 * grammar (a message, its role and content, "prompt", "model",
 * "cache_salt", "prompt_cache_key") and decides where the value's bytes
 * go (src/pa_openai_text.c).
 */


#include <string.h>

#include "pa_openai_int.h"


static void pa_oai_next(pa_oai_t *x);
static pa_oai_slot_e pa_oai_key_slot(pa_oai_frame_e kind,
    const unsigned char *s, size_t n);
static void pa_oai_message_end(pa_oai_t *x);


/* the object keys the key reads, by the object they are in */

#define pa_oai_name(kind, lit, slot)  { kind, sizeof(lit) - 1, lit, slot }

static const struct {
    pa_oai_frame_e       kind;
    size_t               len;
    const char          *name;
    pa_oai_slot_e        slot;
} pa_oai_keys[] = {
    pa_oai_name(PA_F_TOP, "messages", PA_S_MESSAGES),
    pa_oai_name(PA_F_TOP, "model", PA_S_MODEL),
    pa_oai_name(PA_F_TOP, "prompt", PA_S_PROMPT),
    pa_oai_name(PA_F_TOP, "cache_salt", PA_S_SALT),
    pa_oai_name(PA_F_TOP, "prompt_cache_key", PA_S_PCK),
    pa_oai_name(PA_F_MESSAGE, "role", PA_S_ROLE),
    pa_oai_name(PA_F_MESSAGE, "content", PA_S_CONTENT),
    pa_oai_name(PA_F_PART, "text", PA_S_PART_TEXT),
    pa_oai_name(PA_F_PART, "image_url", PA_S_IMAGE_URL),
    pa_oai_name(PA_F_PART, "input_audio", PA_S_INPUT_AUDIO),
    pa_oai_name(PA_F_IMAGE_URL, "url", PA_S_PART_TEXT),
    pa_oai_name(PA_F_INPUT_AUDIO, "data", PA_S_PART_TEXT)
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
        kind = PA_F_MESSAGES;
        break;

    case PA_S_MESSAGE:
        if (type != PA_T_MAP) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        x->role_seen = 0;
        x->pend_len = 0;
        x->pend_chars = 0;
        x->pend_last = 0;
        kind = PA_F_MESSAGE;
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

    case PA_S_PROMPT:
        if (type != PA_T_ARRAY) {
            pa_oai_fail(x, PA_OAI_BAD_TYPE);
            return;
        }

        x->has_text = 1;
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
        pa_oai_fail(x, PA_OAI_BAD_TYPE);
        return;

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

    default: /* PA_S_SKIP, PA_S_ROLE, PA_S_PART_TEXT */
        break;
    }

    if (x->depth == PA_OAI_MAX_DEPTH) {
        pa_oai_fail(x, PA_OAI_TOO_DEEP);
        return;
    }

    f = &x->frames[x->depth++];

    f->kind = (unsigned char) kind;
    f->array = (type == PA_T_ARRAY);

    switch (kind) {
    case PA_F_MESSAGES:
        f->slot = PA_S_MESSAGE;
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
    x->depth--;

    switch (x->frames[x->depth].kind) {

    case PA_F_MESSAGE:
        pa_oai_message_end(x);
        break;

    case PA_F_TOKENS:
        pa_oai_sep(x, PA_OAI_SEP_PIECE, 1);
        break;

    default:
        break;
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
        if (type != PA_T_STRING) {
            break;
        }

        if (x->role_seen) {
            x->pieces++;
            x->sink = PA_K_TEXT;
            x->val = PA_V_PIECE;

        } else if (x->chars + x->pend_chars < x->length) {
            pa_oai_pend_open(x);

        } else if (x->count_past) {
            x->sink = PA_K_PAST;
        }

        break;

    case PA_S_PROMPT:
        if (type == PA_T_STRING) {
            x->pieces++;
            x->sink = PA_K_TEXT;
            x->val = PA_V_PIECE;
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
        if (type == PA_T_STRING) {
            x->buf_len = 0;
            x->buf_bad = 0;
            x->sink = PA_K_BUF;
        }

        break;

    default:
        break;
    }

    if (x->sink == PA_K_TEXT && x->chars >= x->length) {
        x->sink = x->count_past ? PA_K_PAST : PA_K_SKIP;
    }
}


/* a string, number or literal ends */

void
pa_oai_end(pa_oai_t *x, pa_oai_type_e type)
{
    pa_oai_slot_e  slot;

    slot = (x->depth == 0) ? PA_S_ROOT : x->frames[x->depth - 1].slot;

    x->sink = PA_K_SKIP;

    switch (slot) {

    case PA_S_ROOT:
        pa_oai_fail(x, PA_OAI_NOT_OBJECT);
        return;

    case PA_S_MESSAGES:
    case PA_S_MESSAGE:
        pa_oai_fail(x, PA_OAI_BAD_TYPE);
        return;

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

    default:
        break;
    }

    x->state = x->depth ? PA_L_NEXT : PA_L_END;

    pa_oai_next(x);
}


/* an object key ends: what its value is */

void
pa_oai_key(pa_oai_t *x)
{
    size_t           n;
    pa_oai_frame_t  *f;

    n = (x->buf_len <= PA_OAI_BUF) ? x->buf_len : 0;

    f = &x->frames[x->depth - 1];
    f->slot = (unsigned char) pa_oai_key_slot(f->kind, x->buf, n);

    x->sink = PA_K_SKIP;
    x->state = PA_L_COLON;
}


/* after each value and each end of a container: is the key complete? */

static void
pa_oai_next(pa_oai_t *x)
{
    if (x->status == PA_OAI_OK && x->chars >= x->length && !x->count_past
        && x->model_seen && x->salt_seen && x->pck_seen)
    {
        x->done = 1;
    }
}


static pa_oai_slot_e
pa_oai_key_slot(pa_oai_frame_e kind, const unsigned char *s, size_t n)
{
    size_t  i;

    for (i = 0; i < sizeof(pa_oai_keys) / sizeof(pa_oai_keys[0]); i++) {
        if (pa_oai_keys[i].kind == kind && pa_oai_keys[i].len == n
            && memcmp(s, pa_oai_keys[i].name, n) == 0)
        {
            return pa_oai_keys[i].slot;
        }
    }

    return PA_S_SKIP;
}


static void
pa_oai_message_end(pa_oai_t *x)
{
    if (x->role_seen) {
        return;
    }

    /* no role: an empty one */

    x->role_seen = 1;

    pa_oai_sep(x, PA_OAI_SEP_ROLE, 1);
    pa_oai_flush(x);
}
