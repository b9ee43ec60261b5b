
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The routing key of a request: the tenant id header, the buffered body
 * read in place (memory buffers or a temp file), the raw-byte and OpenAI
 * keys (chat, completions, Responses, Anthropic Messages; and the body's
 * model), and the 400 for an invalid id.
 */


#include "ngx_http_prefix_aware.h"


typedef ngx_int_t (*ngx_http_prefix_aware_feed_pt)(void *data, u_char *p,
    size_t n);


/*
 * the raw-byte key; with index=, the block keys of the same bytes
 * instead, whose tail key is then the request's key
 */
typedef struct {
    pa_body_key_t                       key;
    pa_blocks_t                        *blocks;
    size_t                              left;   /* with blocks */
    size_t                              total;  /* with blocks */
} ngx_http_prefix_aware_raw_t;


/*
 * what reading the key needs (parser state, block state, a temp file
 * buffer) comes from a piece of the stack; what does not fit, from a
 * pool made for it and freed as soon as the key is known: a streamed
 * answer keeps its request, and r->pool, for minutes
 */
typedef struct {
    u_char                             *pos;
    u_char                             *last;
    ngx_pool_t                         *pool;
    ngx_log_t                          *log;
} ngx_http_prefix_aware_scratch_t;


static ngx_int_t ngx_http_prefix_aware_find_id(ngx_http_request_t *r,
    ngx_str_t *id, ngx_str_t *reason);
static ngx_uint_t ngx_http_prefix_aware_path(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t format,
    pa_oai_dialect_e *dialect);
static ngx_int_t ngx_http_prefix_aware_key_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd,
    ngx_http_prefix_aware_scratch_t *scratch, ngx_uint_t format,
    pa_oai_dialect_e dialect, ngx_str_t *id, u_char *pck, size_t *pck_len);
static ngx_int_t ngx_http_prefix_aware_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_scratch_t *scratch,
    ngx_http_prefix_aware_feed_pt feed, void *data, size_t chunk);
static off_t ngx_http_prefix_aware_body_size(ngx_http_request_t *r);
static ngx_int_t ngx_http_prefix_aware_feed_bytes(void *data, u_char *p,
    size_t n);
static ngx_int_t ngx_http_prefix_aware_feed_openai(void *data, u_char *p,
    size_t n);
static void ngx_http_prefix_aware_feed_text(void *ctx,
    const unsigned char *p, size_t n, size_t chars);
static void *ngx_http_prefix_aware_alloc(void *ctx, size_t size);


static ngx_str_t  ngx_http_prefix_aware_id_header =
    ngx_string(NGX_HTTP_PREFIX_AWARE_ID_HEADER);

static ngx_uint_t  ngx_http_prefix_aware_unbuffered_warned;


ngx_int_t
ngx_http_prefix_aware_key(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_str_t *reason)
{
    size_t                              idlen;
    u_char                             *idp;
    ngx_str_t                           id;
    ngx_int_t                           rc;
    ngx_uint_t                          format, k;
    pa_oai_dialect_e                    dialect;
    ngx_http_prefix_aware_srv_conf_t   *pacf;
    ngx_http_prefix_aware_scratch_t     scratch;
    u_char                              pck[PA_ID_MAX_LEN];
    uint64_t                            stack[NGX_HTTP_PREFIX_AWARE_SCRATCH
                                              / sizeof(uint64_t)];

    pacf = pd->conf;

    rc = ngx_http_prefix_aware_find_id(r, &id, reason);
    if (rc != NGX_OK) {
        return rc;
    }

    idp = id.data;
    idlen = id.len;

    if (r->request_body_no_buffering) {

        /* only part of the body may be here yet: a key from it would vary */

        ngx_atomic_fetch_add(&pacf->shm->counter[NGX_HTTP_PA_UP_UNBUFFERED],
                             1);

        if (!ngx_http_prefix_aware_unbuffered_warned) {
            ngx_http_prefix_aware_unbuffered_warned = 1;
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "prefix_aware: the request body is not buffered "
                          "(proxy_request_buffering off?), routing by the "
                          "id header or to the least loaded server");
        }

    } else if (r->request_body && r->request_body->bufs) {

        format = ngx_http_prefix_aware_path(r, pd, pacf->format, &dialect);

        scratch.pos = (u_char *) stack;
        scratch.last = (u_char *) stack + sizeof(stack);
        scratch.pool = NULL;
        scratch.log = r->connection->log;

        rc = ngx_http_prefix_aware_key_body(r, pd, &scratch, format, dialect,
                                            &id, pck, idlen ? NULL : &idlen);

        if (scratch.pool) {
            ngx_destroy_pool(scratch.pool);
        }

        if (rc != NGX_OK) {
            return rc;
        }

        if (id.len == 0 && idlen) {
            idp = pck;
        }
    }

    if (pd->source != NGX_HTTP_PREFIX_AWARE_SOURCE_NONE) {
        pd->hash = pa_key_mix(pd->hash, idp, idlen);
        pd->keyed = 1;

    } else if (idlen) {
        pd->hash = pa_key_id_only(idp, idlen);
        pd->keyed = 1;
    }

    pd->id = idlen ? 1 : 0;

    /*
     * a prefix nobody holds enough of is placed on the ring by its first
     * 4096 units, as with index=off's default length, however deep the
     * index matches: a conversation or a file edited past its beginning
     * keeps its home; block k's hash stands for blocks 1..k
     */

    pd->ring_key = pd->hash;

    if (pd->nblocks) {
        k = ngx_max(NGX_HTTP_PREFIX_AWARE_RING_LENGTH / pacf->block, 1);
        pd->ring_key = pd->blocks[ngx_min(pd->nblocks, k) - 1];
    }

    if (pacf->models) {
        return ngx_http_prefix_aware_models_route(r, pd);
    }

    return NGX_OK;
}


/*
 * the format by the path: with format=auto, a path ending in
 * "/completions" (chat, completions), "/v1/responses" (not
 * "/v1/responses/{id}") and "/v1/messages" or "/v1/messages/count_tokens"
 * (Anthropic) is JSON of its API, any other raw bytes; with format=openai,
 * the Anthropic paths are Anthropic JSON, others OpenAI.  count_tokens is
 * routed by its key and not recorded in the index
 */

static ngx_uint_t
ngx_http_prefix_aware_path(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t format,
    pa_oai_dialect_e *dialect)
{
    ngx_str_t   *uri;
    ngx_uint_t   i, api;

    static ngx_str_t  paths[] = {
        ngx_string("/completions"),
        ngx_string("/v1/responses"),
        ngx_string("/v1/messages"),
        ngx_string("/v1/messages/count_tokens")
    };

    uri = &r->uri;
    api = 0;

    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (uri->len >= paths[i].len
            && ngx_strncmp(uri->data + uri->len - paths[i].len,
                           paths[i].data, paths[i].len) == 0)
        {
            api = i + 1;
        }
    }

    *dialect = (api >= 3) ? PA_OAI_ANTHROPIC : PA_OAI_OPENAI;

    if (api == 4) {
        pd->no_record = 1;
    }

    if (format != NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO) {
        return format;
    }

    return api ? NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI
               : NGX_HTTP_PREFIX_AWARE_FORMAT_BODY;
}


/*
 * the key of a buffered body, OpenAI JSON or raw bytes; a valid
 * prompt_cache_key is copied to "pck" and its length set in "*pck_len"
 * if "pck_len" is not NULL (no id header).  With index=, the chained
 * block keys of the same text too, seeded with the model, cache_salt and
 * the tenant id "id" (or the prompt_cache_key)
 */

static ngx_int_t
ngx_http_prefix_aware_key_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd,
    ngx_http_prefix_aware_scratch_t *scratch, ngx_uint_t format,
    pa_oai_dialect_e dialect, ngx_str_t *id, u_char *pck, size_t *pck_len)
{
    off_t                               size;
    size_t                              len;
    u_char                             *idp;
    uint64_t                            seed, units, past;
    uint32_t                            max;
    pa_oai_t                           *x;
    pa_alloc_t                          alloc;
    pa_blocks_t                        *b;
    pa_oai_result_t                     res;
    ngx_http_prefix_aware_raw_t         raw;
    ngx_http_prefix_aware_srv_conf_t   *pacf;

    pacf = pd->conf;
    b = NULL;
    seed = 0;
    past = 0;
    size = 0;
    max = 0;

    if (pacf->index_size) {

        /* a unit is a byte at least: no more blocks than the body has */

        size = ngx_http_prefix_aware_body_size(r);
        max = (uint32_t) ngx_min((off_t) pacf->max_blocks,
                                 size / (off_t) pacf->block + 1);

        /* past the head, a hash for each "stride" blocks */

        max = ngx_max(pa_blocks_kept(max, (uint32_t) pacf->head,
                                     (uint32_t) pacf->stride), 1);

        b = ngx_http_prefix_aware_alloc(scratch, sizeof(pa_blocks_t));
        pd->blocks = ngx_palloc(r->pool, max * sizeof(uint64_t));

        if (b == NULL || pd->blocks == NULL) {
            return NGX_ERROR;
        }
    }

    if (format == NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI) {

        alloc.alloc = ngx_http_prefix_aware_alloc;
        alloc.ctx = scratch;

        x = pa_oai_create(&alloc, pacf->length, 0);
        if (x == NULL) {
            return NGX_ERROR;
        }

        pa_oai_dialect(x, dialect);

        if (b) {
            (void) pa_blocks_init(b, 1, (uint32_t) pacf->block, max,
                                  pd->blocks);
            pa_blocks_stride(b, (uint32_t) pacf->head,
                             (uint32_t) pacf->stride);
            pa_oai_text_hook(x, ngx_http_prefix_aware_feed_text, b);
            pa_oai_hook_only(x);
            pa_oai_count_past(x);
        }

        if (ngx_http_prefix_aware_body(r, scratch,
                                       ngx_http_prefix_aware_feed_openai, x,
                                       NGX_HTTP_PREFIX_AWARE_FILE_BUF)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        pa_oai_finish(x, &res);

        if (res.status == PA_OAI_OK) {

            if (res.pck_invalid) {

                /*
                 * the inference server may well accept what this module
                 * cannot use as a tenant id: route without it
                 */

                ngx_atomic_fetch_add(
                         &pacf->shm->counter[NGX_HTTP_PA_UP_INVALID_PCK], 1);

                ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                              "prefix_aware: prompt_cache_key is not a "
                              "string of 1 to 64 printable ASCII "
                              "characters, routed without it");

            } else if (pck_len && res.has_pck) {
                *pck_len = ngx_min(res.pck_len, PA_ID_MAX_LEN);
                ngx_memcpy(pck, res.pck, *pck_len);
            }

            pd->hash = res.hash;
            pd->source = NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI;
            pd->api = res.api;

            /* a stored response this one follows (state.c) */

            if (res.prev_len && res.api == PA_OAI_API_RESPONSES) {
                pd->state_id = pa_store_hash(res.prev, res.prev_len);
            }
            seed = res.meta;
            past = res.past;

            if (res.has_model) {
                pd->model_hash = res.model ? res.model : 1;
                pd->has_model = 1;
            }

            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "prefix_aware openai: %s, %uz characters, "
                           "%uz bytes scanned", pa_oai_api_name(res.api),
                           res.chars, res.scanned);

            goto blocks;
        }

        ngx_atomic_fetch_add(&pacf->shm->counter[NGX_HTTP_PA_UP_FALLBACK], 1);

        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "prefix_aware: not an OpenAI request body (%s), "
                      "keyed by its raw bytes",
                      pa_oai_status_name(res.status));
    }

    raw.blocks = b;
    raw.left = pacf->length;
    raw.total = 0;

    if (b) {
        (void) pa_blocks_init(b, 0, (uint32_t) pacf->block, max,
                              pd->blocks);
        pa_blocks_stride(b, (uint32_t) pacf->head, (uint32_t) pacf->stride);

    } else {
        pa_body_key_init(&raw.key, pacf->length);
    }

    if (ngx_http_prefix_aware_body(r, scratch,
                                   ngx_http_prefix_aware_feed_bytes, &raw,
                                   pacf->length)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (b == NULL && raw.key.total) {
        pd->hash = pa_body_key_digest(&raw.key);
        pd->source = NGX_HTTP_PREFIX_AWARE_SOURCE_BODY;

    } else if (b && raw.total) {
        pd->source = NGX_HTTP_PREFIX_AWARE_SOURCE_BODY;
        past = (uint64_t) (size - (off_t) raw.total);
    }

blocks:

    if (b == NULL || pd->source == NGX_HTTP_PREFIX_AWARE_SOURCE_NONE) {
        return NGX_OK;
    }

    /* the tenant id: the header's, else a valid prompt_cache_key */

    idp = id->data;
    len = id->len;

    if (len == 0 && pck_len && *pck_len) {
        idp = pck;
        len = *pck_len;
    }

    if (len) {
        seed = XXH3_64bits_withSeed(idp, len, seed);
    }

    pd->nblocks = pa_blocks_finish(b, seed);

    /*
     * the key of the text read, with the model, cache_salt and tenant:
     * the chain's tail stands for all of it, so the text is hashed once
     */

    pd->hash = b->tail;

    /*
     * the units of the key's text: bytes, or characters without the
     * separators, which are no text the engine prefills (a body of empty
     * strings has millions of them), up to "length"; the prompt's are
     * those and the text past the key, which the engine prefills too
     * (an agent's new tool result at the end of a long history); and a
     * request counts at most "capacity" units, a quarter of its server's
     * cache (in tokens of 4 units), as work and as what it takes of that
     * cache
     */

    units = ngx_min(b->units, (uint64_t) pacf->length);

    pd->units = ngx_min(units, (uint64_t) pacf->capacity);
    pd->total_units = ngx_min(units + past, (uint64_t) pacf->capacity);

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_aware_find_id(ngx_http_request_t *r, ngx_str_t *id,
    ngx_str_t *reason)
{
    const char       *bad;
    ngx_uint_t        n;
    ngx_table_elt_t  *h;

    ngx_str_null(id);

    h = ngx_http_prefix_aware_header(r, &ngx_http_prefix_aware_id_header, &n);

    if (h == NULL) {
        return NGX_OK;
    }

    if (n > 1) {
        ngx_str_set(reason, "duplicate " NGX_HTTP_PREFIX_AWARE_ID_HEADER
                    " header");
        return NGX_HTTP_BAD_REQUEST;
    }

    bad = pa_id_check(h->value.data, h->value.len);

    if (bad) {
        reason->data = (u_char *) bad;
        reason->len = ngx_strlen(bad);
        return NGX_HTTP_BAD_REQUEST;
    }

    *id = h->value;

    return NGX_OK;
}


/*
 * hands the buffered body to "feed" in place, buffer by buffer, reading
 * a body kept in a temporary file in pieces of up to "chunk" bytes, until
 * "feed" has enough (NGX_DONE)
 */

static ngx_int_t
ngx_http_prefix_aware_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_scratch_t *scratch,
    ngx_http_prefix_aware_feed_pt feed, void *data, size_t chunk)
{
    off_t         offset;
    size_t        size;
    ssize_t       n;
    u_char       *buf;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    buf = NULL;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b)) {

            if (b->last == b->pos) {
                continue;
            }

            if (feed(data, b->pos, b->last - b->pos) == NGX_DONE) {
                return NGX_OK;
            }

            continue;
        }

        if (!b->in_file || b->file_last <= b->file_pos) {
            continue;
        }

        if (buf == NULL) {
            chunk = (size_t) ngx_min((off_t) chunk, b->file_last - b->file_pos);

            buf = ngx_http_prefix_aware_alloc(scratch, chunk);
            if (buf == NULL) {
                return NGX_ERROR;
            }
        }

        for (offset = b->file_pos; offset < b->file_last; offset += n) {
            size = (size_t) ngx_min(b->file_last - offset, (off_t) chunk);

            n = ngx_read_file(b->file, buf, size, offset);

            if (n == NGX_ERROR) {
                return NGX_ERROR;
            }

            if (n == 0) {
                ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                              "prefix_aware: body temp file \"%V\" is "
                              "shorter than expected", &b->file->name);
                return NGX_ERROR;
            }

            if (feed(data, buf, n) == NGX_DONE) {
                return NGX_OK;
            }
        }
    }

    return NGX_OK;
}


/* the bytes of the body read, in memory and in a temp file */

static off_t
ngx_http_prefix_aware_body_size(ngx_http_request_t *r)
{
    off_t         size;
    ngx_chain_t  *cl;

    size = 0;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        size += ngx_buf_size(cl->buf);
    }

    return size;
}


static ngx_int_t
ngx_http_prefix_aware_feed_bytes(void *data, u_char *p, size_t n)
{
    ngx_http_prefix_aware_raw_t  *raw = data;

    if (raw->blocks == NULL) {
        return pa_body_key_feed(&raw->key, p, n) ? NGX_OK : NGX_DONE;
    }

    n = ngx_min(n, raw->left);

    (void) pa_blocks_feed(raw->blocks, p, n);

    raw->left -= n;
    raw->total += n;

    return raw->left ? NGX_OK : NGX_DONE;
}


/*
 * separators are hashed into the blocks, and are no units; ASCII text
 * is not scanned again for the ends of blocks
 */

static void
ngx_http_prefix_aware_feed_text(void *ctx, const unsigned char *p, size_t n,
    size_t chars)
{
    if (chars == 0) {
        (void) pa_blocks_feed_sep(ctx, p, n);

    } else {
        (void) pa_blocks_feed_text(ctx, p, n, chars == n);
    }
}


static ngx_int_t
ngx_http_prefix_aware_feed_openai(void *data, u_char *p, size_t n)
{
    return pa_oai_feed(data, p, n) == PA_OAI_MORE ? NGX_OK : NGX_DONE;
}


static void *
ngx_http_prefix_aware_alloc(void *ctx, size_t size)
{
    ngx_http_prefix_aware_scratch_t  *scratch = ctx;

    u_char  *p;

    p = ngx_align_ptr(scratch->pos, NGX_ALIGNMENT);

    if (p <= scratch->last && size <= (size_t) (scratch->last - p)) {
        scratch->pos = p + size;
        return p;
    }

    if (scratch->pool == NULL) {
        scratch->pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, scratch->log);
        if (scratch->pool == NULL) {
            return NULL;
        }
    }

    return ngx_palloc(scratch->pool, size);
}
