
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The table of stored responses (src/pa_store.h): places in a ring,
 * written in turn (the oldest is the next one written), each chained in
 * its bucket of a power-of-two array of at least as many buckets as
 * places: a chain is about one place long.  Plain C, no nginx headers.
 */


#include <string.h>

#include "pa_store.h"
#include "pa_xxhash.h"


static uint32_t pa_store_buckets(uint32_t capacity);
static void pa_store_unlink(pa_store_t *t, uint32_t k);


static uint32_t
pa_store_buckets(uint32_t capacity)
{
    uint32_t  n;

    for (n = 1; n < capacity; n <<= 1) { /* void */ }

    return n;
}


size_t
pa_store_size(uint32_t capacity)
{
    size_t  head;

    head = (sizeof(pa_store_t) + 7) & ~(size_t) 7;

    return head + (size_t) capacity * sizeof(pa_store_entry_t)
           + (size_t) pa_store_buckets(capacity) * sizeof(uint32_t);
}


pa_store_t *
pa_store_init(void *mem, uint32_t capacity)
{
    size_t       head;
    uint32_t     n;
    pa_store_t  *t;

    if (capacity < PA_STORE_MIN || capacity > PA_STORE_MAX) {
        return NULL;
    }

    n = pa_store_buckets(capacity);

    memset(mem, 0, pa_store_size(capacity));

    head = (sizeof(pa_store_t) + 7) & ~(size_t) 7;

    t = mem;
    t->capacity = capacity;
    t->mask = n - 1;
    t->entry = (pa_store_entry_t *) ((unsigned char *) mem + head);
    t->bucket = (uint32_t *) (t->entry + capacity);

    return t;
}


uint64_t
pa_store_hash(const unsigned char *id, size_t len)
{
    return XXH3_64bits(id, len) | 1;
}


/* takes place k out of its bucket's chain */

static void
pa_store_unlink(pa_store_t *t, uint32_t k)
{
    uint32_t  *link;

    link = &t->bucket[t->entry[k].id & t->mask];

    while (*link) {
        if (*link == k + 1) {
            *link = t->entry[k].next;
            break;
        }

        link = &t->entry[*link - 1].next;
    }

    t->entry[k].id = 0;
    t->entry[k].next = 0;
}


int
pa_store_put(pa_store_t *t, uint64_t id, uint64_t server)
{
    int                evicted;
    uint32_t           k, b;
    pa_store_entry_t  *e;

    if (id == 0 || server == 0) {
        return 0;
    }

    b = (uint32_t) (id & t->mask);

    for (k = t->bucket[b]; k; k = e->next) {
        e = &t->entry[k - 1];

        if (e->id == id) {
            e->server = server;
            return 0;
        }
    }

    k = t->head;
    e = &t->entry[k];
    evicted = 0;

    if (e->id) {
        pa_store_unlink(t, k);
        t->evicted++;
        evicted = 1;

    } else {
        t->size++;
    }

    e->id = id;
    e->server = server;
    e->next = t->bucket[b];
    t->bucket[b] = k + 1;

    t->head = (k + 1 == t->capacity) ? 0 : k + 1;
    t->stored++;

    return evicted;
}


uint64_t
pa_store_get(const pa_store_t *t, uint64_t id)
{
    uint32_t                 k;
    const pa_store_entry_t  *e;

    if (id == 0) {
        return 0;
    }

    for (k = t->bucket[id & t->mask]; k; k = e->next) {
        e = &t->entry[k - 1];

        if (e->id == id) {
            return e->server;
        }
    }

    return 0;
}
