
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * xxHash in its header-only form.  XXH3_state_t is a private layout that
 * may change between xxHash releases: with XXH_INLINE_ALL every function
 * that touches it is compiled here from the same header, so the module
 * never meets a libxxhash.so of another layout.  Include this, never
 * <xxhash.h> directly.  Plain C, no nginx headers.
 */


#ifndef _PA_XXHASH_H_INCLUDED_
#define _PA_XXHASH_H_INCLUDED_


/*
 * unaligned reads as one load (a packed union, GCC and clang), not a call
 * of memcpy(): nginx's default -O does not inline xxHash's XXH_read64(),
 * and through a module's PLT every 8 bytes hashed cost three calls
 */
#if (defined(__GNUC__) || defined(__clang__)) \
    && !defined(XXH_FORCE_MEMORY_ACCESS)
#define XXH_FORCE_MEMORY_ACCESS  1
#endif

#define XXH_INLINE_ALL
#include <xxhash.h>


#endif /* _PA_XXHASH_H_INCLUDED_ */
