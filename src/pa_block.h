
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Chained block keys of a prefix (routing v2): the key text is cut into
 * blocks of "block_units" units, bytes of a raw body or Unicode code
 * points of OpenAI text, and block i is hashed with the hash of block
 * i - 1 as its seed, so that one hash stands for the whole prefix up to
 * its block.  The text streams in pieces; at most one partial block is
 * kept, inside an XXH3 streaming state.  Plain C, no nginx headers.
 */


#ifndef _PA_BLOCK_H_INCLUDED_
#define _PA_BLOCK_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "pa_key.h"


/*
 * like pa_body_key_t, the XXH3 state lives at the first 64-byte boundary
 * of "raw": the struct must not be moved or copied while in use
 */

typedef struct {
    uint64_t       *out;          /* max_blocks chained hashes */
    uint64_t        prev;         /* chained hash of the last block */
    uint64_t        tail;         /* finish: hash of the whole text */
    uint64_t        units;        /* units fed, counted past the blocks;
                                     separators are no units */
    uint32_t        block_units;  /* of the next block */
    uint32_t        head;         /* blocks before "stride" applies */
    uint32_t        stride;
    uint32_t        max_blocks;
    uint32_t        nblocks;      /* complete blocks in "out" */
    uint32_t        fill;         /* units of the partial block */
    unsigned        unit_is_char:1;
    unsigned        open:1;       /* the state holds a partial block */
    unsigned        done:1;       /* finished */
    unsigned char   raw[sizeof(XXH3_state_t) + PA_XXH3_STATE_ALIGN - 1];
} pa_blocks_t;


/*
 * "unit_is_char": units are code points (counted by utf-8 lead bytes,
 * a piece may end inside a character), else bytes.  "out" has room for
 * "max_blocks" hashes.  returns 0, or -1 if a count is 0.
 */
int pa_blocks_init(pa_blocks_t *b, int unit_is_char, uint32_t block_units,
    uint32_t max_blocks, uint64_t *out);

/*
 * after pa_blocks_init(): past the first "head" blocks, each block is
 * "stride" blocks long, so that a long text has fewer hashes (the index
 * records fewer); block k's hash stands for all the text before its end,
 * and a depth of k hashes covers pa_blocks_span(k) blocks of the size
 * given to pa_blocks_init().  "max_blocks" counts hashes.
 */
void pa_blocks_stride(pa_blocks_t *b, uint32_t head, uint32_t stride);

/*
 * hashes the complete blocks of the text so far; returns 1 while more
 * text would add a block, 0 once "max_blocks" are complete (feeding more
 * only counts units) or after pa_blocks_finish() (nothing is taken)
 */
int pa_blocks_feed(pa_blocks_t *b, const unsigned char *p, size_t n);

/*
 * as pa_blocks_feed(), for a caller that has counted the code points of
 * the piece already: "ascii" 1 says that each of its bytes is one (the
 * text is not scanned for the ends of blocks); the blocks are the same
 */
int pa_blocks_feed_text(pa_blocks_t *b, const unsigned char *p, size_t n,
    int ascii);

/*
 * bytes of the text that are not units, as the separators of OpenAI
 * text (0x1d, 0x1e, 0x1f between roles, pieces and token ids): hashed
 * into the block they come in (after a block's last unit, still into
 * it), never counted, so that they neither complete a block nor add to
 * b->units; a text of separators alone has no block.  returns as
 * pa_blocks_feed() does.
 */
int pa_blocks_feed_sep(pa_blocks_t *b, const unsigned char *p, size_t n);

/*
 * ends the text and mixes "seed" (model, cache_salt, tenant) into every
 * hash: out[i] = pa_blocks_mix(chain[i], seed).  a trailing partial block
 * is not a block; it only counts in b->units and in b->tail, the hash of
 * all the text fed up to max_blocks blocks and a partial one, a ring key
 * for a text shorter than a block.  returns the number of blocks.
 */
uint32_t pa_blocks_finish(pa_blocks_t *b, uint64_t seed);

/* a bijection of "hash" for each seed, different for different seeds */
uint64_t pa_blocks_mix(uint64_t hash, uint64_t seed);

/* the blocks of "block_units" that the first "kept" hashes cover */
uint32_t pa_blocks_span(uint32_t kept, uint32_t head, uint32_t stride);

/* the hashes of the first "blocks" blocks of "block_units" (rounded down) */
uint32_t pa_blocks_kept(uint32_t blocks, uint32_t head, uint32_t stride);


#endif /* _PA_BLOCK_H_INCLUDED_ */
