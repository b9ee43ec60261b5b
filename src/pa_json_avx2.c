
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The JSON scanner's fast path (src/pa_json_plain.h) built for AVX2 and
 * chosen at run time where the CPU has it: 64 bytes a test while none is
 * special, where SSE2 tests 32.  A prompt's text is nearly all such
 * bytes, and a body of 64 KB costs SSE2 about 0.9 instructions a byte.
 * Plain C, no nginx headers.
 */


#include "pa_json_plain.h"


#if (PA_OAI_AVX2)

#include <immintrin.h>


/* the attribute, not a pragma: clang (the fuzzers') ignores GCC's pragma */

__attribute__((target("avx2"))) const unsigned char *
pa_oai_plain_avx2(const unsigned char *p, const unsigned char *last)
{
    unsigned  m;
    __m256i   v, w, q, b, l;

    q = _mm256_set1_epi8('"');
    b = _mm256_set1_epi8('\\');
    l = _mm256_set1_epi8(0x20);

    /* signed: the bytes above 0x7f are below 0x20 too */

#define pa_oai_special32(v)                                                   \
    _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, q),                  \
                                    _mm256_cmpeq_epi8(v, b)),                 \
                    _mm256_cmpgt_epi8(l, v))

    while (last - p >= 64) {
        v = pa_oai_special32(_mm256_loadu_si256((const __m256i *) p));
        w = pa_oai_special32(_mm256_loadu_si256((const __m256i *) (p + 32)));

        if (!_mm256_testz_si256(_mm256_or_si256(v, w),
                                _mm256_or_si256(v, w)))
        {
            break;
        }

        p += 64;
    }

    while (last - p >= 32) {
        m = (unsigned) _mm256_movemask_epi8(
                pa_oai_special32(_mm256_loadu_si256((const __m256i *) p)));

        if (m) {
            return p + __builtin_ctz(m);
        }

        p += 32;
    }

#undef pa_oai_special32

    return p;
}

#else

const unsigned char *
pa_oai_plain_avx2(const unsigned char *p, const unsigned char *last)
{
    return p;
}

#endif
