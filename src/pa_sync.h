
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * What nginx hosts in front of the same engines tell each other
 * (prefix_aware_sync): the blocks each recorded for a server, and each
 * one's requests and work in flight on every server.  One message is one
 * UDP datagram of at most PA_SYNC_MTU bytes, authenticated with a
 * SipHash-2-4 tag under a key the hosts share; a receiver refuses a
 * datagram whose tag, length or upstream does not check before it reads
 * anything else of it, then one that is not fresh (pa_sync_admit()).
 * Little-endian on the wire.  Plain C, no nginx headers.
 *
 *   head (40):  magic u32, version u8, type u8, count u16,
 *               sender u64, upstream u64,
 *               sent u64 (the wall clock, milliseconds since 1970),
 *               seq u64 (the sender's datagrams, from 1, in all its
 *               processes)
 *   record:     server u64, n u16, cached u16, size u32, n x hash u64
 *   load:       server u64, inflight u32, 0 u32, work u64
 *   state:      server u64, id u64 (a stored response's id, its XXH3:
 *               src/pa_store.h; type 3, which hosts before it refuse as
 *               of an unknown type)
 *   tag (8):    SipHash-2-4 of everything before it
 *
 * "server" is the hash of the server's name in the upstream (XXH3 of
 * "10.0.0.1:8000"), so hosts whose "server" lines are in another order
 * agree; "sender" is a random number drawn when the host's upstream
 * record is made (each start of nginx, kept over reloads), so a host
 * that hears itself (the same peer list on every host) knows it, and
 * (sender, seq) names each datagram once: a receiver keeps, for each
 * sender heard, the highest seq taken and which of the PA_SYNC_WINDOW
 * before it were, and refuses a datagram taken before (a replay), one
 * whose "sent" is more than "skew" from its own clock (a replay of an
 * old one, or a host whose clock is off), and a new sender when its
 * table is full of senders whose datagrams could still be fresh.
 */


#ifndef _PA_SYNC_H_INCLUDED_
#define _PA_SYNC_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define PA_SYNC_MAGIC        0x79736170u        /* "pasy" */
#define PA_SYNC_VERSION      2
#define PA_SYNC_MTU          1400               /* no IP fragments */
#define PA_SYNC_HEAD         40
#define PA_SYNC_TAG          8
#define PA_SYNC_RECORD_HEAD  16
#define PA_SYNC_LOAD_SIZE    24
#define PA_SYNC_STATE_SIZE   16

/* the most hashes one record entry of a datagram carries */
#define PA_SYNC_MAX_HASHES                                                    \
    ((PA_SYNC_MTU - PA_SYNC_HEAD - PA_SYNC_TAG - PA_SYNC_RECORD_HEAD) / 8)

#define PA_SYNC_RECORDS      1
#define PA_SYNC_LOAD         2
#define PA_SYNC_STATE        3

/* why a datagram is refused */
#define PA_SYNC_OK           0
#define PA_SYNC_ESIZE        1
#define PA_SYNC_EMAGIC       2
#define PA_SYNC_ETAG         3
#define PA_SYNC_EVERSION     4
#define PA_SYNC_EUPSTREAM    5
#define PA_SYNC_ETYPE        6
#define PA_SYNC_ESTALE       7      /* "sent" more than "skew" away */
#define PA_SYNC_EREPLAY      8      /* (sender, seq) taken before */
#define PA_SYNC_EFULL        9      /* a new sender, no place for it */
#define PA_SYNC_NERRORS      10

/* the sequence numbers below a sender's highest that are remembered */
#define PA_SYNC_WINDOW       256


typedef struct {
    uint64_t              k0;
    uint64_t              k1;
} pa_sync_key_t;


/* a datagram being written, in a buffer of PA_SYNC_MTU bytes */
typedef struct {
    unsigned char        *buf;
    size_t                len;
    unsigned              count;
    int                   type;
} pa_sync_dgram_t;


/* a datagram being read */
typedef struct {
    int                   type;
    unsigned              count;
    unsigned              left;
    uint64_t              sender;
    uint64_t              upstream;
    uint64_t              sent;
    uint64_t              seq;
    const unsigned char  *p;
    const unsigned char  *end;
} pa_sync_msg_t;


/*
 * a sender as a receiver remembers it, in a table of a few (shared
 * memory in nginx: the caller serializes pa_sync_admit() on a table)
 */
typedef struct {
    uint64_t              sender;     /* 0: a free place */
    uint64_t              top;        /* the highest seq taken */
    uint64_t              seen[PA_SYNC_WINDOW / 64];  /* bit i: top - i */
    uint64_t              sent;       /* the latest "sent" taken */
    uint64_t              live;       /* the caller's: its load counts */
} pa_sync_peer_t;


typedef struct {
    uint64_t              server;
    uint32_t              n;
    uint32_t              cached;
    uint32_t              size;
} pa_sync_record_t;


typedef struct {
    uint64_t              server;
    uint32_t              inflight;
    uint64_t              work;
} pa_sync_load_t;


typedef struct {
    uint64_t              server;
    uint64_t              id;
} pa_sync_state_t;


uint64_t pa_siphash(const pa_sync_key_t *key, const void *data, size_t len);

/* the key of a shared secret of any length (XXH3-128 of it) */
void pa_sync_key(pa_sync_key_t *key, const void *secret, size_t len);

void pa_sync_begin(pa_sync_dgram_t *d, unsigned char *buf, int type,
    uint64_t sender, uint64_t upstream);

/*
 * appends the blocks "*from".."n" - 1 of a record of "n" blocks, "cached"
 * of them held, "size" blocks of cache taken (pa_index_record_size()),
 * as many as fit, and moves "*from" past them: a record split over
 * datagrams ages its server as much as the whole one.  returns 1 when
 * the record is all written, 0 when the datagram is full.
 */
int pa_sync_put_record(pa_sync_dgram_t *d, uint64_t server,
    const uint64_t *hashes, uint32_t n, uint32_t cached, uint32_t size,
    uint32_t *from);

/* returns 0, or -1 when the datagram is full */
int pa_sync_put_load(pa_sync_dgram_t *d, uint64_t server, uint32_t inflight,
    uint64_t work);

/* returns 0, or -1 when the datagram is full */
int pa_sync_put_state(pa_sync_dgram_t *d, uint64_t server, uint64_t id);

/*
 * writes the count, the time "sent" (the wall clock, ms), the sequence
 * number "seq" and the tag; returns the datagram's length
 */
size_t pa_sync_seal(pa_sync_dgram_t *d, const pa_sync_key_t *key,
    uint64_t sent, uint64_t seq);

/* checks a datagram; PA_SYNC_OK, or why it is refused */
int pa_sync_open(pa_sync_msg_t *m, const unsigned char *p, size_t len,
    const pa_sync_key_t *key, uint64_t upstream);

/*
 * whether an opened datagram is fresh, against a table of "n" senders:
 * PA_SYNC_OK and its sender's place in "*slot" (taken: the same datagram
 * again is a replay), or PA_SYNC_ESTALE, PA_SYNC_EREPLAY, PA_SYNC_EFULL.
 * "wall" is the receiver's wall clock in ms; a place is given to a new
 * sender when it is free, or when its sender is not "live" and every
 * datagram taken of it is past "skew" (a replay of one would be stale)
 */
int pa_sync_admit(pa_sync_peer_t *table, unsigned n, const pa_sync_msg_t *m,
    uint64_t wall, uint64_t skew, unsigned *slot);

/*
 * the next entry of a checked datagram: 1, 0 at the end, -1 if it is
 * malformed (a datagram of a writer with the key and a bug: the entries
 * before it stand).  a record's hashes go to "hashes", room for
 * PA_SYNC_MAX_HASHES
 */
int pa_sync_next_record(pa_sync_msg_t *m, pa_sync_record_t *r,
    uint64_t *hashes);
int pa_sync_next_load(pa_sync_msg_t *m, pa_sync_load_t *l);
int pa_sync_next_state(pa_sync_msg_t *m, pa_sync_state_t *s);

const char *pa_sync_error(int rc);


#endif /* _PA_SYNC_H_INCLUDED_ */
