
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The list of models an inference server serves, read from its answer to
 * GET /v1/models (vLLM, SGLang, TGI: {"object": "list", "data": [{"id":
 * "name", ...}, ...]}), in pieces as it arrives.  Plain C, no nginx
 * headers.
 */


#ifndef _PA_MODELS_H_INCLUDED_
#define _PA_MODELS_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


/* the longest model id kept, in bytes; longer ones are not given */
#define PA_MODELS_ID_MAX     256

/* nesting of the answer's JSON deeper than this is refused */
#define PA_MODELS_MAX_DEPTH  32


/* is given each id, decoded (escapes undone), in the order of "data" */
typedef void (*pa_models_id_pt)(void *ctx, const unsigned char *id,
    size_t len);


/*
 * a /v1/models answer read as it comes, in pieces of any size: the only
 * state is the nesting (a bit per level), the place in the current token
 * and the id being decoded, so the memory is the same whatever the size
 * of the answer.  The fields are private to pa_models.c.
 */
typedef struct {
    pa_models_id_pt        id;
    void                  *ctx;
    size_t                 skipped;
    int                    ids;
    int                    state;
    int                    sub;       /* in a string, number or literal */
    int                    depth;     /* containers open */
    uint32_t               objects;   /* bit d - 1: depth d is an object */
    uint32_t               cp;        /* of a \u escape */
    uint32_t               hi;        /* a high surrogate, before its low */
    int                    hex;       /* digits of the \u escape read */
    const char            *lit;       /* true, false or null */
    unsigned               role:2;    /* of the value to come */
    unsigned               key:1;     /* the string is a member's name */
    unsigned               is_id:1;   /* the string is an element's id */
    unsigned               data:1;    /* a top-level "data" array was seen */
    unsigned               in_data:1; /* the array at depth 2 is "data" */
    unsigned               found:1;   /* the element has an id given */
    size_t                 len;       /* decoded, or more than buf kept */
    unsigned char          buf[PA_MODELS_ID_MAX];
} pa_models_scan_t;


/*
 * a scan of one answer: pa_models_init(), pa_models_feed() with each
 * piece as it arrives, pa_models_finish() at its end.  "id" is called
 * for each string "id" of an object in the top-level "data" array, as
 * soon as that string ends (the rest of the answer may still be refused).
 */
void pa_models_init(pa_models_scan_t *s, pa_models_id_pt id, void *ctx);

/* 0, or -1 once the answer cannot be a list of models (and from then on) */
int pa_models_feed(pa_models_scan_t *s, const unsigned char *p, size_t n);

/*
 * the number of ids given, or -1 if the answer was not JSON (RFC 8259),
 * was nested deeper than PA_MODELS_MAX_DEPTH, had no top-level "data"
 * array or ended early.  Elements that are not objects, or have no string
 * "id", or an id longer than PA_MODELS_ID_MAX bytes, are passed over;
 * "*skipped" (if not NULL) counts them.
 */
int pa_models_finish(pa_models_scan_t *s, size_t *skipped);

/* a whole answer in one piece: init, feed and finish.  Nothing allocated */
int pa_models_parse(const unsigned char *p, size_t n, pa_models_id_pt id,
    void *ctx, size_t *skipped);

/* the hash a model name is known by: XXH3 of its bytes, never 0 */
uint64_t pa_models_hash(const unsigned char *name, size_t len);

/*
 * the slots of a zone of "slots" that one of "servers" servers holds
 * whatever the others list: an equal part of those not taken by the
 * "declared" models, at least 1 (then, with more servers than slots, no
 * longer held whatever the others list)
 */
unsigned pa_models_share(unsigned slots, unsigned declared,
    unsigned servers);

/*
 * the slot for a new model, of "n" (a multiple of 64) described by
 * bitmaps of n bits: the first free one (not in "used"), else the first
 * in neither "listed" nor "kept" (a model no server lists), else, with
 * "evict", the first not in "kept" (a model listed only past a server's
 * share); -1 if none
 */
int pa_models_pick(unsigned n, const uint64_t *used, const uint64_t *listed,
    const uint64_t *kept, int evict);

/* the bits set in the "n" bits (a multiple of 64) of "set" */
unsigned pa_models_count(unsigned n, const uint64_t *set);

/* the most slots pa_models_keep() takes */
#define PA_MODELS_SLOTS_MAX  1024

/*
 * the slots of one server's list, its "nids" ids given by their hashes,
 * in a zone of "n" slots (a multiple of 64, at most PA_MODELS_SLOTS_MAX)
 * whose models are "hash" (0: free).  Bitmaps of n bits: "declared", the
 * declared models' slots; "others", what the other servers list; "held",
 * what they hold (their shares).  The ids that have a slot come first,
 * then each other id takes one by pa_models_pick(), evicting while the
 * server holds less than "share"; the slots held are the first "share"
 * taken that are not declared.  "hash" is updated with the new models,
 * "slot[i]" is id i's slot or -1, "listed" the server's slots and "own"
 * those it holds.  Returns the ids refused (slot -1)
 */
unsigned pa_models_keep(unsigned n, uint64_t *hash, const uint64_t *declared,
    const uint64_t *others, const uint64_t *held, const uint64_t *ids,
    unsigned nids, unsigned share, int *slot, uint64_t *listed,
    uint64_t *own);


#endif /* _PA_MODELS_H_INCLUDED_ */
