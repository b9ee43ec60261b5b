
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * What an engine says it reused of a request's prompt, read from its
 * answer as the answer streams by: OpenAI's
 * usage.prompt_tokens_details.cached_tokens, which vLLM and SGLang give
 * on an answer that carries usage (a JSON answer, and the last event of
 * a stream whose request set stream_options.include_usage).  Plain C, no
 * nginx headers, nothing allocated, a few bytes of state: no byte is
 * kept or held back.
 *
 * The bytes "cached_tokens" between two unescaped quotes can only be a
 * key or the whole of a string in valid JSON (inside a string a quote is
 * escaped), so the reader looks for that key, a colon and a number, in
 * any JSON or server-sent events around it, cut anywhere.  The last one
 * seen counts; a value that is no plain integer (null, negative, a
 * fraction's part) or over PA_USAGE_MAX is not taken.
 */


#ifndef _PA_USAGE_H_INCLUDED_
#define _PA_USAGE_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define PA_USAGE_MAX  ((uint64_t) 1 << 40)


typedef struct {
    uint64_t      value;      /* the last cached_tokens taken */
    uint64_t      cur;        /* the number being read */
    uint32_t      state;      /* key bytes matched, or a later state */
    uint32_t      seen;       /* values taken */
    uint32_t      rejected;   /* values not taken */
} pa_usage_t;


void pa_usage_init(pa_usage_t *u);

/* reads "n" bytes of the answer; "p" is not kept */
void pa_usage_feed(pa_usage_t *u, const unsigned char *p, size_t n);

/*
 * the answer ended: 1 and "*tokens" the last cached_tokens taken, or 0
 * if none was (a number still being read at the end counts, as a body
 * may end with it)
 */
int pa_usage_finish(pa_usage_t *u, uint64_t *tokens);


#endif /* _PA_USAGE_H_INCLUDED_ */
