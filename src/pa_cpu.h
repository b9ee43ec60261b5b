
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Whether this CPU has AVX2, for the pieces built for it and chosen at
 * run time (src/pa_xxh_avx2.c, src/pa_json_avx2.c): x86-64 with GCC or
 * clang; elsewhere PA_CPU_AVX2 is 0 and pa_cpu_has_avx2() says no.
 * Plain C, no nginx headers.
 */


#ifndef _PA_CPU_H_INCLUDED_
#define _PA_CPU_H_INCLUDED_


#if (defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)))

#define PA_CPU_AVX2  1

/* asked once in each file that asks, then remembered */

static inline int
pa_cpu_has_avx2(void)
{
    static int  avx2 = -1;

    if (avx2 < 0) {
        __builtin_cpu_init();
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    }

    return avx2;
}

#else

#define PA_CPU_AVX2  0

static inline int
pa_cpu_has_avx2(void)
{
    return 0;
}

#endif


#endif /* _PA_CPU_H_INCLUDED_ */
