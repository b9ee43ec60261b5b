
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * pa_models_parse(): the ids of /v1/models answers as vLLM, SGLang and
 * TGI give them, escapes, what is passed over, what is refused; the
 * streaming scan (pa_models_feed()) of 128 full vLLM cards in pieces of
 * every size from 1 to 600 bytes, cut anywhere, and 10 MB read
 * in the scanner's few hundred bytes; and that an id and an OpenAI body's
 * "model" have the same hash; a server's share of the models zone, the
 * slot a new model takes and a server's list given its slots
 * (pa_models_share(), pa_models_pick(), pa_models_keep()): the case of
 * issue 42 (one server's 128 ids, another's new adapter), and on random
 * lists that a server listing at most its share never has an id refused.
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "arena.h"
#include "pa_models.h"
#include "pa_openai.h"


typedef struct {
    int     n;
    char    ids[8][PA_MODELS_ID_MAX + 1];
    size_t  len[8];
} got_t;


static void
got_id(void *ctx, const unsigned char *id, size_t len)
{
    got_t  *g = ctx;

    if (g->n < 8) {
        memcpy(g->ids[g->n], id, len);
        g->ids[g->n][len] = '\0';
        g->len[g->n] = len;
    }

    g->n++;
}


static int
parse(const char *s, got_t *g, size_t *skipped)
{
    memset(g, 0, sizeof(got_t));

    return pa_models_parse((const unsigned char *) s, strlen(s), got_id, g,
                           skipped);
}


static void
test_vllm(void)
{
    int     rc;
    got_t   g;
    size_t  skipped;

    /* vLLM 0.6 with --enable-lora and two adapters */

    rc = parse("{\"object\":\"list\",\"data\":[{\"id\":\"meta-llama/"
               "Llama-3.1-8B-Instruct\",\"object\":\"model\",\"created\":"
               "1733000000,\"owned_by\":\"vllm\",\"root\":\"meta-llama/"
               "Llama-3.1-8B-Instruct\",\"parent\":null,\"max_model_len\":"
               "8192,\"permission\":[{\"id\":\"modelperm-1\",\"object\":"
               "\"model_permission\",\"allow_sampling\":true,\"group\":null,"
               "\"is_blocking\":false}]},{\"id\":\"sql-lora\",\"object\":"
               "\"model\",\"parent\":\"meta-llama/Llama-3.1-8B-Instruct\"},"
               "{\"id\":\"chat-lora\",\"root\":\"/adapters/chat\"}]}",
               &g, &skipped);

    CHECK(rc == 3);
    CHECK(g.n == 3);
    CHECK(strcmp(g.ids[0], "meta-llama/Llama-3.1-8B-Instruct") == 0);
    CHECK(strcmp(g.ids[1], "sql-lora") == 0);
    CHECK(strcmp(g.ids[2], "chat-lora") == 0);
    CHECK(skipped == 0);
}


static void
test_shapes(void)
{
    got_t   g;
    size_t  skipped;
    char    big[PA_MODELS_ID_MAX + 64];

    /* "data" anywhere at the top, white space, an empty list */

    CHECK(parse(" { \"a\" : [1, -2.5e+3, {\"data\": 1}], \"data\" : [ ] ,"
                "\"z\":\"\\u00e9\" } \n", &g, NULL) == 0);

    CHECK(parse("{\"data\":[{\"id\":\"a\\/b\\u00e9\\ud83d\\ude00\"}]}",
                &g, NULL) == 1);
    CHECK(strcmp(g.ids[0], "a/b\xc3\xa9\xf0\x9f\x98\x80") == 0);

    /* elements without a string id are passed over, and counted */

    CHECK(parse("{\"data\":[1,\"x\",{},{\"id\":7},{\"name\":\"n\"},"
                "{\"id\":\"\"},{\"id\":\"ok\"},null]}", &g, &skipped) == 1);
    CHECK(strcmp(g.ids[0], "ok") == 0);
    CHECK(skipped == 7);

    /* an id longer than PA_MODELS_ID_MAX */

    memset(big, 0, sizeof(big));
    strcpy(big, "{\"data\":[{\"id\":\"");
    memset(big + strlen(big), 'm', PA_MODELS_ID_MAX + 1);
    strcat(big, "\"},{\"id\":\"b\"}]}");

    CHECK(parse(big, &g, &skipped) == 1);
    CHECK(skipped == 1);
    CHECK(strcmp(g.ids[0], "b") == 0);

    /* exactly PA_MODELS_ID_MAX is kept */

    memset(big, 0, sizeof(big));
    strcpy(big, "{\"data\":[{\"id\":\"");
    memset(big + strlen(big), 'm', PA_MODELS_ID_MAX);
    strcat(big, "\"}]}");

    CHECK(parse(big, &g, &skipped) == 1);
    CHECK(g.len[0] == PA_MODELS_ID_MAX);
}


static void
test_refused(void)
{
    int     i;
    got_t   g;
    char    deep[256];

    static const char  *bad[] = {
        "",
        "[]",
        "{}",
        "{\"data\":{}}",
        "{\"data\":\"x\"}",
        "{\"data\":[{\"id\":\"a\"}]",
        "{\"data\":[{\"id\":\"a\"}]} x",
        "{\"data\":[{\"id\":\"a\"},]}",
        "{\"data\":[{\"id\":\"a\x01\"}]}",
        "{\"data\":[{\"id\":\"\\x\"}]}",
        "{\"data\":[{\"id\":\"\\udc00\"}]}",
        "{\"data\":[{\"id\":\"\\ud800x\"}]}",
        "{\"data\":[01]}",
        "{\"data\":[1.]}",
        "{\"data\":[tru]}",
        "{\"data\":[], \"a\": }",
        "{'data':[]}",
        NULL
    };

    for (i = 0; bad[i]; i++) {
        CHECK_MSG(parse(bad[i], &g, NULL) == -1, "%s", bad[i]);
    }

    /* too deep */

    memset(deep, 0, sizeof(deep));
    strcpy(deep, "{\"data\":[],\"x\":");

    for (i = 0; i < PA_MODELS_MAX_DEPTH; i++) {
        strcat(deep, "[");
    }

    for (i = 0; i < PA_MODELS_MAX_DEPTH; i++) {
        strcat(deep, "]");
    }

    strcat(deep, "}");

    CHECK(parse(deep, &g, NULL) == -1);

    /* a truncated body at every length fails, never reads past its end */

    {
        const char  *s = "{\"data\":[{\"id\":\"abc\",\"x\":[1,2]}]}";
        size_t       n;

        for (n = 0; n < strlen(s); n++) {
            CHECK(pa_models_parse((const unsigned char *) s, n, got_id, &g,
                                  NULL) == -1);
        }
    }
}


/* "n" vLLM cards as vLLM 0.6 serializes them: 510 to 560 bytes each */

static char *
vllm_answer(int n, size_t *len)
{
    int     i;
    char   *b, *p;
    size_t  size;

    size = 64 + (size_t) n * 640;
    b = malloc(size);
    if (b == NULL) {
        return NULL;
    }

    p = b + sprintf(b, "{\"object\":\"list\",\"data\":[");

    for (i = 0; i < n; i++) {
        p += sprintf(p, "%s{\"id\":\"tenant-%d-support-chat-lora-%04d\","
                     "\"object\":\"model\",\"created\":%d,\"owned_by\":"
                     "\"vllm\",\"root\":\"/srv/adapters/tenant-%d-support-"
                     "chat-lora-%04d/v1\",\"parent\":\"meta-llama/Llama-3.1-"
                     "8B-Instruct\",\"max_model_len\":null,\"permission\":"
                     "[{\"id\":\"modelperm-%032x\",\"object\":"
                     "\"model_permission\",\"created\":%d,"
                     "\"allow_create_engine\":false,\"allow_sampling\":true,"
                     "\"allow_logprobs\":true,\"allow_search_indices\":false,"
                     "\"allow_view\":true,\"allow_fine_tuning\":false,"
                     "\"organization\":\"*\",\"group\":null,"
                     "\"is_blocking\":false}]}",
                     i ? "," : "", i % 97, i, 1733000000 + i, i % 97, i,
                     0x5eed0000u + (unsigned) i, 1733000000 + i);
    }

    p += sprintf(p, "]}");
    *len = p - b;

    return b;
}


typedef struct {
    int       n;
    uint64_t  sum;
} sum_t;


static void
sum_id(void *ctx, const unsigned char *id, size_t len)
{
    sum_t  *s = ctx;

    s->sum = s->sum * 31 + pa_models_hash(id, len);
    s->n++;
}


static void
test_stream(void)
{
    int               rc, bad;
    char             *a;
    sum_t             whole, got;
    size_t            len, piece, off, n, skipped;
    pa_models_scan_t  s;

    a = vllm_answer(128, &len);
    CHECK(a != NULL);
    if (a == NULL) {
        return;
    }

    /* 128 cards are over 64 KB, the buffer answers were read into */

    CHECK(len > 65536);

    memset(&whole, 0, sizeof(sum_t));
    CHECK(pa_models_parse((unsigned char *) a, len, sum_id, &whole, NULL)
          == 128);
    CHECK(whole.n == 128);

    /* in pieces of 1 to 600 bytes: the same ids, in the same order */

    bad = 0;

    for (piece = 1; piece <= 600; piece++) {
        memset(&got, 0, sizeof(sum_t));
        pa_models_init(&s, sum_id, &got);

        for (off = 0; off < len; off += n) {
            n = (len - off < piece) ? len - off : piece;

            if (pa_models_feed(&s, (unsigned char *) a + off, n) != 0) {
                break;
            }
        }

        rc = pa_models_finish(&s, &skipped);

        if (rc != 128 || got.n != 128 || got.sum != whole.sum
            || skipped != 0)
        {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%d piece sizes differ", bad);

    /* cut at every 7th byte: refused (it ends early), never more ids */

    bad = 0;

    for (n = 0; n < len; n += 7) {
        memset(&got, 0, sizeof(sum_t));

        if (pa_models_parse((unsigned char *) a, n, sum_id, &got, NULL)
            != -1 || got.n > 128)
        {
            bad++;
        }
    }

    CHECK_MSG(bad == 0, "%d cut answers accepted", bad);

    free(a);

    /* 20,000 cards, 10 MB, in 4 KB pieces: all ids in the same state */

    a = vllm_answer(20000, &len);
    CHECK(a != NULL);
    if (a == NULL) {
        return;
    }

    CHECK(len > 10 * 1000 * 1000);
    CHECK(sizeof(pa_models_scan_t) < 512);

    memset(&got, 0, sizeof(sum_t));
    pa_models_init(&s, sum_id, &got);

    for (off = 0; off < len; off += n) {
        n = (len - off < 4096) ? len - off : 4096;
        CHECK(pa_models_feed(&s, (unsigned char *) a + off, n) == 0);
    }

    CHECK(pa_models_finish(&s, NULL) == 20000);
    CHECK(got.n == 20000);

    free(a);
}


/* escapes and numbers cut anywhere: the same decoded ids */

static void
test_stream_tokens(void)
{
    int               rc;
    got_t             g;
    size_t            len, cut;
    pa_models_scan_t  s;

    static const char  a[] =
        "{\"n\":-12.5e+3,\"data\":[{\"id\":\"a\\ud83d\\ude00\\u00e9\\n\","
        "\"v\":[0,1E-2,true,false,null]},{\"\\u0069d\":\"b\\/c\"}],"
        "\"z\":0}";

    len = sizeof(a) - 1;

    for (cut = 0; cut <= len; cut++) {
        memset(&g, 0, sizeof(got_t));
        pa_models_init(&s, got_id, &g);

        (void) pa_models_feed(&s, (const unsigned char *) a, cut);
        (void) pa_models_feed(&s, (const unsigned char *) a + cut,
                              len - cut);

        rc = pa_models_finish(&s, NULL);

        CHECK_MSG(rc == 2, "cut at %zu: %d", cut, rc);
        CHECK_MSG(strcmp(g.ids[0], "a\xf0\x9f\x98\x80\xc3\xa9\n") == 0,
                  "cut at %zu: %s", cut, g.ids[0]);
        CHECK_MSG(strcmp(g.ids[1], "b/c") == 0, "cut at %zu", cut);
    }

    /* refused once, refused from then on */

    pa_models_init(&s, got_id, &g);
    CHECK(pa_models_feed(&s, (const unsigned char *) "{\"data\":x", 9)
          == -1);
    CHECK(pa_models_feed(&s, (const unsigned char *) "[]}", 3) == -1);
    CHECK(pa_models_finish(&s, NULL) == -1);
}


static void
test_hash(void)
{
    ta_arena_t       a;
    pa_oai_t        *x;
    pa_alloc_t       alloc;
    pa_oai_result_t  res;

    static const char  body[] =
        "{\"model\":\"sql-\\u006cora\",\"messages\":[{\"role\":\"user\","
        "\"content\":\"hi\"}]}";

    a.blocks = NULL;
    a.fail_at = -1;
    a.count = 0;
    alloc.alloc = ta_alloc;
    alloc.ctx = &a;

    x = pa_oai_create(&alloc, 64, 0);
    CHECK(x != NULL);

    (void) pa_oai_feed(x, (const unsigned char *) body, sizeof(body) - 1);
    pa_oai_finish(x, &res);

    CHECK(res.status == PA_OAI_OK);
    CHECK(res.has_model);
    CHECK(pa_models_hash((const unsigned char *) "sql-lora", 8)
          == (res.model ? res.model : 1));
    CHECK(pa_models_hash((const unsigned char *) "sql-lor", 7) != res.model);

    ta_reset(&a);
}


/* a server's share of the zone's slots */

static void
test_share(void)
{
    CHECK(pa_models_share(128, 0, 1) == 128);
    CHECK(pa_models_share(128, 0, 2) == 64);
    CHECK(pa_models_share(128, 0, 3) == 42);
    CHECK(pa_models_share(128, 8, 4) == 30);
    CHECK(pa_models_share(128, 0, 128) == 1);

    /* more servers than slots, or every slot declared: one, not held */

    CHECK(pa_models_share(128, 0, 200) == 1);
    CHECK(pa_models_share(128, 128, 2) == 1);
    CHECK(pa_models_share(128, 0, 0) == 1);

    /* the shares of all servers and the declared models fit the slots */

    {
        unsigned  d, n;

        for (d = 0; d < 128; d += 7) {
            for (n = 1; n <= 128 - d; n++) {
                CHECK_MSG(n * pa_models_share(128, d, n) + d <= 128,
                          "declared %u servers %u", d, n);
            }
        }
    }
}


#define BIT(set, i)  ((set)[(i) / 64] |= (uint64_t) 1 << ((i) % 64))


/* the slot a new model takes */

static void
test_pick(void)
{
    int       i;
    uint64_t  used[2], listed[2], kept[2];

    memset(used, 0, sizeof(used));
    memset(listed, 0, sizeof(listed));
    memset(kept, 0, sizeof(kept));

    /* an empty zone: the first slot */

    CHECK(pa_models_pick(128, used, listed, kept, 0) == 0);

    /* the first free one, in the second word too */

    used[0] = ~(uint64_t) 0;
    BIT(used, 64);
    CHECK(pa_models_pick(128, used, listed, kept, 0) == 65);

    /* all taken: a model nobody lists, even without "evict" */

    used[1] = ~(uint64_t) 0;
    listed[0] = ~(uint64_t) 0;
    listed[1] = ~(uint64_t) 0 & ~((uint64_t) 1 << 40);
    CHECK(pa_models_pick(128, used, listed, kept, 0) == 104);

    /* a model nobody lists but that is kept (declared): not taken */

    BIT(kept, 104);
    CHECK(pa_models_pick(128, used, listed, kept, 0) == -1);

    /* every model listed: none without "evict" */

    listed[1] = ~(uint64_t) 0;
    CHECK(pa_models_pick(128, used, listed, kept, 0) == -1);

    /* with it, the first listed only past the shares */

    kept[0] = ~(uint64_t) 0;
    kept[1] = ~(uint64_t) 0 & ~((uint64_t) 1 << 9);
    CHECK(pa_models_pick(128, used, listed, kept, 1) == 73);

    /* all kept: none, evict or not */

    BIT(kept, 73);
    CHECK(pa_models_pick(128, used, listed, kept, 1) == -1);

    /* a free slot comes before one nobody lists, and one to evict */

    memset(listed, 0, sizeof(listed));
    memset(kept, 0, sizeof(kept));
    used[1] &= ~((uint64_t) 1 << 63);
    CHECK(pa_models_pick(128, used, listed, kept, 1) == 127);

    CHECK(pa_models_count(128, used) == 127);
    CHECK(pa_models_count(128, kept) == 0);

    for (i = 0; i < 128; i++) {
        BIT(kept, i);
    }

    CHECK(pa_models_count(128, kept) == 128);
}


/*
 * the issue 42 case, as the discovery uses pick: one server lists 128
 * ids, then another a new one; the second takes a slot of the first's
 * past its share, and no server's share is ever taken
 */

static void
test_one_takes_all(void)
{
    int       k, i;
    unsigned  share;
    uint64_t  used[2], listed[2], kept[2], own_a[2];

    memset(used, 0, sizeof(used));
    memset(listed, 0, sizeof(listed));
    memset(own_a, 0, sizeof(own_a));

    share = pa_models_share(128, 0, 2);

    /* A: the first 64 are its share, the next 64 free slots it borrows */

    for (i = 0; i < 128; i++) {
        memset(kept, 0, sizeof(kept));
        kept[0] = listed[0];
        kept[1] = listed[1];

        k = pa_models_pick(128, used, listed, kept, i < (int) share);
        CHECK(k == i);

        BIT(used, k);
        BIT(listed, k);

        if (i < (int) share) {
            BIT(own_a, k);
        }
    }

    /* B, within its share: one of A's past its share */

    k = pa_models_pick(128, used, listed, own_a, 1);
    CHECK(k == 64);

    /* B past its share (none of its own): nothing */

    CHECK(pa_models_pick(128, used, listed, own_a, 0) == -1);

    /* and A's share is never what B takes */

    for (i = 0; i < 64; i++) {
        BIT(own_a, 64 + i);
        k = pa_models_pick(128, used, listed, own_a, 1);
        CHECK(k == (i < 63 ? 65 + i : -1));
    }
}


/*
 * pa_models_keep(), one server's list at a time, as the discovery does:
 * a zone of "n" slots shared by "ns" servers, each with its last slots
 * and share; a slot given to a new model leaves the others' lists
 */

#define KEEP_SERVERS  16
#define KEEP_WORDS    (128 / 64)

typedef struct {
    uint64_t  hash[128];
    uint64_t  declared[KEEP_WORDS];
    uint64_t  listed[KEEP_SERVERS][KEEP_WORDS];
    uint64_t  own[KEEP_SERVERS][KEEP_WORDS];
    unsigned  ns;
    unsigned  share;
} keep_zone_t;


static unsigned
keep_poll(keep_zone_t *z, unsigned srv, const uint64_t *ids, unsigned nids,
    int *slot)
{
    unsigned  j, w, k, refused;
    uint64_t  before[128], others[KEEP_WORDS], held[KEEP_WORDS];

    memset(others, 0, sizeof(others));
    memset(held, 0, sizeof(held));

    for (j = 0; j < z->ns; j++) {
        if (j == srv) {
            continue;
        }

        for (w = 0; w < KEEP_WORDS; w++) {
            others[w] |= z->listed[j][w];
            held[w] |= z->own[j][w];
        }
    }

    memcpy(before, z->hash, sizeof(before));

    refused = pa_models_keep(128, z->hash, z->declared, others, held, ids,
                             nids, z->share, slot, z->listed[srv],
                             z->own[srv]);

    /* a slot that changed models leaves the others' lists */

    for (k = 0; k < 128; k++) {
        if (before[k] && before[k] != z->hash[k]) {
            for (j = 0; j < z->ns; j++) {
                if (j != srv) {
                    z->listed[j][k / 64] &= ~((uint64_t) 1 << (k % 64));
                    z->own[j][k / 64] &= ~((uint64_t) 1 << (k % 64));
                }
            }
        }
    }

    return refused;
}


/* the issue 42 case through pa_models_keep() */

static void
test_keep(void)
{
    int          slot[400];
    unsigned     i, refused;
    uint64_t     ids[400], lora;
    keep_zone_t  z;

    memset(&z, 0, sizeof(keep_zone_t));
    z.ns = 2;
    z.share = pa_models_share(128, 0, 2);

    for (i = 0; i < 400; i++) {
        ids[i] = 1000 + i;
    }

    lora = 7;

    /* A (0) lists 128: all kept, 64 held, 64 lent */

    refused = keep_poll(&z, 0, ids, 128, slot);
    CHECK(refused == 0);
    CHECK(pa_models_count(128, z.listed[0]) == 128);
    CHECK(pa_models_count(128, z.own[0]) == 64);
    CHECK(slot[0] == 0 && slot[127] == 127);

    /* B (1) loads lora-new: it takes the first slot A had past its share */

    refused = keep_poll(&z, 1, &lora, 1, slot);
    CHECK(refused == 0);
    CHECK(slot[0] == 64);
    CHECK(z.hash[64] == lora);
    CHECK(pa_models_count(128, z.listed[0]) == 127);
    CHECK(pa_models_count(128, z.own[0]) == 64);
    CHECK(pa_models_count(128, z.own[1]) == 1);

    /* A's next poll: the id that lost its slot is refused, A's only */

    refused = keep_poll(&z, 0, ids, 128, slot);
    CHECK(refused == 1);
    CHECK(slot[64] == -1);
    CHECK(z.hash[64] == lora);

    /* B's next poll keeps it, A's churning lists never take it */

    CHECK(keep_poll(&z, 1, &lora, 1, slot) == 0 && slot[0] == 64);

    for (i = 0; i < 10; i++) {
        refused = keep_poll(&z, 0, ids + 100 + 17 * i, 128, slot);
        CHECK(refused == 1);
        CHECK(z.hash[64] == lora);
    }

    /* a list longer than the zone: the slots it can have, no more */

    CHECK(keep_poll(&z, 0, ids, 300, slot) == 300 - 127);
    CHECK(z.hash[64] == lora);

    /* B unloads: A has its 128 again */

    CHECK(keep_poll(&z, 1, NULL, 0, slot) == 0);
    CHECK(keep_poll(&z, 0, ids, 128, slot) == 0);
    CHECK(pa_models_count(128, z.listed[0]) == 128);

    /* the same id twice in a list takes one slot */

    memset(&z, 0, sizeof(keep_zone_t));
    z.ns = 1;
    z.share = 128;
    ids[1] = ids[0];
    CHECK(keep_poll(&z, 0, ids, 3, slot) == 0);
    CHECK(slot[0] == slot[1] && slot[0] != slot[2]);
    CHECK(pa_models_count(128, z.listed[0]) == 2);
    CHECK(pa_models_count(128, z.own[0]) == 2);

    /* a declared model's slot is listed, not held */

    memset(&z, 0, sizeof(keep_zone_t));
    z.ns = 2;
    z.share = pa_models_share(128, 1, 2);
    z.hash[5] = 42;
    z.declared[0] = (uint64_t) 1 << 5;
    ids[0] = 42;
    ids[1] = 43;
    CHECK(keep_poll(&z, 0, ids, 2, slot) == 0);
    CHECK(slot[0] == 5 && slot[1] == 0);
    CHECK(pa_models_count(128, z.own[0]) == 1);

    /* a declared slot is never evicted, even for a server in its share */

    for (i = 0; i < 128; i++) {
        if (i != 5) {
            z.hash[i] = 5000 + i;
        }
    }

    memset(z.listed[0], 0xff, sizeof(z.listed[0]));
    memset(z.own[0], 0xff, sizeof(z.own[0]));
    z.own[0][0] &= ~((uint64_t) 1 << 5);
    ids[0] = 77;
    CHECK(keep_poll(&z, 1, ids, 1, slot) == 1 && slot[0] == -1);
}


/*
 * the guarantee, on random lists: with servers' lists drawn from a pool
 * (overlapping, of every length up to 2.5 times the share, some far past
 * it) and polled in random order, a server whose list has at most its
 * share of ids (not declared) never has one refused, and one with more
 * keeps its share; the slots held by all never exceed the zone
 */

static void
test_keep_random(void)
{
    int          slot[400];
    unsigned     round, srv, i, j, nids, ns, nd, refused, held, distinct;
    uint64_t     ids[KEEP_SERVERS][400], all[KEEP_WORDS];
    unsigned     len[KEEP_SERVERS];
    keep_zone_t  z;

    srand(42);

    for (round = 0; round < 150; round++) {
        memset(&z, 0, sizeof(keep_zone_t));

        ns = 1 + rand() % KEEP_SERVERS;
        nd = rand() % 4 == 0 ? rand() % 16 : 0;

        for (i = 0; i < nd; i++) {
            z.hash[i * 7] = 1 + i;
            z.declared[(i * 7) / 64] |= (uint64_t) 1 << ((i * 7) % 64);
        }

        z.ns = ns;
        z.share = pa_models_share(128, nd, ns);

        for (srv = 0; srv < ns; srv++) {
            len[srv] = 0;
        }

        for (i = 0; i < 60 * ns; i++) {
            srv = rand() % ns;

            /* a new list now and then: ids of its own, or of a pool */

            if (len[srv] == 0 || rand() % 3 == 0) {
                nids = rand() % 4 == 0
                       ? (unsigned) (rand() % 400)
                       : (unsigned) rand() % (z.share * 5 / 2 + 1);

                for (j = 0; j < nids; j++) {
                    ids[srv][j] = rand() % 2
                                  ? (uint64_t) (1000 + rand() % 300)
                                  : (uint64_t) (100000 * (srv + 1)
                                                + rand() % 1000);

                    /* a declared model in a list now and then */

                    if (nd && rand() % 50 == 0) {
                        ids[srv][j] = 1 + rand() % nd;
                    }
                }

                len[srv] = nids;
            }

            refused = keep_poll(&z, srv, ids[srv], len[srv], slot);

            /* its distinct ids not declared */

            distinct = 0;

            for (j = 0; j < len[srv]; j++) {
                unsigned  d;

                for (d = 0; d < j && ids[srv][d] != ids[srv][j]; d++) {
                    /* void */
                }

                if (d == j && !(ids[srv][j] >= 1 && ids[srv][j] <= nd)) {
                    distinct++;
                }
            }

            held = pa_models_count(128, z.own[srv]);

            if (z.share * ns + nd <= 128) {
                CHECK_MSG(distinct > z.share || refused == 0,
                          "round %u: %u ids, share %u, %u refused",
                          round, distinct, z.share, refused);
                CHECK_MSG(held == (distinct < z.share ? distinct : z.share),
                          "round %u: holds %u of %u ids, share %u",
                          round, held, distinct, z.share);
            }

            /* every id given a slot is in it */

            for (j = 0; j < len[srv]; j++) {
                if (slot[j] >= 0 && z.hash[slot[j]] != ids[srv][j]) {
                    break;
                }
            }

            CHECK(j == len[srv]);

            memset(all, 0, sizeof(all));

            for (j = 0; j < ns; j++) {
                all[0] |= z.own[j][0];
                all[1] |= z.own[j][1];
            }

            CHECK(pa_models_count(128, all) + nd <= 128);
        }
    }
}


int
main(void)
{
    test_vllm();
    test_shapes();
    test_refused();
    test_stream();
    test_stream_tokens();
    test_hash();
    test_share();
    test_pick();
    test_one_takes_all();
    test_keep();
    test_keep_random();

    return UNIT_DONE();
}
