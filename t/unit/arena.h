
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * A test arena for pa_alloc_t, shared by the unit tests and the fuzz
 * targets: every block is kept in a list and freed by ta_reset(), and
 * allocation number "fail_at" fails, to exercise the out-of-memory paths.
 */


#ifndef _ARENA_H_INCLUDED_
#define _ARENA_H_INCLUDED_


#include <stdlib.h>


typedef struct ta_block_s  ta_block_t;

struct ta_block_s {
    ta_block_t     *next;
    size_t          pad;        /* keeps what follows 16-byte aligned */
};


typedef struct {
    ta_block_t     *blocks;
    long            fail_at;    /* the allocation that fails, -1: none */
    long            count;
} ta_arena_t;


static void *
ta_alloc(void *ctx, size_t size)
{
    ta_arena_t  *a = ctx;
    ta_block_t  *b;

    if (a->fail_at >= 0 && a->count++ == a->fail_at) {
        return NULL;
    }

    b = malloc(sizeof(ta_block_t) + size);
    if (b == NULL) {
        return NULL;
    }

    b->next = a->blocks;
    a->blocks = b;

    return b + 1;
}


static void
ta_reset(ta_arena_t *a)
{
    ta_block_t  *b, *next;

    for (b = a->blocks; b; b = next) {
        next = b->next;
        free(b);
    }

    a->blocks = NULL;
    a->count = 0;
}


#endif /* _ARENA_H_INCLUDED_ */
