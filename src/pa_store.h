
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Which server holds a stored response: a table of (response id, server)
 * in one flat piece of memory (an nginx shared zone), of a fixed number
 * of places given when it is made, the oldest forgotten first when it is
 * full.  An id is kept as its 64-bit hash (XXH3 of its bytes), a server
 * as the hash of its name in the upstream, as prefix_aware_sync names
 * servers: a place is 24 bytes whatever the id, and a server named again
 * after a reload or a re-resolve is found by its name.  Plain C, no
 * nginx headers; the caller serializes the calls on a table.
 */


#ifndef _PA_STORE_H_INCLUDED_
#define _PA_STORE_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define PA_STORE_MIN      16
#define PA_STORE_MAX      (16 * 1024 * 1024)


typedef struct {
    uint64_t              id;         /* 0: a free place */
    uint64_t              server;
    uint32_t              next;       /* in its bucket, place + 1; 0 */
    uint32_t              pad;
} pa_store_entry_t;


typedef struct {
    uint32_t              capacity;
    uint32_t              mask;       /* buckets - 1 */
    uint32_t              size;
    uint32_t              head;       /* the next place written */
    uint64_t              evicted;
    uint64_t              stored;     /* puts of a new id */
    uint32_t             *bucket;     /* place + 1; 0: empty */
    pa_store_entry_t     *entry;
} pa_store_t;


/* the bytes a table of "capacity" places takes, with its header */
size_t pa_store_size(uint32_t capacity);

/*
 * makes an empty table in "mem" of pa_store_size(capacity) bytes; the
 * pointers in it are into "mem": the table is used where it was made
 */
pa_store_t *pa_store_init(void *mem, uint32_t capacity);

/* the hash of an id's bytes, never 0 */
uint64_t pa_store_hash(const unsigned char *id, size_t len);

/*
 * "id" is on "server" (neither 0): a new id takes the next place,
 * forgetting the oldest id when the table is full (1 is returned then,
 * else 0); a known id is moved to "server" in its place
 */
int pa_store_put(pa_store_t *t, uint64_t id, uint64_t server);

/* the server of "id", or 0 if it is not known */
uint64_t pa_store_get(const pa_store_t *t, uint64_t id);


#endif /* _PA_STORE_H_INCLUDED_ */
