
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * xxHash in its header-only form.  XXH3_state_t is a private layout that
 * may change between xxHash releases: with XXH_INLINE_ALL every function
 * that touches it is compiled here from the same header, so the module
 * never meets a libxxhash.so of another layout.  Include this, never
 * <xxhash.h> directly.  Plain C, no nginx headers.
 */


#ifndef _PA_XXHASH_H_INCLUDED_
#define _PA_XXHASH_H_INCLUDED_


/*
 * unaligned reads as one load (a packed union, GCC and clang), not a call
 * of memcpy(): nginx's default -O does not inline xxHash's XXH_read64(),
 * and through a module's PLT every 8 bytes hashed cost three calls
 */
#if (defined(__GNUC__) || defined(__clang__)) \
    && !defined(XXH_FORCE_MEMORY_ACCESS)
#define XXH_FORCE_MEMORY_ACCESS  1
#endif

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pa_xxh.h"


/*
 * inputs longer than this are hashed whole by the AVX2 build, pieces at
 * least this long added by it, where it runs: shorter ones take XXH3's
 * scalar paths, the same in both builds
 */
#define PA_XXH_HASH_AVX2    240
#define PA_XXH_UPDATE_AVX2  256


/* XXH3_64bits_withSeed(), by the AVX2 build past its vector loop's start */

static inline uint64_t
pa_xxh3_hash(const void *p, size_t n, uint64_t seed)
{
#if (PA_XXH_AVX2)
    if (n > PA_XXH_HASH_AVX2 && pa_cpu_has_avx2()) {
        return pa_xxh3_avx2(p, n, seed);
    }
#endif

    return XXH3_64bits_withSeed(p, n, seed);
}


/*
 * XXH3_64bits_update(): a piece long enough for XXH3's vector loop goes
 * to the AVX2 build (src/pa_xxh_avx2.c) where the CPU has it, about a
 * third of the instructions; the state is the same either way
 */

static inline void
pa_xxh3_update(XXH3_state_t *state, const void *p, size_t n)
{
#if (PA_XXH_AVX2)
    if (n >= PA_XXH_UPDATE_AVX2 && pa_cpu_has_avx2()) {
        pa_xxh3_update_avx2(state, p, n);
        return;
    }
#endif

    (void) XXH3_64bits_update(state, p, n);
}


#endif /* _PA_XXHASH_H_INCLUDED_ */
