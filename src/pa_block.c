
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 */


#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "pa_block.h"
#include "pa_xxh.h"
#include "pa_utf8.h"


/* keeps a seed of 0 from giving a mixer key of 0 */
#define PA_BLOCKS_SEED_ADD  0x9e3779b97f4a7c15ULL


static XXH3_state_t *pa_blocks_state(pa_blocks_t *b);
static void pa_blocks_emit(pa_blocks_t *b, uint64_t h);
static uint64_t pa_blocks_fmix(uint64_t z);


int
pa_blocks_init(pa_blocks_t *b, int unit_is_char, uint32_t block_units,
    uint32_t max_blocks, uint64_t *out)
{
    if (block_units == 0 || max_blocks == 0 || out == NULL) {
        return -1;
    }

    b->out = out;
    b->prev = 0;
    b->tail = 0;
    b->units = 0;
    b->block_units = block_units;
    b->max_blocks = max_blocks;
    b->nblocks = 0;
    b->fill = 0;
    b->head = 0;
    b->stride = 1;
    b->unit_is_char = unit_is_char ? 1 : 0;
    b->open = 0;
    b->done = 0;

    return 0;
}


void
pa_blocks_stride(pa_blocks_t *b, uint32_t head, uint32_t stride)
{
    if (head > 0 && stride > 1 && b->nblocks < head) {
        b->head = head;
        b->stride = stride;
    }
}


int
pa_blocks_feed(pa_blocks_t *b, const unsigned char *p, size_t n)
{
    return pa_blocks_feed_text(b, p, n, 0);
}


int
pa_blocks_feed_text(pa_blocks_t *b, const unsigned char *p, size_t n,
    int ascii)
{
    size_t         k, leads, want;
    XXH3_state_t  *st;

    if (b->done) {
        /* the hashes are mixed with the seed: nothing more goes in */
        return 0;
    }

    st = pa_blocks_state(b);

    while (n > 0 && b->nblocks < b->max_blocks) {

        if (!b->unit_is_char) {

            if (!b->open && n >= b->block_units) {
                /* a whole block in the piece: hashed in place, no state */
                k = b->block_units;
                b->units += k;
                pa_blocks_emit(b, pa_xxh3_hash(p, k, b->prev));
                p += k;
                n -= k;
                continue;
            }

            if (!b->open) {
                (void) XXH3_64bits_reset_withSeed(st, b->prev);
                b->open = 1;
            }

            k = b->block_units - b->fill;
            k = (n < k) ? n : k;

            pa_xxh3_update(st, p, k);
            b->units += k;
            b->fill += (uint32_t) k;
            p += k;
            n -= k;

            if (b->fill == b->block_units) {
                pa_blocks_emit(b, XXH3_64bits_digest(st));
            }

            continue;
        }

        /*
         * code points: a block runs from its first lead byte to the byte
         * before the lead byte of unit block_units + 1, so it is complete
         * only when that byte is seen or at the end of the text, and a
         * piece may end inside a character
         */

        want = b->block_units + 1 - b->fill;

        if (ascii) {
            k = (n < want - 1) ? n : want - 1;
            leads = k;

        } else {
            k = pa_utf8_span(p, n, want, &leads);
        }

        if (k < n && !b->open) {
            /* the block starts and ends in this piece */
            b->units += leads;
            pa_blocks_emit(b, pa_xxh3_hash(p, k, b->prev));
            p += k;
            n -= k;
            continue;
        }

        if (!b->open) {
            (void) XXH3_64bits_reset_withSeed(st, b->prev);
            b->open = 1;
        }

        if (k > 0) {
            pa_xxh3_update(st, p, k);
        }

        b->units += leads;
        b->fill += (uint32_t) leads;
        p += k;
        n -= k;

        if (n > 0) {
            /* p is at the first lead byte of the next block */
            pa_blocks_emit(b, XXH3_64bits_digest(st));
        }
    }

    if (n > 0) {
        /* all blocks are complete: count the units the caller fed */

        if (!b->unit_is_char) {
            b->units += n;

        } else if (ascii) {
            b->units += n;

        } else {
            (void) pa_utf8_span(p, n, SIZE_MAX, &leads);
            b->units += leads;
        }
    }

    return b->nblocks < b->max_blocks;
}


int
pa_blocks_feed_sep(pa_blocks_t *b, const unsigned char *p, size_t n)
{
    XXH3_state_t  *st;

    if (b->done || b->nblocks == b->max_blocks) {
        return 0;
    }

    if (n == 0) {
        return 1;
    }

    st = pa_blocks_state(b);

    if (!b->open) {
        (void) XXH3_64bits_reset_withSeed(st, b->prev);
        b->open = 1;
    }

    pa_xxh3_update(st, p, n);

    return 1;
}


uint32_t
pa_blocks_finish(pa_blocks_t *b, uint64_t seed)
{
    uint32_t       i;
    uint64_t       s;
    XXH3_state_t  *st;

    if (b->done) {
        return b->nblocks;
    }

    b->done = 1;

    st = pa_blocks_state(b);

    if (b->open && b->fill == b->block_units) {
        /* in code points the last block ends with the text */
        pa_blocks_emit(b, XXH3_64bits_digest(st));
    }

    /* the partial block, if any, extends the chain for the tail key */
    b->tail = b->open ? XXH3_64bits_digest(st) : b->prev;

    s = pa_blocks_fmix(seed + PA_BLOCKS_SEED_ADD);

    for (i = 0; i < b->nblocks; i++) {
        b->out[i] = pa_blocks_fmix(b->out[i] ^ s);
    }

    b->tail = pa_blocks_fmix(b->tail ^ s);

    return b->nblocks;
}


uint64_t
pa_blocks_mix(uint64_t hash, uint64_t seed)
{
    return pa_blocks_fmix(hash ^ pa_blocks_fmix(seed + PA_BLOCKS_SEED_ADD));
}


uint32_t
pa_blocks_span(uint32_t kept, uint32_t head, uint32_t stride)
{
    uint64_t  blocks;

    if (stride <= 1 || kept <= head) {
        return kept;
    }

    blocks = head + (uint64_t) (kept - head) * stride;

    return (blocks > 0xffffffffu) ? 0xffffffffu : (uint32_t) blocks;
}


uint32_t
pa_blocks_kept(uint32_t blocks, uint32_t head, uint32_t stride)
{
    if (stride <= 1 || blocks <= head) {
        return blocks;
    }

    return head + (blocks - head) / stride;
}


static void
pa_blocks_emit(pa_blocks_t *b, uint64_t h)
{
    b->out[b->nblocks++] = h;
    b->prev = h;
    b->fill = 0;
    b->open = 0;

    if (b->nblocks == b->head) {
        /* past the head, blocks of "stride" blocks */
        b->block_units *= b->stride;
    }
}


/* splitmix64's finalizer: a bijection with full avalanche */

static uint64_t
pa_blocks_fmix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}


static XXH3_state_t *
pa_blocks_state(pa_blocks_t *b)
{
    uintptr_t  a;

    a = (uintptr_t) b->raw;
    a = (a + PA_XXH3_STATE_ALIGN - 1) & ~(uintptr_t) (PA_XXH3_STATE_ALIGN - 1);

    return (XXH3_state_t *) a;
}
