
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The id of a stored response, read from the engine's answer to a
 * POST /v1/responses as the answer streams by: the top-level "id" of a
 * JSON body, or in a stream (server-sent events) the "id" of the
 * "response" object of the first event that has one (response.created,
 * the stream's first event, carries it; so do the events after it).
 * Plain C, no nginx headers, nothing allocated, a fixed state of about
 * 100 bytes whatever the answer: no byte is held back, nesting is a
 * count, and an id is kept only up to PA_RESPID_MAX bytes.
 *
 * An id is taken if it is a JSON string of 1 to PA_RESPID_MAX printable
 * ASCII bytes without escapes (vLLM's and SGLang's are "resp_" and 32
 * hex digits, OpenAI's "resp_" and 48); any other "id" ends the read
 * with PA_RESPID_BAD: it is not stored.
 */


#ifndef _PA_RESPID_H_INCLUDED_
#define _PA_RESPID_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define PA_RESPID_MAX     64

/* data events of a stream read at most: the id is in the first */
#define PA_RESPID_EVENTS  8


typedef enum {
    PA_RESPID_MORE = 0,        /* feed more */
    PA_RESPID_FOUND,           /* id[0..len) is the response's id */
    PA_RESPID_NONE,            /* no id: the body ended, or the events */
    PA_RESPID_BAD              /* an id over the bound, escaped, not ASCII */
} pa_respid_rc_e;


typedef struct {
    uint32_t       depth;      /* of the JSON being read, a count */
    uint32_t       len;        /* of id */
    uint32_t       events;     /* data events ended */
    unsigned char  rc;         /* pa_respid_rc_e */
    unsigned char  mode;       /* 0 not known, 1 JSON, 2 events */
    unsigned char  str;        /* in a string: what it is, 0 none */
    unsigned char  esc;        /* after a backslash in a string */
    unsigned char  obj[3];     /* the container at depth 1, 2: an object */
    unsigned char  key[3];     /* the key of its value being read */
    unsigned char  want_key;   /* the next string is a key */
    unsigned char  line;       /* events: where in the line */
    unsigned char  pre;        /* events: bytes of "data:" matched */
    unsigned char  data;       /* events: a data line in this event */
    unsigned char  bad;        /* the id string is not taken */
    unsigned char  klen;       /* of kbuf; 9: longer than any key read */
    unsigned char  kbuf[8];
    unsigned char  id[PA_RESPID_MAX];
} pa_respid_t;


void pa_respid_init(pa_respid_t *s);

/* reads "n" bytes of the answer; returns PA_RESPID_MORE until it is done */
pa_respid_rc_e pa_respid_feed(pa_respid_t *s, const unsigned char *p,
    size_t n);

/* the answer ended: FOUND, or why not */
pa_respid_rc_e pa_respid_finish(pa_respid_t *s);


/*
 * the id of a request's path: the segment after "/v1/responses/" (GET,
 * DELETE, .../cancel, .../input_items); 0 and "*len" 0 if the path has
 * none, or one of more than PA_RESPID_MAX bytes
 */
int pa_respid_path(const unsigned char *uri, size_t n,
    const unsigned char **id, size_t *len);


#endif /* _PA_RESPID_H_INCLUDED_ */
