
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 */


#include <stdint.h>
#include <string.h>

#include "pa_yajl.h"


/* keeps the blocks that follow the header aligned for any type */
#define PA_YAJL_HDR  16


static void *pa_yajl_malloc(void *ctx, size_t size);
static void *pa_yajl_realloc(void *ctx, void *ptr, size_t size);
static void pa_yajl_free(void *ctx, void *ptr);


void
pa_yajl_funcs(yajl_alloc_funcs *funcs, pa_yajl_mem_t *mem)
{
    funcs->malloc = pa_yajl_malloc;
    funcs->realloc = pa_yajl_realloc;
    funcs->free = pa_yajl_free;
    funcs->ctx = mem;
}


static void *
pa_yajl_malloc(void *ctx, size_t size)
{
    pa_yajl_mem_t  *mem = ctx;
    unsigned char  *p;

    p = NULL;

    if (size <= SIZE_MAX - PA_YAJL_HDR) {
        p = mem->alloc.alloc(mem->alloc.ctx, size + PA_YAJL_HDR);
    }

    if (p == NULL) {
        longjmp(*mem->jmp, 1);
    }

    memcpy(p, &size, sizeof(size_t));

    return p + PA_YAJL_HDR;
}


static void *
pa_yajl_realloc(void *ctx, void *ptr, size_t size)
{
    size_t          old;
    unsigned char  *p;

    if (ptr == NULL) {
        return pa_yajl_malloc(ctx, size);
    }

    memcpy(&old, (unsigned char *) ptr - PA_YAJL_HDR, sizeof(size_t));

    if (size <= old) {
        return ptr;
    }

    p = pa_yajl_malloc(ctx, size);

    memcpy(p, ptr, old);

    return p;
}


static void
pa_yajl_free(void *ctx, void *ptr)
{
    /* the memory belongs to the caller's pool */
}
