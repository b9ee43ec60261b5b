
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The ids of a /v1/models answer, read by a push scanner as the answer
 * arrives: a state machine over each byte, with the nesting kept as a bit
 * per level (PA_MODELS_MAX_DEPTH levels at most), so that an answer of
 * any size is read in the same few hundred bytes: no tree, no buffer of
 * the answer, no allocation.  The only copy is the string being decoded,
 * kept up to PA_MODELS_ID_MAX bytes.  Strings are decoded as the OpenAI
 * body's "model" is (escapes undone, \u escapes to UTF-8), so that an id
 * and a request's model compare equal by their bytes, and by
 * pa_models_hash().
 */


#include <string.h>

#include "pa_xxhash.h"

#include "pa_models.h"


/* where the scanner is */
enum {
    PA_MODELS_START = 0,        /* before the top-level object */
    PA_MODELS_KEY_OR_CLOSE,     /* after '{' */
    PA_MODELS_KEY,              /* after ',' in an object */
    PA_MODELS_COLON,            /* after a member's name */
    PA_MODELS_VALUE_OR_CLOSE,   /* after '[' */
    PA_MODELS_VALUE,            /* after ':' or ',' in an array */
    PA_MODELS_AFTER,            /* after a value: ',' or the close */
    PA_MODELS_STRING,
    PA_MODELS_NUMBER,
    PA_MODELS_LITERAL,
    PA_MODELS_DONE,             /* after the top-level object */
    PA_MODELS_ERROR
};

/* in a string */
enum {
    PA_MODELS_CHAR = 0,
    PA_MODELS_ESC,              /* after '\' */
    PA_MODELS_HEX,              /* in the 4 digits of \u */
    PA_MODELS_LOW_BS,           /* after a high surrogate: its '\' */
    PA_MODELS_LOW_U             /* and its 'u' */
};

/* in a number (RFC 8259: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?) */
enum {
    PA_MODELS_MINUS = 0,
    PA_MODELS_ZERO,
    PA_MODELS_INT,
    PA_MODELS_DOT,
    PA_MODELS_FRAC,
    PA_MODELS_E,
    PA_MODELS_ESIGN,
    PA_MODELS_EXP
};

/* what the value after a member's name is */
enum {
    PA_MODELS_ANY = 0,
    PA_MODELS_DATA,             /* of the top-level "data": an array */
    PA_MODELS_ID                /* of an element's "id" */
};


static int pa_models_byte(pa_models_scan_t *s, unsigned char c);
static int pa_models_value(pa_models_scan_t *s, unsigned char c);
static int pa_models_open(pa_models_scan_t *s, int object);
static int pa_models_close(pa_models_scan_t *s, unsigned char c);
static int pa_models_string(pa_models_scan_t *s, unsigned char c);
static int pa_models_string_end(pa_models_scan_t *s);
static int pa_models_number(pa_models_scan_t *s, unsigned char c);
static void pa_models_put(pa_models_scan_t *s, const unsigned char *p,
    size_t n);
static void pa_models_utf8(pa_models_scan_t *s, uint32_t cp);
static int pa_models_is(pa_models_scan_t *s, const char *lit);


void
pa_models_init(pa_models_scan_t *s, pa_models_id_pt id, void *ctx)
{
    memset(s, 0, sizeof(pa_models_scan_t));

    s->id = id;
    s->ctx = ctx;
    s->state = PA_MODELS_START;
}


int
pa_models_feed(pa_models_scan_t *s, const unsigned char *p, size_t n)
{
    const unsigned char  *q, *end;

    end = p + n;

    while (p < end) {

        if (s->state == PA_MODELS_ERROR) {
            return -1;
        }

        /* the bulk of an answer: the plain bytes of strings */

        if (s->state == PA_MODELS_STRING && s->sub == PA_MODELS_CHAR
            && *p != '"' && *p != '\\' && *p >= 0x20)
        {
            q = p;

            while (q < end && *q != '"' && *q != '\\' && *q >= 0x20) {
                q++;
            }

            pa_models_put(s, p, q - p);
            p = q;
            continue;
        }

        switch (pa_models_byte(s, *p)) {

        case 0:
            p++;
            break;

        case 1:
            /* the byte ended a number: it is read again after it */
            break;

        default:
            s->state = PA_MODELS_ERROR;
            return -1;
        }
    }

    return (s->state == PA_MODELS_ERROR) ? -1 : 0;
}


int
pa_models_finish(pa_models_scan_t *s, size_t *skipped)
{
    if (skipped) {
        *skipped = s->skipped;
    }

    if (s->state != PA_MODELS_DONE || !s->data) {
        return -1;
    }

    return s->ids;
}


int
pa_models_parse(const unsigned char *p, size_t n, pa_models_id_pt id,
    void *ctx, size_t *skipped)
{
    int               rc;
    pa_models_scan_t  s;

    pa_models_init(&s, id, ctx);

    (void) pa_models_feed(&s, p, n);

    rc = pa_models_finish(&s, skipped);

    if (rc < 0 && skipped) {
        *skipped = 0;
    }

    return rc;
}


uint64_t
pa_models_hash(const unsigned char *name, size_t len)
{
    uint64_t  h;

    h = XXH3_64bits(name, len);

    return h ? h : 1;
}


unsigned
pa_models_share(unsigned slots, unsigned declared, unsigned servers)
{
    unsigned  share;

    if (declared >= slots || servers == 0) {
        return 1;
    }

    share = (slots - declared) / servers;

    return share ? share : 1;
}


int
pa_models_pick(unsigned n, const uint64_t *used, const uint64_t *listed,
    const uint64_t *kept, int evict)
{
    unsigned  w;
    uint64_t  free;

    /* a free slot, then one of a model nobody lists, then one to evict */

    for (w = 0; w < n / 64; w++) {
        free = ~used[w];

        if (free) {
            return (int) (w * 64 + __builtin_ctzll(free));
        }
    }

    for (w = 0; w < n / 64; w++) {
        free = ~(listed[w] | kept[w]);

        if (free) {
            return (int) (w * 64 + __builtin_ctzll(free));
        }
    }

    for (w = 0; evict && w < n / 64; w++) {
        free = ~kept[w];

        if (free) {
            return (int) (w * 64 + __builtin_ctzll(free));
        }
    }

    return -1;
}


unsigned
pa_models_count(unsigned n, const uint64_t *set)
{
    unsigned  w, count;

    count = 0;

    for (w = 0; w < n / 64; w++) {
        count += (unsigned) __builtin_popcountll(set[w]);
    }

    return count;
}


unsigned
pa_models_keep(unsigned n, uint64_t *hash, const uint64_t *declared,
    const uint64_t *others, const uint64_t *held, const uint64_t *ids,
    unsigned nids, unsigned share, int *slot, uint64_t *listed,
    uint64_t *own)
{
    int       k;
    unsigned  i, j, w, pass, nown, refused;
    uint64_t  bit;
    uint64_t  used[PA_MODELS_SLOTS_MAX / 64], all[PA_MODELS_SLOTS_MAX / 64];
    uint64_t  kept[PA_MODELS_SLOTS_MAX / 64];

    if (n > PA_MODELS_SLOTS_MAX) {
        n = PA_MODELS_SLOTS_MAX;
    }

    memset(listed, 0, n / 8);
    memset(own, 0, n / 8);
    memset(used, 0, n / 8);

    for (j = 0; j < n; j++) {
        if (hash[j]) {
            used[j / 64] |= (uint64_t) 1 << (j % 64);
        }
    }

    nown = 0;
    refused = 0;

    for (pass = 0; pass < 2; pass++) {

        for (i = 0; i < nids; i++) {

            for (k = 0; k < (int) n && hash[k] != ids[i]; k++) {
                /* void */
            }

            if (k == (int) n) {
                k = -1;
            }

            if (pass == 0) {
                /* an id with a slot, once */

                slot[i] = k;

                if (k < 0 || (listed[k / 64] & ((uint64_t) 1 << (k % 64)))) {
                    continue;
                }

            } else if (k >= 0) {
                /* kept in the first pass, or a second time in the list */

                slot[i] = k;
                continue;

            } else {
                for (w = 0; w < n / 64; w++) {
                    all[w] = others[w] | listed[w];
                    kept[w] = held[w] | declared[w] | listed[w];
                }

                k = pa_models_pick(n, used, all, kept, nown < share);

                slot[i] = k;

                if (k < 0) {
                    refused++;
                    continue;
                }

                hash[k] = ids[i];
                used[k / 64] |= (uint64_t) 1 << (k % 64);
            }

            bit = (uint64_t) 1 << (k % 64);

            listed[k / 64] |= bit;

            /* a declared model's slot is held for it: not of the share */

            if (nown < share && !(declared[k / 64] & bit)) {
                own[k / 64] |= bit;
                nown++;
            }
        }
    }

    return refused;
}


/* one byte: 0 read, 1 to be read again (it ended a number), -1 refused */

static int
pa_models_byte(pa_models_scan_t *s, unsigned char c)
{
    int  object;

    switch (s->state) {

    case PA_MODELS_STRING:
        return pa_models_string(s, c);

    case PA_MODELS_NUMBER:
        return pa_models_number(s, c);

    case PA_MODELS_LITERAL:
        if (c != (unsigned char) s->lit[s->sub]) {
            return -1;
        }

        if (s->lit[++s->sub] == '\0') {
            s->state = PA_MODELS_AFTER;
        }

        return 0;

    default:
        break;
    }

    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        return 0;
    }

    switch (s->state) {

    case PA_MODELS_START:
        if (c != '{') {
            return -1;
        }

        return pa_models_open(s, 1);

    case PA_MODELS_KEY_OR_CLOSE:
        if (c == '}') {
            return pa_models_close(s, c);
        }

        /* fall through */

    case PA_MODELS_KEY:
        if (c != '"') {
            return -1;
        }

        s->state = PA_MODELS_STRING;
        s->sub = PA_MODELS_CHAR;
        s->key = 1;
        s->is_id = 0;
        s->len = 0;
        return 0;

    case PA_MODELS_COLON:
        if (c != ':') {
            return -1;
        }

        s->state = PA_MODELS_VALUE;
        return 0;

    case PA_MODELS_VALUE_OR_CLOSE:
        if (c == ']') {
            return pa_models_close(s, c);
        }

        /* fall through */

    case PA_MODELS_VALUE:
        return pa_models_value(s, c);

    case PA_MODELS_AFTER:
        object = (s->objects >> (s->depth - 1)) & 1;

        if (c == ',') {
            s->state = object ? PA_MODELS_KEY : PA_MODELS_VALUE;
            return 0;
        }

        if (c != (object ? '}' : ']')) {
            return -1;
        }

        return pa_models_close(s, c);

    default:    /* PA_MODELS_DONE: white space only */
        return -1;
    }
}


/* the first byte of a value */

static int
pa_models_value(pa_models_scan_t *s, unsigned char c)
{
    int  role;

    role = s->role;
    s->role = PA_MODELS_ANY;

    if (role == PA_MODELS_DATA && c != '[') {
        return -1;
    }

    /* an element of "data": an object is looked into, else passed over */

    if (s->in_data && s->depth == 2) {
        if (c == '{') {
            s->found = 0;

        } else {
            s->skipped++;
        }
    }

    switch (c) {

    case '{':
        return pa_models_open(s, 1);

    case '[':
        if (pa_models_open(s, 0) != 0) {
            return -1;
        }

        if (role == PA_MODELS_DATA) {
            s->in_data = 1;
            s->data = 1;
        }

        return 0;

    case '"':
        s->state = PA_MODELS_STRING;
        s->sub = PA_MODELS_CHAR;
        s->key = 0;
        s->is_id = (role == PA_MODELS_ID);
        s->len = 0;
        return 0;

    case 't':
        s->lit = "true";
        break;

    case 'f':
        s->lit = "false";
        break;

    case 'n':
        s->lit = "null";
        break;

    case '-':
        s->state = PA_MODELS_NUMBER;
        s->sub = PA_MODELS_MINUS;
        return 0;

    case '0':
        s->state = PA_MODELS_NUMBER;
        s->sub = PA_MODELS_ZERO;
        return 0;

    default:
        if (c < '1' || c > '9') {
            return -1;
        }

        s->state = PA_MODELS_NUMBER;
        s->sub = PA_MODELS_INT;
        return 0;
    }

    s->state = PA_MODELS_LITERAL;
    s->sub = 1;

    return 0;
}


static int
pa_models_open(pa_models_scan_t *s, int object)
{
    if (s->depth == PA_MODELS_MAX_DEPTH) {
        return -1;
    }

    if (object) {
        s->objects |= (uint32_t) 1 << s->depth;
        s->state = PA_MODELS_KEY_OR_CLOSE;

    } else {
        s->objects &= ~((uint32_t) 1 << s->depth);
        s->state = PA_MODELS_VALUE_OR_CLOSE;
    }

    s->depth++;

    return 0;
}


static int
pa_models_close(pa_models_scan_t *s, unsigned char c)
{
    if (s->in_data) {
        if (s->depth == 3 && c == '}' && !s->found) {
            s->skipped++;

        } else if (s->depth == 2) {
            s->in_data = 0;
        }
    }

    s->depth--;
    s->state = (s->depth == 0) ? PA_MODELS_DONE : PA_MODELS_AFTER;

    return 0;
}


/* a byte of a string other than a run of plain ones */

static int
pa_models_string(pa_models_scan_t *s, unsigned char c)
{
    uint32_t  v;

    switch (s->sub) {

    case PA_MODELS_CHAR:
        if (c == '"') {
            return pa_models_string_end(s);
        }

        if (c == '\\') {
            s->sub = PA_MODELS_ESC;
            return 0;
        }

        if (c < 0x20) {
            return -1;
        }

        pa_models_put(s, &c, 1);
        return 0;

    case PA_MODELS_ESC:
        switch (c) {
        case '"':
        case '\\':
        case '/':
            break;
        case 'b':
            c = '\b';
            break;
        case 'f':
            c = '\f';
            break;
        case 'n':
            c = '\n';
            break;
        case 'r':
            c = '\r';
            break;
        case 't':
            c = '\t';
            break;

        case 'u':
            s->sub = PA_MODELS_HEX;
            s->cp = 0;
            s->hex = 0;
            return 0;

        default:
            return -1;
        }

        pa_models_put(s, &c, 1);
        s->sub = PA_MODELS_CHAR;
        return 0;

    case PA_MODELS_HEX:
        if (c >= '0' && c <= '9') {
            v = c - '0';

        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            v = (c | 0x20) - 'a' + 10;

        } else {
            return -1;
        }

        s->cp = (s->cp << 4) | v;

        if (++s->hex < 4) {
            return 0;
        }

        if (s->hi) {
            if (s->cp < 0xdc00 || s->cp > 0xdfff) {
                return -1;
            }

            pa_models_utf8(s, 0x10000 + ((s->hi - 0xd800) << 10)
                              + (s->cp - 0xdc00));
            s->hi = 0;

        } else if (s->cp >= 0xdc00 && s->cp <= 0xdfff) {
            return -1;

        } else if (s->cp >= 0xd800 && s->cp <= 0xdbff) {
            s->hi = s->cp;
            s->sub = PA_MODELS_LOW_BS;
            return 0;

        } else {
            pa_models_utf8(s, s->cp);
        }

        s->sub = PA_MODELS_CHAR;
        return 0;

    case PA_MODELS_LOW_BS:
        if (c != '\\') {
            return -1;
        }

        s->sub = PA_MODELS_LOW_U;
        return 0;

    default:    /* PA_MODELS_LOW_U */
        if (c != 'u') {
            return -1;
        }

        s->sub = PA_MODELS_HEX;
        s->cp = 0;
        s->hex = 0;
        return 0;
    }
}


/* the closing quote: a member's name says what its value is */

static int
pa_models_string_end(pa_models_scan_t *s)
{
    if (s->key) {
        s->state = PA_MODELS_COLON;

        if (s->depth == 1 && pa_models_is(s, "data")) {
            s->role = PA_MODELS_DATA;

        } else if (s->depth == 3 && s->in_data && pa_models_is(s, "id")) {
            s->role = PA_MODELS_ID;

        } else {
            s->role = PA_MODELS_ANY;
        }

        return 0;
    }

    if (s->is_id && s->len > 0 && s->len <= PA_MODELS_ID_MAX) {
        s->id(s->ctx, s->buf, s->len);
        s->ids++;
        s->found = 1;
    }

    s->state = PA_MODELS_AFTER;

    return 0;
}


/* a byte after the first of a number: 1 if it ended the number */

static int
pa_models_number(pa_models_scan_t *s, unsigned char c)
{
    int  digit;

    digit = (c >= '0' && c <= '9');

    switch (s->sub) {

    case PA_MODELS_MINUS:
        if (!digit) {
            return -1;
        }

        s->sub = (c == '0') ? PA_MODELS_ZERO : PA_MODELS_INT;
        return 0;

    case PA_MODELS_INT:
        if (digit) {
            return 0;
        }

        /* fall through */

    case PA_MODELS_ZERO:
        if (c == '.') {
            s->sub = PA_MODELS_DOT;
            return 0;
        }

        if (c == 'e' || c == 'E') {
            s->sub = PA_MODELS_E;
            return 0;
        }

        break;

    case PA_MODELS_DOT:
        if (!digit) {
            return -1;
        }

        s->sub = PA_MODELS_FRAC;
        return 0;

    case PA_MODELS_FRAC:
        if (digit) {
            return 0;
        }

        if (c == 'e' || c == 'E') {
            s->sub = PA_MODELS_E;
            return 0;
        }

        break;

    case PA_MODELS_E:
        if (c == '+' || c == '-') {
            s->sub = PA_MODELS_ESIGN;
            return 0;
        }

        /* fall through */

    case PA_MODELS_ESIGN:
        if (!digit) {
            return -1;
        }

        s->sub = PA_MODELS_EXP;
        return 0;

    default:    /* PA_MODELS_EXP */
        if (digit) {
            return 0;
        }

        break;
    }

    s->state = PA_MODELS_AFTER;

    return 1;
}


/* the decoded string is kept up to PA_MODELS_ID_MAX bytes, and measured */

static void
pa_models_put(pa_models_scan_t *s, const unsigned char *p, size_t n)
{
    if (s->len + n <= PA_MODELS_ID_MAX) {
        memcpy(s->buf + s->len, p, n);
    }

    s->len += n;
}


static void
pa_models_utf8(pa_models_scan_t *s, uint32_t cp)
{
    unsigned char  u[4];

    if (cp < 0x80) {
        u[0] = (unsigned char) cp;
        pa_models_put(s, u, 1);

    } else if (cp < 0x800) {
        u[0] = (unsigned char) (0xc0 | (cp >> 6));
        u[1] = (unsigned char) (0x80 | (cp & 0x3f));
        pa_models_put(s, u, 2);

    } else if (cp < 0x10000) {
        u[0] = (unsigned char) (0xe0 | (cp >> 12));
        u[1] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
        u[2] = (unsigned char) (0x80 | (cp & 0x3f));
        pa_models_put(s, u, 3);

    } else {
        u[0] = (unsigned char) (0xf0 | (cp >> 18));
        u[1] = (unsigned char) (0x80 | ((cp >> 12) & 0x3f));
        u[2] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
        u[3] = (unsigned char) (0x80 | (cp & 0x3f));
        pa_models_put(s, u, 4);
    }
}


/* the string just read is "lit" */

static int
pa_models_is(pa_models_scan_t *s, const char *lit)
{
    size_t  n;

    n = strlen(lit);

    return s->len == n && memcmp(s->buf, lit, n) == 0;
}
