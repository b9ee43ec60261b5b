
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * XXH3 built for AVX2 (src/pa_xxh_avx2.c), for x86-64 with GCC or clang
 * (pa_cpu.h: pa_cpu_has_avx2()): a whole block, and a piece of a
 * streaming hash (pa_xxhash.h: pa_xxh3_update() chooses).  This header
 * does not include xxHash: the AVX2 file includes it after its target
 * pragma.
 */


#ifndef _PA_XXH_H_INCLUDED_
#define _PA_XXH_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "pa_cpu.h"


#define PA_XXH_AVX2  PA_CPU_AVX2


/* XXH3_64bits_withSeed(), the same hash, for a CPU with AVX2 */
uint64_t pa_xxh3_avx2(const void *p, size_t n, uint64_t seed);

/* XXH3_64bits_update() of an XXH3_state_t, for a CPU with AVX2 */
void pa_xxh3_update_avx2(void *state, const void *p, size_t n);

#endif /* _PA_XXH_H_INCLUDED_ */
