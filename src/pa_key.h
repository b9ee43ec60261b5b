
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Routing keys: the tenant id check, the streaming hash of the first
 * "length" bytes of a request body, and the mix of a key with an id.
 * Plain C, no nginx headers.
 */


#ifndef _PA_KEY_H_INCLUDED_
#define _PA_KEY_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "pa_xxhash.h"


#define PA_ID_MAX_LEN        64

/* xxhash declares XXH3_state_t with 64-byte alignment */
#define PA_XXH3_STATE_ALIGN  64


/*
 * the XXH3 state lives at the first 64-byte boundary inside "raw", so
 * that the struct itself needs only ordinary alignment: a request context
 * from a pool aligned to 8 or 16 bytes can embed it.  it must not be
 * moved or copied between pa_body_key_init() and pa_body_key_digest().
 */

typedef struct {
    size_t          left;       /* body bytes still wanted */
    size_t          total;      /* body bytes hashed so far */
    unsigned char   raw[sizeof(XXH3_state_t) + PA_XXH3_STATE_ALIGN - 1];
} pa_body_key_t;


/*
 * returns NULL if "id" is 1..64 printable ascii characters (0x20..0x7e),
 * else a static one-line reason
 */
const char *pa_id_check(const unsigned char *id, size_t len);

void pa_body_key_init(pa_body_key_t *k, size_t length);

/* hashes up to k->left bytes of p in place; returns the bytes still wanted */
size_t pa_body_key_feed(pa_body_key_t *k, const unsigned char *p, size_t n);

uint64_t pa_body_key_digest(pa_body_key_t *k);

/* the key of a request: its source hash combined with a tenant id */
uint64_t pa_key_mix(uint64_t hash, const unsigned char *id, size_t len);

/* the key of a request that has an id but no body */
uint64_t pa_key_id_only(const unsigned char *id, size_t len);


#endif /* _PA_KEY_H_INCLUDED_ */
