
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Differential libFuzzer target: src/pa_openai.c against the yajl-based
 * extractor it replaced (the file at commit PA_REF, built by fuzz.mk with
 * its functions renamed ref_oai_*), which must give the same status,
 * key, characters, prompt_cache_key and bytes scanned for every input,
 * whole and split, at several lengths.  Inputs stay far below the old
 * extractor's scan cap (256 KiB + 4 x length), so it never applies.
 *
 * Unless the body has a field the old extractor did not read ("input",
 * "instructions", "tools"; the result's "newer"): then the key is of the
 * new shapes, which test_apis.c and fuzz_openai.c check.  And a body the
 * old one stopped reading before its end (its key complete): the new
 * one reads a chat body to its end, for "tools" that may come (and may
 * find it truncated or not JSON there), so only a key it gets is
 * compared.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pa_openai.h"
#include "arena.h"
#include "fuzz_fields.h"


#define D_CHECK(cond)                                                         \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: the extractors differ: %s\n",             \
                    __FILE__, __LINE__, #cond);                               \
            abort();                                                          \
        }                                                                     \
    } while (0)


typedef pa_oai_t *(*d_create_pt)(const pa_alloc_t *alloc, size_t length,
    size_t scan_cap);
typedef pa_oai_rc_e (*d_feed_pt)(pa_oai_t *x, const unsigned char *p,
    size_t n);
typedef void (*d_finish_pt)(pa_oai_t *x, d_fields_t *f);


typedef struct {
    d_create_pt      create;
    d_feed_pt        feed;
    d_finish_pt      finish;
} d_impl_t;


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

pa_oai_t *ref_oai_create(const pa_alloc_t *alloc, size_t length,
    size_t scan_cap);
pa_oai_rc_e ref_oai_feed(pa_oai_t *x, const unsigned char *p, size_t n);
void ref_oai_fields(pa_oai_t *x, d_fields_t *f);

static void d_new_fields(pa_oai_t *x, d_fields_t *f);
static void d_run(const d_impl_t *impl, const uint8_t *data, size_t size,
    size_t length, size_t split, pa_oai_rc_e *rc, d_fields_t *res);


static ta_arena_t  d_arena = { NULL, -1, 0 };
static unsigned    d_newer;    /* the new extractor's last result's */
static unsigned    d_stopped;  /* the last run's key was complete early */

static const d_impl_t  d_new = { pa_oai_create, pa_oai_feed, d_new_fields };
static const d_impl_t  d_ref = { ref_oai_create, ref_oai_feed,
                                 ref_oai_fields };


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t           i, s, pos;
    unsigned         stopped;
    pa_oai_rc_e      rc1, rc2;
    d_fields_t       r1, r2;

    static size_t    lengths[] = { 1024, 16, 3, 1 };

    pos = size ? (size_t) data[0] * size / 256 : 0;

    for (i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {

        d_run(&d_ref, data, size, lengths[i], 0, &rc1, &r1);
        stopped = d_stopped;

        for (s = 0; s < 3; s++) {
            d_run(&d_new, data, size, lengths[i],
                  (s == 0) ? 0 : (s == 1) ? pos : 1, &rc2, &r2);

            if (s == 2 && size > 512) {
                break;
            }

            if (d_newer) {
                continue;
            }

            if (r1.status == PA_OAI_OK && stopped) {

                /* the old one stopped before the end, the new one not */

                if (r2.status == PA_OAI_OK) {
                    D_CHECK(r1.hash == r2.hash);
                    D_CHECK(r1.chars == r2.chars);
                    D_CHECK(r1.pck_len == r2.pck_len);
                }

                continue;
            }

            if (r1.status != r2.status) {
                fprintf(stderr, "length %zu: old \"%s\", new \"%s\"\n",
                        lengths[i],
                        pa_oai_status_name((pa_oai_status_e) r1.status),
                        pa_oai_status_name((pa_oai_status_e) r2.status));
            }

            D_CHECK(rc1 == rc2);
            D_CHECK(r1.status == r2.status);
            D_CHECK(r1.hash == r2.hash);
            D_CHECK(r1.chars == r2.chars);
            D_CHECK(r1.has_pck == r2.has_pck);
            D_CHECK(r1.pck_invalid == r2.pck_invalid);
            D_CHECK(r1.pck_len == r2.pck_len);
            D_CHECK(memcmp(r1.pck, r2.pck, r1.pck_len) == 0);

            if (r1.status == PA_OAI_OK) {
                D_CHECK(r1.scanned == r2.scanned);
            }
        }
    }

    ta_reset(&d_arena);

    return 0;
}


/* split 0: one buffer; 1: byte by byte; else two buffers */

static void
d_new_fields(pa_oai_t *x, d_fields_t *f)
{
    pa_oai_result_t  res;

    memset(&res, 0, sizeof(pa_oai_result_t));
    pa_oai_finish(x, &res);

    D_FIELDS_COPY(f, &res);

    d_newer = res.newer;
}


static void
d_run(const d_impl_t *impl, const uint8_t *data, size_t size, size_t length,
    size_t split, pa_oai_rc_e *rc, d_fields_t *res)
{
    size_t          pos, n;
    pa_oai_t       *x;
    pa_alloc_t      a;
    unsigned char  *p;

    ta_reset(&d_arena);

    a.alloc = ta_alloc;
    a.ctx = &d_arena;

    x = impl->create(&a, length, 0);
    if (x == NULL) {
        abort();
    }

    *rc = PA_OAI_MORE;
    pos = 0;

    while (pos < size && *rc == PA_OAI_MORE) {

        if (split == 0) {
            n = size;

        } else if (split == 1) {
            n = 1;

        } else {
            n = (pos < split) ? split - pos : size - pos;
        }

        p = malloc(n);
        memcpy(p, data + pos, n);

        *rc = impl->feed(x, p, n);

        free(p);

        pos += n;
    }

    /* the key complete before the end of the body was (or at it) */
    d_stopped = (*rc == PA_OAI_DONE);

    impl->finish(x, res);

    if (*rc == PA_OAI_MORE) {
        *rc = (res->status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;
    }
}
