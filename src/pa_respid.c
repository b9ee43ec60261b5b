
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The id of a stored response in an engine's answer (src/pa_respid.h):
 * a JSON reader that knows only where it is (the nesting, whether the
 * containers at depths 1 and 2 are objects and the key of their value
 * being read), and for a stream the lines of the events.  Plain C, no
 * nginx headers.
 */


#include <string.h>

#include "pa_respid.h"


#define PA_RESPID_JSON     1
#define PA_RESPID_SSE      2

/* a string is: skipped, a key at depth 1 or 2, the id */
#define PA_RESPID_S_SKIP   1
#define PA_RESPID_S_KEY    2
#define PA_RESPID_S_ID     3

/* the keys known */
#define PA_RESPID_K_OTHER  0
#define PA_RESPID_K_ID     1
#define PA_RESPID_K_RESP   2

/* a line of the events: its start, a data line's value, another line */
#define PA_RESPID_L_START  0
#define PA_RESPID_L_DATA   1
#define PA_RESPID_L_SKIP   2
#define PA_RESPID_L_SPACE  3            /* after "data:", a space or not */


static void pa_respid_json(pa_respid_t *s, unsigned char c);
static void pa_respid_string(pa_respid_t *s, unsigned char c);
static void pa_respid_value(pa_respid_t *s);
static void pa_respid_reset(pa_respid_t *s);
static size_t pa_respid_skip(const unsigned char *p, size_t i, size_t n);


void
pa_respid_init(pa_respid_t *s)
{
    memset(s, 0, sizeof(pa_respid_t));
}


pa_respid_rc_e
pa_respid_feed(pa_respid_t *s, const unsigned char *p, size_t n)
{
    size_t         i;
    unsigned char  c;

    for (i = 0; i < n && s->rc == PA_RESPID_MORE; i++) {

        /*
         * the text of a string nobody reads (an answer's output) goes by
         * with memchr(): to its quote, an escape, or (in an event's line,
         * where JSON has none) a line feed
         */

        if (s->str == PA_RESPID_S_SKIP && !s->esc
            && (s->mode == PA_RESPID_JSON || s->line == PA_RESPID_L_DATA))
        {
            i = pa_respid_skip(p, i, n);

            if (i == n) {
                break;
            }
        }

        c = p[i];

        if (s->mode == 0) {
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
                continue;
            }

            s->mode = (c == '{') ? PA_RESPID_JSON : PA_RESPID_SSE;
        }

        if (s->mode == PA_RESPID_JSON) {
            pa_respid_json(s, c);
            continue;
        }

        /* server-sent events: the values of "data:" lines are JSON */

        switch (s->line) {

        case PA_RESPID_L_START:
            if (c == '\n') {

                /* a blank line ends the event */

                if (s->data && ++s->events >= PA_RESPID_EVENTS) {
                    s->rc = PA_RESPID_NONE;
                }

                s->data = 0;
                pa_respid_reset(s);
                break;
            }

            if (c == '\r' && s->pre == 0) {
                break;
            }

            if (c != "data:"[s->pre]) {
                s->line = PA_RESPID_L_SKIP;
                break;
            }

            if (++s->pre == 5) {
                s->line = PA_RESPID_L_SPACE;
                s->data = 1;
            }

            break;

        case PA_RESPID_L_SPACE:
        case PA_RESPID_L_DATA:
            if (c == '\n') {
                s->line = PA_RESPID_L_START;
                s->pre = 0;
                break;
            }

            if (s->line == PA_RESPID_L_SPACE) {
                s->line = PA_RESPID_L_DATA;

                if (c == ' ') {
                    break;
                }
            }

            pa_respid_json(s, c);
            break;

        default: /* PA_RESPID_L_SKIP */
            if (c == '\n') {
                s->line = PA_RESPID_L_START;
                s->pre = 0;
            }

            break;
        }
    }

    return (pa_respid_rc_e) s->rc;
}


/* the first quote, backslash or line feed of p[i..n), or n */

static size_t
pa_respid_skip(const unsigned char *p, size_t i, size_t n)
{
    size_t                end;
    const unsigned char  *q;

    end = n;

    q = memchr(p + i, '"', end - i);
    end = q ? (size_t) (q - p) : end;

    q = memchr(p + i, '\\', end - i);
    end = q ? (size_t) (q - p) : end;

    q = memchr(p + i, '\n', end - i);

    return q ? (size_t) (q - p) : end;
}


pa_respid_rc_e
pa_respid_finish(pa_respid_t *s)
{
    if (s->rc == PA_RESPID_MORE) {
        s->rc = PA_RESPID_NONE;
    }

    return (pa_respid_rc_e) s->rc;
}


/* an event's JSON begins again: where it is, not what was found */

static void
pa_respid_reset(pa_respid_t *s)
{
    s->depth = 0;
    s->str = 0;
    s->esc = 0;
    s->want_key = 0;
    s->obj[1] = 0;
    s->obj[2] = 0;
    s->key[1] = 0;
    s->key[2] = 0;
}


static void
pa_respid_json(pa_respid_t *s, unsigned char c)
{
    uint32_t  d;

    if (s->str) {
        pa_respid_string(s, c);
        return;
    }

    d = s->depth;

    switch (c) {

    case '"':
        if (s->want_key && d >= 1 && d <= 2 && s->obj[d]) {
            s->str = PA_RESPID_S_KEY;
            s->klen = 0;
            break;
        }

        s->str = PA_RESPID_S_SKIP;

        /* the id: the top-level one, or in a stream the response's */

        if ((s->mode == PA_RESPID_JSON && d == 1 && s->obj[1]
             && s->key[1] == PA_RESPID_K_ID)
            || (s->mode == PA_RESPID_SSE && d == 2 && s->obj[1]
                && s->key[1] == PA_RESPID_K_RESP && s->obj[2]
                && s->key[2] == PA_RESPID_K_ID))
        {
            s->str = PA_RESPID_S_ID;
            s->len = 0;
            s->bad = 0;
        }

        break;

    case '{':
    case '[':
        if (d < 0xffffffffu) {
            s->depth = ++d;
        }

        if (d <= 2) {
            s->obj[d] = (c == '{');
            s->key[d] = PA_RESPID_K_OTHER;
        }

        s->want_key = (c == '{');
        break;

    case '}':
    case ']':
        if (d == 0) {
            break;
        }

        s->depth = --d;
        s->want_key = 0;

        if (d == 0 && s->mode == PA_RESPID_JSON) {
            s->rc = PA_RESPID_NONE;           /* the body's object ended */
        }

        break;

    case ',':
        s->want_key = (d >= 1 && d <= 2) ? s->obj[d] : 0;
        break;

    case ':':
        s->want_key = 0;
        break;

    default:
        /* whitespace, a number, a literal: nothing to tell */
        break;
    }
}


static void
pa_respid_string(pa_respid_t *s, unsigned char c)
{
    if (s->esc) {
        s->esc = 0;
        return;
    }

    if (c == '\\') {
        s->esc = 1;

        /* an escaped key is none of those known, an escaped id not taken */

        s->klen = 9;
        s->bad = 1;
        return;
    }

    if (c != '"') {
        if (s->str == PA_RESPID_S_KEY) {
            if (s->klen < 8) {
                s->kbuf[s->klen++] = c;

            } else {
                s->klen = 9;
            }

        } else if (s->str == PA_RESPID_S_ID) {
            if (c < 0x21 || c > 0x7e || s->len == PA_RESPID_MAX) {
                s->bad = 1;

            } else {
                s->id[s->len++] = c;
            }
        }

        return;
    }

    /* the string ends */

    if (s->str == PA_RESPID_S_KEY) {
        s->str = 0;
        s->want_key = 0;
        s->key[s->depth] = PA_RESPID_K_OTHER;

        if (s->klen == 2 && memcmp(s->kbuf, "id", 2) == 0) {
            s->key[s->depth] = PA_RESPID_K_ID;

        } else if (s->klen == 8 && memcmp(s->kbuf, "response", 8) == 0) {
            s->key[s->depth] = PA_RESPID_K_RESP;
        }

        return;
    }

    if (s->str == PA_RESPID_S_ID) {
        s->rc = (s->bad || s->len == 0) ? PA_RESPID_BAD : PA_RESPID_FOUND;
    }

    s->str = 0;
    pa_respid_value(s);
}


/* a string value ended */

static void
pa_respid_value(pa_respid_t *s)
{
    s->want_key = 0;
}


int
pa_respid_path(const unsigned char *uri, size_t n, const unsigned char **id,
    size_t *len)
{
    size_t                i, k;
    static const char     prefix[] = "/v1/responses/";
    const size_t          plen = sizeof(prefix) - 1;

    *id = NULL;
    *len = 0;

    for (i = 0; i + plen <= n; i++) {
        if (uri[i] == '/' && memcmp(uri + i, prefix, plen) == 0) {
            break;
        }
    }

    if (i + plen > n) {
        return 0;
    }

    i += plen;

    for (k = i; k < n && uri[k] != '/'; k++) {
        if (uri[k] < 0x21 || uri[k] > 0x7e) {
            return 0;
        }
    }

    if (k == i || k - i > PA_RESPID_MAX) {
        return 0;
    }

    *id = uri + i;
    *len = k - i;

    return 1;
}
