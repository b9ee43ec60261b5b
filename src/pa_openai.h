
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The key of an LLM API request (OpenAI chat/completions, completions,
 * Responses; Anthropic Messages), read by a streaming JSON scanner from
 * the body as it comes, buffer by buffer, in memory that does not grow
 * with the body.  Plain C, no nginx headers.
 *
 * The key is XXH3 of the first "length" characters (Unicode code points)
 * of the text, in the order the engine renders it: the system prompt
 * ("instructions", Anthropic's "system", a first message of role system
 * or developer), the tools, then the conversation: each top-level
 * "messages" element's role and content (strings, parts' "text",
 * "image_url" and "input_audio" data; Anthropic's blocks), the Responses
 * "input" items, or the top-level "prompt" (strings or token ids); mixed
 * with top-level "model" and "cache_salt", wherever they are in the body.
 * Other fields, their order and whitespace do not change it.
 * docs/directives.md ("The OpenAI key") tells each shape.
 */


#ifndef _PA_OPENAI_H_INCLUDED_
#define _PA_OPENAI_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define PA_OAI_MAX_DEPTH   64


typedef struct {
    void         *(*alloc)(void *ctx, size_t size);   /* never freed */
    void          *ctx;
} pa_alloc_t;


typedef enum {
    PA_OAI_MORE = 0,           /* feed more */
    PA_OAI_DONE,               /* the key is complete, stop feeding */
    PA_OAI_FALLBACK            /* unusable body, use the raw-byte key */
} pa_oai_rc_e;


typedef enum {
    PA_OAI_OK = 0,
    PA_OAI_NOT_JSON,           /* parse error, truncated, invalid utf-8 */
    PA_OAI_NOT_OBJECT,         /* top level is not an object */
    PA_OAI_BAD_TYPE,           /* messages/prompt of a wrong type */
    PA_OAI_TOO_DEEP,           /* nesting over PA_OAI_MAX_DEPTH */
    PA_OAI_NO_TEXT,            /* neither messages nor prompt, or no text
                                  before an explicit scan cap */
    PA_OAI_NOMEM
} pa_oai_status_e;


/* the API a body is of, by its fields (and the dialect) */
typedef enum {
    PA_OAI_API_NONE = 0,
    PA_OAI_API_CHAT,           /* "messages" */
    PA_OAI_API_COMPLETIONS,    /* "prompt" */
    PA_OAI_API_RESPONSES,      /* "input" */
    PA_OAI_API_MESSAGES        /* Anthropic "messages" */
} pa_oai_api_e;

#define PA_OAI_API_N  5


typedef enum {
    PA_OAI_OPENAI = 0,         /* chat, completions, Responses */
    PA_OAI_ANTHROPIC           /* Messages (/v1/messages) */
} pa_oai_dialect_e;


typedef struct {
    pa_oai_status_e  status;
    pa_oai_api_e     api;
    uint64_t         hash;          /* text + model + cache_salt */
    uint64_t         meta;          /* model + cache_salt alone */
    uint64_t         model;         /* XXH3 of the model's bytes, or 0 */
    size_t           chars;         /* characters of text hashed */
    size_t           past;          /* bytes of text past them, below */
    size_t           scanned;       /* body bytes given to the parser */

    unsigned         has_model:1;   /* "model" is a top-level string */
    unsigned         has_tools:1;   /* a tool is in the key's text */
    unsigned         has_system:1;  /* "instructions" or "system" is */

    /*
     * a field earlier releases did not read was: "input",
     * "instructions", "system" or "tools" (the differential test's
     * filter: without it, the key is theirs)
     */
    unsigned         newer:1;

    /* prompt_cache_key, if a top-level string; valid only if status OK */
    unsigned         has_pck:1;
    unsigned         pck_invalid:1; /* present but not a 1..64 ascii string */
    size_t           pck_len;
    unsigned char    pck[64];

    /*
     * a Responses body's "previous_response_id", if a string of 1 to 64
     * printable ASCII bytes (0: none); it is not in the key
     */
    size_t           prev_len;
    unsigned char    prev[64];
} pa_oai_result_t;


typedef struct pa_oai_s  pa_oai_t;

/*
 * is given the bytes of the key's text as they are hashed, see below;
 * "chars" is how many characters they are: n for ASCII text, less for
 * other UTF-8, 0 for separator bytes, which are not characters
 */
typedef void (*pa_oai_text_pt)(void *ctx, const unsigned char *p, size_t n,
    size_t chars);


/*
 * "length": characters of message text to hash, >= 1; "scan_cap": body
 * bytes after which scanning stops, 0: none, the whole body is read
 * unless the key is complete before its end.  All memory comes from
 * "alloc": about 2 KB, the content of a message that comes before its
 * role (at most "length" characters), and the sections that come before
 * one rendered ahead of them (at most "length" characters, twice that
 * while the first message's role is not known, and 1 MiB of separators);
 * NULL if it fails or "length" is 0.
 */
pa_oai_t *pa_oai_create(const pa_alloc_t *alloc, size_t length,
    size_t scan_cap);

/*
 * Optional, before the first feed: "text" is given, in order, exactly
 * the bytes hashed as the key's text (see pa_openai.c: UTF-8 of the
 * first "length" characters, with the separator bytes 0x1d, 0x1e and
 * 0x1f), split anywhere between characters, never inside one, and the
 * separators apart from the characters ("sep" 1).  Separators are hashed
 * while characters are still wanted, however many there are: a body of
 * empty strings gives as many as it has strings and no character.  It
 * is called from pa_oai_feed() and pa_oai_finish(); what it got is the
 * key's text only if the result is PA_OAI_OK.
 */
void pa_oai_text_hook(pa_oai_t *x, pa_oai_text_pt text, void *ctx);

/*
 * Optional, with a hook, before the first feed: the text goes to the
 * hook alone and is not hashed here, for a caller that hashes it itself
 * (the block keys); the result's "hash" then stands for the model and
 * cache_salt only, and "meta" is unchanged.
 */
void pa_oai_hook_only(pa_oai_t *x);

/*
 * Optional, before the first feed: the body is read to its end (unless a
 * scan cap stops it) and the text past the first "length" characters is
 * counted in the result's "past", in UTF-8 bytes: the separators are
 * none.  The key is the same.
 */
void pa_oai_count_past(pa_oai_t *x);

/*
 * Optional, before the first feed: the body is an Anthropic Messages
 * request ("system", "messages" of blocks); the default is OpenAI's
 * chat, completions or Responses, told apart by the body's fields.
 */
void pa_oai_dialect(pa_oai_t *x, pa_oai_dialect_e dialect);

/*
 * "p" is not kept after the call; once DONE or FALLBACK, the same is
 * returned and nothing more is read.  At an explicit scan cap: DONE if
 * some text was seen, else FALLBACK (PA_OAI_NO_TEXT).
 */
pa_oai_rc_e pa_oai_feed(pa_oai_t *x, const unsigned char *p, size_t n);

/* call at the end of the body or after DONE/FALLBACK; may be repeated */
void pa_oai_finish(pa_oai_t *x, pa_oai_result_t *res);

const char *pa_oai_status_name(pa_oai_status_e status);
const char *pa_oai_api_name(pa_oai_api_e api);


#endif /* _PA_OPENAI_H_INCLUDED_ */
