
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Counting the characters of valid UTF-8 text: a character starts at
 * each byte that is not a continuation byte 10xxxxxx (a lead byte).
 * Shared by the OpenAI text's cut at "length" (pa_openai_text.c) and the
 * block keys' cut at "block" (pa_block.c).  Plain C, no nginx headers.
 */


#ifndef _PA_UTF8_H_INCLUDED_
#define _PA_UTF8_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>
#include <string.h>


#define PA_UTF8_HIGH  0x8080808080808080ULL
#define PA_UTF8_LOW   0x0101010101010101ULL


/* the continuation bytes of a word, one per byte at bit 0 */

#define pa_utf8_conts(w)  (((w) & ~((w) << 1)) >> 7 & PA_UTF8_LOW)


/*
 * the length of the longest prefix of p (n bytes) that holds fewer than
 * "want" lead bytes, that is up to the lead byte number "want" or to the
 * end; "leads" is set to the lead bytes in that prefix.  "want" is 1 at
 * least.
 *
 * 32 bytes at a time while they cannot reach "want", then 8: a word
 * without a byte over 0x7f is 8 characters (ASCII text, most prompts,
 * costs about a third of an instruction a byte), other words count
 * their continuation bytes bytewise, summed by a multiply into the top
 * byte.  Once fewer than 8 leads are wanted, an ASCII word tells where
 * the wanted lead is at once; only a word with other bytes is read
 * byte by byte.
 */

static inline size_t
pa_utf8_span(const unsigned char *p, size_t n, size_t want, size_t *leads)
{
    size_t    i, c;
    uint64_t  x[4], w, f;

    c = 0;
    i = 0;

    while (n - i >= 32 && want - c > 32) {
        memcpy(x, p + i, sizeof(x));

        if (((x[0] | x[1] | x[2] | x[3]) & PA_UTF8_HIGH) == 0) {
            c += 32;
            i += 32;
            continue;
        }

        f = pa_utf8_conts(x[0]) + pa_utf8_conts(x[1])
            + pa_utf8_conts(x[2]) + pa_utf8_conts(x[3]);

        c += 32 - (size_t) ((f * PA_UTF8_LOW) >> 56);
        i += 32;
    }

    while (n - i >= 8) {
        memcpy(&w, p + i, sizeof(w));

        if ((w & PA_UTF8_HIGH) == 0) {

            if (want - c <= 8) {
                /* the wanted lead is in this word, each byte a lead */
                i += want - c - 1;
                c = want - 1;
                goto done;
            }

            c += 8;
            i += 8;
            continue;
        }

        if (want - c <= 8) {
            break;
        }

        c += 8 - (size_t) ((pa_utf8_conts(w) * PA_UTF8_LOW) >> 56);
        i += 8;
    }

    for ( /* void */ ; i < n; i++) {

        if ((p[i] & 0xc0) != 0x80) {
            if (c + 1 == want) {
                break;
            }

            c++;
        }
    }

done:

    *leads = c;

    return i;
}


#endif /* _PA_UTF8_H_INCLUDED_ */
