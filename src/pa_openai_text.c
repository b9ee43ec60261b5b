
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The text of the OpenAI key: where the decoded bytes of a value go
 * (the text, content kept until its message's role, model or
 * cache_salt, a key or prompt_cache_key), the separators, and the cut
 * at "length" characters.  Plain C, no nginx headers.
 */


#include <string.h>

#include "pa_openai_int.h"
#include "pa_utf8.h"


static void pa_oai_pend(pa_oai_t *x, const unsigned char *s, size_t n);
static int pa_oai_grow(pa_oai_t *x, unsigned char **data, size_t len,
    size_t *size, size_t need);
static size_t pa_oai_text(pa_oai_t *x, const unsigned char *s, size_t n,
    int ascii);
static void pa_oai_past(pa_oai_t *x, const unsigned char *s, size_t n);
static void pa_oai_sep_out(pa_oai_t *x);
static size_t pa_oai_keep(pa_oai_t *x, const unsigned char *s, size_t n,
    int ascii);
static void pa_oai_keep_sep(pa_oai_t *x, unsigned char sep, size_t n);
static void pa_oai_trim(pa_oai_t *x);
static void pa_oai_kept_out(pa_oai_t *x, pa_oai_kept_t *k);


/* decoded bytes of a string, or the text of a number, whole characters */

void
pa_oai_data(pa_oai_t *x, const unsigned char *s, size_t n)
{
    pa_oai_data_text(x, s, n, 0);
}


/* the same; "ascii" 1 if the scanner saw no byte over 0x7f in them */

void
pa_oai_data_text(pa_oai_t *x, const unsigned char *s, size_t n, int ascii)
{
    size_t  i, m;

    /* a message's role: is it "system"? */

    if (x->val == PA_V_ROLE && !x->in_key) {

        if (x->role_len < sizeof(x->role)) {
            m = sizeof(x->role) - x->role_len;
            m = (n < m) ? n : m;
            memcpy(x->role + x->role_len, s, m);
        }

        x->role_len = (unsigned char) ((x->role_len + n < 255)
                                       ? x->role_len + n : 255);
    }

    switch (x->sink) {

    case PA_K_TEXT:
        m = pa_oai_text(x, s, n, ascii);

        if (pa_oai_used(x) >= x->length) {

            /* the rest of a role is still read: is it "system"? */

            x->sink = (x->count_past || x->val == PA_V_ROLE) ? PA_K_PAST
                                                             : PA_K_SKIP;
            pa_oai_past(x, s + m, n - m);
        }

        break;

    case PA_K_PAST:
        pa_oai_past(x, s, n);
        break;

    case PA_K_PEND:
        pa_oai_pend(x, s, n);
        break;

    case PA_K_FIELD:
        pa_xxh3_update(x->field, s, n);
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


/* a piece of content before the role: a record opens */

void
pa_oai_pend_open(pa_oai_t *x)
{
    if (pa_oai_grow(x, &x->pend, x->pend_len, &x->pend_size,
                    2 * sizeof(size_t))
        != 0)
    {
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

    want = x->length - pa_oai_used(x);
    want = (want > x->pend_chars) ? want - x->pend_chars : 0;

    len = (want == 0) ? 0 : pa_utf8_span(s, n, want + 1, &chars);

    /* past the key: counted, as the rest of the body's text */

    pa_oai_past(x, s + len, n - len);

    if (len == 0) {
        return;
    }

    if (pa_oai_grow(x, &x->pend, x->pend_len, &x->pend_size, len) != 0) {
        return;
    }

    memcpy(x->pend + x->pend_len, s, len);

    x->pend_len += len;
    x->pend_chars += chars;
}


void
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


/*
 * room for "need" more bytes past "len" in a buffer of the key's (the
 * content pending its role, a kept section): doubled, 256 bytes at least
 */

static int
pa_oai_grow(pa_oai_t *x, unsigned char **data, size_t len, size_t *size,
    size_t need)
{
    size_t          n;
    unsigned char  *p;

    need += len;

    if (need <= *size) {
        return 0;
    }

    n = *size * 2;

    if (n < need) {
        n = need;
    }

    if (n < 256) {
        n = 256;
    }

    p = x->alloc.alloc(x->alloc.ctx, n);
    if (p == NULL) {
        pa_oai_fail(x, PA_OAI_NOMEM);
        x->sink = PA_K_SKIP;
        return -1;
    }

    if (len) {
        memcpy(p, *data, len);
    }

    *data = p;
    *size = n;

    return 0;
}


/* the role came: the content kept is hashed after it */

void
pa_oai_flush(pa_oai_t *x)
{
    size_t          m, len, seps;
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

        /* the role may have filled the key: the rest is past it */

        m = pa_oai_text(x, p, len, 0);
        pa_oai_past(x, p + m, len - m);
        pa_oai_sep(x, PA_OAI_SEP_PIECE, seps);

        p += len;
    }

    x->pend_len = 0;
    x->pend_chars = 0;
    x->pend_last = 0;
}


void
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


/*
 * hashes as much of s as the characters still wanted allow; returns
 * how many bytes.  ASCII text is not counted: each byte is a character.
 */

static size_t
pa_oai_text(pa_oai_t *x, const unsigned char *s, size_t n, int ascii)
{
    size_t  len, chars, want;

    if (!pa_oai_streams(x)) {
        return pa_oai_keep(x, s, n, ascii);
    }

    if (x->chars >= x->length || n == 0) {
        return 0;
    }

    want = x->length - x->chars;

    if (ascii) {
        len = (n < want) ? n : want;
        chars = len;

    } else {
        len = pa_utf8_span(s, n, want + 1, &chars);
    }

    if (x->sep_run) {
        pa_oai_sep_out(x);
    }

    if (!x->hook_only) {
        pa_xxh3_update(x->text, s, len);
    }

    if (x->hook) {
        x->hook(x->hook_ctx, s, len, chars);
    }

    x->chars += chars;

    return len;
}


/*
 * text past the key, with pa_oai_count_past(): its UTF-8 bytes, which
 * cost nothing to count (characters cost 2 instructions a byte here), and
 * are as near the tokens the engine prefills (a CJK character is three
 * bytes and about a token, four ASCII characters about a token)
 */

static void
pa_oai_past(pa_oai_t *x, const unsigned char *s, size_t n)
{
    if (x->count_past) {
        x->past += n;
    }
}


/*
 * "n" separators, which are hashed while characters are still wanted.
 * a run of the same separator is hashed at once, before the next text
 * or other separator, or at the end: a body of a million empty strings
 * costs one XXH3 update per 64 of them, not two per string
 */

void
pa_oai_sep(pa_oai_t *x, unsigned char sep, size_t n)
{
    if (!pa_oai_streams(x)) {
        pa_oai_keep_sep(x, sep, n);
        return;
    }

    if (x->chars >= x->length || n == 0) {
        return;
    }

    if (x->sep_run && x->sep_byte != sep) {
        pa_oai_sep_out(x);
    }

    x->sep_byte = sep;
    x->sep_run += n;
}


/* the run of separators is hashed, and given to the hook */

void
pa_oai_sep_flush(pa_oai_t *x)
{
    if (x->sep_run) {
        pa_oai_sep_out(x);
    }
}


static void
pa_oai_sep_out(pa_oai_t *x)
{
    size_t         m, n;
    unsigned char  seps[64];

    n = x->sep_run;
    x->sep_run = 0;

    memset(seps, x->sep_byte, (n < sizeof(seps)) ? n : sizeof(seps));

    while (n) {
        m = (n < sizeof(seps)) ? n : sizeof(seps);

        if (!x->hook_only) {
            pa_xxh3_update(x->text, seps, m);
        }

        if (x->hook) {
            x->hook(x->hook_ctx, seps, m, 0);
        }

        n -= m;
    }
}


/*
 * the characters of the key's text up to the section written, in the
 * order they are rendered: those hashed, and those kept of the sections
 * from the first not complete to it
 */

size_t
pa_oai_used(pa_oai_t *x)
{
    size_t    n;
    unsigned  s;

    n = x->chars;

    for (s = x->live; s <= x->sec && s < PA_SEC_N; s++) {
        n += x->kept[s].chars;
    }

    return n;
}


/*
 * text of a section that waits for one rendered ahead of it: as much as
 * the characters still wanted allow at its place in the order
 */

static size_t
pa_oai_keep(pa_oai_t *x, const unsigned char *s, size_t n, int ascii)
{
    size_t          len, chars, used, want;
    pa_oai_kept_t  *k;

    used = pa_oai_used(x);

    if (used >= x->length || n == 0) {
        return 0;
    }

    want = x->length - used;

    k = &x->kept[x->sec];

    if (ascii) {
        len = (n < want) ? n : want;
        chars = len;

    } else {
        len = pa_utf8_span(s, n, want + 1, &chars);
        k->utf8 |= (chars != len);
    }

    if (pa_oai_grow(x, &k->data, k->len, &k->size, len) != 0) {
        return 0;
    }

    memcpy(k->data + k->len, s, len);

    k->len += len;
    k->chars += chars;
    x->kept_chars += chars;

    pa_oai_trim(x);

    return len;
}


/*
 * separators of a section that waits: at most PA_OAI_KEPT_SEPS in all
 * sections, so that a body of empty strings keeps no more than that
 */

static void
pa_oai_keep_sep(pa_oai_t *x, unsigned char sep, size_t n)
{
    pa_oai_kept_t  *k;

    if (n == 0 || pa_oai_used(x) >= x->length
        || x->kept_seps >= PA_OAI_KEPT_SEPS)
    {
        return;
    }

    if (n > PA_OAI_KEPT_SEPS - x->kept_seps) {
        n = PA_OAI_KEPT_SEPS - x->kept_seps;
    }

    k = &x->kept[x->sec];

    if (pa_oai_grow(x, &k->data, k->len, &k->size, n) != 0) {
        return;
    }

    memset(k->data + k->len, PA_OAI_KEPT_SEP + sep, n);

    k->len += n;
    k->seps += n;
    x->kept_seps += n;
}


/*
 * no more than "length" characters are kept in all: text kept of a
 * section rendered after the one written, past them, is cut from its end
 */

static void
pa_oai_trim(pa_oai_t *x)
{
    size_t          over, cut;
    unsigned        s;
    pa_oai_kept_t  *k;

    if (x->chars + x->kept_chars <= x->length) {
        return;
    }

    over = x->chars + x->kept_chars - x->length;

    for (s = PA_SEC_N - 1; s > x->sec && over; s--) {

        /* the first message may yet come before the tools */

        if (s == PA_SEC_TOOLS && x->first) {
            continue;
        }

        k = &x->kept[s];
        cut = 0;

        while (k->len && cut < over) {
            if (k->data[k->len - 1] >= PA_OAI_KEPT_SEP + PA_OAI_SEP_TOKEN) {
                k->len--;
                k->seps--;
                x->kept_seps--;
                continue;
            }

            /* a character: back to its first byte */

            do {
                k->len--;
                pa_oai_past(x, k->data + k->len, 1);
            } while (k->len && (k->data[k->len] & 0xc0) == 0x80);

            cut++;
        }

        k->chars -= cut;
        x->kept_chars -= cut;
        over -= cut;
    }
}


/* a section is complete: those that can be hashed now are */

void
pa_oai_sec_close(pa_oai_t *x, pa_oai_sec_e sec)
{
    x->closed |= (unsigned char) (1 << sec);

    pa_oai_advance(x);
}


/* a section is not part of the key: "instructions" in a chat body */

void
pa_oai_sec_drop(pa_oai_t *x, pa_oai_sec_e sec)
{
    pa_oai_kept_t  *k;

    k = &x->kept[sec];

    x->kept_chars -= k->chars;
    x->kept_seps -= k->seps;

    k->len = 0;
    k->chars = 0;
    k->seps = 0;
    k->utf8 = 0;

    x->closed |= (unsigned char) (1 << sec);
}


/* the first message is not "system": its text is the conversation's */

void
pa_oai_sec_move(pa_oai_t *x, pa_oai_sec_e from, pa_oai_sec_e to)
{
    pa_oai_kept_t  k;

    /* "to" is empty: nothing was written to it before */

    k = x->kept[to];
    x->kept[to] = x->kept[from];
    x->kept[from] = k;

    pa_oai_trim(x);
}


/*
 * the sections complete in order are hashed from what was kept of them,
 * and the first not complete is hashed as it comes from now on.  Not
 * before the OpenAI body's API is known: "instructions" count only in
 * a Responses body.  The first message is kept until its role is known.
 */

void
pa_oai_advance(pa_oai_t *x)
{
    if (x->wait_api) {
        return;
    }

    while (x->live < PA_SEC_N) {

        if (x->live == PA_SEC_FIRST
            && !(x->closed & (1 << PA_SEC_FIRST)))
        {
            return;
        }

        if (x->kept[x->live].len) {
            pa_oai_kept_out(x, &x->kept[x->live]);
        }

        if (!(x->closed & (1 << x->live))) {
            return;
        }

        x->live++;
    }
}


static void
pa_oai_kept_out(pa_oai_t *x, pa_oai_kept_t *k)
{
    size_t          m;
    uint64_t        w;
    unsigned char   sec, sep;
    unsigned char  *p, *q, *last;

    sec = x->sec;
    x->sec = x->live;

    p = k->data;
    last = k->data + k->len;

    while (p < last) {
        q = p;

        if (*p >= PA_OAI_KEPT_SEP + PA_OAI_SEP_TOKEN) {
            sep = *p;

            while (q < last && *q == sep) {
                q++;
            }

            pa_oai_sep(x, (unsigned char) (sep - PA_OAI_KEPT_SEP), q - p);

        } else {

            /* ASCII text: 8 bytes at a time to the next separator */

            if (!k->utf8) {
                while (last - q >= 8) {
                    memcpy(&w, q, sizeof(w));

                    if (w & PA_UTF8_HIGH) {
                        break;
                    }

                    q += 8;
                }
            }

            while (q < last && *q < PA_OAI_KEPT_SEP + PA_OAI_SEP_TOKEN) {
                q++;
            }

            m = pa_oai_text(x, p, q - p, !k->utf8);
            pa_oai_past(x, p + m, (q - p) - m);
        }

        p = q;
    }

    x->sec = sec;

    x->kept_chars -= k->chars;
    x->kept_seps -= k->seps;

    k->len = 0;
    k->chars = 0;
    k->seps = 0;
    k->utf8 = 0;
}
