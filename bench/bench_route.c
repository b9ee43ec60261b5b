
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The module's own work per request, apart from nginx: the body key (XXH3
 * over the first "length" bytes, fed in 4 KB buffers as nginx holds a
 * body), the mix with a tenant id, and the bounded-load ring walk, for
 * rings of 4, 16 and 64 servers, idle and with every server at the
 * threshold (the longest walk).  Best of 5 slices of 0.1 s; a markdown
 * table in nanoseconds per request.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pa_key.h"
#include "pa_ring.h"


#define B_SLICES     5
#define B_SLICE      0.1
#define B_MAX_SRV    64
#define B_BODY       (64 * 1024)
#define B_KEYS       1024


typedef struct {
    uint64_t        inflight[B_MAX_SRV];
} b_load_t;


static double b_now(void);
static int b_probe(void *ctx, uint32_t server, uint64_t *inflight);
static double b_key_ns(const unsigned char *body, size_t size, size_t length);
static double b_pick_ns(uint32_t n, uint64_t busy);


static volatile uint64_t  b_sink;


int
main(void)
{
    size_t          i;
    uint32_t        n;
    unsigned char  *body;
    static const uint32_t  servers[] = { 4, 16, 64 };

    body = malloc(B_BODY);
    if (body == NULL) {
        return 1;
    }

    srand(1);

    for (i = 0; i < B_BODY; i++) {
        body[i] = (unsigned char) (' ' + rand() % 95);
    }

    printf("| work | ns per request |\n|---|---:|\n");
    printf("| body key, length=4096, 4 KB body | %.0f |\n",
           b_key_ns(body, 4096, 4096));
    printf("| body key, length=4096, 64 KB body | %.0f |\n",
           b_key_ns(body, B_BODY, 4096));
    printf("| body key, length=65536, 64 KB body | %.0f |\n",
           b_key_ns(body, B_BODY, 65536));

    for (i = 0; i < sizeof(servers) / sizeof(servers[0]); i++) {
        n = servers[i];
        printf("| ring walk, %u servers, idle | %.0f |\n", n,
               b_pick_ns(n, 0));
        printf("| ring walk, %u servers, all at threshold | %.0f |\n", n,
               b_pick_ns(n, 10));
    }

    free(body);

    return 0;
}


static double
b_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


static int
b_probe(void *ctx, uint32_t server, uint64_t *inflight)
{
    b_load_t  *load = ctx;

    *inflight = load->inflight[server];

    return PA_SERVER_USABLE;
}


static double
b_key_ns(const unsigned char *body, size_t size, size_t length)
{
    int             s;
    size_t          off, chunk;
    double          start, best, t;
    uint64_t        ops, h;
    pa_body_key_t   k;

    best = 1e18;

    for (s = 0; s < B_SLICES; s++) {
        ops = 0;
        start = b_now();

        do {
            pa_body_key_init(&k, length);

            for (off = 0; off < size; off += chunk) {
                chunk = size - off < 4096 ? size - off : 4096;

                if (pa_body_key_feed(&k, body + off, chunk) == 0) {
                    break;
                }
            }

            h = pa_key_mix(pa_body_key_digest(&k),
                           (const unsigned char *) "tenant-42", 9);
            b_sink += h;
            ops++;

        } while ((t = b_now() - start) < B_SLICE);

        if (t / ops < best) {
            best = t / ops;
        }
    }

    return best * 1e9;
}


static double
b_pick_ns(uint32_t n, uint64_t busy)
{
    int               s;
    char              name[32];
    double            start, best, t;
    uint32_t          i;
    uint64_t          ops;
    b_load_t          load;
    pa_pick_t         pick;
    pa_ring_t         ring;
    unsigned char     seen[B_MAX_SRV / 8];
    pa_ring_point_t  *points;
    pa_ring_server_t  srv[B_MAX_SRV];
    static char       names[B_MAX_SRV][32];

    for (i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "10.0.%u.%u:8000", i / 200, i % 200);
        memcpy(names[i], name, sizeof(name));
        srv[i].name = (const unsigned char *) names[i];
        srv[i].len = strlen(names[i]);
        srv[i].weight = 1;
        load.inflight[i] = busy;
    }

    points = malloc(pa_ring_points(srv, n) * sizeof(pa_ring_point_t));
    if (points == NULL || pa_ring_build(&ring, points, srv, n) != 0) {
        exit(1);
    }

    best = 1e18;

    for (s = 0; s < B_SLICES; s++) {
        ops = 0;
        start = b_now();

        do {
            for (i = 0; i < B_KEYS; i++) {
                pa_ring_pick(&ring, (uint64_t) i * 0x9e3779b97f4a7c15ULL,
                             10, b_probe, &load, seen, &pick);
                b_sink += pick.server;
            }

            ops += B_KEYS;

        } while ((t = b_now() - start) < B_SLICE);

        if (t / ops < best) {
            best = t / ops;
        }
    }

    free(points);

    return best * 1e9;
}
