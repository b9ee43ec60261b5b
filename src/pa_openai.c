
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The key of an OpenAI-compatible request body, read by a streaming JSON
 * scanner buffer by buffer: no tree is built, no string is kept whole,
 * and no more text is copied than the key needs.
 *
 * The text of the key is, in order of the body: for each element of the
 * top-level "messages", its "role" then each piece of its "content" (a
 * string, or the "text", "image_url" ("url") and "input_audio" ("data")
 * of each part); or the top-level "prompt": a string, strings, token ids,
 * or arrays of token ids.  A role is followed by the byte 0x1e, a piece
 * of content or prompt by 0x1f, a token id by 0x1d: they are hashed, but
 * not counted as characters.  Only the first "length" characters (code
 * points of the decoded UTF-8) are hashed, with XXH3.
 *
 * "model" and "cache_salt" are hashed on their own and mixed in at the
 * end, so that the key does not depend on where they are in the body.
 * Within a message, content before the role is kept (no more of it than
 * the characters still wanted) until the role comes, so the order of
 * "role" and "content" does not matter either.  Of a top-level field
 * given twice, the last counts, as in most JSON readers.
 *
 * Strings are read in pieces as the buffers bring them: text goes to
 * the key's hash as it comes, "model" and "cache_salt" to a hash of
 * their own, of "prompt_cache_key" and of object keys at most 64 bytes
 * are kept, and anything else is only checked.  So neither the memory
 * nor the key depends on how long a string is, and each byte is looked
 * at once (16 at a time in runs of plain ASCII with SSE2, else 8).  The
 * memory is pa_oai_t and two XXH3 states, about 1.8 KB, and the content
 * of a message that comes before its role (no more than "length"
 * characters, and a record per non-empty piece).  The body is read to its
 * end unless the key is complete before: the text has "length"
 * characters and "model", "cache_salt" and "prompt_cache_key" were seen.
 * As far as it is read, it must be JSON (RFC 8259, UTF-8 as in RFC 3629:
 * no overlong forms, surrogates or code points above U+10FFFF), an object
 * at the top, no deeper than PA_OAI_MAX_DEPTH.
 *
 * The key is the one the yajl-based reader of earlier releases gave, to
 * the bit, so routes do not move on an upgrade (make fuzz-diff compares
 * the two).  This keeps yajl 2.1's ways of reading JSON: \v and \f
 * count as white space; a high surrogate escape takes any \u escape
 * after it as its low half, and one followed by anything else reads as
 * "?" (a lone low surrogate is not UTF-8: not JSON); the end of the body
 * is a space, and within a string after the top value it is not garbage.
 */


#include <string.h>

#include "pa_openai_int.h"


static void pa_oai_next(pa_oai_t *x);
static pa_oai_slot_e pa_oai_key_slot(pa_oai_frame_e kind,
    const unsigned char *s, size_t n);
static void pa_oai_message_end(pa_oai_t *x);


static const unsigned char  pa_oai_space[] = " ";


pa_oai_t *
pa_oai_create(const pa_alloc_t *alloc, size_t length, size_t scan_cap)
{
    uintptr_t       a;
    pa_oai_t       *x;
    unsigned char  *p;

    if (length == 0) {
        return NULL;
    }

    x = alloc->alloc(alloc->ctx, sizeof(pa_oai_t));
    if (x == NULL) {
        return NULL;
    }

    memset(x, 0, sizeof(pa_oai_t));

    x->alloc = *alloc;
    x->length = length;
    x->cap = (scan_cap == 0) ? (size_t) -1 : scan_cap;
    x->status = PA_OAI_OK;
    x->rc = PA_OAI_MORE;
    x->state = PA_L_VALUE;

    /* the states want 64-byte alignment, SSE2 code needs 16 at least */

    p = alloc->alloc(alloc->ctx, 2 * sizeof(XXH3_state_t) + 64);
    if (p == NULL) {
        return NULL;
    }

    a = ((uintptr_t) p + 63) & ~(uintptr_t) 63;
    x->text = (XXH3_state_t *) (p + (a - (uintptr_t) p));
    x->field = x->text + 1;

    XXH3_INITSTATE(x->text);
    XXH3_INITSTATE(x->field);
    XXH3_64bits_reset(x->text);

    return x;
}


void
pa_oai_text_hook(pa_oai_t *x, pa_oai_text_pt text, void *ctx)
{
    x->hook = text;
    x->hook_ctx = ctx;
}


void
pa_oai_hook_only(pa_oai_t *x)
{
    x->hook_only = (x->hook != NULL);
}


void
pa_oai_count_past(pa_oai_t *x)
{
    x->count_past = 1;
}


pa_oai_rc_e
pa_oai_feed(pa_oai_t *x, const unsigned char *p, size_t n)
{
    size_t  m;

    if (x->rc != PA_OAI_MORE) {
        return x->rc;
    }

    m = x->cap - x->scanned;

    if (m > n) {
        m = n;
    }

    if (m > 0) {
        x->scanned += pa_oai_scan(x, p, p + m) - p;

        if (x->status != PA_OAI_OK) {
            x->rc = PA_OAI_FALLBACK;
            return x->rc;
        }

        if (x->done) {
            x->rc = PA_OAI_DONE;
            return x->rc;
        }
    }

    if (m == n) {
        return PA_OAI_MORE;
    }

    /* the scan cap: the key is what was seen, if any text was */

    if (x->pieces > 0) {
        x->rc = PA_OAI_DONE;

    } else {
        x->status = PA_OAI_NO_TEXT;
        x->rc = PA_OAI_FALLBACK;
    }

    return x->rc;
}


void
pa_oai_finish(pa_oai_t *x, pa_oai_result_t *res)
{
    uint64_t  v[4];

    memset(res, 0, sizeof(pa_oai_result_t));

    if (x->rc == PA_OAI_MORE) {

        /*
         * the end of the body is a space, as yajl_complete_parse() made
         * it: it ends a number there, and a string after the top value
         * is not garbage if the space can be part of it
         */

        (void) pa_oai_scan(x, pa_oai_space, pa_oai_space + 1);

        if (x->status == PA_OAI_OK && !x->done && x->state != PA_L_END
            && !(x->trail && x->state == PA_L_STRING))
        {
            x->status = PA_OAI_NOT_JSON;
        }

        if (x->status == PA_OAI_OK && !x->has_text) {
            x->status = PA_OAI_NO_TEXT;
        }

        x->rc = (x->status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;
    }

    /* the separators the text ended with */
    pa_oai_sep_flush(x);

    res->status = x->status;
    res->scanned = x->scanned;

    if (x->status != PA_OAI_OK) {
        return;
    }

    v[0] = x->hook_only ? 0 : XXH3_64bits_digest(x->text);
    v[1] = x->model;
    v[2] = x->salt;
    v[3] = (uint64_t) x->model_str | ((uint64_t) x->salt_str << 1);

    res->hash = XXH3_64bits(v, sizeof(v));
    res->meta = XXH3_64bits(&v[1], 3 * sizeof(uint64_t));
    res->model = x->model;
    res->has_model = x->model_str;
    res->chars = x->chars;
    res->past = x->past;

    res->has_pck = x->has_pck;
    res->pck_invalid = x->pck_invalid;

    if (x->has_pck) {
        res->pck_len = x->pck_len;
        memcpy(res->pck, x->pck, x->pck_len);
    }
}


const char *
pa_oai_status_name(pa_oai_status_e status)
{
    switch (status) {
    case PA_OAI_OK:
        return "ok";
    case PA_OAI_NOT_JSON:
        return "not json";
    case PA_OAI_NOT_OBJECT:
        return "not an object";
    case PA_OAI_BAD_TYPE:
        return "bad type";
    case PA_OAI_TOO_DEEP:
        return "too deep";
    case PA_OAI_NO_TEXT:
        return "no text";
    case PA_OAI_NOMEM:
        return "no memory";
    }

    return "unknown";
}



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
#define pa_oai_is(s, n, lit)                                                  \
    ((n) == sizeof(lit) - 1 && memcmp(s, lit, sizeof(lit) - 1) == 0)

    switch (kind) {

    case PA_F_TOP:
        if (pa_oai_is(s, n, "messages")) {
            return PA_S_MESSAGES;
        }

        if (pa_oai_is(s, n, "model")) {
            return PA_S_MODEL;
        }

        if (pa_oai_is(s, n, "prompt")) {
            return PA_S_PROMPT;
        }

        if (pa_oai_is(s, n, "cache_salt")) {
            return PA_S_SALT;
        }

        if (pa_oai_is(s, n, "prompt_cache_key")) {
            return PA_S_PCK;
        }

        break;

    case PA_F_MESSAGE:
        if (pa_oai_is(s, n, "role")) {
            return PA_S_ROLE;
        }

        if (pa_oai_is(s, n, "content")) {
            return PA_S_CONTENT;
        }

        break;

    case PA_F_PART:
        if (pa_oai_is(s, n, "text")) {
            return PA_S_PART_TEXT;
        }

        if (pa_oai_is(s, n, "image_url")) {
            return PA_S_IMAGE_URL;
        }

        if (pa_oai_is(s, n, "input_audio")) {
            return PA_S_INPUT_AUDIO;
        }

        break;

    case PA_F_IMAGE_URL:
        if (pa_oai_is(s, n, "url")) {
            return PA_S_PART_TEXT;
        }

        break;

    case PA_F_INPUT_AUDIO:
        if (pa_oai_is(s, n, "data")) {
            return PA_S_PART_TEXT;
        }

        break;

    default:
        break;
    }

    return PA_S_SKIP;

#undef pa_oai_is
}


void
pa_oai_fail(pa_oai_t *x, pa_oai_status_e status)
{
    if (x->status == PA_OAI_OK) {
        x->status = status;
    }
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
