
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The key of an OpenAI-compatible request body, read with yajl's callback
 * parser buffer by buffer; no tree is built, and no more text is copied
 * than the key needs.
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
 * yajl does not check what its allocator returns: an allocation that
 * fails inside yajl longjmp()s (see pa_yajl.c) back to the pa_oai_*()
 * function that called yajl, and the extractor falls back with
 * PA_OAI_NOMEM.  All memory belongs to the caller's allocator, so nothing
 * is lost.
 */


#include <setjmp.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "pa_xxhash.h"

#include "pa_openai.h"
#include "pa_yajl.h"


#define PA_OAI_SEP_ROLE    0x1e
#define PA_OAI_SEP_PIECE   0x1f
#define PA_OAI_SEP_TOKEN   0x1d


typedef enum {
    PA_T_NULL = 0,
    PA_T_BOOL,
    PA_T_NUMBER,
    PA_T_STRING,
    PA_T_MAP,
    PA_T_ARRAY
} pa_oai_type_e;


/* what a container is */
typedef enum {
    PA_F_SKIP = 0,
    PA_F_TOP,
    PA_F_MESSAGES,
    PA_F_MESSAGE,
    PA_F_PARTS,
    PA_F_PART,
    PA_F_IMAGE_URL,
    PA_F_INPUT_AUDIO,
    PA_F_PROMPT,
    PA_F_TOKENS
} pa_oai_frame_e;


/* what the next value in a container is */
typedef enum {
    PA_S_SKIP = 0,
    PA_S_ROOT,
    PA_S_MESSAGES,
    PA_S_PROMPT,
    PA_S_MODEL,
    PA_S_SALT,
    PA_S_PCK,
    PA_S_MESSAGE,
    PA_S_ROLE,
    PA_S_CONTENT,
    PA_S_PART,
    PA_S_PART_TEXT,
    PA_S_IMAGE_URL,
    PA_S_INPUT_AUDIO,
    PA_S_PROMPT_ITEM,
    PA_S_TOKEN
} pa_oai_slot_e;


typedef struct {
    unsigned char        kind;      /* pa_oai_frame_e */
    unsigned char        slot;      /* pa_oai_slot_e */
} pa_oai_frame_t;


struct pa_oai_s {
    XXH3_state_t        *text;
    yajl_handle          yajl;
    yajl_alloc_funcs     yajl_funcs;
    pa_yajl_mem_t        mem;

    size_t               length;
    size_t               cap;
    size_t               chars;
    size_t               scanned;
    size_t               pieces;       /* content/prompt pieces hashed */
    size_t               depth;

    uint64_t             model;
    uint64_t             salt;

    pa_oai_status_e      status;
    pa_oai_rc_e          rc;

    /* content of the current message seen before its role */
    unsigned char       *pend;
    size_t               pend_len;
    size_t               pend_size;
    size_t               pend_chars;

    size_t               pck_len;
    unsigned char        pck[64];

    unsigned             done:1;
    unsigned             has_text:1;   /* messages or prompt seen */
    unsigned             role_seen:1;
    unsigned             model_seen:1;
    unsigned             model_str:1;
    unsigned             salt_seen:1;
    unsigned             salt_str:1;
    unsigned             pck_seen:1;
    unsigned             has_pck:1;
    unsigned             pck_invalid:1;

    pa_oai_frame_t       frames[PA_OAI_MAX_DEPTH];

    jmp_buf              jmp;
};


static int pa_oai_null(void *ctx);
static int pa_oai_boolean(void *ctx, int value);
static int pa_oai_number(void *ctx, const char *s, size_t n);
static int pa_oai_string(void *ctx, const unsigned char *s, size_t n);
static int pa_oai_start_map(void *ctx);
static int pa_oai_map_key(void *ctx, const unsigned char *s, size_t n);
static int pa_oai_start_array(void *ctx);
static int pa_oai_end(void *ctx);

static int pa_oai_value(pa_oai_t *x, pa_oai_type_e type,
    const unsigned char *s, size_t n);
static pa_oai_slot_e pa_oai_key_slot(pa_oai_frame_e kind,
    const unsigned char *s, size_t n);
static int pa_oai_push(pa_oai_t *x, pa_oai_frame_e kind);
static int pa_oai_fail(pa_oai_t *x, pa_oai_status_e status);
static int pa_oai_go_on(pa_oai_t *x);

static void pa_oai_role(pa_oai_t *x, const unsigned char *s, size_t n);
static int pa_oai_content(pa_oai_t *x, const unsigned char *s, size_t n);
static void pa_oai_message_end(pa_oai_t *x);
static void pa_oai_flush(pa_oai_t *x);
static void pa_oai_piece(pa_oai_t *x, const unsigned char *s, size_t n,
    unsigned char sep);
static void pa_oai_pck(pa_oai_t *x, const unsigned char *s, size_t n);

static void pa_oai_text(pa_oai_t *x, const unsigned char *s, size_t n);
static void pa_oai_sep(pa_oai_t *x, unsigned char sep);
static size_t pa_oai_cut(const unsigned char *s, size_t n, size_t want,
    size_t *chars);
static int pa_oai_utf8(const unsigned char *s, size_t n);
static void *pa_oai_palloc(pa_oai_t *x, size_t size);


static const yajl_callbacks  pa_oai_callbacks = {
    pa_oai_null,
    pa_oai_boolean,
    NULL,                       /* integer: the number callback gets all */
    NULL,                       /* double */
    pa_oai_number,
    pa_oai_string,
    pa_oai_start_map,
    pa_oai_map_key,
    pa_oai_end,
    pa_oai_start_array,
    pa_oai_end
};


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

    x->mem.alloc = *alloc;
    x->mem.jmp = &x->jmp;
    x->length = length;

    if (scan_cap == 0) {
        scan_cap = (length > (SIZE_MAX - PA_OAI_SCAN_BASE) / 4)
                   ? SIZE_MAX : PA_OAI_SCAN_BASE + 4 * length;
    }

    x->cap = scan_cap;
    x->status = PA_OAI_OK;
    x->rc = PA_OAI_MORE;

    /* the state wants 64-byte alignment, SSE2 code needs 16 at least */

    p = alloc->alloc(alloc->ctx, sizeof(XXH3_state_t) + 64);
    if (p == NULL) {
        return NULL;
    }

    a = ((uintptr_t) p + 63) & ~(uintptr_t) 63;
    x->text = (XXH3_state_t *) (p + (a - (uintptr_t) p));

    XXH3_INITSTATE(x->text);
    XXH3_64bits_reset(x->text);

    pa_yajl_funcs(&x->yajl_funcs, &x->mem);

    if (setjmp(x->jmp) != 0) {
        return NULL;
    }

    /* strings stay validated: invalid UTF-8 is a parse error */

    x->yajl = yajl_alloc(&pa_oai_callbacks, &x->yajl_funcs, x);
    if (x->yajl == NULL) {
        return NULL;
    }

    return x;
}


pa_oai_rc_e
pa_oai_feed(pa_oai_t *x, const unsigned char *p, size_t n)
{
    size_t       m;
    yajl_status  st;

    if (x->rc != PA_OAI_MORE) {
        return x->rc;
    }

    m = x->cap - x->scanned;

    if (m > n) {
        m = n;
    }

    if (m > 0) {

        if (setjmp(x->jmp) != 0) {
            x->status = PA_OAI_NOMEM;
            x->rc = PA_OAI_FALLBACK;
            return x->rc;
        }

        st = yajl_parse(x->yajl, p, m);

        x->scanned += (st == yajl_status_ok)
                      ? m : yajl_get_bytes_consumed(x->yajl);

        if (x->status != PA_OAI_OK) {
            x->rc = PA_OAI_FALLBACK;
            return x->rc;
        }

        if (x->done) {
            x->rc = PA_OAI_DONE;
            return x->rc;
        }

        if (st != yajl_status_ok) {
            x->status = PA_OAI_NOT_JSON;
            x->rc = PA_OAI_FALLBACK;
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
    uint64_t     v[4];
    yajl_status  st;

    memset(res, 0, sizeof(pa_oai_result_t));

    if (x->rc == PA_OAI_MORE) {

        if (setjmp(x->jmp) == 0) {
            st = yajl_complete_parse(x->yajl);

            if (x->status == PA_OAI_OK && !x->done
                && st != yajl_status_ok)
            {
                x->status = PA_OAI_NOT_JSON;
            }

        } else {
            x->status = PA_OAI_NOMEM;
        }

        if (x->status == PA_OAI_OK && !x->has_text) {
            x->status = PA_OAI_NO_TEXT;
        }

        x->rc = (x->status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;
    }

    res->status = x->status;
    res->scanned = x->scanned;

    if (x->status != PA_OAI_OK) {
        return;
    }

    v[0] = XXH3_64bits_digest(x->text);
    v[1] = x->model;
    v[2] = x->salt;
    v[3] = (uint64_t) x->model_str | ((uint64_t) x->salt_str << 1);

    res->hash = XXH3_64bits(v, sizeof(v));
    res->chars = x->chars;

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


/* yajl's callbacks */

static int
pa_oai_null(void *ctx)
{
    return pa_oai_value(ctx, PA_T_NULL, NULL, 0);
}


static int
pa_oai_boolean(void *ctx, int value)
{
    return pa_oai_value(ctx, PA_T_BOOL, NULL, 0);
}


static int
pa_oai_number(void *ctx, const char *s, size_t n)
{
    return pa_oai_value(ctx, PA_T_NUMBER, (const unsigned char *) s, n);
}


static int
pa_oai_string(void *ctx, const unsigned char *s, size_t n)
{
    if (!pa_oai_utf8(s, n)) {
        return pa_oai_fail(ctx, PA_OAI_NOT_JSON);
    }

    return pa_oai_value(ctx, PA_T_STRING, s, n);
}


static int
pa_oai_start_map(void *ctx)
{
    return pa_oai_value(ctx, PA_T_MAP, NULL, 0);
}


static int
pa_oai_start_array(void *ctx)
{
    return pa_oai_value(ctx, PA_T_ARRAY, NULL, 0);
}


static int
pa_oai_map_key(void *ctx, const unsigned char *s, size_t n)
{
    pa_oai_t        *x = ctx;
    pa_oai_frame_t  *f;

    if (!pa_oai_utf8(s, n)) {
        return pa_oai_fail(x, PA_OAI_NOT_JSON);
    }

    f = &x->frames[x->depth - 1];
    f->slot = pa_oai_key_slot(f->kind, s, n);

    return 1;
}


static int
pa_oai_end(void *ctx)
{
    pa_oai_t  *x = ctx;

    x->depth--;

    switch (x->frames[x->depth].kind) {

    case PA_F_MESSAGE:
        pa_oai_message_end(x);
        break;

    case PA_F_TOKENS:
        pa_oai_sep(x, PA_OAI_SEP_PIECE);
        break;

    default:
        break;
    }

    return pa_oai_go_on(x);
}


static int
pa_oai_value(pa_oai_t *x, pa_oai_type_e type, const unsigned char *s,
    size_t n)
{
    pa_oai_slot_e   slot;
    pa_oai_frame_e  kind;

    slot = (x->depth == 0) ? PA_S_ROOT : x->frames[x->depth - 1].slot;
    kind = PA_F_SKIP;

    switch (slot) {

    case PA_S_ROOT:
        if (type != PA_T_MAP) {
            return pa_oai_fail(x, PA_OAI_NOT_OBJECT);
        }

        kind = PA_F_TOP;
        break;

    case PA_S_MESSAGES:
        if (type != PA_T_ARRAY) {
            return pa_oai_fail(x, PA_OAI_BAD_TYPE);
        }

        x->has_text = 1;
        kind = PA_F_MESSAGES;
        break;

    case PA_S_MESSAGE:
        if (type != PA_T_MAP) {
            return pa_oai_fail(x, PA_OAI_BAD_TYPE);
        }

        x->role_seen = 0;
        x->pend_len = 0;
        x->pend_chars = 0;
        kind = PA_F_MESSAGE;
        break;

    case PA_S_ROLE:
        if (type == PA_T_STRING) {
            pa_oai_role(x, s, n);
        }

        break;

    case PA_S_CONTENT:
        if (type == PA_T_STRING) {
            if (pa_oai_content(x, s, n) != 0) {
                return pa_oai_fail(x, PA_OAI_NOMEM);
            }

        } else if (type == PA_T_ARRAY) {
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
            break;
        }

        /* fall through */

    case PA_S_PART_TEXT:
        if (type == PA_T_STRING) {
            if (pa_oai_content(x, s, n) != 0) {
                return pa_oai_fail(x, PA_OAI_NOMEM);
            }
        }

        break;

    case PA_S_INPUT_AUDIO:
        if (type == PA_T_MAP) {
            kind = PA_F_INPUT_AUDIO;
        }

        break;

    case PA_S_PROMPT:
        if (type == PA_T_STRING) {
            pa_oai_piece(x, s, n, PA_OAI_SEP_PIECE);

        } else if (type == PA_T_ARRAY) {
            kind = PA_F_PROMPT;

        } else {
            return pa_oai_fail(x, PA_OAI_BAD_TYPE);
        }

        x->has_text = 1;
        break;

    case PA_S_PROMPT_ITEM:
        if (type == PA_T_STRING) {
            pa_oai_piece(x, s, n, PA_OAI_SEP_PIECE);

        } else if (type == PA_T_NUMBER) {
            pa_oai_piece(x, s, n, PA_OAI_SEP_TOKEN);

        } else if (type == PA_T_ARRAY) {
            kind = PA_F_TOKENS;

        } else {
            return pa_oai_fail(x, PA_OAI_BAD_TYPE);
        }

        break;

    case PA_S_TOKEN:
        if (type != PA_T_NUMBER) {
            return pa_oai_fail(x, PA_OAI_BAD_TYPE);
        }

        pa_oai_piece(x, s, n, PA_OAI_SEP_TOKEN);
        break;

    case PA_S_MODEL:
        x->model_seen = 1;
        x->model_str = (type == PA_T_STRING);
        x->model = (type == PA_T_STRING) ? XXH3_64bits(s, n) : 0;
        break;

    case PA_S_SALT:
        x->salt_seen = 1;
        x->salt_str = (type == PA_T_STRING);
        x->salt = (type == PA_T_STRING) ? XXH3_64bits(s, n) : 0;
        break;

    case PA_S_PCK:
        x->pck_seen = 1;

        if (type == PA_T_STRING) {
            pa_oai_pck(x, s, n);

        } else {
            /* clients that send every optional field give null: absent */
            x->has_pck = 0;
            x->pck_invalid = (type != PA_T_NULL);
        }

        break;

    default: /* PA_S_SKIP */
        break;
    }

    if (type == PA_T_MAP || type == PA_T_ARRAY) {
        if (pa_oai_push(x, kind) != 0) {
            return 0;
        }
    }

    return pa_oai_go_on(x);
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


static int
pa_oai_push(pa_oai_t *x, pa_oai_frame_e kind)
{
    pa_oai_frame_t  *f;

    if (x->depth == PA_OAI_MAX_DEPTH) {
        (void) pa_oai_fail(x, PA_OAI_TOO_DEEP);
        return -1;
    }

    f = &x->frames[x->depth++];

    f->kind = (unsigned char) kind;

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

    return 0;
}


static int
pa_oai_fail(pa_oai_t *x, pa_oai_status_e status)
{
    x->status = status;
    return 0;
}


/* 1: parse on; 0: the key is complete, stop the parser */

static int
pa_oai_go_on(pa_oai_t *x)
{
    if (x->chars >= x->length
        && x->model_seen && x->salt_seen && x->pck_seen)
    {
        x->done = 1;
        return 0;
    }

    return 1;
}


static void
pa_oai_role(pa_oai_t *x, const unsigned char *s, size_t n)
{
    if (x->role_seen) {
        return;
    }

    x->role_seen = 1;

    pa_oai_text(x, s, n);
    pa_oai_sep(x, PA_OAI_SEP_ROLE);

    pa_oai_flush(x);
}


/*
 * a piece of message content: hashed at once if the role was seen, else
 * kept, as far as the characters still wanted go, until the role comes
 */

static int
pa_oai_content(pa_oai_t *x, const unsigned char *s, size_t n)
{
    size_t          want, len, chars, need, size;
    unsigned char  *p;

    if (x->role_seen) {
        pa_oai_piece(x, s, n, PA_OAI_SEP_PIECE);
        return 0;
    }

    if (x->chars + x->pend_chars >= x->length) {
        return 0;
    }

    want = x->length - x->chars - x->pend_chars;
    len = pa_oai_cut(s, n, want, &chars);

    need = x->pend_len + sizeof(size_t) + len;

    if (need > x->pend_size) {
        size = x->pend_size * 2;

        if (size < need) {
            size = need;
        }

        if (size < 256) {
            size = 256;
        }

        p = pa_oai_palloc(x, size);
        if (p == NULL) {
            return -1;
        }

        if (x->pend_len) {
            memcpy(p, x->pend, x->pend_len);
        }

        x->pend = p;
        x->pend_size = size;
    }

    memcpy(x->pend + x->pend_len, &len, sizeof(size_t));
    memcpy(x->pend + x->pend_len + sizeof(size_t), s, len);

    x->pend_len += sizeof(size_t) + len;
    x->pend_chars += chars;

    return 0;
}


static void
pa_oai_message_end(pa_oai_t *x)
{
    if (x->role_seen) {
        return;
    }

    /* no role: an empty one */

    x->role_seen = 1;

    pa_oai_sep(x, PA_OAI_SEP_ROLE);
    pa_oai_flush(x);
}


static void
pa_oai_flush(pa_oai_t *x)
{
    size_t          len;
    unsigned char  *p, *last;

    if (x->pend_len == 0) {
        return;
    }

    p = x->pend;
    last = x->pend + x->pend_len;

    while (p < last) {
        memcpy(&len, p, sizeof(size_t));
        p += sizeof(size_t);

        pa_oai_piece(x, p, len, PA_OAI_SEP_PIECE);

        p += len;
    }

    x->pend_len = 0;
    x->pend_chars = 0;
}


static void
pa_oai_piece(pa_oai_t *x, const unsigned char *s, size_t n,
    unsigned char sep)
{
    x->pieces++;

    pa_oai_text(x, s, n);
    pa_oai_sep(x, sep);
}


static void
pa_oai_pck(pa_oai_t *x, const unsigned char *s, size_t n)
{
    size_t  i;

    x->has_pck = 0;
    x->pck_invalid = 1;

    if (n == 0 || n > sizeof(x->pck)) {
        return;
    }

    for (i = 0; i < n; i++) {
        if (s[i] < 0x20 || s[i] > 0x7e) {
            return;
        }
    }

    memcpy(x->pck, s, n);
    x->pck_len = n;
    x->has_pck = 1;
    x->pck_invalid = 0;
}


/* hashes as much of s as the characters still wanted allow */

static void
pa_oai_text(pa_oai_t *x, const unsigned char *s, size_t n)
{
    size_t  len, chars;

    if (x->chars >= x->length || n == 0) {
        return;
    }

    len = pa_oai_cut(s, n, x->length - x->chars, &chars);

    XXH3_64bits_update(x->text, s, len);
    x->chars += chars;
}


static void
pa_oai_sep(pa_oai_t *x, unsigned char sep)
{
    if (x->chars < x->length) {
        XXH3_64bits_update(x->text, &sep, 1);
    }
}


/*
 * the bytes of the first "want" characters of valid UTF-8 s, and in
 * "chars" how many characters they are: a character starts at each byte
 * that is not a continuation byte 10xxxxxx.  8 bytes at a time while
 * they cannot hold more characters than are wanted.
 */

static size_t
pa_oai_cut(const unsigned char *s, size_t n, size_t want, size_t *chars)
{
    size_t    i, c;
    uint64_t  w;

    c = 0;

    for (i = 0; n - i >= 8 && want - c >= 8; i += 8) {
        memcpy(&w, s + i, 8);

        /* bit 7 of each continuation byte, then their number */

        w = w & ~(w << 1) & 0x8080808080808080ULL;
        c += 8 - (size_t) (((w >> 7) * 0x0101010101010101ULL) >> 56);
    }

    for ( /* void */ ; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            if (c == want) {
                break;
            }

            c++;
        }
    }

    *chars = c;
    return i;
}


/*
 * 0 if s has a sequence of the right shape that is still not UTF-8 (RFC
 * 3629): an overlong form (C0 AF for "/", E0 80 AF, F0 80 80 AF), a UTF-16
 * surrogate (ED A0 80) or a code point above U+10FFFF (F4 90 80 80, F5
 * ...).  yajl has checked the shape of each sequence (a lead byte, then
 * as many continuation bytes as it announces; its \u escapes decode to
 * such sequences too) but not these, so only the lead bytes C0, C1, E0,
 * ED, F0 and F4 to F7 need a look.  8 bytes at a time: skipped if none
 * has its high bit set, or none is one of those lead bytes.
 */

#define pa_oai_bytes(b)    (0x0101010101010101ULL * (b))
#define pa_oai_zero(v)                                                        \
    (((v) - pa_oai_bytes(0x01)) & ~(v) & pa_oai_bytes(0x80))

static int
pa_oai_utf8(const unsigned char *s, size_t n)
{
    size_t    i, end;
    uint64_t  w;
    unsigned  c, next;

    i = 0;

    while (i < n) {

        if (n - i >= 8) {
            memcpy(&w, s + i, 8);

            if ((w & pa_oai_bytes(0x80)) == 0
                || (pa_oai_zero((w & pa_oai_bytes(0xfe)) ^ pa_oai_bytes(0xc0))
                    | pa_oai_zero(w ^ pa_oai_bytes(0xe0))
                    | pa_oai_zero(w ^ pa_oai_bytes(0xed))
                    | pa_oai_zero(w ^ pa_oai_bytes(0xf0))
                    | pa_oai_zero((w & pa_oai_bytes(0xfc))
                                  ^ pa_oai_bytes(0xf4)))
                   == 0)
            {
                i += 8;
                continue;
            }

            end = i + 8;

        } else {
            end = n;
        }

        for ( /* void */ ; i < end; i++) {
            c = s[i];

            if (c < 0xc0) {
                continue;
            }

            next = (i + 1 < n) ? s[i + 1] : 0;

            switch (c) {
            case 0xc0:
            case 0xc1:
                return 0;
            case 0xe0:
                if (next < 0xa0) {
                    return 0;
                }
                break;
            case 0xed:
                if (next > 0x9f) {
                    return 0;
                }
                break;
            case 0xf0:
                if (next < 0x90) {
                    return 0;
                }
                break;
            case 0xf4:
                if (next > 0x8f) {
                    return 0;
                }
                break;
            default:
                if (c >= 0xf5) {
                    return 0;
                }
                break;
            }
        }
    }

    return 1;
}


static void *
pa_oai_palloc(pa_oai_t *x, size_t size)
{
    return x->mem.alloc.alloc(x->mem.alloc.ctx, size);
}
