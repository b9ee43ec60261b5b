
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The ids of a /v1/models answer, read by a small recursive-descent JSON
 * reader over the whole body: no tree, no allocation; the only copy is
 * the id being decoded, in a buffer of PA_MODELS_ID_MAX bytes.  Strings
 * are decoded as the OpenAI body's "model" is (escapes undone, \u
 * escapes to UTF-8), so that an id and a request's model compare equal
 * by their bytes, and by pa_models_hash().
 */


#include <string.h>

#include "pa_xxhash.h"

#include "pa_models.h"


typedef struct {
    const unsigned char  *p;
    const unsigned char  *end;
    int                   depth;
    size_t                len;        /* of the decoded string, or more */
    unsigned char         buf[PA_MODELS_ID_MAX];
} pa_models_rd_t;


static void pa_models_ws(pa_models_rd_t *rd);
static int pa_models_value(pa_models_rd_t *rd);
static int pa_models_string(pa_models_rd_t *rd);
static int pa_models_hex(pa_models_rd_t *rd, uint32_t *cp);
static void pa_models_put(pa_models_rd_t *rd, const unsigned char *s,
    size_t n);
static int pa_models_number(pa_models_rd_t *rd);
static int pa_models_literal(pa_models_rd_t *rd, const char *lit);
static int pa_models_data(pa_models_rd_t *rd, pa_models_id_pt id, void *ctx,
    size_t *skipped);
static int pa_models_is(pa_models_rd_t *rd, const char *lit);
static int pa_models_next(pa_models_rd_t *rd, unsigned char close);


int
pa_models_parse(const unsigned char *p, size_t n, pa_models_id_pt id,
    void *ctx, size_t *skipped)
{
    int             ids, rc, data;
    size_t          dummy;
    pa_models_rd_t  rd;

    rd.p = p;
    rd.end = p + n;
    rd.depth = 1;
    rd.len = 0;

    if (skipped == NULL) {
        skipped = &dummy;
    }

    *skipped = 0;
    ids = 0;
    data = 0;

    pa_models_ws(&rd);

    if (rd.p == rd.end || *rd.p++ != '{') {
        return -1;
    }

    pa_models_ws(&rd);

    if (rd.p < rd.end && *rd.p == '}') {
        rd.p++;
        goto end;
    }

    for ( ;; ) {
        if (rd.p == rd.end || *rd.p != '"' || pa_models_string(&rd) != 0) {
            return -1;
        }

        pa_models_ws(&rd);

        if (rd.p == rd.end || *rd.p++ != ':') {
            return -1;
        }

        pa_models_ws(&rd);

        if (pa_models_is(&rd, "data")) {
            if (rd.p == rd.end || *rd.p != '[') {
                return -1;
            }

            rc = pa_models_data(&rd, id, ctx, skipped);
            if (rc < 0) {
                return -1;
            }

            ids += rc;
            data = 1;

        } else if (pa_models_value(&rd) != 0) {
            return -1;
        }

        pa_models_ws(&rd);

        if (rd.p == rd.end) {
            return -1;
        }

        if (*rd.p == ',') {
            rd.p++;
            pa_models_ws(&rd);
            continue;
        }

        if (*rd.p++ != '}') {
            return -1;
        }

        break;
    }

end:

    pa_models_ws(&rd);

    if (rd.p != rd.end || !data) {
        return -1;
    }

    return ids;
}


uint64_t
pa_models_hash(const unsigned char *name, size_t len)
{
    uint64_t  h;

    h = XXH3_64bits(name, len);

    return h ? h : 1;
}


/* the elements of "data": objects whose string "id" is given */

static int
pa_models_data(pa_models_rd_t *rd, pa_models_id_pt id, void *ctx,
    size_t *skipped)
{
    int  rc, ids, found;

    ids = 0;

    if (++rd->depth > PA_MODELS_MAX_DEPTH) {
        return -1;
    }

    rd->p++;                                      /* '[' */
    pa_models_ws(rd);

    if (rd->p < rd->end && *rd->p == ']') {
        rd->p++;
        rd->depth--;
        return 0;
    }

    for ( ;; ) {
        if (rd->p == rd->end) {
            return -1;
        }

        if (*rd->p != '{') {
            if (pa_models_value(rd) != 0) {
                return -1;
            }

            (*skipped)++;
            goto next;
        }

        if (++rd->depth > PA_MODELS_MAX_DEPTH) {
            return -1;
        }

        rd->p++;
        pa_models_ws(rd);
        found = 0;

        if (rd->p < rd->end && *rd->p == '}') {
            rd->p++;
            rd->depth--;
            (*skipped)++;
            goto next;
        }

        for ( ;; ) {
            if (rd->p == rd->end || *rd->p != '"'
                || pa_models_string(rd) != 0)
            {
                return -1;
            }

            pa_models_ws(rd);

            if (rd->p == rd->end || *rd->p++ != ':') {
                return -1;
            }

            pa_models_ws(rd);

            if (pa_models_is(rd, "id") && rd->p < rd->end && *rd->p == '"') {
                if (pa_models_string(rd) != 0) {
                    return -1;
                }

                if (rd->len <= PA_MODELS_ID_MAX && rd->len > 0) {
                    id(ctx, rd->buf, rd->len);
                    ids++;
                    found = 1;
                }

            } else if (pa_models_value(rd) != 0) {
                return -1;
            }

            rc = pa_models_next(rd, '}');

            if (rc < 0) {
                return -1;
            }

            if (rc == 0) {
                break;
            }
        }

        rd->depth--;

        if (!found) {
            (*skipped)++;
        }

    next:

        rc = pa_models_next(rd, ']');

        if (rc < 0) {
            return -1;
        }

        if (rc == 0) {
            break;
        }
    }

    rd->depth--;

    return ids;
}


/* the string just read (in rd->buf) is "lit" */

static int
pa_models_is(pa_models_rd_t *rd, const char *lit)
{
    size_t  n;

    n = strlen(lit);

    return rd->len == n && memcmp(rd->buf, lit, n) == 0;
}


/*
 * after a member or an element: 1 at a comma (and the white space after
 * it), 0 at "close", -1 at anything else or the end
 */

static int
pa_models_next(pa_models_rd_t *rd, unsigned char close)
{
    pa_models_ws(rd);

    if (rd->p == rd->end) {
        return -1;
    }

    if (*rd->p == ',') {
        rd->p++;
        pa_models_ws(rd);
        return 1;
    }

    return (*rd->p++ == close) ? 0 : -1;
}


static void
pa_models_ws(pa_models_rd_t *rd)
{
    while (rd->p < rd->end
           && (*rd->p == ' ' || *rd->p == '\t' || *rd->p == '\n'
               || *rd->p == '\r'))
    {
        rd->p++;
    }
}


/* any value, checked and passed over */

static int
pa_models_value(pa_models_rd_t *rd)
{
    int            rc;
    unsigned char  close;

    if (rd->p == rd->end) {
        return -1;
    }

    switch (*rd->p) {

    case '"':
        return pa_models_string(rd);

    case '{':
    case '[':
        close = (*rd->p == '{') ? '}' : ']';

        if (++rd->depth > PA_MODELS_MAX_DEPTH) {
            return -1;
        }

        rd->p++;
        pa_models_ws(rd);

        if (rd->p < rd->end && *rd->p == close) {
            rd->p++;
            rd->depth--;
            return 0;
        }

        for ( ;; ) {
            if (close == '}') {
                if (rd->p == rd->end || *rd->p != '"'
                    || pa_models_string(rd) != 0)
                {
                    return -1;
                }

                pa_models_ws(rd);

                if (rd->p == rd->end || *rd->p++ != ':') {
                    return -1;
                }

                pa_models_ws(rd);
            }

            if (pa_models_value(rd) != 0) {
                return -1;
            }

            rc = pa_models_next(rd, close);

            if (rc <= 0) {
                if (rc == 0) {
                    rd->depth--;
                }

                return rc;
            }
        }

    case 't':
        return pa_models_literal(rd, "true");

    case 'f':
        return pa_models_literal(rd, "false");

    case 'n':
        return pa_models_literal(rd, "null");

    default:
        return pa_models_number(rd);
    }
}


/*
 * a string at rd->p (its opening quote), decoded into rd->buf; rd->len is
 * its decoded length, which may exceed what rd->buf kept
 */

static int
pa_models_string(pa_models_rd_t *rd)
{
    uint32_t        cp, lo;
    unsigned char   c, u[4];

    rd->p++;
    rd->len = 0;

    for ( ;; ) {
        if (rd->p == rd->end) {
            return -1;
        }

        c = *rd->p++;

        if (c == '"') {
            return 0;
        }

        if (c < 0x20) {
            return -1;
        }

        if (c != '\\') {
            pa_models_put(rd, &c, 1);
            continue;
        }

        if (rd->p == rd->end) {
            return -1;
        }

        c = *rd->p++;

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
            if (pa_models_hex(rd, &cp) != 0) {
                return -1;
            }

            if (cp >= 0xdc00 && cp <= 0xdfff) {
                return -1;
            }

            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (rd->end - rd->p < 2 || rd->p[0] != '\\'
                    || rd->p[1] != 'u')
                {
                    return -1;
                }

                rd->p += 2;

                if (pa_models_hex(rd, &lo) != 0
                    || lo < 0xdc00 || lo > 0xdfff)
                {
                    return -1;
                }

                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }

            if (cp < 0x80) {
                u[0] = (unsigned char) cp;
                pa_models_put(rd, u, 1);

            } else if (cp < 0x800) {
                u[0] = (unsigned char) (0xc0 | (cp >> 6));
                u[1] = (unsigned char) (0x80 | (cp & 0x3f));
                pa_models_put(rd, u, 2);

            } else if (cp < 0x10000) {
                u[0] = (unsigned char) (0xe0 | (cp >> 12));
                u[1] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
                u[2] = (unsigned char) (0x80 | (cp & 0x3f));
                pa_models_put(rd, u, 3);

            } else {
                u[0] = (unsigned char) (0xf0 | (cp >> 18));
                u[1] = (unsigned char) (0x80 | ((cp >> 12) & 0x3f));
                u[2] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
                u[3] = (unsigned char) (0x80 | (cp & 0x3f));
                pa_models_put(rd, u, 4);
            }

            continue;

        default:
            return -1;
        }

        pa_models_put(rd, &c, 1);
    }
}


static int
pa_models_hex(pa_models_rd_t *rd, uint32_t *cp)
{
    int            i;
    unsigned char  c;

    if (rd->end - rd->p < 4) {
        return -1;
    }

    *cp = 0;

    for (i = 0; i < 4; i++) {
        c = *rd->p++;

        if (c >= '0' && c <= '9') {
            *cp = (*cp << 4) | (uint32_t) (c - '0');

        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            *cp = (*cp << 4) | (uint32_t) ((c | 0x20) - 'a' + 10);

        } else {
            return -1;
        }
    }

    return 0;
}


static void
pa_models_put(pa_models_rd_t *rd, const unsigned char *s, size_t n)
{
    if (rd->len + n <= PA_MODELS_ID_MAX) {
        memcpy(rd->buf + rd->len, s, n);
    }

    rd->len += n;
}


static int
pa_models_number(pa_models_rd_t *rd)
{
    const unsigned char  *start;

    if (rd->p < rd->end && *rd->p == '-') {
        rd->p++;
    }

    if (rd->p == rd->end || *rd->p < '0' || *rd->p > '9') {
        return -1;
    }

    if (*rd->p++ != '0') {
        while (rd->p < rd->end && *rd->p >= '0' && *rd->p <= '9') {
            rd->p++;
        }
    }

    if (rd->p < rd->end && *rd->p == '.') {
        start = ++rd->p;

        while (rd->p < rd->end && *rd->p >= '0' && *rd->p <= '9') {
            rd->p++;
        }

        if (rd->p == start) {
            return -1;
        }
    }

    if (rd->p < rd->end && (*rd->p == 'e' || *rd->p == 'E')) {
        rd->p++;

        if (rd->p < rd->end && (*rd->p == '+' || *rd->p == '-')) {
            rd->p++;
        }

        start = rd->p;

        while (rd->p < rd->end && *rd->p >= '0' && *rd->p <= '9') {
            rd->p++;
        }

        if (rd->p == start) {
            return -1;
        }
    }

    return 0;
}


static int
pa_models_literal(pa_models_rd_t *rd, const char *lit)
{
    size_t  n;

    n = strlen(lit);

    if ((size_t) (rd->end - rd->p) < n || memcmp(rd->p, lit, n) != 0) {
        return -1;
    }

    rd->p += n;

    return 0;
}
