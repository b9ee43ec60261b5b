
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The key of an OpenAI-compatible request body, read by a streaming JSON
 * scanner buffer by buffer: no tree is built, no string is kept whole,
 * and no more text is copied than the key needs.
 *
 * The text of the key is, in the order the engine renders it (the
 * sections of pa_openai_int.h: the system prompt, the tools, the
 * conversation; a section that comes in the body before one rendered
 * ahead of it is kept until that one is complete), and within a section
 * in order of the body: for each element of the top-level "messages", its
 * "role" then each piece of its "content" (a string, or the "text",
 * "image_url" ("url") and "input_audio" ("data") of each part; Anthropic's
 * blocks); Responses' "input" items; or the top-level "prompt": a string,
 * strings, token ids, or arrays of token ids.  A role is followed by the
 * byte 0x1e, a piece of content or prompt by 0x1f, a token id or a tool
 * by 0x1d: they are hashed, but not counted as characters.  Only the
 * first "length" characters (code points of the decoded UTF-8) are
 * hashed, with XXH3.
 *
 * "model" and "cache_salt" are hashed on their own and mixed in at the
 * end, so that the key does not depend on where they are in the body.
 * Within a message, content before the role is kept (no more of it than
 * the characters still wanted) until the role comes, so the order of
 * "role" and "content" does not matter either.  Of a top-level field
 * given twice, the last counts, as in most JSON readers.
 *
 * Strings are read in pieces as the buffers bring them: text goes to
 * the key's hash as it comes, "model" and "cache_salt" to a hash of
 * their own, of "prompt_cache_key" and of object keys at most 64 bytes
 * are kept, and anything else is only checked.  So neither the memory
 * nor the key depends on how long a string is, and each byte is looked
 * at once (16 at a time in runs of plain ASCII with SSE2, else 8).  The
 * memory is pa_oai_t and two XXH3 states, about 2 KB, and the content
 * of a message that comes before its role (no more than "length"
 * characters, and a record per non-empty piece), and the sections kept
 * (no more than "length" characters in all, 1 MiB of separators).  The
 * body is read to its end unless the key is complete before: the
 * sections before the conversation are, the text has "length"
 * characters and "model", "cache_salt" and "prompt_cache_key" were seen.
 * As far as it is read, it must be JSON (RFC 8259, UTF-8 as in RFC 3629:
 * no overlong forms, surrogates or code points above U+10FFFF), an object
 * at the top, no deeper than PA_OAI_MAX_DEPTH.
 *
 * The key of a chat or completions body without "tools" is the one the
 * yajl-based reader of earlier releases gave, to the bit, so routes do
 * not move on an upgrade (make fuzz-diff compares the two).  This keeps
 * yajl 2.1's ways of reading JSON: \v and \f count as white space; a
 * high surrogate escape takes any \u escape after it as its low half,
 * and one followed by anything else reads as "?" (a lone low surrogate
 * is not UTF-8: not JSON); the end of the body is a space, and within a
 * string after the top value it is not garbage.
 */


#include <string.h>

#include "pa_openai_int.h"


static const unsigned char  pa_oai_space[] = " ";


pa_oai_t *
pa_oai_create(const pa_alloc_t *alloc, size_t length, size_t scan_cap)
{
    uintptr_t       a;
    pa_oai_t       *x;
    unsigned char  *p;

    if (length == 0) {
        return NULL;
    }

    x = alloc->alloc(alloc->ctx, sizeof(pa_oai_t));
    if (x == NULL) {
        return NULL;
    }

    memset(x, 0, sizeof(pa_oai_t));

    x->alloc = *alloc;
    x->length = length;
    x->cap = (scan_cap == 0) ? (size_t) -1 : scan_cap;
    x->status = PA_OAI_OK;
    x->rc = PA_OAI_MORE;
    x->state = PA_L_VALUE;
    x->wait_api = 1;

    /* the states want 64-byte alignment, SSE2 code needs 16 at least */

    p = alloc->alloc(alloc->ctx, 2 * sizeof(XXH3_state_t) + 64);
    if (p == NULL) {
        return NULL;
    }

    a = ((uintptr_t) p + 63) & ~(uintptr_t) 63;
    x->text = (XXH3_state_t *) (p + (a - (uintptr_t) p));
    x->field = x->text + 1;

    XXH3_INITSTATE(x->text);
    XXH3_INITSTATE(x->field);
    XXH3_64bits_reset(x->text);

    return x;
}


void
pa_oai_text_hook(pa_oai_t *x, pa_oai_text_pt text, void *ctx)
{
    x->hook = text;
    x->hook_ctx = ctx;
}


void
pa_oai_hook_only(pa_oai_t *x)
{
    x->hook_only = (x->hook != NULL);
}


void
pa_oai_dialect(pa_oai_t *x, pa_oai_dialect_e dialect)
{
    x->dialect = (unsigned char) dialect;
    x->wait_api = (dialect == PA_OAI_OPENAI);
}


void
pa_oai_count_past(pa_oai_t *x)
{
    x->count_past = 1;
}


pa_oai_rc_e
pa_oai_feed(pa_oai_t *x, const unsigned char *p, size_t n)
{
    size_t  m;

    if (x->rc != PA_OAI_MORE) {
        return x->rc;
    }

    m = x->cap - x->scanned;

    if (m > n) {
        m = n;
    }

    if (m > 0) {
        x->scanned += pa_oai_scan(x, p, p + m) - p;

        if (x->status != PA_OAI_OK) {
            x->rc = PA_OAI_FALLBACK;
            return x->rc;
        }

        if (x->done) {
            x->rc = PA_OAI_DONE;
            return x->rc;
        }
    }

    if (m == n) {
        return PA_OAI_MORE;
    }

    /* the scan cap: the key is what was seen, if any text was */

    if (x->pieces > 0) {
        x->rc = PA_OAI_DONE;

    } else {
        x->status = PA_OAI_NO_TEXT;
        x->rc = PA_OAI_FALLBACK;
    }

    return x->rc;
}


void
pa_oai_finish(pa_oai_t *x, pa_oai_result_t *res)
{
    uint64_t  v[4];

    memset(res, 0, sizeof(pa_oai_result_t));

    if (x->rc == PA_OAI_MORE) {

        /*
         * the end of the body is a space, as yajl_complete_parse() made
         * it: it ends a number there, and a string after the top value
         * is not garbage if the space can be part of it
         */

        (void) pa_oai_scan(x, pa_oai_space, pa_oai_space + 1);

        if (x->status == PA_OAI_OK && !x->done && x->state != PA_L_END
            && !(x->trail && x->state == PA_L_STRING))
        {
            x->status = PA_OAI_NOT_JSON;
        }

        if (x->status == PA_OAI_OK && !x->has_text) {
            x->status = PA_OAI_NO_TEXT;
        }

        x->rc = (x->status == PA_OAI_OK) ? PA_OAI_DONE : PA_OAI_FALLBACK;
    }

    /* the sections kept are hashed in their order */

    if (x->status == PA_OAI_OK && x->live < PA_SEC_N) {

        if (x->first) {
            /* at a scan cap in the first message: not a system one */
            x->first = 0;
            pa_oai_sec_move(x, PA_SEC_FIRST, PA_SEC_CONV);
        }

        x->closed = (1 << PA_SEC_N) - 1;
        x->wait_api = 0;
        pa_oai_advance(x);
    }

    /* the separators the text ended with */
    pa_oai_sep_flush(x);

    res->status = x->status;
    res->scanned = x->scanned;
    res->api = (pa_oai_api_e) x->api;
    res->newer = x->newer;

    if (x->status != PA_OAI_OK) {
        return;
    }

    v[0] = x->hook_only ? 0 : XXH3_64bits_digest(x->text);
    v[1] = x->model;
    v[2] = x->salt;
    v[3] = (uint64_t) x->model_str | ((uint64_t) x->salt_str << 1);

    res->hash = XXH3_64bits(v, sizeof(v));
    res->meta = XXH3_64bits(&v[1], 3 * sizeof(uint64_t));
    res->model = x->model;
    res->has_model = x->model_str;
    res->has_tools = x->has_tools;
    res->has_system = x->has_system;
    res->chars = x->chars;
    res->past = x->past;

    res->has_pck = x->has_pck;
    res->pck_invalid = x->pck_invalid;

    if (x->has_pck) {
        res->pck_len = x->pck_len;
        memcpy(res->pck, x->pck, x->pck_len);
    }

    res->prev_len = x->prev_len;
    memcpy(res->prev, x->prev, x->prev_len);
}


const char *
pa_oai_status_name(pa_oai_status_e status)
{
    switch (status) {
    case PA_OAI_OK:
        return "ok";
    case PA_OAI_NOT_JSON:
        return "not json";
    case PA_OAI_NOT_OBJECT:
        return "not an object";
    case PA_OAI_BAD_TYPE:
        return "bad type";
    case PA_OAI_TOO_DEEP:
        return "too deep";
    case PA_OAI_NO_TEXT:
        return "no text";
    case PA_OAI_NOMEM:
        return "no memory";
    }

    return "unknown";
}


const char *
pa_oai_api_name(pa_oai_api_e api)
{
    static const char  *names[] = {
        "none", "chat", "completions", "responses", "messages"
    };

    return ((unsigned) api < PA_OAI_API_N) ? names[api] : "none";
}
