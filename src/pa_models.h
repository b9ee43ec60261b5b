
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The list of models an inference server serves, read from its answer to
 * GET /v1/models (vLLM, SGLang, TGI: {"object": "list", "data": [{"id":
 * "name", ...}, ...]}).  Plain C, no nginx headers.
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
 * reads a whole /v1/models body: calls "id" for each string "id" of an
 * object in the top-level "data" array; returns the number of ids given,
 * or -1 if the body is not JSON (RFC 8259), is nested deeper than
 * PA_MODELS_MAX_DEPTH or has no top-level "data" array.  Elements that are
 * not objects, or have no string "id", or an id longer than
 * PA_MODELS_ID_MAX bytes, are passed over; "*skipped" (if not NULL) counts
 * them.  Nothing is allocated.
 */
int pa_models_parse(const unsigned char *p, size_t n, pa_models_id_pt id,
    void *ctx, size_t *skipped);

/* the hash a model name is known by: XXH3 of its bytes, never 0 */
uint64_t pa_models_hash(const unsigned char *name, size_t len);


#endif /* _PA_MODELS_H_INCLUDED_ */
