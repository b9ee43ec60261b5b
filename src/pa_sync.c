
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The datagrams of prefix_aware_sync (src/pa_sync.h): written and read
 * with explicit little-endian bytes, every read bounded by the datagram's
 * end, and SipHash-2-4 (Aumasson and Bernstein, 2012) as the tag: a
 * keyed function made for short messages, 64 bits.  Plain C, no nginx
 * headers.
 */


#include <string.h>

#include "pa_sync.h"
#include "pa_time.h"
#include "pa_xxhash.h"


#define pa_rotl(x, b)  (uint64_t) (((x) << (b)) | ((x) >> (64 - (b))))

#define pa_sipround(v0, v1, v2, v3)                                           \
    do {                                                                      \
        v0 += v1; v1 = pa_rotl(v1, 13); v1 ^= v0; v0 = pa_rotl(v0, 32);       \
        v2 += v3; v3 = pa_rotl(v3, 16); v3 ^= v2;                             \
        v0 += v3; v3 = pa_rotl(v3, 21); v3 ^= v0;                             \
        v2 += v1; v1 = pa_rotl(v1, 17); v1 ^= v2; v2 = pa_rotl(v2, 32);       \
    } while (0)


static uint64_t
pa_get64(const unsigned char *p)
{
    return (uint64_t) p[0] | (uint64_t) p[1] << 8 | (uint64_t) p[2] << 16
           | (uint64_t) p[3] << 24 | (uint64_t) p[4] << 32
           | (uint64_t) p[5] << 40 | (uint64_t) p[6] << 48
           | (uint64_t) p[7] << 56;
}


static uint32_t
pa_get32(const unsigned char *p)
{
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16
           | (uint32_t) p[3] << 24;
}


static void
pa_put64(unsigned char *p, uint64_t v)
{
    int  i;

    for (i = 0; i < 8; i++) {
        p[i] = (unsigned char) (v >> (8 * i));
    }
}


static void
pa_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char) v;
    p[1] = (unsigned char) (v >> 8);
    p[2] = (unsigned char) (v >> 16);
    p[3] = (unsigned char) (v >> 24);
}


static void
pa_put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char) v;
    p[1] = (unsigned char) (v >> 8);
}


uint64_t
pa_siphash(const pa_sync_key_t *key, const void *data, size_t len)
{
    size_t                i, left;
    uint64_t              v0, v1, v2, v3, m, b;
    const unsigned char  *p;

    p = data;

    v0 = 0x736f6d6570736575ULL ^ key->k0;
    v1 = 0x646f72616e646f6dULL ^ key->k1;
    v2 = 0x6c7967656e657261ULL ^ key->k0;
    v3 = 0x7465646279746573ULL ^ key->k1;

    for (i = 0; i + 8 <= len; i += 8) {
        m = pa_get64(p + i);
        v3 ^= m;
        pa_sipround(v0, v1, v2, v3);
        pa_sipround(v0, v1, v2, v3);
        v0 ^= m;
    }

    b = (uint64_t) len << 56;
    left = len - i;

    while (left > 0) {
        left--;
        b |= (uint64_t) p[i + left] << (8 * left);
    }

    v3 ^= b;
    pa_sipround(v0, v1, v2, v3);
    pa_sipround(v0, v1, v2, v3);
    v0 ^= b;

    v2 ^= 0xff;
    pa_sipround(v0, v1, v2, v3);
    pa_sipround(v0, v1, v2, v3);
    pa_sipround(v0, v1, v2, v3);
    pa_sipround(v0, v1, v2, v3);

    return v0 ^ v1 ^ v2 ^ v3;
}


void
pa_sync_key(pa_sync_key_t *key, const void *secret, size_t len)
{
    XXH128_hash_t  h;

    h = XXH3_128bits(secret, len);

    key->k0 = h.low64;
    key->k1 = h.high64;
}


void
pa_sync_begin(pa_sync_dgram_t *d, unsigned char *buf, int type,
    uint64_t sender, uint64_t upstream)
{
    d->buf = buf;
    d->type = type;
    d->count = 0;

    pa_put32(buf, PA_SYNC_MAGIC);
    buf[4] = PA_SYNC_VERSION;
    buf[5] = (unsigned char) type;
    pa_put16(buf + 6, 0);
    pa_put64(buf + 8, sender);
    pa_put64(buf + 16, upstream);
    pa_put64(buf + 24, 0);
    pa_put64(buf + 32, 0);

    d->len = PA_SYNC_HEAD;
}


int
pa_sync_put_record(pa_sync_dgram_t *d, uint64_t server,
    const uint64_t *hashes, uint32_t n, uint32_t cached, uint32_t size,
    uint32_t *from)
{
    size_t          room;
    uint32_t        a, k, i, c, s;
    unsigned char  *p;

    a = *from;

    if (a >= n) {
        return 1;
    }

    room = PA_SYNC_MTU - PA_SYNC_TAG - d->len;

    if (d->count == 0xffff || room < PA_SYNC_RECORD_HEAD + 8) {
        return 0;
    }

    k = (uint32_t) ((room - PA_SYNC_RECORD_HEAD) / 8);
    k = (k > n - a) ? n - a : k;

    /* the part of "cached" and of the room past the blocks in this piece */

    c = (cached > a) ? cached - a : 0;
    c = (c > k) ? k : c;

    s = k;

    if (a == 0 && size > n) {
        s = (size - n > 0xffffffffu - k) ? 0xffffffffu : k + (size - n);
    }

    p = d->buf + d->len;

    pa_put64(p, server);
    pa_put16(p + 8, k);
    pa_put16(p + 10, c);
    pa_put32(p + 12, s);
    p += PA_SYNC_RECORD_HEAD;

    for (i = 0; i < k; i++) {
        pa_put64(p, hashes[a + i]);
        p += 8;
    }

    d->len = (size_t) (p - d->buf);
    d->count++;
    *from = a + k;

    return (*from == n);
}


int
pa_sync_put_load(pa_sync_dgram_t *d, uint64_t server, uint32_t inflight,
    uint64_t work)
{
    unsigned char  *p;

    if (d->count == 0xffff
        || d->len + PA_SYNC_LOAD_SIZE > PA_SYNC_MTU - PA_SYNC_TAG)
    {
        return -1;
    }

    p = d->buf + d->len;

    pa_put64(p, server);
    pa_put32(p + 8, inflight);
    pa_put32(p + 12, 0);
    pa_put64(p + 16, work);

    d->len += PA_SYNC_LOAD_SIZE;
    d->count++;

    return 0;
}


int
pa_sync_put_state(pa_sync_dgram_t *d, uint64_t server, uint64_t id)
{
    unsigned char  *p;

    if (d->count == 0xffff
        || d->len + PA_SYNC_STATE_SIZE > PA_SYNC_MTU - PA_SYNC_TAG)
    {
        return -1;
    }

    p = d->buf + d->len;

    pa_put64(p, server);
    pa_put64(p + 8, id);

    d->len += PA_SYNC_STATE_SIZE;
    d->count++;

    return 0;
}


size_t
pa_sync_seal(pa_sync_dgram_t *d, const pa_sync_key_t *key, uint64_t sent,
    uint64_t seq)
{
    pa_put16(d->buf + 6, d->count);
    pa_put64(d->buf + 24, sent);
    pa_put64(d->buf + 32, seq);
    pa_put64(d->buf + d->len, pa_siphash(key, d->buf, d->len));

    return d->len + PA_SYNC_TAG;
}


int
pa_sync_open(pa_sync_msg_t *m, const unsigned char *p, size_t len,
    const pa_sync_key_t *key, uint64_t upstream)
{
    if (len < PA_SYNC_HEAD + PA_SYNC_TAG || len > PA_SYNC_MTU) {
        return PA_SYNC_ESIZE;
    }

    if (pa_get32(p) != PA_SYNC_MAGIC) {
        return PA_SYNC_EMAGIC;
    }

    /* nothing else is read of a datagram whose tag does not check */

    if (pa_siphash(key, p, len - PA_SYNC_TAG)
        != pa_get64(p + len - PA_SYNC_TAG))
    {
        return PA_SYNC_ETAG;
    }

    if (p[4] != PA_SYNC_VERSION) {
        return PA_SYNC_EVERSION;
    }

    if (p[5] != PA_SYNC_RECORDS && p[5] != PA_SYNC_LOAD
        && p[5] != PA_SYNC_STATE)
    {
        return PA_SYNC_ETYPE;
    }

    m->type = p[5];
    m->count = (unsigned) p[6] | (unsigned) p[7] << 8;
    m->left = m->count;
    m->sender = pa_get64(p + 8);
    m->upstream = pa_get64(p + 16);
    m->sent = pa_get64(p + 24);
    m->seq = pa_get64(p + 32);
    m->p = p + PA_SYNC_HEAD;
    m->end = p + len - PA_SYNC_TAG;

    if (m->upstream != upstream) {
        return PA_SYNC_EUPSTREAM;
    }

    if (m->sender == 0) {
        return PA_SYNC_ETYPE;                   /* 0 is a free place */
    }

    return PA_SYNC_OK;
}


/*
 * the window of a sender: bit i of seen[] is seq "top - i"; a higher seq
 * moves it by the difference
 */

static void
pa_sync_shift(pa_sync_peer_t *p, uint64_t by)
{
    unsigned  i, words, bits, n;

    n = PA_SYNC_WINDOW / 64;

    if (by >= PA_SYNC_WINDOW) {
        memset(p->seen, 0, sizeof(p->seen));
        return;
    }

    words = (unsigned) (by / 64);
    bits = (unsigned) (by % 64);

    for (i = n; i-- > 0; /* void */) {
        p->seen[i] = (i >= words) ? p->seen[i - words] : 0;
    }

    if (bits) {
        for (i = n; i-- > 0; /* void */) {
            p->seen[i] = (p->seen[i] << bits)
                         | ((i > 0) ? p->seen[i - 1] >> (64 - bits) : 0);
        }
    }
}


int
pa_sync_admit(pa_sync_peer_t *table, unsigned n, const pa_sync_msg_t *m,
    uint64_t wall, uint64_t skew, unsigned *slot)
{
    unsigned         i, free;
    uint64_t         d;
    pa_sync_peer_t  *p;

    /* sent "skew" or more before this clock, or after it */

    if (pa_age(wall, m->sent) > skew || pa_age(m->sent, wall) > skew) {
        return PA_SYNC_ESTALE;
    }

    free = n;

    for (i = 0; i < n; i++) {
        p = &table[i];

        if (p->sender == m->sender) {
            break;
        }

        if (free == n
            && (p->sender == 0
                || (!p->live && pa_age(wall, p->sent) > skew)))
        {
            free = i;
        }
    }

    if (i < n) {
        p = &table[i];

        if (m->seq > p->top) {
            pa_sync_shift(p, m->seq - p->top);
            p->top = m->seq;
            p->seen[0] |= 1;

        } else {
            d = p->top - m->seq;

            if (d >= PA_SYNC_WINDOW
                || (p->seen[d / 64] & ((uint64_t) 1 << (d % 64))))
            {
                return PA_SYNC_EREPLAY;
            }

            p->seen[d / 64] |= (uint64_t) 1 << (d % 64);
        }

        if (m->sent > p->sent) {
            p->sent = m->sent;
        }

        *slot = i;
        return PA_SYNC_OK;
    }

    if (free == n) {
        return PA_SYNC_EFULL;
    }

    p = &table[free];

    memset(p, 0, sizeof(pa_sync_peer_t));
    p->sender = m->sender;
    p->top = m->seq;
    p->seen[0] = 1;
    p->sent = m->sent;

    *slot = free;
    return PA_SYNC_OK;
}


int
pa_sync_next_record(pa_sync_msg_t *m, pa_sync_record_t *r, uint64_t *hashes)
{
    uint32_t              i;
    const unsigned char  *p;

    if (m->left == 0 || m->type != PA_SYNC_RECORDS) {
        return 0;
    }

    p = m->p;

    if ((size_t) (m->end - p) < PA_SYNC_RECORD_HEAD) {
        return -1;
    }

    r->server = pa_get64(p);
    r->n = (uint32_t) p[8] | (uint32_t) p[9] << 8;
    r->cached = (uint32_t) p[10] | (uint32_t) p[11] << 8;
    r->size = pa_get32(p + 12);
    p += PA_SYNC_RECORD_HEAD;

    if (r->n == 0 || r->n > PA_SYNC_MAX_HASHES
        || (size_t) (m->end - p) / 8 < r->n
        || r->cached > r->n || r->size < r->n)
    {
        return -1;
    }

    for (i = 0; i < r->n; i++) {
        hashes[i] = pa_get64(p);
        p += 8;
    }

    m->p = p;
    m->left--;

    return 1;
}


int
pa_sync_next_load(pa_sync_msg_t *m, pa_sync_load_t *l)
{
    if (m->left == 0 || m->type != PA_SYNC_LOAD) {
        return 0;
    }

    if ((size_t) (m->end - m->p) < PA_SYNC_LOAD_SIZE) {
        return -1;
    }

    l->server = pa_get64(m->p);
    l->inflight = pa_get32(m->p + 8);
    l->work = pa_get64(m->p + 16);

    m->p += PA_SYNC_LOAD_SIZE;
    m->left--;

    return 1;
}


int
pa_sync_next_state(pa_sync_msg_t *m, pa_sync_state_t *s)
{
    if (m->left == 0 || m->type != PA_SYNC_STATE) {
        return 0;
    }

    if ((size_t) (m->end - m->p) < PA_SYNC_STATE_SIZE) {
        return -1;
    }

    s->server = pa_get64(m->p);
    s->id = pa_get64(m->p + 8);

    if (s->server == 0 || s->id == 0) {
        return -1;
    }

    m->p += PA_SYNC_STATE_SIZE;
    m->left--;

    return 1;
}


const char *
pa_sync_error(int rc)
{
    switch (rc) {
    case PA_SYNC_OK:
        return "ok";
    case PA_SYNC_ESIZE:
        return "size";
    case PA_SYNC_EMAGIC:
        return "not a sync datagram";
    case PA_SYNC_ETAG:
        return "tag (another key)";
    case PA_SYNC_EVERSION:
        return "version";
    case PA_SYNC_EUPSTREAM:
        return "another upstream";
    case PA_SYNC_ESTALE:
        return "stale (sent more than \"skew\" from this host's clock)";
    case PA_SYNC_EREPLAY:
        return "replayed";
    case PA_SYNC_EFULL:
        return "a new sender and the table of hosts full";
    default:
        return "type";
    }
}
