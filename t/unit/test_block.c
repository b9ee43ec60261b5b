
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of src/pa_block.c: block boundaries in bytes and in code
 * points, independence from how the text is split, chaining, seeds, the
 * block cap and the unit count; separators, which are no units, and the
 * units of OpenAI bodies read by pa_openai.c (a body of empty strings
 * has none).  pa_utf8_span() (src/pa_utf8.h) against a byte-by-byte
 * count, on text from all ASCII to all multi-byte.
 */


#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "pa_block.h"
#include "pa_xxh.h"
#include "pa_utf8.h"
#include "pa_openai.h"
#include "unit.h"
#include "arena.h"


#define TEXT_MAX   20000
#define MAX_BLK    512


static uint64_t rnd_next(uint64_t *state);
static size_t make_text(unsigned char *buf, size_t chars, uint64_t *rnd,
    int utf8);
static uint32_t reference(const unsigned char *p, size_t n, int is_char,
    uint32_t bu, uint32_t max, uint64_t seed, uint64_t *out,
    uint64_t *units);
static uint32_t in_pieces(const unsigned char *p, size_t n, int is_char,
    uint32_t bu, uint32_t max, uint64_t seed, uint64_t *out, uint64_t *rnd,
    size_t maxpiece, pa_blocks_t *b);
static void test_bytes(void);
static void test_chars(void);
static void test_splits(void);
static void test_chaining(void);
static void test_seeds(void);
static void test_cap(void);
static uint32_t sep_reference(const unsigned char *p, const unsigned char *sep,
    size_t n, uint32_t bu, uint32_t max, uint64_t *out, uint64_t *units);
static void test_seps(void);
static void feed_hook(void *ctx, const unsigned char *p, size_t n,
    size_t chars);
static uint32_t openai_blocks(const char *body, size_t len, size_t length,
    uint32_t bu, uint32_t max, uint64_t *out);
static void test_openai(void);
static void test_span(void);
static void test_stride(void);
static void test_avx2(void);
static void test_update(void);


static unsigned char  text[TEXT_MAX];
static unsigned char  seps[TEXT_MAX];
static pa_blocks_t    blocks;
static uint32_t       ref_head;          /* 0: no stride */
static uint32_t       ref_stride = 1;
static ta_arena_t     arena = { NULL, -1, 0 };


static uint64_t
rnd_next(uint64_t *state)
{
    uint64_t  z;

    z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}


/* "chars" code points of 1 to 4 bytes if utf8, else ascii */

static size_t
make_text(unsigned char *buf, size_t chars, uint64_t *rnd, int utf8)
{
    size_t    i, n;
    uint64_t  r;

    n = 0;

    for (i = 0; i < chars; i++) {
        r = rnd_next(rnd);

        switch (utf8 ? r % 4 : 0) {

        case 0:
            buf[n++] = (unsigned char) ('a' + (r >> 8) % 26);
            break;

        case 1:                         /* U+00E9 */
            buf[n++] = 0xc3;
            buf[n++] = 0xa9;
            break;

        case 2:                         /* U+20AC */
            buf[n++] = 0xe2;
            buf[n++] = 0x82;
            buf[n++] = 0xac;
            break;

        default:                        /* U+1F600 */
            buf[n++] = 0xf0;
            buf[n++] = 0x9f;
            buf[n++] = 0x98;
            buf[n++] = 0x80;
            break;
        }
    }

    return n;
}


/* the definition, on the whole text: one-shot XXH3 per block */

static uint32_t
reference(const unsigned char *p, size_t n, int is_char, uint32_t bu,
    uint32_t max, uint64_t seed, uint64_t *out, uint64_t *units)
{
    size_t    i, start, u;
    uint32_t  nb;
    uint64_t  prev;

    nb = 0;
    prev = 0;
    start = 0;
    u = 0;

    for (i = 0; i <= n; i++) {

        if (i < n && is_char && (p[i] & 0xc0) == 0x80) {
            continue;
        }

        /* i is at a unit start, or at the end */

        if (u > 0 && nb < max && (i - start) > 0
            && ((ref_head == 0 || nb < ref_head) ? u % bu == 0
                : (u - (uint64_t) ref_head * bu) % (bu * ref_stride) == 0))
        {
            prev = XXH3_64bits_withSeed(p + start, i - start, prev);
            out[nb++] = prev;
            start = i;
        }

        if (i < n) {
            u++;
        }
    }

    for (i = 0; i < nb; i++) {
        out[i] = pa_blocks_mix(out[i], seed);
    }

    *units = u;

    return nb;
}


static uint32_t
in_pieces(const unsigned char *p, size_t n, int is_char, uint32_t bu,
    uint32_t max, uint64_t seed, uint64_t *out, uint64_t *rnd,
    size_t maxpiece, pa_blocks_t *b)
{
    int     ascii;
    size_t  off, k, i;

    if (pa_blocks_init(b, is_char, bu, max, out) != 0) {
        return UINT32_MAX;
    }

    pa_blocks_stride(b, ref_head, ref_stride);

    for (off = 0; off < n; off += k) {
        k = (rnd == NULL) ? n : 1 + rnd_next(rnd) % maxpiece;
        k = (k > n - off) ? n - off : k;

        /* an ASCII piece is said to be one, as the OpenAI text's cut does */

        for (ascii = is_char, i = 0; ascii && i < k; i++) {
            ascii = (p[off + i] < 0x80);
        }

        (void) pa_blocks_feed_text(b, p + off, k, ascii);
    }

    return pa_blocks_finish(b, seed);
}


static void
test_bytes(void)
{
    size_t    n;
    uint32_t  nb, nr;
    uint64_t  rnd, units;
    uint64_t  out[MAX_BLK], ref[MAX_BLK];

    rnd = 1;
    n = make_text(text, 3 * 64 + 5, &rnd, 0);

    nb = in_pieces(text, n, 0, 64, 100, 7, out, NULL, 0, &blocks);
    nr = reference(text, n, 0, 64, 100, 7, ref, &units);

    CHECK(nb == 3);
    CHECK(nr == 3);
    CHECK(memcmp(out, ref, nb * sizeof(uint64_t)) == 0);
    CHECK(blocks.units == 3 * 64 + 5);

    /* block 1 is exactly the first 64 bytes */
    CHECK(out[0] == pa_blocks_mix(XXH3_64bits_withSeed(text, 64, 0), 7));
    CHECK(out[1] == pa_blocks_mix(
              XXH3_64bits_withSeed(text + 64, 64,
                                   XXH3_64bits_withSeed(text, 64, 0)), 7));

    /* an exact multiple: the last block is complete */
    nb = in_pieces(text, 3 * 64, 0, 64, 100, 7, out, NULL, 0, &blocks);
    CHECK(nb == 3);
    CHECK(blocks.units == 3 * 64);
    CHECK(blocks.tail == out[2]);

    /* one byte short: two blocks, the tail covers the rest */
    nb = in_pieces(text, 3 * 64 - 1, 0, 64, 100, 7, out, NULL, 0, &blocks);
    CHECK(nb == 2);
    CHECK(blocks.units == 3 * 64 - 1);
    CHECK(blocks.tail != out[1]);

    /* shorter than a block: no block, a tail key, the units */
    nb = in_pieces(text, 10, 0, 64, 100, 7, out, NULL, 0, &blocks);
    CHECK(nb == 0);
    CHECK(blocks.units == 10);
    CHECK(blocks.tail == pa_blocks_mix(XXH3_64bits_withSeed(text, 10, 0),
                                       7));

    CHECK(pa_blocks_init(&blocks, 0, 0, 4, out) == -1);
    CHECK(pa_blocks_init(&blocks, 0, 64, 0, out) == -1);
}


static void
test_chars(void)
{
    size_t    n, i, cut;
    uint32_t  nb, nr, c;
    uint64_t  rnd, units;
    uint64_t  out[MAX_BLK], ref[MAX_BLK];

    rnd = 2;
    n = make_text(text, 5 * 100 + 37, &rnd, 1);

    nb = in_pieces(text, n, 1, 100, 100, 9, out, NULL, 0, &blocks);
    nr = reference(text, n, 1, 100, 100, 9, ref, &units);

    CHECK(nb == 5);
    CHECK(nr == 5);
    CHECK(units == 5 * 100 + 37);
    CHECK(blocks.units == 5 * 100 + 37);
    CHECK(memcmp(out, ref, nb * sizeof(uint64_t)) == 0);

    /* block 1 is the bytes of exactly 100 code points */
    c = 0;
    cut = 0;

    for (i = 0; i < n; i++) {
        if ((text[i] & 0xc0) != 0x80 && c++ == 100) {
            cut = i;
            break;
        }
    }

    CHECK(cut > 100);
    CHECK(out[0] == pa_blocks_mix(XXH3_64bits_withSeed(text, cut, 0), 9));

    /* the text ends with a 4-byte character exactly at a block's end */
    n = make_text(text, 199, &rnd, 1);
    memcpy(text + n, "\xf0\x9f\x98\x80", 4);
    n += 4;

    nb = in_pieces(text, n, 1, 100, 100, 9, out, NULL, 0, &blocks);
    nr = reference(text, n, 1, 100, 100, 9, ref, &units);
    CHECK(nb == 2);
    CHECK(nr == 2);
    CHECK(blocks.units == 200);
    CHECK(memcmp(out, ref, nb * sizeof(uint64_t)) == 0);
    CHECK(blocks.tail == out[1]);

    /* the same ending fed a byte at a time */
    rnd = 5;
    nb = in_pieces(text, n, 1, 100, 100, 9, out, &rnd, 1, &blocks);
    CHECK(nb == 2);
    CHECK(memcmp(out, ref, nb * sizeof(uint64_t)) == 0);
}


static void
test_splits(void)
{
    int       is_char, ok;
    size_t    n, maxpiece;
    uint32_t  nb, nr, bu, round;
    uint64_t  rnd, units, tail;
    uint64_t  out[MAX_BLK], ref[MAX_BLK];
    static const uint32_t  sizes[] = { 1, 3, 64, 128, 256 };
    static const size_t    pieces[] = { 1, 2, 7, 100, 5000 };

    rnd = 3;
    ok = 1;

    for (round = 0; round < 200; round++) {
        is_char = round & 1;
        bu = sizes[round % 5];
        maxpiece = pieces[(round / 5) % 5];

        /* code points in ASCII text are also counted without a scan */
        n = make_text(text, 1 + rnd_next(&rnd) % 3000, &rnd,
                      is_char && round % 4 != 3);

        nr = reference(text, n, is_char, bu, MAX_BLK, round, ref, &units);

        nb = in_pieces(text, n, is_char, bu, MAX_BLK, round, out, NULL, 0,
                       &blocks);
        tail = blocks.tail;

        if (nb != nr || memcmp(out, ref, nb * sizeof(uint64_t)) != 0
            || blocks.units != units)
        {
            ok = 0;
        }

        nb = in_pieces(text, n, is_char, bu, MAX_BLK, round, out, &rnd,
                       maxpiece, &blocks);

        if (nb != nr || memcmp(out, ref, nb * sizeof(uint64_t)) != 0
            || blocks.units != units || blocks.tail != tail)
        {
            ok = 0;
        }
    }

    CHECK_MSG(ok, "a split changed the hashes");
}


static void
test_chaining(void)
{
    size_t    n;
    uint32_t  i, nb, same;
    uint64_t  rnd;
    uint64_t  a[MAX_BLK], b[MAX_BLK];

    rnd = 4;
    n = make_text(text, 10 * 64, &rnd, 0);

    (void) in_pieces(text, n, 0, 64, 100, 0, a, NULL, 0, &blocks);

    /* a change in block 1 changes every hash */
    text[3] ^= 1;
    nb = in_pieces(text, n, 0, 64, 100, 0, b, NULL, 0, &blocks);
    text[3] ^= 1;

    same = 0;

    for (i = 0; i < nb; i++) {
        same += (a[i] == b[i]);
    }

    CHECK(nb == 10);
    CHECK(same == 0);

    /* a change in block 5 keeps blocks 1..4 */
    text[4 * 64 + 1] ^= 1;
    nb = in_pieces(text, n, 0, 64, 100, 0, b, NULL, 0, &blocks);
    text[4 * 64 + 1] ^= 1;

    same = 0;

    for (i = 0; i < nb; i++) {
        same += (a[i] == b[i]);
    }

    CHECK(same == 4);
    CHECK(a[3] == b[3] && a[4] != b[4] && a[9] != b[9]);

    /* equal blocks at other positions hash differently */
    memcpy(text + 64, text, 64);
    nb = in_pieces(text, n, 0, 64, 100, 0, b, NULL, 0, &blocks);
    CHECK(b[0] != b[1]);
}


static void
test_seeds(void)
{
    size_t    n;
    uint32_t  i, diff;
    uint64_t  rnd;
    uint64_t  a[MAX_BLK], b[MAX_BLK], c[MAX_BLK];

    rnd = 6;
    n = make_text(text, 8 * 128, &rnd, 1);

    (void) in_pieces(text, n, 1, 128, 100, 42, a, NULL, 0, &blocks);
    (void) in_pieces(text, n, 1, 128, 100, 42, b, &rnd, 33, &blocks);
    (void) in_pieces(text, n, 1, 128, 100, 43, c, NULL, 0, &blocks);

    CHECK(memcmp(a, b, 8 * sizeof(uint64_t)) == 0);

    diff = 0;

    for (i = 0; i < 8; i++) {
        diff += (a[i] != c[i]);
    }

    CHECK(diff == 8);

    /* the mix is a bijection per seed: no two of many values collide */
    CHECK(pa_blocks_mix(0, 0) != pa_blocks_mix(1, 0));
    CHECK(pa_blocks_mix(0, 0) != pa_blocks_mix(0, 1));
    CHECK(pa_blocks_mix(5, 0) != 5);
}


static void
test_cap(void)
{
    size_t    n;
    uint32_t  nb;
    uint64_t  rnd, units;
    uint64_t  out[MAX_BLK], ref[MAX_BLK];

    rnd = 7;
    n = make_text(text, 1000, &rnd, 1);

    /* 4 blocks of 64 at most; the units still count the whole text */
    nb = in_pieces(text, n, 1, 64, 4, 1, out, &rnd, 50, &blocks);
    CHECK(nb == 4);
    CHECK(blocks.units == 1000);
    CHECK(reference(text, n, 1, 64, 4, 1, ref, &units) == 4);
    CHECK(memcmp(out, ref, 4 * sizeof(uint64_t)) == 0);
    CHECK(blocks.tail == out[3]);

    /* feed says when the blocks are complete */
    CHECK(pa_blocks_init(&blocks, 0, 64, 2, out) == 0);
    CHECK(pa_blocks_feed(&blocks, text, 100) == 1);
    CHECK(pa_blocks_feed(&blocks, text + 100, 28) == 0);
    CHECK(pa_blocks_feed(&blocks, text + 128, 100) == 0);
    CHECK(blocks.units == 228);
    CHECK(pa_blocks_finish(&blocks, 0) == 2);
    CHECK(pa_blocks_finish(&blocks, 0) == 2);

    /* nothing is fed after the finish */
    CHECK(pa_blocks_init(&blocks, 0, 64, 4, out) == 0);
    CHECK(pa_blocks_feed(&blocks, text, 64) == 1);
    CHECK(pa_blocks_finish(&blocks, 0) == 1);
    CHECK(pa_blocks_feed(&blocks, text, 128) == 0);
    CHECK(blocks.nblocks == 1 && blocks.units == 64);
}


/*
 * the definition with separators: "sep[i]" marks the bytes that are no
 * units; a block ends before the unit after its last one, so the
 * separators after its last unit are hashed with it
 */

static uint32_t
sep_reference(const unsigned char *p, const unsigned char *sep, size_t n,
    uint32_t bu, uint32_t max, uint64_t *out, uint64_t *units)
{
    size_t    i, start, u;
    uint32_t  nb;
    uint64_t  prev;

    nb = 0;
    prev = 0;
    start = 0;
    u = 0;

    for (i = 0; i <= n; i++) {

        if (i < n && (sep[i] || (p[i] & 0xc0) == 0x80)) {
            continue;
        }

        if (u > 0 && nb < max && (i - start) > 0
            && ((ref_head == 0 || nb < ref_head) ? u % bu == 0
                : (u - (uint64_t) ref_head * bu) % (bu * ref_stride) == 0))
        {
            prev = XXH3_64bits_withSeed(p + start, i - start, prev);
            out[nb++] = prev;
            start = i;
        }

        if (i < n) {
            u++;
        }
    }

    *units = u;

    return nb;
}


static void
test_seps(void)
{
    size_t    n, i, k, off;
    uint32_t  nb, nr, round;
    uint64_t  rnd, units, st;
    uint64_t  out[MAX_BLK], ref[MAX_BLK];

    rnd = 11;

    for (round = 0; round < 200; round++) {

        /* text of 1..4-byte characters with runs of separators between */

        n = 0;
        st = rnd_next(&rnd);

        while (n < TEXT_MAX - 64) {
            if (rnd_next(&rnd) % 3 == 0) {
                k = 1 + rnd_next(&rnd) % ((st & 1) ? 40 : 3);

                for (i = 0; i < k; i++) {
                    text[n] = (unsigned char) (0x1d + rnd_next(&rnd) % 3);
                    seps[n++] = 1;
                }

            } else {
                k = make_text(text + n, 1 + rnd_next(&rnd) % 20, &rnd, 1);
                memset(seps + n, 0, k);
                n += k;
            }

            if (rnd_next(&rnd) % 200 == 0) {
                break;
            }
        }

        /* fed as the OpenAI reader does: characters and separators apart */

        (void) pa_blocks_init(&blocks, 1, 16 + round % 50, 8 + round % 40,
                              out);

        for (off = 0; off < n; off += k) {
            for (k = 1; off + k < n && seps[off + k] == seps[off]; k++) {
                /* void */
            }

            if (!seps[off]) {
                k = 1 + rnd_next(&rnd) % k;

                /* whole characters only, as the reader gives them */
                while (off + k < n && (text[off + k] & 0xc0) == 0x80) {
                    k++;
                }

                (void) pa_blocks_feed(&blocks, text + off, k);

            } else {
                (void) pa_blocks_feed_sep(&blocks, text + off, k);
            }
        }

        nb = pa_blocks_finish(&blocks, 0);

        nr = sep_reference(text, seps, n, 16 + round % 50, 8 + round % 40,
                           ref, &units);

        for (i = 0; i < nr; i++) {
            ref[i] = pa_blocks_mix(ref[i], 0);
        }

        CHECK_MSG(nb == nr && memcmp(out, ref, nb * sizeof(uint64_t)) == 0,
                  "round %u: %u blocks, %u expected", round, nb, nr);
        CHECK_MSG(blocks.units == units, "round %u: %llu units, %llu",
                  round, (unsigned long long) blocks.units,
                  (unsigned long long) units);
    }

    /* separators alone: no unit, no block; the tail hashes them */

    memset(text, 0x1f, 4096);
    (void) pa_blocks_init(&blocks, 1, 16, 8, out);
    CHECK(pa_blocks_feed_sep(&blocks, text, 4096) == 1);
    CHECK(pa_blocks_finish(&blocks, 5) == 0);
    CHECK(blocks.units == 0);
    CHECK(blocks.tail == pa_blocks_mix(XXH3_64bits_withSeed(text, 4096, 0),
                                       5));

    /* nothing after the last block or the finish */
    (void) pa_blocks_init(&blocks, 1, 16, 1, out);
    CHECK(pa_blocks_feed(&blocks, (const unsigned char *) "0123456789abcdef",
                         16) == 1);
    CHECK(pa_blocks_feed_sep(&blocks, text, 3) == 1);
    CHECK(pa_blocks_feed(&blocks, (const unsigned char *) "x", 1) == 0);
    CHECK(pa_blocks_feed_sep(&blocks, text, 3) == 0);
    CHECK(pa_blocks_finish(&blocks, 0) == 1 && blocks.units == 17);
    CHECK(blocks.out[0] == pa_blocks_mix(XXH3_64bits_withSeed(
                  "0123456789abcdef\x1f\x1f\x1f", 19, 0), 0));
    CHECK(pa_blocks_feed_sep(&blocks, text, 3) == 0);
}


static void
feed_hook(void *ctx, const unsigned char *p, size_t n, size_t chars)
{
    if (chars == 0) {
        (void) pa_blocks_feed_sep(ctx, p, n);

    } else {
        (void) pa_blocks_feed_text(ctx, p, n, chars == n);
    }
}


/* the blocks of an OpenAI body's text, as the module cuts them */

static uint32_t
openai_blocks(const char *body, size_t len, size_t length, uint32_t bu,
    uint32_t max, uint64_t *out)
{
    pa_oai_t         *x;
    pa_alloc_t        a;
    pa_oai_result_t   res;

    a.alloc = ta_alloc;
    a.ctx = &arena;

    ta_reset(&arena);

    x = pa_oai_create(&a, length, 0);
    if (x == NULL || pa_blocks_init(&blocks, 1, bu, max, out) != 0) {
        return UINT32_MAX;
    }

    pa_oai_text_hook(x, feed_hook, &blocks);

    (void) pa_oai_feed(x, (const unsigned char *) body, len);
    pa_oai_finish(x, &res);

    if (res.status != PA_OAI_OK) {
        return UINT32_MAX;
    }

    return pa_blocks_finish(&blocks, res.meta);
}


/*
 * the units of OpenAI bodies are their characters: a body of 1 MB of
 * empty strings (349,000 separators, which counted as units before) has
 * none and no block, however long, and so have empty messages and empty
 * token arrays; the units stop at "length" characters
 */

static void
test_openai(void)
{
    char      *body;
    size_t     len, i, n;
    uint32_t   nb;
    uint64_t   out[MAX_BLK];

    static const char  *unit[] = { "\"\"", "{\"role\":\"\",\"content\":\"\"}",
                                   "[]", "{}" };
    static const char  *head[] = { "{\"model\":\"m\",\"prompt\":[",
                                   "{\"model\":\"m\",\"messages\":[",
                                   "{\"model\":\"m\",\"prompt\":[",
                                   "{\"model\":\"m\",\"messages\":[" };

    body = malloc(1024 * 1024 + 64);

    for (i = 0; i < 4; i++) {
        len = (size_t) sprintf(body, "%s", head[i]);
        n = 0;

        while (len < 1024 * 1024) {
            len += (size_t) sprintf(body + len, "%s%s", n ? "," : "",
                                    unit[i]);
            n++;
        }

        len += (size_t) sprintf(body + len, "]}");

        nb = openai_blocks(body, len, 32768, 128, 256, out);

        CHECK_MSG(nb == 0 && blocks.units == 0,
                  "%s...: %u blocks, %llu units (%zu strings)", head[i], nb,
                  (unsigned long long) blocks.units, n);
    }

    /* characters among the empty strings: they are the units */

    len = (size_t) sprintf(body, "{\"model\":\"m\",\"prompt\":[\"ab\"");

    for (n = 0; n < 100000; n++) {
        len += (size_t) sprintf(body + len, ",\"\"");
    }

    len += (size_t) sprintf(body + len, ",\"\\u4e2dd\"]}");

    nb = openai_blocks(body, len, 32768, 16, 256, out);
    CHECK(nb == 0 && blocks.units == 4);

    /* a long text: units up to "length", the blocks in it */

    len = (size_t) sprintf(body, "{\"model\":\"m\",\"prompt\":\"");
    memset(body + len, 'a', 100000);
    len += 100000;
    len += (size_t) sprintf(body + len, "\"}");

    nb = openai_blocks(body, len, 32768, 128, 256, out);
    CHECK(nb == 256 && blocks.units == 32768);

    ta_reset(&arena);
    free(body);
}


/*
 * text with one character in "odds" multi-byte (runs of ASCII between),
 * cut at every start and for every count of leads wanted, as a byte
 * loop counts them
 */

static void
test_span(void)
{
    size_t    n, i, j, k, c, want, len, leads, odds, bad;
    uint64_t  rnd, r;

    rnd = 11;
    bad = 0;

    for (odds = 1; odds <= 64; odds *= 4) {
        n = 0;

        while (n < 600) {
            r = rnd_next(&rnd);

            if (r % odds == 0) {
                n += make_text(text + n, 1, &rnd, 1);

            } else {
                text[n++] = (unsigned char) ('a' + (r >> 8) % 26);
            }
        }

        for (i = 0; i < 80; i++) {
            for (want = 1; want <= 200; want++) {

                /* the reference: stop at lead number "want" */

                c = 0;

                for (j = i; j < n; j++) {
                    if ((text[j] & 0xc0) != 0x80) {
                        if (c + 1 == want) {
                            break;
                        }

                        c++;
                    }
                }

                len = pa_utf8_span(text + i, n - i, want, &leads);

                if (len != j - i || leads != c) {
                    bad++;
                }

                /* and a piece that ends before it */

                k = (j - i) / 2;
                len = pa_utf8_span(text + i, k, want, &leads);

                if (len != k) {
                    bad++;
                }
            }
        }

        len = pa_utf8_span(text, n, SIZE_MAX, &leads);

        for (c = 0, j = 0; j < n; j++) {
            c += ((text[j] & 0xc0) != 0x80);
        }

        CHECK(len == n && leads == c);
    }

    CHECK_MSG(bad == 0, "%zu spans differ", bad);
}


/*
 * stride=: past "head" blocks, blocks of "stride" blocks; the hashes are
 * those of the definition with those block ends, in any pieces, and a
 * depth in hashes converts to blocks and back
 */

static void
test_stride(void)
{
    size_t    n;
    uint32_t  k, i, nb, nr, head, stride, bu, is_char, max;
    uint64_t  rnd, ur, out[300], ref[300], one[300];

    rnd = 79;

    for (i = 0; i < 200; i++) {
        is_char = i & 1;
        bu = 16 + (uint32_t) (rnd_next(&rnd) % 48);
        head = 1 + (uint32_t) (rnd_next(&rnd) % 20);
        stride = 2 + (uint32_t) (rnd_next(&rnd) % 9);
        max = 1 + (uint32_t) (rnd_next(&rnd) % 60);
        n = make_text(text, 400 + rnd_next(&rnd) % 3000, &rnd, is_char);

        ref_head = head;
        ref_stride = stride;

        nr = reference(text, n, (int) is_char, bu, max, 5, ref, &ur);
        nb = in_pieces(text, n, (int) is_char, bu, max, 5, out, &rnd, 97,
                       &blocks);

        CHECK(nb == nr);
        CHECK(memcmp(out, ref, nb * sizeof(uint64_t)) == 0);
        CHECK(blocks.units == ur);

        /* the hashes of the head are those without a stride */

        ref_head = 0;
        ref_stride = 1;

        nr = reference(text, n, (int) is_char, bu, 300, 5, one, &ur);
        k = (nb < head) ? nb : head;
        CHECK(memcmp(out, one, k * sizeof(uint64_t)) == 0);

        /* as many hashes as the blocks' count says, up to max */

        k = pa_blocks_kept(nr, head, stride);
        CHECK(nb == ((k < max) ? k : max));
    }

    ref_head = 0;
    ref_stride = 1;

    CHECK(pa_blocks_span(81, 64, 8) == 200);
    CHECK(pa_blocks_span(70, 64, 8) == 112);
    CHECK(pa_blocks_span(40, 64, 8) == 40);
    CHECK(pa_blocks_span(200, 64, 1) == 200);
    CHECK(pa_blocks_span(0xffffffffu, 64, 64) == 0xffffffffu);
    CHECK(pa_blocks_kept(4096, 64, 8) == 568);
    CHECK(pa_blocks_kept(70, 64, 8) == 64);

    for (n = 0; n < 1000; n++) {
        k = pa_blocks_kept((uint32_t) n, 64, 8);
        CHECK(pa_blocks_span(k, 64, 8) <= n);
        CHECK(pa_blocks_span(k, 64, 8) + 8 > n);
        CHECK(pa_blocks_kept(pa_blocks_span(k, 64, 8), 64, 8) == k);
    }
}


/*
 * the AVX2 build of XXH3 (src/pa_xxh_avx2.c), where the CPU has it, gives
 * the generic build's hashes, over every length and alignment
 */

static void
test_avx2(void)
{
    size_t    n, off, bad;
    uint64_t  rnd;

    if (!pa_cpu_has_avx2()) {
        printf("no AVX2 here: its XXH3 is not compared\n");
        return;
    }

    rnd = 24;

    for (n = 0; n < sizeof(text); n++) {
        text[n] = (unsigned char) rnd_next(&rnd);
    }

    bad = 0;

    for (n = 0; n < 3000; n++) {
        off = n % 61;
        rnd = rnd_next(&rnd);
        bad += (pa_xxh3_avx2(text + off, n, rnd)
                != XXH3_64bits_withSeed(text + off, n, rnd));
    }

    CHECK(bad == 0);
    printf("AVX2 XXH3 compared on 3000 lengths\n");

    test_update();
}


/*
 * a streaming hash fed in pieces by pa_xxh3_update(), long ones by the
 * AVX2 build and short ones by the generic one into the same state, is
 * the one-shot hash of the whole
 */

static void
test_update(void)
{
    size_t        n, off, at, k, bad, pieces;
    uint64_t      rnd;
    XXH3_state_t  st;

    rnd = 25;
    bad = 0;
    pieces = 0;

    for (n = 0; n < 2000; n++) {
        off = n % 29;
        (void) XXH3_64bits_reset_withSeed(&st, n);

        for (at = 0; at < 6 * n; at += k) {
            k = (size_t) (rnd_next(&rnd) % 700);
            k = (k > 6 * n - at) ? 6 * n - at : k;
            pa_xxh3_update(&st, text + off + at, k);
            pieces += (k >= PA_XXH_UPDATE_AVX2);
        }

        bad += (XXH3_64bits_digest(&st)
                != XXH3_64bits_withSeed(text + off, 6 * n, n));
    }

    CHECK(bad == 0);
    CHECK(pieces > 1000);
    printf("streaming XXH3 compared on 2000 lengths, %zu long pieces\n",
           pieces);
}


int
main(void)
{
    test_bytes();
    test_chars();
    test_splits();
    test_chaining();
    test_seeds();
    test_cap();
    test_seps();
    test_openai();
    test_span();
    test_stride();
    test_avx2();

    return UNIT_DONE();
}
