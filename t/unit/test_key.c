
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of src/pa_key.c: the id check, the streaming body key and
 * the mix of a key with an id.
 */


#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "pa_key.h"
#include "unit.h"


#define BUF_LEN  3000


static uint64_t rnd_next(uint64_t *state);
static void test_id_check(void);
static void test_body_key_pieces(const unsigned char *buf, size_t length);
static void test_body_key_bounds(unsigned char *buf);
static void test_body_key_alignment(const unsigned char *buf);
static void test_mix(void);
static uint64_t key_in_pieces(const unsigned char *buf, size_t n,
    size_t length, uint64_t seed);


static unsigned char  scratch[4096 + 128] __attribute__((aligned(64)));


/* splitmix64: fixed seeds make every run the same */

static uint64_t
rnd_next(uint64_t *state)
{
    uint64_t  z;

    z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}


static void
test_id_check(void)
{
    unsigned int   c, bad;
    unsigned char  id[PA_ID_MAX_LEN + 2];

    memset(id, 'a', sizeof(id));

    CHECK(pa_id_check(NULL, 0) != NULL);
    CHECK(pa_id_check(id, 0) != NULL);
    CHECK(strcmp(pa_id_check(id, 0), "id is empty") == 0);

    CHECK(pa_id_check(id, 1) == NULL);
    CHECK(pa_id_check(id, PA_ID_MAX_LEN) == NULL);
    CHECK(pa_id_check(id, PA_ID_MAX_LEN + 1) != NULL);
    CHECK(strcmp(pa_id_check(id, PA_ID_MAX_LEN + 1),
                 "id is longer than 64 characters") == 0);

    /* the length is checked before the bytes */
    id[0] = 0x01;
    CHECK(strcmp(pa_id_check(id, PA_ID_MAX_LEN + 1),
                 "id is longer than 64 characters") == 0);

    id[0] = 0x7f;
    CHECK(pa_id_check(id, 1) != NULL);
    CHECK(strcmp(pa_id_check(id, 1),
                 "id has a non-printable or non-ASCII byte") == 0);

    id[0] = 0x19;
    CHECK(pa_id_check(id, 1) != NULL);
    id[0] = 0x80;
    CHECK(pa_id_check(id, 1) != NULL);
    id[0] = 0xff;
    CHECK(pa_id_check(id, 1) != NULL);
    id[0] = 0x00;
    CHECK(pa_id_check(id, 1) != NULL);

    id[0] = ' ';
    CHECK(pa_id_check(id, 1) == NULL);
    id[0] = '~';
    CHECK(pa_id_check(id, 1) == NULL);

    /* a bad byte at the last position of a full-length id */
    id[0] = 'a';
    id[PA_ID_MAX_LEN - 1] = '\0';
    CHECK(pa_id_check(id, PA_ID_MAX_LEN) != NULL);
    id[PA_ID_MAX_LEN - 1] = 'a';

    /* a NUL in the middle is not the end of the id */
    memcpy(id, "ten\0ant", 7);
    CHECK(pa_id_check(id, 7) != NULL);
    CHECK(pa_id_check(id, 3) == NULL);

    /* every single byte: only 0x20..0x7e pass */
    bad = 0;

    for (c = 0; c < 256; c++) {
        id[0] = (unsigned char) c;

        if ((pa_id_check(id, 1) == NULL) != (c >= 0x20 && c <= 0x7e)) {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%u bytes misjudged", bad);
}


/* hashes "n" bytes of "buf" fed in pieces of 1..7 bytes */

static uint64_t
key_in_pieces(const unsigned char *buf, size_t n, size_t length,
    uint64_t seed)
{
    size_t         off, piece, left;
    uint64_t       rnd;
    pa_body_key_t  k;

    rnd = seed;
    pa_body_key_init(&k, length);

    for (off = 0; off < n; off += piece) {
        piece = 1 + rnd_next(&rnd) % 7;

        if (piece > n - off) {
            piece = n - off;
        }

        left = pa_body_key_feed(&k, buf + off, piece);

        if (left != (length > off + piece ? length - off - piece : 0)) {
            return 0;
        }
    }

    return pa_body_key_digest(&k);
}


static void
test_body_key_pieces(const unsigned char *buf, size_t length)
{
    size_t         split, bad, n;
    uint64_t       whole, h, seed;
    pa_body_key_t  k;

    pa_body_key_init(&k, length);
    CHECK(pa_body_key_feed(&k, buf, BUF_LEN) == 0);
    CHECK(k.total == length);
    CHECK(k.left == 0);
    whole = pa_body_key_digest(&k);

    /* the same as the one-shot hash of the first "length" bytes */
    CHECK_MSG(whole == XXH3_64bits(buf, length), "length %zu", length);

    /* two pieces, split at every position of the body */
    bad = 0;

    for (split = 0; split <= BUF_LEN; split++) {
        pa_body_key_init(&k, length);
        (void) pa_body_key_feed(&k, buf, split);
        (void) pa_body_key_feed(&k, buf + split, BUF_LEN - split);

        if (pa_body_key_digest(&k) != whole) {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "length %zu: %zu of %d splits differ", length, bad,
              BUF_LEN + 1);

    /* many pieces of 1..7 bytes, several ways */
    bad = 0;

    for (seed = 1; seed <= 20; seed++) {
        n = (seed & 1) ? BUF_LEN : length;
        h = key_in_pieces(buf, n, length, seed);

        if (h != whole) {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "length %zu: %zu of 20 piecewise runs differ",
              length, bad);
}


static void
test_body_key_bounds(unsigned char *buf)
{
    size_t         length;
    uint64_t       h, h2;
    pa_body_key_t  k;

    length = 1000;

    pa_body_key_init(&k, length);
    (void) pa_body_key_feed(&k, buf, BUF_LEN);
    h = pa_body_key_digest(&k);

    /* bytes past "length" do not count */
    buf[length] ^= 0x55;
    buf[BUF_LEN - 1] ^= 0x55;
    pa_body_key_init(&k, length);
    (void) pa_body_key_feed(&k, buf, BUF_LEN);
    CHECK(pa_body_key_digest(&k) == h);
    buf[length] ^= 0x55;
    buf[BUF_LEN - 1] ^= 0x55;

    /* the last byte within "length" does */
    buf[length - 1] ^= 0x01;
    pa_body_key_init(&k, length);
    (void) pa_body_key_feed(&k, buf, BUF_LEN);
    CHECK(pa_body_key_digest(&k) != h);
    buf[length - 1] ^= 0x01;

    /* and so does the first */
    buf[0] ^= 0x80;
    pa_body_key_init(&k, length);
    (void) pa_body_key_feed(&k, buf, BUF_LEN);
    CHECK(pa_body_key_digest(&k) != h);
    buf[0] ^= 0x80;

    /* the feed counts down what is still wanted */
    pa_body_key_init(&k, length);
    CHECK(k.left == length);
    CHECK(pa_body_key_feed(&k, buf, 0) == 1000);
    CHECK(pa_body_key_feed(&k, buf, 300) == 700);
    CHECK(k.total == 300);
    CHECK(pa_body_key_feed(&k, buf + 300, 699) == 1);
    CHECK(pa_body_key_feed(&k, buf + 999, 5) == 0);
    CHECK(k.total == 1000);
    CHECK(pa_body_key_feed(&k, buf + 1004, 100) == 0);
    CHECK(k.total == 1000);
    CHECK(pa_body_key_digest(&k) == h);

    /* a body shorter than "length" is hashed whole */
    pa_body_key_init(&k, length);
    CHECK(pa_body_key_feed(&k, buf, 500) == 500);
    CHECK(k.total == 500);
    h2 = pa_body_key_digest(&k);
    CHECK(h2 == XXH3_64bits(buf, 500));
    CHECK(h2 != h);

    /* the digest may be taken twice */
    CHECK(pa_body_key_digest(&k) == h2);

    /* an empty body, and a zero length */
    pa_body_key_init(&k, length);
    CHECK(pa_body_key_digest(&k) == XXH3_64bits(NULL, 0));
    CHECK(k.total == 0);

    pa_body_key_init(&k, 0);
    CHECK(pa_body_key_feed(&k, buf, 100) == 0);
    CHECK(k.total == 0);
    CHECK(pa_body_key_digest(&k) == XXH3_64bits(NULL, 0));

    /* init restarts a used key */
    pa_body_key_init(&k, 10);
    (void) pa_body_key_feed(&k, buf + 7, 10);
    pa_body_key_init(&k, length);
    (void) pa_body_key_feed(&k, buf, length);
    CHECK(pa_body_key_digest(&k) == h);
}


/* a key in memory aligned only to 8 bytes, as from an nginx pool */

static void
test_body_key_alignment(const unsigned char *buf)
{
    size_t          off, bad;
    uint64_t        h;
    pa_body_key_t  *k;

    h = XXH3_64bits(buf, 2048);
    bad = 0;

    for (off = 0; off < 128; off += 8) {
        k = (pa_body_key_t *) (scratch + off);

        memset(scratch, 0xa5, sizeof(scratch));

        pa_body_key_init(k, 2048);
        (void) pa_body_key_feed(k, buf, 1000);
        (void) pa_body_key_feed(k, buf + 1000, 2000);

        if (pa_body_key_digest(k) != h) {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%zu of 16 offsets differ", bad);
    CHECK(sizeof(pa_body_key_t) + 128 <= sizeof(scratch));
}


static void
test_mix(void)
{
    size_t    i, j, same;
    uint64_t  h, keys[6];

    static const char  *ids[6] = {
        "a", "b", "tenant-1", "tenant-2", "tenant-10", "tenant-1 "
    };

    h = 0x0123456789abcdefULL;

    CHECK(pa_key_mix(h, NULL, 0) == h);
    CHECK(pa_key_mix(h, (const unsigned char *) "x", 0) == h);
    CHECK(pa_key_mix(0, NULL, 0) == 0);

    for (i = 0; i < 6; i++) {
        keys[i] = pa_key_mix(h, (const unsigned char *) ids[i],
                             strlen(ids[i]));
    }

    same = 0;

    for (i = 0; i < 6; i++) {
        if (keys[i] == h) {
            same++;
        }

        for (j = i + 1; j < 6; j++) {
            if (keys[i] == keys[j]) {
                same++;
            }
        }
    }

    CHECK_MSG(same == 0, "%zu keys equal", same);

    /* deterministic, and the body hash still matters */
    CHECK(pa_key_mix(h, (const unsigned char *) "a", 1) == keys[0]);
    CHECK(pa_key_mix(h + 1, (const unsigned char *) "a", 1) != keys[0]);

    /* id-only keys: deterministic and apart for different ids */
    CHECK(pa_key_id_only((const unsigned char *) "a", 1)
          == pa_key_id_only((const unsigned char *) "a", 1));
    CHECK(pa_key_id_only((const unsigned char *) "a", 1)
          != pa_key_id_only((const unsigned char *) "b", 1));
    CHECK(pa_key_id_only((const unsigned char *) "tenant-1", 8)
          != pa_key_id_only((const unsigned char *) "tenant-10", 9));
}


int
main(void)
{
    size_t         i;
    uint64_t       rnd;
    unsigned char  buf[BUF_LEN];

    static const size_t  lengths[] = {
        0, 1, 7, 16, 17, 128, 129, 240, 241, 255, 256, 257, 1000, 1024,
        1025, 2999, 3000
    };

    rnd = 42;

    for (i = 0; i < BUF_LEN; i++) {
        buf[i] = (unsigned char) rnd_next(&rnd);
    }

    test_id_check();

    for (i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        test_body_key_pieces(buf, lengths[i]);
    }

    test_body_key_bounds(buf);
    test_body_key_alignment(buf);
    test_mix();

    return UNIT_DONE();
}
