
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * XXH3 of a whole block, built for AVX2 and chosen at run time where the
 * CPU has it (src/pa_block.c): xxHash is header-only and takes its vector
 * width from the compiler's target, so this one file is compiled for
 * AVX2 while the rest of the module stays generic x86-64.  XXH3 gives the
 * same hash with every vector width; AVX2 takes about a third of SSE2's
 * instructions on blocks past 240 bytes.  Plain C, no nginx headers.
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

#pragma GCC pop_options

#else

uint64_t
pa_xxh3_avx2(const void *p, size_t n, uint64_t seed)
{
    return 0;
}

#endif
