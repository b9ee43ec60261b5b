
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Throughput of src/pa_respid.c, the reader of a stored response's id in
 * an answer to POST /v1/responses (the body filter's work per byte):
 * a JSON answer of 1 MiB of output text with its "id" last (the worst
 * case: every byte is read) and with it first (vLLM's order: the read
 * stops after about 50 bytes), fed in 16 KB buffers as nginx passes
 * them; and the first with an escape every 8 bytes of its text.
 *
 *     cc -O2 -Isrc bench/bench_respid.c src/pa_respid.c src/pa_store.c \
 *         src/pa_xxh_avx2.c && ./a.out
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pa_respid.h"


static double
now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


static double
run(const unsigned char *b, size_t len, int rounds, pa_respid_rc_e *rc)
{
    int          i;
    size_t       at, n;
    double       t0;
    pa_respid_t  s;

    t0 = now();

    for (i = 0; i < rounds; i++) {
        pa_respid_init(&s);
        *rc = PA_RESPID_MORE;

        for (at = 0; at < len && *rc == PA_RESPID_MORE; at += n) {
            n = (len - at < 16384) ? len - at : 16384;
            *rc = pa_respid_feed(&s, b + at, n);
        }

        *rc = pa_respid_finish(&s);
    }

    return (now() - t0) / rounds;
}


int
main(void)
{
    size_t          len, text, n;
    double          t;
    unsigned char  *b;
    pa_respid_rc_e  rc;

    text = 1024 * 1024;
    b = malloc(text + 256);
    if (b == NULL) {
        return 1;
    }

    /* the id last */

    len = (size_t) sprintf((char *) b, "{\"object\":\"response\",\"output\":"
                           "[{\"type\":\"message\",\"content\":[{\"text\":\"");
    memset(b + len, 'a', text);
    len += text;
    len += (size_t) sprintf((char *) b + len, "\"}]}],\"id\":"
                            "\"resp_0123456789abcdef0123456789abcdef\"}");

    t = run(b, len, 50, &rc);
    printf("id last:  %zu bytes, %.3f ms, %.2f GB/s, found %d\n", len,
           t * 1e3, len / t / 1e9, rc == PA_RESPID_FOUND);

    /* the id last, the text an escape every 8 bytes (a slow case) */

    len = (size_t) sprintf((char *) b, "{\"object\":\"response\",\"output\":"
                           "[{\"type\":\"message\",\"content\":[{\"text\":\"");

    for (n = 0; n < text / 8; n++) {
        memcpy(b + len, "abcde\\\"f", 8);
        len += 8;
    }

    len += (size_t) sprintf((char *) b + len, "\"}]}],\"id\":"
                            "\"resp_0123456789abcdef0123456789abcdef\"}");

    t = run(b, len, 20, &rc);
    printf("escapes:  %zu bytes, %.3f ms, %.2f GB/s, found %d\n", len,
           t * 1e3, len / t / 1e9, rc == PA_RESPID_FOUND);

    /* the id first */

    len = (size_t) sprintf((char *) b, "{\"id\":"
                           "\"resp_0123456789abcdef0123456789abcdef\","
                           "\"object\":\"response\",\"output\":"
                           "[{\"type\":\"message\",\"content\":[{\"text\":\"");
    memset(b + len, 'a', text);
    len += text;
    len += (size_t) sprintf((char *) b + len, "\"}]}]}");

    t = run(b, len, 100000, &rc);
    printf("id first: %zu bytes, %.1f ns, found %d\n", len, t * 1e9,
           rc == PA_RESPID_FOUND);

    free(b);

    return 0;
}
