
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

#if (defined(__SSE2__) && defined(__GNUC__))
#include <emmintrin.h>
#define PA_OAI_SSE2  1
#endif

#include "pa_xxhash.h"

#include "pa_openai.h"


#define PA_OAI_SEP_ROLE    0x1e
#define PA_OAI_SEP_PIECE   0x1f
#define PA_OAI_SEP_TOKEN   0x1d

/* kept of a "prompt_cache_key" or an object key; sizeof(res->pck) */
#define PA_OAI_BUF         64


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


/* where the scanner is */
typedef enum {
    PA_L_VALUE = 0,            /* a value */
    PA_L_FIRST,                /* after "[": a value or "]" */
    PA_L_KEY_FIRST,            /* after "{": a key or "}" */
    PA_L_KEY,                  /* after "," in an object: a key */
    PA_L_COLON,
    PA_L_NEXT,                 /* after a value in a container */
    PA_L_END,                  /* after the top-level value */
    PA_L_STRING,
    PA_L_ESCAPE,               /* after "\" */
    PA_L_HEX,                  /* in the 4 digits of "\u" */
    PA_L_LOW,                  /* after a high surrogate: "\"? */
    PA_L_LOW_U,                /* after a high surrogate and "\": "u"? */
    PA_L_NUMBER,
    PA_L_LITERAL
} pa_oai_lex_e;


/* where a number is: JSON's grammar; ZERO, INT, FRAC and EXP may end it */
typedef enum {
    PA_N_START = 0,
    PA_N_MINUS,
    PA_N_ZERO,
    PA_N_INT,
    PA_N_DOT,
    PA_N_FRAC,
    PA_N_E,
    PA_N_SIGN,
    PA_N_EXP
} pa_oai_num_e;


/* where the bytes of a string or number go */
typedef enum {
    PA_K_SKIP = 0,
    PA_K_TEXT,                 /* the key's text */
    PA_K_PEND,                 /* content before the role */
    PA_K_FIELD,                /* the hash of model or cache_salt */
    PA_K_BUF                   /* x->buf: a key or prompt_cache_key */
} pa_oai_sink_e;


/* what a string or number value does for the key */
typedef enum {
    PA_V_NONE = 0,
    PA_V_ROLE,
    PA_V_PIECE,
    PA_V_PEND
} pa_oai_val_e;


typedef struct {
    unsigned char        kind;      /* pa_oai_frame_e */
    unsigned char        slot;      /* pa_oai_slot_e */
    unsigned char        array;
} pa_oai_frame_t;


struct pa_oai_s {
    XXH3_state_t        *text;
    XXH3_state_t        *field;     /* model or cache_salt being read */
    pa_alloc_t           alloc;

    pa_oai_text_pt       hook;
    void                *hook_ctx;

    size_t               length;
    size_t               cap;
    size_t               chars;
    size_t               scanned;
    size_t               pieces;       /* content/prompt pieces begun */
    size_t               depth;

    uint64_t             model;
    uint64_t             salt;

    pa_oai_status_e      status;
    pa_oai_rc_e          rc;

    /*
     * content of the current message seen before its role: records of
     * a size_t length, a size_t count of separators after it, and its
     * bytes; empty pieces only add to the count, so that there are no
     * more records than characters wanted
     */
    unsigned char       *pend;
    size_t               pend_len;
    size_t               pend_size;
    size_t               pend_chars;
    size_t               pend_rec;     /* the open record */
    size_t               pend_last;    /* the last closed one, + 1 */

    /* the scanner: a string, an escape, a number, a literal */
    uint32_t             cp;
    uint32_t             hi;           /* high surrogate waiting */
    const char          *lit;

    unsigned char        state;        /* pa_oai_lex_e */
    unsigned char        num;          /* pa_oai_num_e */
    unsigned char        sink;         /* pa_oai_sink_e */
    unsigned char        val;          /* pa_oai_val_e */
    unsigned char        type;         /* pa_oai_type_e of a literal */
    unsigned char        hex;          /* digits of \u read */
    unsigned char        lit_pos;

    /* a UTF-8 character split between buffers */
    unsigned char        u_need;
    unsigned char        u_lo;
    unsigned char        u_hi;
    unsigned char        carry_len;
    unsigned char        carry[4];

    size_t               buf_len;
    unsigned char        buf[PA_OAI_BUF];

    size_t               pck_len;
    unsigned char        pck[PA_OAI_BUF];

    unsigned             done:1;
    unsigned             has_text:1;   /* messages or prompt seen */
    unsigned             in_key:1;
    unsigned             trail:1;      /* a string after the top value */
    unsigned             buf_bad:1;    /* a byte of buf not 0x20..0x7e */
    unsigned             role_seen:1;
    unsigned             model_seen:1;
    unsigned             model_str:1;
    unsigned             salt_seen:1;
    unsigned             salt_str:1;
    unsigned             pck_seen:1;
    unsigned             has_pck:1;
    unsigned             pck_invalid:1;

    pa_oai_frame_t       frames[PA_OAI_MAX_DEPTH];
};


static const unsigned char *pa_oai_scan(pa_oai_t *x, const unsigned char *p,
    const unsigned char *last);
static const unsigned char *pa_oai_token(pa_oai_t *x,
    const unsigned char *p);
static const unsigned char *pa_oai_plain(const unsigned char *p,
    const unsigned char *last);
static const unsigned char *pa_oai_string(pa_oai_t *x,
    const unsigned char *p, const unsigned char *last);
static size_t pa_oai_escape_fast(pa_oai_t *x, const unsigned char *p,
    size_t n);
static const unsigned char *pa_oai_escape(pa_oai_t *x,
    const unsigned char *p);
static uint32_t pa_oai_hex4(const unsigned char *p);
static void pa_oai_code_point(pa_oai_t *x);
static void pa_oai_put(pa_oai_t *x, uint32_t cp);
static const unsigned char *pa_oai_number(pa_oai_t *x,
    const unsigned char *p, const unsigned char *last);
static void pa_oai_data(pa_oai_t *x, const unsigned char *s, size_t n);

static void pa_oai_open(pa_oai_t *x, pa_oai_type_e type);
static void pa_oai_close(pa_oai_t *x);
static void pa_oai_begin(pa_oai_t *x, pa_oai_type_e type);
static void pa_oai_end(pa_oai_t *x, pa_oai_type_e type);
static void pa_oai_key(pa_oai_t *x);
static void pa_oai_next(pa_oai_t *x);
static pa_oai_slot_e pa_oai_key_slot(pa_oai_frame_e kind,
    const unsigned char *s, size_t n);
static void pa_oai_fail(pa_oai_t *x, pa_oai_status_e status);

static void pa_oai_message_end(pa_oai_t *x);
static void pa_oai_pend_open(pa_oai_t *x);
static void pa_oai_pend(pa_oai_t *x, const unsigned char *s, size_t n);
static void pa_oai_pend_close(pa_oai_t *x);
static int pa_oai_pend_grow(pa_oai_t *x, size_t need);
static void pa_oai_flush(pa_oai_t *x);
static void pa_oai_pck(pa_oai_t *x);

static void pa_oai_text(pa_oai_t *x, const unsigned char *s, size_t n);
static void pa_oai_sep(pa_oai_t *x, unsigned char sep, size_t n);
static size_t pa_oai_cut(const unsigned char *s, size_t n, size_t want,
    size_t *chars);


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
    res->meta = XXH3_64bits(&v[1], 3 * sizeof(uint64_t));
    res->model = x->model;
    res->has_model = x->model_str;
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


/* the scanner: returns where it stopped, at "last" unless done or failed */

static const unsigned char *
pa_oai_scan(pa_oai_t *x, const unsigned char *p, const unsigned char *last)
{
    unsigned  c;

    while (p < last) {

        switch (x->state) {

        case PA_L_STRING:
            p = pa_oai_string(x, p, last);
            break;

        case PA_L_ESCAPE:
        case PA_L_HEX:
        case PA_L_LOW:
        case PA_L_LOW_U:
            p = pa_oai_escape(x, p);
            break;

        case PA_L_NUMBER:
            p = pa_oai_number(x, p, last);
            break;

        case PA_L_LITERAL:
            if (*p != (unsigned char) x->lit[x->lit_pos]) {
                pa_oai_fail(x, PA_OAI_NOT_JSON);
                break;
            }

            p++;

            if (x->lit[++x->lit_pos] == '\0') {
                pa_oai_end(x, x->type);
            }

            break;

        default:
            c = *p;

            /* yajl's white space, which has \v and \f */

            if (c == ' ' || (c >= '\t' && c <= '\r')) {
                p++;
                continue;
            }

            p = pa_oai_token(x, p);
            break;
        }

        if (x->status != PA_OAI_OK || x->done) {
            break;
        }
    }

    return p;
}


/* a byte that starts or ends something, outside strings and numbers */

static const unsigned char *
pa_oai_token(pa_oai_t *x, const unsigned char *p)
{
    unsigned         c;
    pa_oai_frame_t  *f;

    c = *p;

    switch (x->state) {

    case PA_L_FIRST:
        if (c == ']') {
            pa_oai_close(x);
            return p + 1;
        }

        /* fall through */

    case PA_L_VALUE:
        switch (c) {

        case '{':
            pa_oai_open(x, PA_T_MAP);
            return p + 1;

        case '[':
            pa_oai_open(x, PA_T_ARRAY);
            return p + 1;

        case '"':
            pa_oai_begin(x, PA_T_STRING);
            x->in_key = 0;
            x->state = PA_L_STRING;
            return p + 1;

        case 't':
            x->lit = "true";
            x->type = PA_T_BOOL;
            break;

        case 'f':
            x->lit = "false";
            x->type = PA_T_BOOL;
            break;

        case 'n':
            x->lit = "null";
            x->type = PA_T_NULL;
            break;

        default:
            if (c == '-' || (c >= '0' && c <= '9')) {
                pa_oai_begin(x, PA_T_NUMBER);
                x->num = PA_N_START;
                x->state = PA_L_NUMBER;
                return p;
            }

            pa_oai_fail(x, PA_OAI_NOT_JSON);
            return p;
        }

        pa_oai_begin(x, x->type);
        x->lit_pos = 1;
        x->state = PA_L_LITERAL;
        return p + 1;

    case PA_L_KEY_FIRST:
        if (c == '}') {
            pa_oai_close(x);
            return p + 1;
        }

        /* fall through */

    case PA_L_KEY:
        if (c != '"') {
            break;
        }

        x->in_key = 1;
        x->sink = PA_K_BUF;
        x->buf_len = 0;
        x->state = PA_L_STRING;
        return p + 1;

    case PA_L_COLON:
        if (c != ':') {
            break;
        }

        x->state = PA_L_VALUE;
        return p + 1;

    case PA_L_NEXT:
        f = &x->frames[x->depth - 1];

        if (c == ',') {
            x->state = f->array ? PA_L_VALUE : PA_L_KEY;
            return p + 1;
        }

        if (c == (f->array ? ']' : '}')) {
            pa_oai_close(x);
            return p + 1;
        }

        break;

    default: /* PA_L_END */

        /*
         * yajl takes the end of the body within a string after the top
         * value as the end of the body: only a complete one is garbage
         */

        if (c != '"') {
            break;
        }

        x->trail = 1;
        x->in_key = 0;
        x->sink = PA_K_SKIP;
        x->state = PA_L_STRING;
        return p + 1;
    }

    pa_oai_fail(x, PA_OAI_NOT_JSON);

    return p;
}


/*
 * the first byte from p that a string cannot simply go on with: '"',
 * '\\', a control character, or one above 0x7f (UTF-8 to check); "last"
 * if there is none.  16 bytes at a time with SSE2, else 8 in a word: a
 * borrow can only flag a byte above one that is flagged rightly.
 */

#define pa_oai_bytes(b)    (0x0101010101010101ULL * (b))
#define pa_oai_zero(v)     (((v) - pa_oai_bytes(0x01)) & ~(v))
#define pa_oai_special(w)                                                     \
    ((pa_oai_zero((w) ^ pa_oai_bytes('"'))                                    \
      | pa_oai_zero((w) ^ pa_oai_bytes('\\'))                                 \
      | (((w) - pa_oai_bytes(0x20)) & ~(w))                                   \
      | (w))                                                                  \
     & pa_oai_bytes(0x80))

static const unsigned char *
pa_oai_plain(const unsigned char *p, const unsigned char *last)
{
    unsigned  c;
#if (PA_OAI_SSE2)
    int       m;
    __m128i   v, q, b, l;

    q = _mm_set1_epi8('"');
    b = _mm_set1_epi8('\\');
    l = _mm_set1_epi8(0x20);

    while (last - p >= 16) {
        v = _mm_loadu_si128((const __m128i *) p);

        /* signed: the bytes above 0x7f are below 0x20 too */

        m = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q),
                                                        _mm_cmpeq_epi8(v, b)),
                                           _mm_cmplt_epi8(v, l)));
        if (m) {
            return p + __builtin_ctz(m);
        }

        p += 16;
    }
#else
    uint64_t  w;

    while (last - p >= 8) {
        memcpy(&w, p, 8);

        if (pa_oai_special(w)) {
            break;
        }

        p += 8;
    }
#endif

    for ( /* void */ ; p < last; p++) {
        c = *p;

        if (c == '"' || c == '\\' || c < 0x20 || c > 0x7f) {
            break;
        }
    }

    return p;
}


/*
 * in a string: runs of plain bytes are checked as UTF-8 and given to the
 * sink whole, escapes that are whole in the buffer are read at once, a
 * character split between buffers is kept in "carry" until it is whole,
 * so that the sink never gets part of one
 */

static const unsigned char *
pa_oai_string(pa_oai_t *x, const unsigned char *p, const unsigned char *last)
{
    size_t                n;
    unsigned              c, need, lo, hi;
    const unsigned char  *start, *seq;

    while (x->u_need) {

        if (p == last) {
            return p;
        }

        c = *p;

        if (c < x->u_lo || c > x->u_hi) {
            pa_oai_fail(x, PA_OAI_NOT_JSON);
            return p;
        }

        x->carry[x->carry_len++] = (unsigned char) c;
        x->u_need--;
        x->u_lo = 0x80;
        x->u_hi = 0xbf;
        p++;
    }

    if (x->carry_len) {
        pa_oai_data(x, x->carry, x->carry_len);
        x->carry_len = 0;

        if (x->status != PA_OAI_OK) {
            return p;
        }
    }

    start = p;

    for ( ;; ) {

        p = pa_oai_plain(p, last);

        if (p == last) {
            break;
        }

        c = *p;

        if (c == '\\') {
            if (x->sink != PA_K_SKIP && p > start) {
                pa_oai_data(x, start, p - start);
            }

            n = pa_oai_escape_fast(x, p, last - p);

            if (x->status != PA_OAI_OK) {
                return p;
            }

            if (n == 0) {
                /* at the end of the buffer, or odd: byte by byte */
                x->state = PA_L_ESCAPE;
                return p + 1;
            }

            p += n;
            start = p;
            continue;
        }

        if (c < 0x80) {
            break;
        }

        /* the lead byte tells the length and the range of the next byte */

        lo = 0x80;
        hi = 0xbf;

        if (x->trail) {
            /* of that string yajl checks only the shape of UTF-8 */
            need = (c >= 0xf0) ? 3 : (c >= 0xe0) ? 2 : 1;

            if (c < 0xc0 || c > 0xf7) {
                pa_oai_fail(x, PA_OAI_NOT_JSON);
                return p;
            }

        } else if (c >= 0xc2 && c <= 0xdf) {
            need = 1;

        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;

            if (c == 0xe0) {
                lo = 0xa0;

            } else if (c == 0xed) {
                hi = 0x9f;
            }

        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;

            if (c == 0xf0) {
                lo = 0x90;

            } else if (c == 0xf4) {
                hi = 0x8f;
            }

        } else {
            pa_oai_fail(x, PA_OAI_NOT_JSON);
            return p;
        }

        seq = p++;

        while (need) {

            if (p == last) {
                if (x->sink != PA_K_SKIP && seq > start) {
                    pa_oai_data(x, start, seq - start);
                }

                x->carry_len = (unsigned char) (last - seq);
                memcpy(x->carry, seq, x->carry_len);
                x->u_need = (unsigned char) need;
                x->u_lo = (unsigned char) lo;
                x->u_hi = (unsigned char) hi;

                return last;
            }

            c = *p;

            if (c < lo || c > hi) {
                pa_oai_fail(x, PA_OAI_NOT_JSON);
                return p;
            }

            need--;
            lo = 0x80;
            hi = 0xbf;
            p++;
        }
    }

    if (x->sink != PA_K_SKIP && p > start) {
        pa_oai_data(x, start, p - start);

        if (x->status != PA_OAI_OK) {
            return p;
        }
    }

    if (p == last) {
        return p;
    }

    if (*p == '"') {
        if (x->trail) {
            pa_oai_fail(x, PA_OAI_NOT_JSON);

        } else if (x->in_key) {
            pa_oai_key(x);

        } else {
            pa_oai_end(x, PA_T_STRING);
        }

        return p + 1;
    }

    /* a control character */

    pa_oai_fail(x, PA_OAI_NOT_JSON);

    return p;
}


/*
 * an escape at p, whole within the "n" bytes there, read at once: its
 * length; 0 if it is not whole, or a high surrogate without a \u escape
 * after it: pa_oai_escape() then reads it byte by byte
 */

static size_t
pa_oai_escape_fast(pa_oai_t *x, const unsigned char *p, size_t n)
{
    uint32_t       cp, low;
    unsigned char  b;

    if (n < 2) {
        return 0;
    }

    switch (p[1]) {
    case '"':
    case '\\':
    case '/':
        b = p[1];
        break;
    case 'b':
        b = '\b';
        break;
    case 'f':
        b = '\f';
        break;
    case 'n':
        b = '\n';
        break;
    case 'r':
        b = '\r';
        break;
    case 't':
        b = '\t';
        break;

    case 'u':
        if (n < 6 || (cp = pa_oai_hex4(p + 2)) > 0xffff) {
            return 0;
        }

        if ((cp & 0xfc00) == 0xd800) {
            if (n < 12 || p[6] != '\\' || p[7] != 'u'
                || (low = pa_oai_hex4(p + 8)) > 0xffff)
            {
                return 0;
            }

            x->hi = cp;
            x->cp = low;
            pa_oai_code_point(x);
            return 12;
        }

        x->cp = cp;
        pa_oai_code_point(x);
        return 6;

    default:
        pa_oai_fail(x, PA_OAI_NOT_JSON);
        return 0;
    }

    if (x->sink != PA_K_SKIP) {
        pa_oai_data(x, &b, 1);
    }

    return 2;
}


/* 4 hex digits, above 0xffff if one is not */

static uint32_t
pa_oai_hex4(const unsigned char *p)
{
    unsigned  i, c;
    uint32_t  v;

    v = 0;

    for (i = 0; i < 4; i++) {
        c = p[i];

        if (c >= '0' && c <= '9') {
            c -= '0';

        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            c = (c | 0x20) - 'a' + 10;

        } else {
            return 0x10000;
        }

        v = v << 4 | c;
    }

    return v;
}


/* one byte of an escape */

static const unsigned char *
pa_oai_escape(pa_oai_t *x, const unsigned char *p)
{
    unsigned       c;
    unsigned char  b;

    c = *p;

    switch (x->state) {

    case PA_L_LOW:
        if (c == '\\') {
            x->state = PA_L_LOW_U;
            return p + 1;
        }

        /* a high surrogate alone: "?", as yajl 2.1 reads it */

        x->hi = 0;
        x->state = PA_L_STRING;
        pa_oai_data(x, (const unsigned char *) "?", 1);
        return p;

    case PA_L_LOW_U:
        if (c == 'u') {
            x->cp = 0;
            x->hex = 0;
            x->state = PA_L_HEX;
            return p + 1;
        }

        x->hi = 0;
        x->state = PA_L_ESCAPE;
        pa_oai_data(x, (const unsigned char *) "?", 1);
        return p;

    case PA_L_HEX:
        if (c >= '0' && c <= '9') {
            c -= '0';

        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            c = (c | 0x20) - 'a' + 10;

        } else {
            pa_oai_fail(x, PA_OAI_NOT_JSON);
            return p;
        }

        x->cp = x->cp << 4 | c;

        if (++x->hex == 4) {
            pa_oai_code_point(x);
        }

        return p + 1;

    default: /* PA_L_ESCAPE */
        break;
    }

    switch (c) {
    case '"':
    case '\\':
    case '/':
        b = (unsigned char) c;
        break;
    case 'b':
        b = '\b';
        break;
    case 'f':
        b = '\f';
        break;
    case 'n':
        b = '\n';
        break;
    case 'r':
        b = '\r';
        break;
    case 't':
        b = '\t';
        break;

    case 'u':
        x->cp = 0;
        x->hex = 0;
        x->state = PA_L_HEX;
        return p + 1;

    default:
        pa_oai_fail(x, PA_OAI_NOT_JSON);
        return p;
    }

    x->state = PA_L_STRING;
    pa_oai_data(x, &b, 1);

    return p + 1;
}


/* the 4 digits of \u are read: the code point, as UTF-8 */

static void
pa_oai_code_point(pa_oai_t *x)
{
    uint32_t  cp;

    cp = x->cp;

    if (x->hi) {
        /* yajl's formula, which does not look at the low half's range */

        cp = ((x->hi & 0x3f) << 10) | ((((x->hi >> 6) & 0xf) + 1) << 16)
             | (cp & 0x3ff);
        x->hi = 0;

    } else if ((cp & 0xfc00) == 0xd800) {
        x->hi = cp;
        x->state = PA_L_LOW;
        return;

    } else if ((cp & 0xfc00) == 0xdc00 && !x->trail) {
        pa_oai_fail(x, PA_OAI_NOT_JSON);
        return;
    }

    x->state = PA_L_STRING;

    if (x->sink != PA_K_SKIP) {
        pa_oai_put(x, cp);
    }
}


static void
pa_oai_put(pa_oai_t *x, uint32_t cp)
{
    size_t         n;
    unsigned char  u[4];

    if (cp < 0x80) {
        u[0] = (unsigned char) cp;
        n = 1;

    } else if (cp < 0x800) {
        u[0] = (unsigned char) (0xc0 | (cp >> 6));
        u[1] = (unsigned char) (0x80 | (cp & 0x3f));
        n = 2;

    } else if (cp < 0x10000) {
        u[0] = (unsigned char) (0xe0 | (cp >> 12));
        u[1] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
        u[2] = (unsigned char) (0x80 | (cp & 0x3f));
        n = 3;

    } else {
        u[0] = (unsigned char) (0xf0 | (cp >> 18));
        u[1] = (unsigned char) (0x80 | ((cp >> 12) & 0x3f));
        u[2] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
        u[3] = (unsigned char) (0x80 | (cp & 0x3f));
        n = 4;
    }

    pa_oai_data(x, u, n);
}


/*
 * a number: JSON's grammar; it ends at the first byte that cannot go on
 * with it, which is not taken; its text goes to the sink (a token id)
 */

static const unsigned char *
pa_oai_number(pa_oai_t *x, const unsigned char *p, const unsigned char *last)
{
    unsigned              c, num;
    const unsigned char  *start;

    start = p;
    num = x->num;

    for ( /* void */ ; p < last; p++) {
        c = *p;

        switch (num) {

        case PA_N_START:
            if (c == '-') {
                num = PA_N_MINUS;
                continue;
            }

            /* fall through */

        case PA_N_MINUS:
            if (c == '0') {
                num = PA_N_ZERO;
                continue;
            }

            if (c >= '1' && c <= '9') {
                num = PA_N_INT;
                continue;
            }

            goto invalid;

        case PA_N_INT:
            if (c >= '0' && c <= '9') {
                continue;
            }

            /* fall through */

        case PA_N_ZERO:
            if (c == '.') {
                num = PA_N_DOT;
                continue;
            }

            /* fall through */

        case PA_N_FRAC:
            if (num == PA_N_FRAC && c >= '0' && c <= '9') {
                continue;
            }

            if (c == 'e' || c == 'E') {
                num = PA_N_E;
                continue;
            }

            goto end;

        case PA_N_DOT:
            if (c >= '0' && c <= '9') {
                num = PA_N_FRAC;
                continue;
            }

            goto invalid;

        case PA_N_E:
            if (c == '+' || c == '-') {
                num = PA_N_SIGN;
                continue;
            }

            /* fall through */

        case PA_N_SIGN:
            if (c >= '0' && c <= '9') {
                num = PA_N_EXP;
                continue;
            }

            goto invalid;

        default: /* PA_N_EXP */
            if (c >= '0' && c <= '9') {
                continue;
            }

            goto end;
        }
    }

    x->num = (unsigned char) num;

    if (p > start) {
        pa_oai_data(x, start, p - start);
    }

    return p;

end:

    if (p > start) {
        pa_oai_data(x, start, p - start);
    }

    pa_oai_end(x, PA_T_NUMBER);

    return p;

invalid:

    pa_oai_fail(x, PA_OAI_NOT_JSON);

    return p;
}


/* decoded bytes of a string, or the text of a number, whole characters */

static void
pa_oai_data(pa_oai_t *x, const unsigned char *s, size_t n)
{
    size_t  i, m;

    switch (x->sink) {

    case PA_K_TEXT:
        pa_oai_text(x, s, n);

        if (x->chars >= x->length) {
            x->sink = PA_K_SKIP;
        }

        break;

    case PA_K_PEND:
        pa_oai_pend(x, s, n);
        break;

    case PA_K_FIELD:
        XXH3_64bits_update(x->field, s, n);
        break;

    case PA_K_BUF:

        /* longer than PA_OAI_BUF: neither a key we read nor a valid id */

        if (x->buf_len <= PA_OAI_BUF) {
            m = PA_OAI_BUF - x->buf_len;
            m = (n < m) ? n : m;
            memcpy(x->buf + x->buf_len, s, m);

            for (i = 0; i < m; i++) {
                if (s[i] < 0x20 || s[i] > 0x7e) {
                    x->buf_bad = 1;
                }
            }
        }

        x->buf_len += n;
        break;

    default: /* PA_K_SKIP */
        break;
    }
}


/* "{" or "[": what the container is, by where it is */

static void
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

static void
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

static void
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
        x->sink = PA_K_SKIP;
    }
}


/* a string, number or literal ends */

static void
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

static void
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
    if (x->status == PA_OAI_OK && x->chars >= x->length
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


static void
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


/* a piece of content before the role: a record opens */

static void
pa_oai_pend_open(pa_oai_t *x)
{
    if (pa_oai_pend_grow(x, 2 * sizeof(size_t)) != 0) {
        return;
    }

    x->pend_rec = x->pend_len;
    x->pend_len += 2 * sizeof(size_t);

    x->sink = PA_K_PEND;
    x->val = PA_V_PEND;
}


/* as much of it as the characters still wanted allow is kept */

static void
pa_oai_pend(pa_oai_t *x, const unsigned char *s, size_t n)
{
    size_t  want, len, chars;

    want = x->length - x->chars - x->pend_chars;

    if (want == 0) {
        return;
    }

    len = pa_oai_cut(s, n, want, &chars);

    if (pa_oai_pend_grow(x, len) != 0) {
        return;
    }

    memcpy(x->pend + x->pend_len, s, len);

    x->pend_len += len;
    x->pend_chars += chars;
}


static void
pa_oai_pend_close(pa_oai_t *x)
{
    size_t  len, seps;

    len = x->pend_len - x->pend_rec - 2 * sizeof(size_t);

    if (len == 0 && x->pend_last) {

        /* an empty piece: one more separator after the last record */

        x->pend_len = x->pend_rec;

        memcpy(&seps, x->pend + x->pend_last - 1 + sizeof(size_t),
               sizeof(size_t));
        seps++;
        memcpy(x->pend + x->pend_last - 1 + sizeof(size_t), &seps,
               sizeof(size_t));

        return;
    }

    seps = 1;

    memcpy(x->pend + x->pend_rec, &len, sizeof(size_t));
    memcpy(x->pend + x->pend_rec + sizeof(size_t), &seps, sizeof(size_t));

    x->pend_last = x->pend_rec + 1;
}


static int
pa_oai_pend_grow(pa_oai_t *x, size_t need)
{
    size_t          size;
    unsigned char  *p;

    need += x->pend_len;

    if (need <= x->pend_size) {
        return 0;
    }

    size = x->pend_size * 2;

    if (size < need) {
        size = need;
    }

    if (size < 256) {
        size = 256;
    }

    p = x->alloc.alloc(x->alloc.ctx, size);
    if (p == NULL) {
        pa_oai_fail(x, PA_OAI_NOMEM);
        x->sink = PA_K_SKIP;
        return -1;
    }

    if (x->pend_len) {
        memcpy(p, x->pend, x->pend_len);
    }

    x->pend = p;
    x->pend_size = size;

    return 0;
}


/* the role came: the content kept is hashed after it */

static void
pa_oai_flush(pa_oai_t *x)
{
    size_t          len, seps;
    unsigned char  *p, *last;

    if (x->pend_len == 0) {
        return;
    }

    p = x->pend;
    last = x->pend + x->pend_len;

    while (p < last) {
        memcpy(&len, p, sizeof(size_t));
        memcpy(&seps, p + sizeof(size_t), sizeof(size_t));
        p += 2 * sizeof(size_t);

        x->pieces += seps;

        pa_oai_text(x, p, len);
        pa_oai_sep(x, PA_OAI_SEP_PIECE, seps);

        p += len;
    }

    x->pend_len = 0;
    x->pend_chars = 0;
    x->pend_last = 0;
}


static void
pa_oai_pck(pa_oai_t *x)
{
    x->has_pck = 0;
    x->pck_invalid = 1;

    if (x->buf_len == 0 || x->buf_len > PA_OAI_BUF || x->buf_bad) {
        return;
    }

    memcpy(x->pck, x->buf, x->buf_len);
    x->pck_len = x->buf_len;
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

    if (x->hook) {
        x->hook(x->hook_ctx, s, len);
    }

    x->chars += chars;
}


/* "n" separators, which are hashed while characters are still wanted */

static void
pa_oai_sep(pa_oai_t *x, unsigned char sep, size_t n)
{
    size_t         m;
    unsigned char  seps[64];

    if (x->chars >= x->length || n == 0) {
        return;
    }

    memset(seps, sep, (n < sizeof(seps)) ? n : sizeof(seps));

    while (n) {
        m = (n < sizeof(seps)) ? n : sizeof(seps);

        XXH3_64bits_update(x->text, seps, m);

        if (x->hook) {
            x->hook(x->hook_ctx, seps, m);
        }

        n -= m;
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
