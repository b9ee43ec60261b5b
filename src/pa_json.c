
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The streaming JSON scanner of the OpenAI key reader: tokens, strings
 * with their escapes and UTF-8, numbers, literals, nesting, across
 * buffer boundaries, and errors.  It tells the key rules (pa_openai.c)
 * what it reads: containers opened and closed, values begun and ended,
 * object keys, and the decoded bytes of strings and numbers.  Plain C,
 * no nginx headers.
 *
 * RFC 8259 JSON, UTF-8 as in RFC 3629 (no overlong forms, surrogates or
 * code points above U+10FFFF), with yajl 2.1's ways of reading it, so
 * that the key is the one the yajl-based reader of earlier releases gave
 * (make fuzz-diff compares the two): \v and \f count as white space; a
 * high surrogate escape takes any \u escape after it as its low half,
 * and one followed by anything else reads as "?" (a lone low surrogate
 * is not UTF-8: not JSON).
 */


#include <string.h>

#include "pa_openai_int.h"
#include "pa_json_plain.h"


static const unsigned char *pa_oai_token(pa_oai_t *x,
    const unsigned char *p);
static const unsigned char *pa_oai_string(pa_oai_t *x,
    const unsigned char *p, const unsigned char *last);
static size_t pa_oai_escape_fast(pa_oai_t *x, const unsigned char *p,
    size_t n);
static const unsigned char *pa_oai_escape(pa_oai_t *x,
    const unsigned char *p);
static unsigned char pa_oai_unescape(unsigned c);
static uint32_t pa_oai_hex4(const unsigned char *p);
static void pa_oai_lone_high(pa_oai_t *x, pa_oai_lex_e state);
static void pa_oai_code_point(pa_oai_t *x);
static void pa_oai_put(pa_oai_t *x, uint32_t cp);
static const unsigned char *pa_oai_number(pa_oai_t *x,
    const unsigned char *p, const unsigned char *last);


int  pa_oai_avx2 = -1;


/* the scanner: returns where it stopped, at "last" unless done or failed */

const unsigned char *
pa_oai_scan(pa_oai_t *x, const unsigned char *p, const unsigned char *last)
{
    unsigned  c;

    if (pa_oai_avx2 < 0) {
        pa_oai_avx2 = pa_cpu_has_avx2();
    }

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
        x->buf_len = 0;
        pa_oai_key_begin(x);
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
 * in a string: runs of plain bytes are checked as UTF-8 and given to the
 * sink whole, escapes that are whole in the buffer are read at once, a
 * character split between buffers is kept in "carry" until it is whole,
 * so that the sink never gets part of one
 */

static const unsigned char *
pa_oai_string(pa_oai_t *x, const unsigned char *p, const unsigned char *last)
{
    int                   ascii;
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

    /* the run from "start" has no byte over 0x7f while "ascii" is 1 */

    start = p;
    ascii = 1;

    for ( ;; ) {

        p = pa_oai_plain(p, last);

        if (p == last) {
            break;
        }

        c = *p;

        if (c == '\\') {
            if (x->sink != PA_K_SKIP && p > start) {
                pa_oai_data_text(x, start, p - start, ascii);
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
            ascii = 1;
            continue;
        }

        if (c < 0x80) {
            break;
        }

        /* the lead byte tells the length and the range of the next byte */

        ascii = 0;

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
        pa_oai_data_text(x, start, p - start, ascii);

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

    if (p[1] != 'u') {
        b = pa_oai_unescape(p[1]);

        if (b == 0) {
            pa_oai_fail(x, PA_OAI_NOT_JSON);
            return 0;
        }

        if (x->sink != PA_K_SKIP) {
            pa_oai_data(x, &b, 1);
        }

        return 2;
    }

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
}


/* the byte of a one-character escape "\c", 0 if "c" is not one */

static unsigned char
pa_oai_unescape(unsigned c)
{
    switch (c) {
    case '"':
    case '\\':
    case '/':
        return (unsigned char) c;
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return 0;
    }
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

        pa_oai_lone_high(x, PA_L_STRING);
        return p;

    case PA_L_LOW_U:
        if (c == 'u') {
            x->cp = 0;
            x->hex = 0;
            x->state = PA_L_HEX;
            return p + 1;
        }

        pa_oai_lone_high(x, PA_L_ESCAPE);
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

    if (c == 'u') {
        x->cp = 0;
        x->hex = 0;
        x->state = PA_L_HEX;
        return p + 1;
    }

    b = pa_oai_unescape(c);

    if (b == 0) {
        pa_oai_fail(x, PA_OAI_NOT_JSON);
        return p;
    }

    x->state = PA_L_STRING;
    pa_oai_data(x, &b, 1);

    return p + 1;
}


/*
 * a high surrogate not followed by a \u escape: "?", as yajl 2.1 reads
 * it; the byte after it is read again in "state"
 */

static void
pa_oai_lone_high(pa_oai_t *x, pa_oai_lex_e state)
{
    x->hi = 0;
    x->state = state;
    pa_oai_data(x, (const unsigned char *) "?", 1);
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
