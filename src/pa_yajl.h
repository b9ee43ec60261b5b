
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * yajl's allocator on top of a caller's pool (pa_alloc_t): yajl asks for
 * malloc, realloc and free; the pool gives only alloc, so each block
 * keeps its size for realloc, and free does nothing.  yajl does not
 * check what malloc returns, so a failed allocation jumps to "jmp".
 * Plain C, no nginx headers.
 */


#ifndef _PA_YAJL_H_INCLUDED_
#define _PA_YAJL_H_INCLUDED_


#include <setjmp.h>
#include <yajl/yajl_common.h>

#include "pa_openai.h"


typedef struct {
    pa_alloc_t      alloc;
    jmp_buf        *jmp;
} pa_yajl_mem_t;


void pa_yajl_funcs(yajl_alloc_funcs *funcs, pa_yajl_mem_t *mem);


#endif /* _PA_YAJL_H_INCLUDED_ */
