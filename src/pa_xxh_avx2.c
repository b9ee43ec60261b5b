
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * XXH3 of a whole block and of a streaming piece, built for AVX2 and
 * chosen at run time where the CPU has it (src/pa_block.c, pa_xxhash.h's
 * pa_xxh3_update()): xxHash is header-only and takes its vector
 * width from the compiler's target, so this one file is compiled for
 * AVX2 while the rest of the module stays generic x86-64.  XXH3 gives the
 * same hash with every vector width, and a streaming state has the same
 * layout in both builds (one header): a piece may be added by either.
 * AVX2 takes about a third of SSE2's instructions on blocks past 240
 * bytes.  Plain C, no nginx headers.
 */


#include "pa_xxh.h"


#if (PA_XXH_AVX2)

#pragma GCC push_options
#pragma GCC target("avx2")

#include "pa_xxhash.h"


uint64_t
pa_xxh3_avx2(const void *p, size_t n, uint64_t seed)
{
    return XXH3_64bits_withSeed(p, n, seed);
}


void
pa_xxh3_update_avx2(void *state, const void *p, size_t n)
{
    (void) XXH3_64bits_update((XXH3_state_t *) state, p, n);
}

#pragma GCC pop_options

#else

uint64_t
pa_xxh3_avx2(const void *p, size_t n, uint64_t seed)
{
    return 0;
}


void
pa_xxh3_update_avx2(void *state, const void *p, size_t n)
{
}

#endif
