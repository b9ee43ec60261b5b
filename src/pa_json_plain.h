
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The JSON scanner's fast path (pa_json.c): how far the bytes of a
 * string need no other look.  Plain C, no nginx headers.
 */


#ifndef _PA_JSON_PLAIN_H_INCLUDED_
#define _PA_JSON_PLAIN_H_INCLUDED_


#include <stdint.h>
#include <string.h>

#if (defined(__SSE2__) && defined(__GNUC__))
#include <emmintrin.h>
#define PA_OAI_SSE2  1
#endif

#include "pa_cpu.h"

#define PA_OAI_AVX2  PA_CPU_AVX2


/*
 * src/pa_json_avx2.c: the first special byte from p in whole pieces of
 * 32 bytes, else where fewer than 32 are left (pa_oai_plain() goes on
 * from there)
 */
const unsigned char *pa_oai_plain_avx2(const unsigned char *p,
    const unsigned char *last);

/* -1: not known yet; else pa_cpu_has_avx2(), src/pa_json.c */
extern int  pa_oai_avx2;


/*
 * the first byte from p that a string cannot simply go on with: '"',
 * '\\', a control character, or one above 0x7f (UTF-8 to check); "last"
 * if there is none.  32, then 16 bytes at a time with SSE2, else 8 in a
 * word: a borrow can only flag a byte above one that is flagged rightly.
 */

#define pa_oai_bytes(b)    (0x0101010101010101ULL * (b))
#define pa_oai_zero(v)     (((v) - pa_oai_bytes(0x01)) & ~(v))
#define pa_oai_special(w)                                                     \
    ((pa_oai_zero((w) ^ pa_oai_bytes('"'))                                    \
      | pa_oai_zero((w) ^ pa_oai_bytes('\\'))                                 \
      | (((w) - pa_oai_bytes(0x20)) & ~(w))                                   \
      | (w))                                                                  \
     & pa_oai_bytes(0x80))

static inline const unsigned char *
pa_oai_plain(const unsigned char *p, const unsigned char *last)
{
    unsigned  c;
#if (PA_OAI_SSE2)
    int       m;
    __m128i   v, w, q, b, l;

    if (pa_oai_avx2 > 0 && last - p >= 64) {
        p = pa_oai_plain_avx2(p, last);
    }

    q = _mm_set1_epi8('"');
    b = _mm_set1_epi8('\\');
    l = _mm_set1_epi8(0x20);

    /*
     * 32 bytes a test while none is special (most of a prompt), then 16;
     * signed: the bytes above 0x7f are below 0x20 too
     */

#define pa_oai_special16(v)                                                   \
    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, b)),    \
                 _mm_cmplt_epi8(v, l))

    while (last - p >= 32) {
        v = pa_oai_special16(_mm_loadu_si128((const __m128i *) p));
        w = pa_oai_special16(_mm_loadu_si128((const __m128i *) (p + 16)));

        if (_mm_movemask_epi8(_mm_or_si128(v, w))) {
            break;
        }

        p += 32;
    }

    while (last - p >= 16) {
        m = _mm_movemask_epi8(
                pa_oai_special16(_mm_loadu_si128((const __m128i *) p)));

        if (m) {
            return p + __builtin_ctz(m);
        }

        p += 16;
    }

#undef pa_oai_special16
#else
    uint64_t  w;

    while (last - p >= 8) {
        memcpy(&w, p, 8);

        if (pa_oai_special(w)) {
            break;
        }

        p += 8;
    }
#endif

    for ( /* void */ ; p < last; p++) {
        c = *p;

        if (c == '"' || c == '\\' || c < 0x20 || c > 0x7f) {
            break;
        }
    }

    return p;
}


#endif /* _PA_JSON_PLAIN_H_INCLUDED_ */
