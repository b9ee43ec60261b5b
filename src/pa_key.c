
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 */


#include <stdint.h>
#include <stddef.h>

#include "pa_key.h"


/* seeds the id-only key apart from the keys of bodies */
#define PA_KEY_ID_ONLY_SEED  0x70612d69642d6f6eULL     /* "pa-id-on" */


static XXH3_state_t *pa_body_key_state(pa_body_key_t *k);


const char *
pa_id_check(const unsigned char *id, size_t len)
{
    size_t  i;

    if (len == 0) {
        return "id is empty";
    }

    if (len > PA_ID_MAX_LEN) {
        return "id is longer than 64 characters";
    }

    for (i = 0; i < len; i++) {
        if (id[i] < 0x20 || id[i] > 0x7e) {
            return "id has a non-printable or non-ASCII byte";
        }
    }

    return NULL;
}


void
pa_body_key_init(pa_body_key_t *k, size_t length)
{
    k->left = length;
    k->total = 0;

    (void) XXH3_64bits_reset(pa_body_key_state(k));
}


size_t
pa_body_key_feed(pa_body_key_t *k, const unsigned char *p, size_t n)
{
    if (n > k->left) {
        n = k->left;
    }

    if (n == 0) {
        return k->left;
    }

    pa_xxh3_update(pa_body_key_state(k), p, n);

    k->left -= n;
    k->total += n;

    return k->left;
}


uint64_t
pa_body_key_digest(pa_body_key_t *k)
{
    return XXH3_64bits_digest(pa_body_key_state(k));
}


uint64_t
pa_key_mix(uint64_t hash, const unsigned char *id, size_t len)
{
    if (len == 0) {
        return hash;
    }

    return XXH3_64bits_withSeed(id, len, hash);
}


uint64_t
pa_key_id_only(const unsigned char *id, size_t len)
{
    return XXH3_64bits_withSeed(id, len, PA_KEY_ID_ONLY_SEED);
}


static XXH3_state_t *
pa_body_key_state(pa_body_key_t *k)
{
    uintptr_t  a;

    a = (uintptr_t) k->raw;
    a = (a + PA_XXH3_STATE_ALIGN - 1) & ~(uintptr_t) (PA_XXH3_STATE_ALIGN - 1);

    return (XXH3_state_t *) a;
}
