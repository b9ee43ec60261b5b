
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * pa_sync_*(): SipHash-2-4 against the paper's and the reference
 * implementation's vectors; datagrams written and read back; a record
 * split over datagrams ages its server as much as the whole; a datagram
 * with one bit changed, cut short, of another key or upstream, refused;
 * entries past a datagram's end never read.
 */


#include <string.h>

#include "unit.h"
#include "pa_sync.h"


static void
test_siphash(void)
{
    int            i;
    unsigned char  msg[64];
    pa_sync_key_t  key;

    /* key 00..0f, as in the paper and the reference's vectors.h */

    key.k0 = 0x0706050403020100ULL;
    key.k1 = 0x0f0e0d0c0b0a0908ULL;

    for (i = 0; i < 64; i++) {
        msg[i] = (unsigned char) i;
    }

    CHECK(pa_siphash(&key, msg, 0) == 0x726fdb47dd0e0e31ULL);
    CHECK(pa_siphash(&key, msg, 1) == 0x74f839c593dc67fdULL);
    CHECK(pa_siphash(&key, msg, 15) == 0xa129ca6149be45e5ULL);

    /* every length differs, and a bit of the key changes the tag */

    CHECK(pa_siphash(&key, msg, 8) != pa_siphash(&key, msg, 9));
    key.k1 ^= 1;
    CHECK(pa_siphash(&key, msg, 15) != 0xa129ca6149be45e5ULL);
}


static void
test_records(void)
{
    int               rc, more;
    uint32_t          i, from, total, aged, cached, n;
    uint64_t          hashes[1000], got[PA_SYNC_MAX_HASHES];
    unsigned char     buf[PA_SYNC_MTU];
    size_t            len;
    pa_sync_key_t     key;
    pa_sync_msg_t     m;
    pa_sync_dgram_t   d;
    pa_sync_record_t  r;

    pa_sync_key(&key, "a shared secret of the hosts", 28);

    for (i = 0; i < 1000; i++) {
        hashes[i] = 0x9e3779b97f4a7c15ULL * (i + 1);
    }

    /* two small records in one datagram */

    pa_sync_begin(&d, buf, PA_SYNC_RECORDS, 77, 99);
    from = 0;
    CHECK(pa_sync_put_record(&d, 5, hashes, 3, 1, 40, &from) == 1);
    CHECK(from == 3);
    from = 0;
    CHECK(pa_sync_put_record(&d, 6, hashes + 10, 2, 0, 2, &from) == 1);
    len = pa_sync_seal(&d, &key, 123456, 42);
    CHECK(len == PA_SYNC_HEAD + 2 * PA_SYNC_RECORD_HEAD + 5 * 8
                 + PA_SYNC_TAG);

    CHECK(pa_sync_open(&m, buf, len, &key, 99) == PA_SYNC_OK);
    CHECK(m.type == PA_SYNC_RECORDS && m.count == 2);
    CHECK(m.sender == 77 && m.sent == 123456 && m.seq == 42);

    CHECK(pa_sync_next_record(&m, &r, got) == 1);
    CHECK(r.server == 5 && r.n == 3 && r.cached == 1 && r.size == 40);
    CHECK(got[0] == hashes[0] && got[2] == hashes[2]);
    CHECK(pa_sync_next_record(&m, &r, got) == 1);
    CHECK(r.server == 6 && r.n == 2 && r.cached == 0 && r.size == 2);
    CHECK(got[1] == hashes[11]);
    CHECK(pa_sync_next_record(&m, &r, got) == 0);

    /* a load entry is not read from a datagram of records */

    {
        pa_sync_load_t  l;
        CHECK(pa_sync_next_load(&m, &l) == 0);
    }

    /*
     * 1,000 blocks, 300 held, 5,000 of cache: split over datagrams, each
     * piece readable alone; the pieces hold every block once, "cached"
     * where it was, and age the server by 5,000 - 300 in all
     */

    from = 0;
    total = 0;
    aged = 0;
    cached = 0;
    more = 1;
    n = 0;

    while (more) {
        pa_sync_begin(&d, buf, PA_SYNC_RECORDS, 1, 2);
        rc = pa_sync_put_record(&d, 42, hashes, 1000, 300, 5000, &from);
        more = (rc == 0);
        len = pa_sync_seal(&d, &key, 3, 1);
        CHECK(len <= PA_SYNC_MTU);

        CHECK(pa_sync_open(&m, buf, len, &key, 2) == PA_SYNC_OK);
        CHECK(pa_sync_next_record(&m, &r, got) == 1);
        CHECK(r.n <= PA_SYNC_MAX_HASHES);
        CHECK(got[0] == hashes[total]);
        CHECK(got[r.n - 1] == hashes[total + r.n - 1]);
        total += r.n;
        aged += r.size - r.cached;
        cached += r.cached;
        n++;
    }

    CHECK(total == 1000);
    CHECK(cached == 300);
    CHECK(aged == 5000 - 300);
    CHECK(n == (1000 + PA_SYNC_MAX_HASHES - 1) / PA_SYNC_MAX_HASHES);

    /* a full datagram takes no more */

    pa_sync_begin(&d, buf, PA_SYNC_RECORDS, 1, 2);
    from = 0;
    CHECK(pa_sync_put_record(&d, 42, hashes, 1000, 0, 1000, &from) == 0);
    CHECK(from == PA_SYNC_MAX_HASHES);
    CHECK(pa_sync_put_record(&d, 42, hashes, 1000, 0, 1000, &from) == 0);
    CHECK(from == PA_SYNC_MAX_HASHES);
}


static void
test_load(void)
{
    int              i;
    size_t           len;
    unsigned char    buf[PA_SYNC_MTU];
    pa_sync_key_t    key;
    pa_sync_msg_t    m;
    pa_sync_load_t   l;
    pa_sync_dgram_t  d;

    pa_sync_key(&key, "k", 1);

    pa_sync_begin(&d, buf, PA_SYNC_LOAD, 8, 9);

    for (i = 0; pa_sync_put_load(&d, 1000 + i, i, 100000ULL * i) == 0; i++) {
        /* void */
    }

    CHECK(i == (PA_SYNC_MTU - PA_SYNC_HEAD - PA_SYNC_TAG)
               / PA_SYNC_LOAD_SIZE);

    len = pa_sync_seal(&d, &key, 3, 1);
    CHECK(pa_sync_open(&m, buf, len, &key, 9) == PA_SYNC_OK);
    CHECK(m.type == PA_SYNC_LOAD && (int) m.count == i);

    CHECK(pa_sync_next_load(&m, &l) == 1);
    CHECK(l.server == 1000 && l.inflight == 0 && l.work == 0);
    CHECK(pa_sync_next_load(&m, &l) == 1);
    CHECK(l.server == 1001 && l.inflight == 1 && l.work == 100000);
}


/* the ids of stored responses: a datagram full of them, read back */

static void
test_state(void)
{
    int              i;
    size_t           len;
    unsigned char    buf[PA_SYNC_MTU];
    pa_sync_key_t    key;
    pa_sync_msg_t    m;
    pa_sync_state_t  s;
    pa_sync_dgram_t  d;

    pa_sync_key(&key, "k", 1);

    pa_sync_begin(&d, buf, PA_SYNC_STATE, 8, 9);

    for (i = 0; pa_sync_put_state(&d, 1000 + i, 77 + i) == 0; i++) {
        /* void */
    }

    CHECK(i == (PA_SYNC_MTU - PA_SYNC_HEAD - PA_SYNC_TAG)
               / PA_SYNC_STATE_SIZE);

    len = pa_sync_seal(&d, &key, 3, 1);
    CHECK(pa_sync_open(&m, buf, len, &key, 9) == PA_SYNC_OK);
    CHECK(m.type == PA_SYNC_STATE && (int) m.count == i);

    /* no record or load in it */

    CHECK(pa_sync_next_load(&m, &(pa_sync_load_t) { 0, 0, 0 }) == 0);

    CHECK(pa_sync_next_state(&m, &s) == 1);
    CHECK(s.server == 1000 && s.id == 77);
    CHECK(pa_sync_next_state(&m, &s) == 1);
    CHECK(s.server == 1001 && s.id == 78);

    /* a 0 is malformed */

    pa_sync_begin(&d, buf, PA_SYNC_STATE, 8, 9);
    CHECK(pa_sync_put_state(&d, 0, 5) == 0);
    len = pa_sync_seal(&d, &key, 3, 2);
    CHECK(pa_sync_open(&m, buf, len, &key, 9) == PA_SYNC_OK);
    CHECK(pa_sync_next_state(&m, &s) == -1);

    /* a type past it is refused before anything is read */

    pa_sync_begin(&d, buf, PA_SYNC_STATE + 1, 8, 9);
    len = pa_sync_seal(&d, &key, 3, 3);
    CHECK(pa_sync_open(&m, buf, len, &key, 9) == PA_SYNC_ETYPE);
}


static void
test_refused(void)
{
    size_t            len, i;
    uint32_t          from;
    uint64_t          hashes[4] = { 1, 2, 3, 4 }, got[PA_SYNC_MAX_HASHES];
    unsigned char     buf[PA_SYNC_MTU], copy[PA_SYNC_MTU];
    pa_sync_key_t     key, other;
    pa_sync_msg_t     m;
    pa_sync_dgram_t   d;
    pa_sync_record_t  r;

    pa_sync_key(&key, "secret one", 10);
    pa_sync_key(&other, "secret two", 10);

    pa_sync_begin(&d, buf, PA_SYNC_RECORDS, 1, 2);
    from = 0;
    (void) pa_sync_put_record(&d, 7, hashes, 4, 0, 4, &from);
    len = pa_sync_seal(&d, &key, 3, 1);

    CHECK(pa_sync_open(&m, buf, len, &key, 2) == PA_SYNC_OK);
    CHECK(pa_sync_open(&m, buf, len, &other, 2) == PA_SYNC_ETAG);
    CHECK(pa_sync_open(&m, buf, len, &key, 3) == PA_SYNC_EUPSTREAM);
    CHECK(pa_sync_open(&m, buf, len - 1, &key, 2) == PA_SYNC_ETAG);
    CHECK(pa_sync_open(&m, buf, PA_SYNC_HEAD, &key, 2) == PA_SYNC_ESIZE);
    CHECK(pa_sync_open(&m, buf, PA_SYNC_MTU + 1, &key, 2) == PA_SYNC_ESIZE);

    /* any one bit changed */

    for (i = 0; i < 8 * len; i++) {
        memcpy(copy, buf, len);
        copy[i / 8] ^= (unsigned char) (1 << (i % 8));

        if (pa_sync_open(&m, copy, len, &key, 2) == PA_SYNC_OK) {
            CHECK_MSG(0, "bit %zu changed, still taken", i);
            break;
        }
    }

    CHECK(i == 8 * len);

    /*
     * a datagram with the key that says more entries than it has, or an
     * entry longer than what is left: read up to there, not past it
     */

    pa_sync_begin(&d, buf, PA_SYNC_RECORDS, 1, 2);
    from = 0;
    (void) pa_sync_put_record(&d, 7, hashes, 4, 0, 4, &from);
    d.count = 2;
    len = pa_sync_seal(&d, &key, 3, 1);
    CHECK(pa_sync_open(&m, buf, len, &key, 2) == PA_SYNC_OK);
    CHECK(pa_sync_next_record(&m, &r, got) == 1);
    CHECK(pa_sync_next_record(&m, &r, got) == -1);

    pa_sync_begin(&d, buf, PA_SYNC_RECORDS, 1, 2);
    from = 0;
    (void) pa_sync_put_record(&d, 7, hashes, 4, 0, 4, &from);
    d.len -= 8;                         /* the last hash cut off */
    len = pa_sync_seal(&d, &key, 3, 1);
    CHECK(pa_sync_open(&m, buf, len, &key, 2) == PA_SYNC_OK);
    CHECK(pa_sync_next_record(&m, &r, got) == -1);

    /* cached > n, size < n */

    pa_sync_begin(&d, buf, PA_SYNC_RECORDS, 1, 2);
    from = 0;
    (void) pa_sync_put_record(&d, 7, hashes, 4, 0, 4, &from);
    buf[PA_SYNC_HEAD + 10] = 5;
    len = pa_sync_seal(&d, &key, 3, 1);
    CHECK(pa_sync_open(&m, buf, len, &key, 2) == PA_SYNC_OK);
    CHECK(pa_sync_next_record(&m, &r, got) == -1);

    CHECK(strcmp(pa_sync_error(PA_SYNC_ETAG), "tag (another key)") == 0);
}


/* a datagram of "sender" with "seq", "sent", opened */

static void
msg(pa_sync_msg_t *m, uint64_t sender, uint64_t seq, uint64_t sent)
{
    size_t           len;
    unsigned char    buf[PA_SYNC_MTU];
    pa_sync_key_t    key;
    pa_sync_dgram_t  d;

    pa_sync_key(&key, "k", 1);
    pa_sync_begin(&d, buf, PA_SYNC_LOAD, sender, 9);
    (void) pa_sync_put_load(&d, 1, 2, 3);
    len = pa_sync_seal(&d, &key, sent, seq);

    if (pa_sync_open(m, buf, len, &key, 9) != PA_SYNC_OK) {
        CHECK(0);
    }
}


/*
 * replays (the review's items 1-3): a datagram taken once is refused
 * again; so is one older than the window, or sent more than "skew" from
 * the receiver's clock; reordering within the window is taken; a new
 * sender takes a free place, or one whose datagrams are all stale, never
 * a live sender's
 */

static void
test_admit(void)
{
    unsigned        i, slot;
    uint64_t        wall, seq;
    pa_sync_msg_t   m;
    pa_sync_peer_t  t[4];

    memset(t, 0, sizeof(t));
    wall = 1700000000000ULL;

    msg(&m, 11, 1, wall);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_OK);
    CHECK(slot == 0 && t[0].sender == 11 && t[0].top == 1);

    /* the same datagram again, 400 times: each refused */

    for (i = 0; i < 400; i++) {
        if (pa_sync_admit(t, 4, &m, wall + i, 1000, &slot)
            != PA_SYNC_EREPLAY)
        {
            break;
        }
    }

    CHECK(i == 400);

    /* later ones, out of order within the window: each taken once */

    for (seq = 300; seq >= 2; seq--) {
        msg(&m, 11, seq, wall);
        CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot)
              == ((300 - seq < PA_SYNC_WINDOW) ? PA_SYNC_OK
                                                 : PA_SYNC_EREPLAY));
    }

    CHECK(t[0].top == 300);

    for (seq = 300; seq > 300 - PA_SYNC_WINDOW; seq--) {
        msg(&m, 11, seq, wall);
        CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot)
              == PA_SYNC_EREPLAY);
    }

    /* a jump past the window forgets it; the one just below is new */

    msg(&m, 11, 1000, wall);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_OK);
    msg(&m, 11, 999, wall);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_OK);
    msg(&m, 11, 1000 - PA_SYNC_WINDOW, wall);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_EREPLAY);

    /* a shift of a number of bits not a multiple of 64 keeps the bits */

    msg(&m, 11, 1070, wall);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_OK);
    msg(&m, 11, 999, wall);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_EREPLAY);
    msg(&m, 11, 998, wall);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_OK);

    /* the clock: 1,000 ms either way is fresh, more is not */

    msg(&m, 11, 2000, wall - 1000);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_OK);
    msg(&m, 11, 2001, wall + 1000);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_OK);
    msg(&m, 11, 2002, wall - 1001);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_ESTALE);
    msg(&m, 11, 2003, wall + 1001);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_ESTALE);

    /* a new sender never heard: stale is refused before it takes a place */

    msg(&m, 99, 1, wall - 5000);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_ESTALE);
    CHECK(t[1].sender == 0);

    /* three more senders fill the table; a fifth finds it full */

    for (i = 0; i < 3; i++) {
        msg(&m, 20 + i, 1, wall);
        CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_OK);
        CHECK(slot == i + 1);
        t[slot].live = 1;
    }

    msg(&m, 30, 1, wall);
    CHECK(pa_sync_admit(t, 4, &m, wall, 1000, &slot) == PA_SYNC_EFULL);

    /*
     * sender 11 is not live; its place is taken once its latest "sent"
     * (wall + 1000) is stale: a replay of any datagram of it would be
     */

    t[0].live = 0;
    msg(&m, 30, 1, wall + 2000);
    CHECK(pa_sync_admit(t, 4, &m, wall + 2000, 1000, &slot)
          == PA_SYNC_EFULL);

    msg(&m, 30, 1, wall + 2001);
    CHECK(pa_sync_admit(t, 4, &m, wall + 2001, 1000, &slot) == PA_SYNC_OK);
    CHECK(slot == 0 && t[0].sender == 30 && t[0].top == 1);

    /* live senders keep their places however long */

    msg(&m, 31, 1, wall + 100000);
    CHECK(pa_sync_admit(t, 4, &m, wall + 100000, 1000, &slot)
          == PA_SYNC_OK);
    CHECK(slot == 0);
    msg(&m, 32, 1, wall + 100000);
    CHECK(pa_sync_admit(t, 4, &m, wall + 100000, 1000, &slot)
          == PA_SYNC_EFULL);

    CHECK(strcmp(pa_sync_error(PA_SYNC_EREPLAY), "replayed") == 0);
}


int
main(void)
{
    test_admit();
    test_siphash();
    test_records();
    test_load();
    test_state();
    test_refused();

    return UNIT_DONE();
}
