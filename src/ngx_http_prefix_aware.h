
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The private header of the module's nginx glue: types shared by
 * ngx_http_prefix_aware_module.c (directives, balancer) and
 * src/ngx_http_prefix_aware_{key,zone,status,variables,index,models}.c.
 */


#ifndef _NGX_HTTP_PREFIX_AWARE_H_INCLUDED_
#define _NGX_HTTP_PREFIX_AWARE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "pa_key.h"
#include "pa_ring.h"
#include "pa_openai.h"
#include "pa_block.h"
#include "pa_index.h"
#include "pa_choose.h"
#include "pa_strategy.h"
#include "pa_models.h"
#include "pa_prom.h"
#include "pa_usage.h"
#include "pa_sync.h"
#include "pa_respid.h"
#include "pa_store.h"
#include "pa_queue.h"


/*
 * nginx version differences, in this one place: since 1.27.3 an upstream
 * with a "zone" re-resolves "server ... resolve" at run time, and peers
 * are counted references (ngx_http_upstream_rr_peer_ref/unref), taken by
 * the balancer's get and released by round robin's free
 */

#if (nginx_version >= 1027003 && NGX_HTTP_UPSTREAM_ZONE)
#define NGX_HTTP_PREFIX_AWARE_RESOLVE         1
#define NGX_HTTP_PREFIX_AWARE_MODIFY          NGX_HTTP_UPSTREAM_MODIFY
#define ngx_http_prefix_aware_peer_ref(peers, peer)                           \
    ngx_http_upstream_rr_peer_ref(peers, peer)
#else
#define NGX_HTTP_PREFIX_AWARE_RESOLVE         0
#define NGX_HTTP_PREFIX_AWARE_MODIFY          0
#define ngx_http_prefix_aware_peer_ref(peers, peer)
#endif


#define NGX_HTTP_PREFIX_AWARE_FORMAT_AUTO     0
#define NGX_HTTP_PREFIX_AWARE_FORMAT_BODY     1
#define NGX_HTTP_PREFIX_AWARE_FORMAT_OPENAI   2

#define NGX_HTTP_PREFIX_AWARE_SOURCE_NONE     0
#define NGX_HTTP_PREFIX_AWARE_SOURCE_BODY     1
#define NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI   2

/* strategy=: how a server is chosen; the index of per-strategy counters */
#define NGX_HTTP_PA_STRATEGY_PREFIX           0
#define NGX_HTTP_PA_STRATEGY_LEAST            1
#define NGX_HTTP_PA_STRATEGY_RANDOM           2
#define NGX_HTTP_PA_STRATEGIES                3

#define NGX_HTTP_PREFIX_AWARE_RETRIES         8     /* walks on lost races */
#define NGX_HTTP_PREFIX_AWARE_GENERATIONS     4     /* current + draining */
#define NGX_HTTP_PREFIX_AWARE_REAP            1000  /* reaper period, ms */

/* the ring has 160 points per unit of weight: bound what it may cost */
#define NGX_HTTP_PREFIX_AWARE_MAX_WEIGHT      100
#define NGX_HTTP_PREFIX_AWARE_MAX_POINTS      4194304

/* length= without the index; the index's own is in its file */
#define NGX_HTTP_PREFIX_AWARE_LENGTH          4096
#define NGX_HTTP_PREFIX_AWARE_INDEX_AUTO_MIN  (1024 * 1024)
#define NGX_HTTP_PREFIX_AWARE_RING_LENGTH     4096
#define NGX_HTTP_PREFIX_AWARE_INDEX_HEAD      8192   /* units, 64 blocks+ */

/*
 * the decode share of a request's work (index.c, peer.c): 512 units, plus
 * a quarter of its prompt (per cent) for the decoding steps that read its
 * whole KV cache
 */
#define NGX_HTTP_PREFIX_AWARE_DECODE          512
#define NGX_HTTP_PREFIX_AWARE_ACTIVE          25

/* matched depth, in blocks: 0, 1, 2, 4, ... 512, +inf */
#define NGX_HTTP_PREFIX_AWARE_DEPTHS          12

/* in flight at the first choice: 0, 1, 2, 4, ... 1024, +inf */
#define NGX_HTTP_PREFIX_AWARE_HIST            13

#define NGX_HTTP_PREFIX_AWARE_ID_HEADER  "X-Amzn-SageMaker-Prefix-Aware-Id"

/* responses=: stored responses' ids kept by default (state.c) */
#define NGX_HTTP_PREFIX_AWARE_RESPONSES       65536

/* a body in a temp file is read through a buffer of this size */
#define NGX_HTTP_PREFIX_AWARE_FILE_BUF        65536

/* the stack the key is read with (parser and block states); more: a pool */
#define NGX_HTTP_PREFIX_AWARE_SCRATCH         4096


/* per-upstream counters in the shared zone */
enum {
    /* the first three count key sources, indexed by pd->source */
    NGX_HTTP_PA_UP_SOURCE_NONE = NGX_HTTP_PREFIX_AWARE_SOURCE_NONE,
    NGX_HTTP_PA_UP_SOURCE_BODY = NGX_HTTP_PREFIX_AWARE_SOURCE_BODY,
    NGX_HTTP_PA_UP_SOURCE_OPENAI = NGX_HTTP_PREFIX_AWARE_SOURCE_OPENAI,
    NGX_HTTP_PA_UP_ID,
    NGX_HTTP_PA_UP_FALLBACK,
    NGX_HTTP_PA_UP_UNBUFFERED,
    NGX_HTTP_PA_UP_REJECTED,
    NGX_HTTP_PA_UP_INVALID_PCK,
    NGX_HTTP_PA_UP_KEYED,
    NGX_HTTP_PA_UP_FIRST_USABLE,
    /* OpenAI-format keys by API, indexed by pa_oai_api_e - 1 */
    NGX_HTTP_PA_UP_API_CHAT,
    NGX_HTTP_PA_UP_API_COMPLETIONS,
    NGX_HTTP_PA_UP_API_RESPONSES,
    NGX_HTTP_PA_UP_API_MESSAGES,
    NGX_HTTP_PA_UP_HIST_SUM,
    NGX_HTTP_PA_UP_NCOUNTERS
};


typedef struct ngx_http_prefix_aware_shm_server_s
    ngx_http_prefix_aware_shm_server_t;
typedef struct ngx_http_prefix_aware_shm_upstream_s
    ngx_http_prefix_aware_shm_upstream_t;
typedef struct ngx_http_prefix_aware_shm_conf_s
    ngx_http_prefix_aware_shm_conf_t;
typedef struct ngx_http_prefix_aware_shm_worker_s
    ngx_http_prefix_aware_shm_worker_t;
typedef struct ngx_http_prefix_aware_shm_block_s
    ngx_http_prefix_aware_shm_block_t;
typedef struct ngx_http_prefix_aware_models_s
    ngx_http_prefix_aware_models_t;
typedef struct ngx_http_prefix_aware_shm_model_s
    ngx_http_prefix_aware_shm_model_t;
typedef struct ngx_http_prefix_aware_shm_mserver_s
    ngx_http_prefix_aware_shm_mserver_t;
typedef struct ngx_http_prefix_aware_engine_s
    ngx_http_prefix_aware_engine_t;
typedef struct ngx_http_prefix_aware_get_s
    ngx_http_prefix_aware_get_t;
typedef struct ngx_http_prefix_aware_sync_s
    ngx_http_prefix_aware_sync_t;
typedef struct ngx_http_prefix_aware_state_s
    ngx_http_prefix_aware_state_t;
typedef struct ngx_http_prefix_aware_queue_s
    ngx_http_prefix_aware_queue_t;
typedef struct ngx_http_prefix_aware_wait_s
    ngx_http_prefix_aware_wait_t;

/* prefix_aware_sync: the other hosts a host keeps the load of */
#define NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS      16

/*
 * the counters of the upstream's record (sync_count): "refused" counts
 * every datagram not taken, the five after "unknown" why, of those that
 * had the key (a datagram of another key is only "refused")
 */
enum {
    NGX_HTTP_PA_SYNC_SENT = 0,
    NGX_HTTP_PA_SYNC_SEND_ERRORS,
    NGX_HTTP_PA_SYNC_RECEIVED,
    NGX_HTTP_PA_SYNC_REFUSED,
    NGX_HTTP_PA_SYNC_RECORDS,
    NGX_HTTP_PA_SYNC_LOADS,
    NGX_HTTP_PA_SYNC_DROPPED,
    NGX_HTTP_PA_SYNC_UNKNOWN,
    NGX_HTTP_PA_SYNC_REPLAYED,
    NGX_HTTP_PA_SYNC_STALE,
    NGX_HTTP_PA_SYNC_FULL,
    NGX_HTTP_PA_SYNC_BUSY,
    NGX_HTTP_PA_SYNC_MALFORMED,
    NGX_HTTP_PA_SYNC_DRAINED,
    NGX_HTTP_PA_SYNC_N
};


struct ngx_http_prefix_aware_shm_server_s {
    ngx_atomic_t                           inflight;
    ngx_atomic_t                           work;      /* routing v2 */
    ngx_atomic_t                           requests;
    ngx_atomic_t                           route[PA_ROUTE_N];
    /* requests by strategy and route */
    ngx_atomic_t                           strategy[NGX_HTTP_PA_STRATEGIES]
                                                   [PA_ROUTE_N];
    ngx_uint_t                             refs;      /* configurations */
    ngx_http_prefix_aware_shm_server_t    *sibling;   /* same upstream */
    ngx_str_t                              name;

    /* what its engine reports (metrics=, capacity=auto): engine.c */
    ngx_atomic_t                           engine_capacity;  /* tokens */
    ngx_atomic_t                           engine_capacity_ms;
    ngx_atomic_t                           engine_reported;  /* msec */
    ngx_atomic_t                           engine_waiting;
    ngx_atomic_t                           engine_running;
    ngx_atomic_t                           engine_usage;     /* 1e-6 */
    ngx_atomic_t                           engine_seen;  /* PA_PROM_* */
    ngx_atomic_t                           engine_errors;
    ngx_atomic_t                           engine_rejected;
    ngx_atomic_t                           engine_failing;
    ngx_atomic_t                           engine_nocapacity;
    /* its own poll's schedule: the last poll's start, and the poll in */
    /* progress (its start, 0: none), whichever worker makes it */
    ngx_atomic_t                           engine_polled;
    ngx_atomic_t                           engine_polling;

    /* the other hosts' requests and work on it, in all, and by host */
    ngx_atomic_t                           sync_inflight;
    ngx_atomic_t                           sync_work;
    int32_t                    sync_host_inflight[
                                             NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS];
    int32_t                    sync_host_work[NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS];
};


struct ngx_http_prefix_aware_shm_upstream_s {
    ngx_atomic_t                           counter[NGX_HTTP_PA_UP_NCOUNTERS];
    ngx_atomic_t                           hist[NGX_HTTP_PREFIX_AWARE_HIST];
    ngx_atomic_t                           placed[PA_CHOICE_LEAST + 1];
    ngx_atomic_t                           depth[NGX_HTTP_PREFIX_AWARE_DEPTHS];
    /* by strategy: in flight on the chosen server when it was chosen */
    ngx_atomic_t                           chosen_inflight
                                               [NGX_HTTP_PA_STRATEGIES];
    ngx_atomic_t                           strategy_unknown;
    /* metrics=: the polls made (each server's schedule is its own) */
    ngx_atomic_t                           engine_polls;
    /*
     * prefix_aware_sync: this host's id and its datagrams' sequence; the
     * hosts heard, under sync_lock (sync_hosts.c): each one's replay
     * window and, while "live", when its load was last heard
     */
    ngx_atomic_t                           sync_id;
    ngx_atomic_t                           sync_seq;
    ngx_atomic_t                           sync_lock;
    ngx_atomic_t                           sync_lock_pid;
    ngx_atomic_t                           sync_lock_seen;
    ngx_atomic_t                           sync_lock_since;
    ngx_atomic_t                           sync_ticked;
    ngx_atomic_t                           sync_count[NGX_HTTP_PA_SYNC_N];
    /* by why refused (PA_SYNC_E*): when last logged, refused since */
    ngx_atomic_t                           sync_logged[PA_SYNC_NERRORS];
    ngx_atomic_t                           sync_unlogged[PA_SYNC_NERRORS];
    pa_sync_peer_t             sync_peer[NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS];
    ngx_msec_t                 sync_heard[NGX_HTTP_PREFIX_AWARE_SYNC_HOSTS];
    ngx_uint_t                             refs;      /* configurations */
    ngx_http_prefix_aware_shm_server_t    *servers;
    ngx_http_prefix_aware_shm_upstream_t  *next;
    ngx_str_t                              name;
};


/*
 * a configuration (generation) loaded by the master: the records it uses,
 * its upstreams first, then the servers of all its upstreams in order;
 * it lives while it is the master's, or a worker that runs it is alive
 */

struct ngx_http_prefix_aware_shm_conf_s {
    ngx_uint_t                             id;        /* never reused */
    ngx_uint_t                             generation;
    ngx_uint_t                             nupstreams;
    ngx_uint_t                             nservers;
    ngx_uint_t                             pinned;    /* never freed */
    ngx_http_prefix_aware_shm_conf_t      *next;
    ngx_http_prefix_aware_shm_upstream_t **upstream;
    ngx_http_prefix_aware_shm_server_t   **server;
};


/*
 * a worker process and its in-flight counts, by the server's place in its
 * configuration, given back when it exits or is found dead
 */

struct ngx_http_prefix_aware_shm_worker_s {
    ngx_pid_t                              pid;
    ngx_uint_t                             nservers;
    ngx_http_prefix_aware_shm_conf_t      *conf;
    ngx_http_prefix_aware_shm_worker_t    *next;
    ngx_atomic_t                          *count;
    ngx_atomic_t                          *work;
    /* its counts of servers found by resolving names, by its views */
    ngx_http_prefix_aware_shm_block_t     *blocks;
};


/*
 * a worker's counts of the servers of one view of an upstream with
 * "resolve" (src/ngx_http_prefix_aware_resolve.c): the view in use
 * ("current") holds a reference to each record; an older view's block
 * lives until its counts are 0
 */

struct ngx_http_prefix_aware_shm_block_s {
    ngx_http_prefix_aware_shm_block_t     *next;
    ngx_uint_t                             nservers;
    ngx_uint_t                             current;
    ngx_http_prefix_aware_shm_server_t   **server;
    ngx_atomic_t                          *count;
    ngx_atomic_t                          *work;
};


typedef struct {
    ngx_http_prefix_aware_shm_upstream_t  *upstreams;
    ngx_http_prefix_aware_shm_conf_t      *confs;
    ngx_http_prefix_aware_shm_worker_t    *workers;

    /* the last generation made, and the one the master runs */
    ngx_uint_t                             generation;
    ngx_uint_t                             current;
    ngx_uint_t                             ids;

    /* the reaper of one worker a period does the work for all */
    ngx_atomic_t                           reaped;

    /* records, for the status page */
    ngx_uint_t                             nupstreams;
    ngx_uint_t                             nservers;
    ngx_uint_t                             nconfs;
    ngx_uint_t                             nworkers;
} ngx_http_prefix_aware_shm_t;


typedef struct {
    ngx_uint_t                             length;
    ngx_uint_t                             threshold;
    ngx_uint_t                             format;

    /* strategy=: the strategy, or the default of a variable's value */
    ngx_uint_t                             strategy;
    ngx_uint_t                             strategy_var;  /* index + 1 */
    ngx_uint_t                             strategy_default; /* given */
    ngx_str_t                              strategy_name; /* as given */

    ngx_uint_t                             nservers;
    pa_ring_t                              ring;
    uint32_t                              *weights;
    /* per process: smooth weighted round robin among least-loaded ties */
    int64_t                               *current;
    ngx_str_t                             *names;

    /* per process: the peers by ring index, where the zone put them */
    ngx_http_upstream_rr_peer_t          **peer;

    ngx_http_prefix_aware_shm_upstream_t  *shm;
    ngx_http_prefix_aware_shm_server_t   **shm_server;

    /* this worker's counts of the servers, in its zone record */
    ngx_atomic_t                          *counts;
    ngx_atomic_t                          *works;

    /* the place of the first server in the configuration's record */
    ngx_uint_t                             base;

    ngx_http_upstream_srv_conf_t          *upstream;

    /* per process: the view of an upstream with "resolve", or NULL */
    void                                  *resolve;

    /* routing v2, index=: 0 is off */
    size_t                                 index_size;
    ngx_uint_t                             index_auto;  /* index=auto */
    ngx_uint_t                             length_set;  /* length= given */
    ngx_uint_t                             block;
    ngx_uint_t                             stride;    /* past the head */
    ngx_uint_t                             head;      /* blocks all kept */
    ngx_uint_t                             max_blocks;
    ngx_uint_t                             balance;   /* F x 100, 0: off */
    ngx_uint_t                             capacity;  /* tokens a server */
    pa_cold_e                              cold;
    pa_place_e                             place;
    ngx_uint_t                             overload;  /* 1: holder */
    ngx_uint_t                             match;     /* percent */
    ngx_uint_t                             prefill_end;  /* prefill=end */
    pa_cap_e                               cap;       /* cap= */
    ngx_uint_t                             feedback;  /* feedback=on */
    ngx_shm_zone_t                        *index_zone;
    pa_index_t                             index;

    /* each server's id in the index and the hash of its name */
    uint32_t                              *id;
    uint64_t                              *id_hash;

    /* per process: index id to ring index + 1, and scratch of a choice */
    uint32_t                              *ring_of;
    uint32_t                              *depth_id;
    uint32_t                              *found_id;
    uint32_t                              *depth;
    uint32_t                              *found;

    /* models and adapters: declared and discovered sets, NULL: none */
    ngx_http_prefix_aware_models_t        *models;

    /* what the engines report: metrics=, capacity=auto; NULL: off */
    ngx_uint_t                             capacity_auto;
    ngx_uint_t                             metrics;
    ngx_str_t                              metrics_uri;
    ngx_msec_t                             metrics_interval;
    ngx_uint_t                             engine_load;   /* load=engine */
    ngx_http_prefix_aware_engine_t        *engine;

    /* prefix_aware_sync, or NULL; load= 0 off, 1 work, 2 on (requests) */
    ngx_http_prefix_aware_sync_t          *sync;
    ngx_uint_t                             sync_load;

    /* responses=: the stored responses' places, 0 off; its zone (state.c) */
    ngx_uint_t                             responses;
    ngx_http_prefix_aware_state_t         *state;
    /* queue=: requests wait while every server is full; NULL: off */
    ngx_http_prefix_aware_queue_t         *queue;
} ngx_http_prefix_aware_srv_conf_t;


typedef struct {
    ngx_array_t                            upstreams;
    ngx_uint_t                             nservers;
    ngx_shm_zone_t                        *shm_zone;
    ngx_http_prefix_aware_shm_t           *sh;

    /* this configuration's record, and this process's, in the zone */
    ngx_http_prefix_aware_shm_conf_t      *conf;
    ngx_http_prefix_aware_shm_worker_t    *worker;
    ngx_uint_t                             conf_id;
    ngx_uint_t                             generation;
    unsigned                               attached:1;
} ngx_http_prefix_aware_main_conf_t;


typedef struct {
    /* the round robin data must be first */
    ngx_http_upstream_rr_peer_data_t       rrp;

    ngx_http_prefix_aware_srv_conf_t      *conf;
    ngx_http_prefix_aware_shm_server_t    *held;
    ngx_atomic_t                          *count;
    ngx_atomic_t                          *wcount;
    u_char                                *seen;
    uint64_t                               hash;
    time_t                                 now;
    ngx_uint_t                             tries;
    pa_route_e                             route;

    /* routing v2: the block keys, and the work counted on the server */
    uint64_t                              *blocks;
    uint64_t                               ring_key;
    uint64_t                               units;
    uint64_t                               total_units;
    uint64_t                               cost;
    uint64_t                               decode;    /* of the cost */
    uint64_t                               prefill;   /* counted until */
                                                      /* the first byte */
    uint32_t                               nblocks;
    uint32_t                               depth;
    pa_choice_e                            choice;

    /*
     * stored responses (state.c): the id a request names (its hash) and
     * its server's (the hash of its name), taken at the first try; an
     * answer to POST /v1/responses read for its id, and its server
     */
    uint64_t                               state_id;
    uint64_t                               state_server;
    uint64_t                               learn_server;
    pa_respid_t                           *respid;

    /* feedback=on: the engine's answer, read for its cached_tokens */
    pa_usage_t                             usage;
    int64_t                                age;       /* of the depth */
    uint32_t                               fb_id;     /* index id */

    /* queue=: the tenant's hash (0: none), its wait in the queue */
    uint64_t                               flow;
    ngx_http_prefix_aware_wait_t          *wait;

    /* "resolve": the view the scratch above is for, its room, its pool */
    ngx_uint_t                             view;
    ngx_uint_t                             room;
    ngx_pool_t                            *pool;

    /* the request's model: the servers it may go to (NULL: all) */
    uintptr_t                             *set;
    ngx_http_prefix_aware_shm_model_t     *model;
    ngx_str_t                              model_name;
    uint64_t                               model_hash;
    unsigned                               has_model:1;

    unsigned                               source:2;
    unsigned                               api:3;     /* pa_oai_api_e */
    unsigned                               no_record:1;
    unsigned                               strategy:2;
    unsigned                               keyed:1;
    unsigned                               id:1;
    unsigned                               feedback:1;
    unsigned                               learn:1;
} ngx_http_prefix_aware_peer_data_t;


/*
 * a round of GETs, one to each of "n" servers, every "interval", by
 * whichever worker's timer fires first (a compare-and-swap of the round's
 * time in a zone, "polled"); "poll" starts server j's GET with
 * ngx_http_prefix_aware_get(), its struct from the round's pool and put in
 * gets[j], and calls ngx_http_prefix_aware_round_done() when it ends.
 * A round waits for its slowest server: metrics= makes a round of each
 * server, with "busy" (its poll in progress, in the zone: no other worker
 * starts one until it ends, or until "timeout" and an interval have
 * passed, its worker having died); models=discover one of all, "busy"
 * NULL
 */
typedef struct ngx_http_prefix_aware_round_s
    ngx_http_prefix_aware_round_t;

typedef void (*ngx_http_prefix_aware_round_pt)(
    ngx_http_prefix_aware_round_t *rd, ngx_uint_t server);

struct ngx_http_prefix_aware_round_s {
    const char                            *name;      /* for the log */
    ngx_msec_t                             interval;
    ngx_msec_t                             timeout;   /* with "busy" */
    ngx_atomic_t                          *polled;
    ngx_atomic_t                          *busy;
    ngx_uint_t                             n;
    ngx_http_prefix_aware_round_pt         poll;
    void                                  *data;

    /* per process: the timer, and the pool and GETs of a round */
    ngx_event_t                            timer;
    ngx_pool_t                            *pool;
    ngx_http_prefix_aware_get_t          **gets;
    ngx_uint_t                             pending;
    ngx_msec_t                             started;   /* put in "busy" */
};


/* models and adapters: ngx_http_prefix_aware_models{,_status}.c, _discover.c */

/* models (declared and discovered) an upstream's zone keeps */
#define NGX_HTTP_PREFIX_AWARE_MAX_MODELS    128

#define NGX_HTTP_PREFIX_AWARE_MODELS_WORDS                                    \
    (NGX_HTTP_PREFIX_AWARE_MAX_MODELS / 64)

#define ngx_http_prefix_aware_bit(set, i)                                     \
    ((set)[(i) / (8 * sizeof(uintptr_t))]                                     \
     & ((uintptr_t) 1 << ((i) % (8 * sizeof(uintptr_t)))))

#define ngx_http_prefix_aware_set_bit(set, i)                                 \
    (set)[(i) / (8 * sizeof(uintptr_t))]                                      \
        |= (uintptr_t) 1 << ((i) % (8 * sizeof(uintptr_t)))


/* a model's record in the zone: its name and counters */
struct ngx_http_prefix_aware_shm_model_s {
    uint64_t                               hash;      /* 0: free */
    ngx_atomic_t                           requests;
    ngx_atomic_t                           noserver;
    time_t                                 seen;      /* last listed */
    ngx_uint_t                             declared;
    size_t                                 len;
    u_char                                 name[PA_MODELS_ID_MAX];
};


/* a server's answers, by its name in the upstream */
struct ngx_http_prefix_aware_shm_mserver_s {
    ngx_http_prefix_aware_shm_mserver_t   *next;
    time_t                                 answered;  /* 0: never */
    ngx_msec_t                             answered_ms;
    ngx_uint_t                             failing;
    ngx_uint_t                             wild;      /* serves all */
    ngx_uint_t                             nmodels;
    ngx_uint_t                             refused;   /* of its last list */
    ngx_msec_t                             warned;    /* refusals logged */
    ngx_uint_t                             warning;   /* until all kept */
    uint64_t                     listed[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];

    /* the slots of "listed" it holds against the others: its share */
    uint64_t                     own[NGX_HTTP_PREFIX_AWARE_MODELS_WORDS];
    ngx_str_t                              name;

    /* the generations of the configurations that had the name */
    ngx_uint_t                             gen_min;
    ngx_uint_t                             gen_max;
};


typedef struct {
    ngx_atomic_t                           version;   /* of the sets */
    ngx_atomic_t                           polled;    /* the round's lock */
    ngx_atomic_t                           full;
    ngx_atomic_t                           unknown;
    ngx_uint_t                             freed;     /* records, ever */
    ngx_http_prefix_aware_shm_mserver_t   *servers;
    ngx_http_prefix_aware_shm_model_t      model[
                                         NGX_HTTP_PREFIX_AWARE_MAX_MODELS];
} ngx_http_prefix_aware_models_shm_t;


typedef struct {
    ngx_str_t                              name;
    uint64_t                               hash;
    uintptr_t                             *set;
    ngx_http_prefix_aware_shm_model_t     *slot;
    ngx_array_t                           *servers;   /* ngx_str_t */
} ngx_http_prefix_aware_model_t;


struct ngx_http_prefix_aware_models_s {
    ngx_array_t                            declared;
    ngx_str_t                              header;
    ngx_msec_t                             interval;
    ngx_uint_t                             discover;
    ngx_uint_t                             fallback;
    ngx_uint_t                             share;     /* slots a server */
    ngx_uint_t                             words;     /* of a set */
    ngx_http_prefix_aware_srv_conf_t      *pacf;
    ngx_shm_zone_t                        *zone;
    ngx_http_prefix_aware_models_shm_t    *sh;

    /* the configuration's generation in the main zone (at its commit) */
    ngx_uint_t                             generation;

    /* per process: the discovered sets by slot, as of "version"; the */
    /* server records found, valid while the zone's "freed" is "freed" */
    ngx_atomic_uint_t                      version;
    ngx_uint_t                             freed;
    ngx_uint_t                             built;
    uint64_t                              *hash;
    uintptr_t                             *sets;
    u_char                                *known;
    ngx_http_prefix_aware_shm_mserver_t  **rec;

    /* per process: the poller */
    ngx_http_prefix_aware_round_t          round;
};


/* queue=: ngx_http_prefix_aware_queue{,_status}.c */

#define NGX_HTTP_PREFIX_AWARE_WAITING      1
#define NGX_HTTP_PREFIX_AWARE_RELEASED     2
#define NGX_HTTP_PREFIX_AWARE_WAITED       3


struct ngx_http_prefix_aware_queue_s {
    ngx_uint_t                             size;      /* queue=, 0: off */
    ngx_uint_t                             nwords;    /* of a place's set */
    ngx_uint_t                             off;
    ngx_msec_t                             timeout;
    ngx_msec_t                             poll;
    ngx_uint_t                             status;
    ngx_uint_t                             retry;     /* s */
    ngx_uint_t                             reserve;   /* places a server */
    ngx_uint_t                             high;      /* priority_reserve= */
    ngx_int_t                              priority;  /* index, -1 */
    ngx_str_t                              priority_name;
    ngx_int_t                              flow;      /* index, -1 */
    ngx_str_t                              flow_name;

    ngx_http_prefix_aware_srv_conf_t      *pacf;
    ngx_shm_zone_t                        *zone;
    ngx_slab_pool_t                       *shpool;
    pa_queue_t                             q;

    /* per process: its requests that wait, by place; the look's timer */
    ngx_queue_t                            waiters;
    ngx_uint_t                             nwaiters;
    ngx_http_prefix_aware_wait_t         **of;
    uintptr_t                             *tried;
    uint32_t                              *room;      /* by server */
    ngx_uint_t                             cap;       /* of both */
    ngx_event_t                            look;
    ngx_uint_t                             started;
};


struct ngx_http_prefix_aware_wait_s {
    ngx_http_request_t                    *r;
    ngx_http_prefix_aware_queue_t         *qu;
    ngx_queue_t                            queue;
    ngx_event_t                            timer;
    uint64_t                               seq;
    uint32_t                               slot;
    int32_t                                priority;
    ngx_msec_t                             since;
    ngx_msec_t                             waited;
    ngx_uint_t                             state;
};


/* one GET of a server's page: ngx_http_prefix_aware_get.c */

/* the read buffer, and the most of an answer's head kept */
#define NGX_HTTP_PREFIX_AWARE_GET_BUF       4096
#define NGX_HTTP_PREFIX_AWARE_GET_HEAD      4096

/* is given the body as it arrives; NGX_ERROR ends the GET */
typedef ngx_int_t (*ngx_http_prefix_aware_get_body_pt)(
    ngx_http_prefix_aware_get_t *g, u_char *p, size_t n);

/* the end, once: NULL, or why it failed */
typedef void (*ngx_http_prefix_aware_get_done_pt)(
    ngx_http_prefix_aware_get_t *g, const char *error);

struct ngx_http_prefix_aware_get_s {
    /* set by the caller */
    ngx_str_t                              uri;
    size_t                                 limit;     /* of the body */
    const char                            *over;      /* its error */
    ngx_msec_t                             timeout;
    ngx_http_prefix_aware_get_body_pt      body;
    ngx_http_prefix_aware_get_done_pt      done;
    void                                  *data;

    ngx_log_t                             *log;
    ngx_peer_connection_t                  pc;
    ngx_buf_t                             *request;
    u_char                                *buf;
    size_t                                 received;
    off_t                                  length;    /* -1: not given */
    size_t                                 hlen;
    unsigned                               in_body:1;
    unsigned                               ended:1;
    u_char                                 head[
                                             NGX_HTTP_PREFIX_AWARE_GET_HEAD];
};


/* prefix_aware_sync: ngx_http_prefix_aware_sync{,_hosts}.c */

/* datagrams a worker queues between two turns of its event loop */
#define NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE     32

/* load=: what the other hosts' counts go into */
#define NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_OFF  0
#define NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_WORK 1
#define NGX_HTTP_PREFIX_AWARE_SYNC_LOAD_ALL  2


typedef struct {
    ngx_addr_t                          addr;
    ngx_socket_t                        fd;       /* per process */
} ngx_http_prefix_aware_sync_peer_t;


/* a datagram to a peer, as sendmmsg() takes it (config: the check) */
#if (NGX_HTTP_PREFIX_AWARE_HAVE_SENDMMSG)
typedef struct mmsghdr  ngx_http_prefix_aware_sync_msg_t;
#else
typedef struct {
    struct msghdr                       msg_hdr;
} ngx_http_prefix_aware_sync_msg_t;
#endif


struct ngx_http_prefix_aware_sync_s {
    ngx_http_prefix_aware_srv_conf_t      *pacf;
    ngx_addr_t                             listen;
    ngx_array_t                            peers;
    pa_sync_key_t                          key;
    uint64_t                               upstream;
    ngx_msec_t                             interval;
    ngx_msec_t                             skew;
    ngx_uint_t                             load;
    /* per process: servers by the hash of their name, sorted */
    uint64_t                              *by_hash;
    ngx_uint_t                            *by_server;
    /* per process: the datagrams queued, and the one being written */
    ngx_event_t                            flush;
    ngx_event_t                            tick;
    u_char                                *queue;
    size_t                       qlen[NGX_HTTP_PREFIX_AWARE_SYNC_QUEUE];
    ngx_uint_t                             nqueued;
    pa_sync_dgram_t                        cur;
    /* rcvbuf= (-1: the system's); per process: the listening socket,
     * the sockets sent from (IPv4, IPv6), the messages of a flush, the
     * send errors not yet logged (sync.c) */
    int                                    rcvbuf;
    ngx_socket_t                           listen_fd;
    ngx_socket_t                           send_fd[2];
    void                                  *msgs;
    struct iovec                          *iov;
    ngx_uint_t                             send_failed;
    ngx_err_t                              send_err;
    ngx_str_t                             *send_peer;
    ngx_msec_t                             send_logged;
};


/* a server's name and its index, sorted to find equal names */
typedef struct {
    ngx_str_t                             *name;
    ngx_uint_t                             index;
} ngx_http_prefix_aware_name_t;


typedef struct {
    const char                            *name;
    const char                            *help;
    ngx_uint_t                             counter;
} ngx_http_prefix_aware_metric_t;


/*
 * the status page's output, a chain of buffers that grows (status.c); like
 * njs's chain buffer (njs_chb_t): a failed allocation is remembered and
 * later writes do nothing, so the page is checked once, at its end
 */
typedef struct {
    size_t                                 size;
    ngx_pool_t                            *pool;
    ngx_chain_t                           *out;
    ngx_chain_t                           *last;
    ngx_uint_t                             error;
} ngx_http_prefix_aware_writer_t;


/* a Prometheus family: name (after "nginx_prefix_aware_"), type, help */
typedef struct {
    const char                            *name;
    const char                            *type;
    const char                            *help;
} ngx_http_prefix_aware_family_t;


typedef struct {
    size_t                                 size;
    ngx_uint_t                             pages;
    ngx_uint_t                             free;
    ngx_uint_t                             upstreams;
    ngx_uint_t                             servers;
    ngx_uint_t                             confs;
    ngx_uint_t                             workers;
} ngx_http_prefix_aware_zone_usage_t;


/* ngx_http_prefix_aware_key.c */
ngx_int_t ngx_http_prefix_aware_key(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_str_t *reason);

/* ngx_http_prefix_aware_request.c */
ngx_int_t ngx_http_prefix_aware_reject(ngx_http_request_t *r,
    ngx_str_t *reason);
ngx_int_t ngx_http_prefix_aware_answer(ngx_http_request_t *r,
    ngx_uint_t status, ngx_str_t *reason);
ngx_table_elt_t *ngx_http_prefix_aware_header(ngx_http_request_t *r,
    ngx_str_t *name, ngx_uint_t *n);

/* ngx_http_prefix_aware_index.c */
ngx_int_t ngx_http_prefix_aware_index_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value);
ngx_int_t ngx_http_prefix_aware_index_add(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf);
ngx_int_t ngx_http_prefix_aware_index_length(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value);
void ngx_http_prefix_aware_index_off(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, char *why);
ngx_int_t ngx_http_prefix_aware_index_choose(
    ngx_http_prefix_aware_peer_data_t *pd, pa_pick_t *pick);
void ngx_http_prefix_aware_index_record(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server);

void ngx_http_prefix_aware_index_capacity(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t server,
    uint64_t tokens);
uint64_t ngx_http_prefix_aware_index_capacity_of(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t server);

/* ngx_http_prefix_aware_writer.c */
ngx_int_t ngx_http_prefix_aware_writer_init(ngx_http_prefix_aware_writer_t *w,
    ngx_pool_t *pool);
void ngx_http_prefix_aware_printf(ngx_http_prefix_aware_writer_t *w,
    const char *fmt, ...);
void ngx_http_prefix_aware_escape(ngx_http_prefix_aware_writer_t *w,
    ngx_str_t *dst, ngx_str_t *src, ngx_uint_t json);
void ngx_http_prefix_aware_family(ngx_http_prefix_aware_writer_t *w,
    const char *name, const char *type, const char *help);

/* ngx_http_prefix_aware_status_html.c */
ngx_int_t ngx_http_prefix_aware_status_html(ngx_http_request_t *r);

/* ngx_http_prefix_aware_feedback.c */
void ngx_http_prefix_aware_feedback_first_byte(
    ngx_http_prefix_aware_peer_data_t *pd, ngx_chain_t *in);
void ngx_http_prefix_aware_feedback_start(
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t server, int64_t age);
void ngx_http_prefix_aware_feedback_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_chain_t *in);
void ngx_http_prefix_aware_feedback_json_server(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t j,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_feedback_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w);

/* ngx_http_prefix_aware_state.c */
ngx_int_t ngx_http_prefix_aware_state_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value);
ngx_int_t ngx_http_prefix_aware_state_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf);
void ngx_http_prefix_aware_state_start(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd);
void ngx_http_prefix_aware_state_lookup(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t last);
ngx_int_t ngx_http_prefix_aware_state_find(
    ngx_http_prefix_aware_peer_data_t *pd, pa_pick_t *pick);
void ngx_http_prefix_aware_state_taken(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server, ngx_uint_t routed);
uint64_t ngx_http_prefix_aware_state_body(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd, ngx_chain_t *in);
void ngx_http_prefix_aware_state_put(ngx_http_prefix_aware_srv_conf_t *pacf,
    uint64_t id, uint64_t server, ngx_uint_t synced);
void ngx_http_prefix_aware_state_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_state_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w);

/* ngx_http_prefix_aware_get.c */
void ngx_http_prefix_aware_get(ngx_http_prefix_aware_get_t *g,
    ngx_pool_t *pool, ngx_http_upstream_rr_peer_t *peer, ngx_log_t *log);
void ngx_http_prefix_aware_get_close(ngx_http_prefix_aware_get_t *g);
void ngx_http_prefix_aware_round_start(ngx_http_prefix_aware_round_t *rd,
    ngx_log_t *log);
void ngx_http_prefix_aware_round_stop(ngx_http_prefix_aware_round_t *rd);
void ngx_http_prefix_aware_round_done(ngx_http_prefix_aware_round_t *rd);

/* ngx_http_prefix_aware_engine.c */
ngx_int_t ngx_http_prefix_aware_engine_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value);
ngx_int_t ngx_http_prefix_aware_engine_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf);
void ngx_http_prefix_aware_engine_start(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf);
void ngx_http_prefix_aware_engine_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_engine_json_server(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t j,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_engine_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w);

/* ngx_http_prefix_aware_sync.c */
char *ngx_http_prefix_aware_sync(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_prefix_aware_sync_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf);
void ngx_http_prefix_aware_sync_start(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf);
/* ngx_http_prefix_aware_sync_send.c */
void ngx_http_prefix_aware_sync_record(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_uint_t server, uint64_t *blocks, uint32_t n, uint32_t cached,
    uint32_t size);
void ngx_http_prefix_aware_sync_state(ngx_http_prefix_aware_srv_conf_t *pacf,
    uint64_t server, uint64_t id);
void ngx_http_prefix_aware_sync_flush(ngx_event_t *ev);
void ngx_http_prefix_aware_sync_tick(ngx_event_t *ev);
void ngx_http_prefix_aware_sync_json_socket(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_sync_prometheus_socket(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w);
/* ngx_http_prefix_aware_sync_hosts.c */
void ngx_http_prefix_aware_sync_servers(ngx_http_prefix_aware_sync_t *sy);
uint64_t ngx_http_prefix_aware_sync_wall(void);
void ngx_http_prefix_aware_sync_receive(ngx_connection_t *c);
void ngx_http_prefix_aware_sync_unknown(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd);
void ngx_http_prefix_aware_sync_quiet(ngx_http_prefix_aware_sync_t *sy);
void ngx_http_prefix_aware_sync_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_sync_json_server(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_uint_t j,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_sync_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w);

/* ngx_http_prefix_aware_models.c */
char *ngx_http_prefix_aware_model(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_prefix_aware_models_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value);
ngx_int_t ngx_http_prefix_aware_models_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf);
ngx_int_t ngx_http_prefix_aware_models_route(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd);
void ngx_http_prefix_aware_models_build(ngx_http_prefix_aware_models_t *m);

/* ngx_http_prefix_aware_models_zone.c */
ngx_int_t ngx_http_prefix_aware_models_zone(ngx_conf_t *cf,
    ngx_http_prefix_aware_models_t *m);
ngx_int_t ngx_http_prefix_aware_models_find(
    ngx_http_prefix_aware_models_shm_t *sh, uint64_t hash);
ngx_int_t ngx_http_prefix_aware_models_slot(
    ngx_http_prefix_aware_models_shm_t *sh, uint64_t hash, u_char *name,
    size_t len, uint64_t *listed, uint64_t *kept, ngx_uint_t evict);
void ngx_http_prefix_aware_models_take(ngx_http_prefix_aware_models_shm_t *sh,
    ngx_uint_t k, uint64_t hash, u_char *name, size_t len);
ngx_http_prefix_aware_shm_mserver_t *ngx_http_prefix_aware_models_record(
    ngx_http_prefix_aware_models_t *m, ngx_str_t *name);
void ngx_http_prefix_aware_models_commit(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_uint_t *live,
    ngx_uint_t nlive);

/* ngx_http_prefix_aware_conf.c */
char *ngx_http_prefix_aware_number(ngx_conf_t *cf, ngx_str_t *value,
    size_t skip, ngx_uint_t min, ngx_uint_t max, ngx_uint_t *n);
ngx_int_t ngx_http_prefix_aware_time(ngx_conf_t *cf, ngx_str_t *value,
    size_t skip, const char *directive, ngx_msec_t min, const char *from,
    ngx_msec_t max, const char *to, ngx_msec_t *t);
ngx_shm_zone_t *ngx_http_prefix_aware_upstream_zone(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *prefix, size_t size);

/* ngx_http_prefix_aware_discover.c */
void ngx_http_prefix_aware_models_start(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf);
void ngx_http_prefix_aware_models_stop(void *data);

/* ngx_http_prefix_aware_models_status.c */
void ngx_http_prefix_aware_models_json(ngx_http_prefix_aware_srv_conf_t *c,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_models_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_writer_t *w, ngx_str_t **label);


/* ngx_http_prefix_aware_peer.c */
int ngx_http_prefix_aware_probe(void *ctx, uint32_t server,
    uint64_t *inflight);
ngx_int_t ngx_http_prefix_aware_reserve(ngx_http_prefix_aware_shm_server_t *s,
    ngx_uint_t threshold);
uint64_t ngx_http_prefix_aware_work(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_uint_t server, uint64_t unit);
void ngx_http_prefix_aware_work_add(ngx_http_prefix_aware_peer_data_t *pd,
    ngx_uint_t server);
void ngx_http_prefix_aware_work_uncached(
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t server);

/* filter.c: the answers as they pass */
void ngx_http_prefix_aware_filter_init(void);

/* ngx_http_prefix_aware_zone.c */
ngx_int_t ngx_http_prefix_aware_zone_add(ngx_conf_t *cf,
    ngx_http_prefix_aware_main_conf_t *pamcf);
ngx_int_t ngx_http_prefix_aware_attach(ngx_cycle_t *cycle,
    ngx_http_prefix_aware_main_conf_t *pamcf);
ngx_int_t ngx_http_prefix_aware_init_module(ngx_cycle_t *cycle);
ngx_int_t ngx_http_prefix_aware_init_process(ngx_cycle_t *cycle);
void ngx_http_prefix_aware_exit_process(ngx_cycle_t *cycle);
void ngx_http_prefix_aware_zone_usage(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_http_prefix_aware_zone_usage_t *usage);

/* ngx_http_prefix_aware_resolve.c */
ngx_int_t ngx_http_prefix_aware_resolve_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf);
ngx_int_t ngx_http_prefix_aware_resolve_peer(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd);
ngx_int_t ngx_http_prefix_aware_resolve_current(
    ngx_http_prefix_aware_peer_data_t *pd, ngx_log_t *log);
void ngx_http_prefix_aware_resolve_update(
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_log_t *log);
ngx_uint_t ngx_http_prefix_aware_resolve_stale(
    ngx_http_prefix_aware_srv_conf_t *pacf);
void ngx_http_prefix_aware_resolve_refresh(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_log_t *log);

/* ngx_http_prefix_aware_resolve_zone.c */
size_t ngx_http_prefix_aware_resolve_size(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_uint_t workers);
void ngx_http_prefix_aware_resolve_drain(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_worker_t *w);
void ngx_http_prefix_aware_resolve_reap(ngx_slab_pool_t *shpool,
    ngx_http_prefix_aware_shm_worker_t *w);
ngx_uint_t ngx_http_prefix_aware_resolve_busy(
    ngx_http_prefix_aware_shm_worker_t *w);

/* ngx_http_prefix_aware_queue.c */
ngx_int_t ngx_http_prefix_aware_queue_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value);
ngx_int_t ngx_http_prefix_aware_queue_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf);
ngx_int_t ngx_http_prefix_aware_queue_enter(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd);
ngx_int_t ngx_http_prefix_aware_queue_resume(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd);
void ngx_http_prefix_aware_queue_kick(ngx_http_prefix_aware_srv_conf_t *pacf);
void ngx_http_prefix_aware_queue_reap(ngx_http_prefix_aware_main_conf_t *pamcf,
    ngx_log_t *log);

/* ngx_http_prefix_aware_queue_room.c */
ngx_int_t ngx_http_prefix_aware_queue_scratch(
    ngx_http_prefix_aware_queue_t *qu);
void ngx_http_prefix_aware_queue_fill(ngx_http_prefix_aware_peer_data_t *pd,
    uint32_t *room);
void ngx_http_prefix_aware_queue_mask(ngx_http_prefix_aware_peer_data_t *pd,
    uint32_t slot);
ngx_int_t ngx_http_prefix_aware_queue_room(
    ngx_http_prefix_aware_peer_data_t *pd, ngx_uint_t first,
    ngx_uint_t limit);
uint64_t ngx_http_prefix_aware_queue_uncached(
    ngx_http_prefix_aware_peer_data_t *pd);
ngx_uint_t ngx_http_prefix_aware_queue_match(
    ngx_http_prefix_aware_peer_data_t *pd);
ngx_msec_t ngx_http_prefix_aware_queue_waited(
    ngx_http_prefix_aware_peer_data_t *pd);
uint64_t ngx_http_prefix_aware_queue_flow(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd);
void ngx_http_prefix_aware_queue_json(ngx_http_prefix_aware_srv_conf_t *pacf,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_queue_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w);

/* ngx_http_prefix_aware_ring.c */
ngx_int_t ngx_http_prefix_aware_ring_init(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_http_upstream_srv_conf_t *us);

/* ngx_http_prefix_aware_status.c */
ngx_int_t ngx_http_prefix_aware_status_handler(ngx_http_request_t *r);
char *ngx_http_prefix_aware_status(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* ngx_http_prefix_aware_strategy.c */
ngx_int_t ngx_http_prefix_aware_strategy_param(ngx_conf_t *cf,
    ngx_http_prefix_aware_srv_conf_t *pacf, ngx_str_t *value);
void ngx_http_prefix_aware_strategy_init(ngx_http_request_t *r,
    ngx_http_prefix_aware_peer_data_t *pd);
ngx_int_t ngx_http_prefix_aware_strategy_pick(
    ngx_http_prefix_aware_peer_data_t *pd, pa_pick_t *pick);
void ngx_http_prefix_aware_strategy_count(
    ngx_http_prefix_aware_peer_data_t *pd, pa_pick_t *pick);
void ngx_http_prefix_aware_strategy_prometheus(
    ngx_http_prefix_aware_main_conf_t *pamcf, ngx_str_t **label,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_strategy_json(ngx_http_prefix_aware_srv_conf_t *c,
    ngx_http_prefix_aware_writer_t *w);
void ngx_http_prefix_aware_strategy_json_server(
    ngx_http_prefix_aware_srv_conf_t *c, ngx_uint_t j,
    ngx_http_prefix_aware_writer_t *w);

/* ngx_http_prefix_aware_variables.c */
ngx_int_t ngx_http_prefix_aware_add_variables(ngx_conf_t *cf);


/* key-source names, indexed by NGX_HTTP_PREFIX_AWARE_SOURCE_* */
extern ngx_str_t     ngx_http_prefix_aware_sources[];
/* API names, indexed by pa_oai_api_e */
extern ngx_str_t     ngx_http_prefix_aware_apis[];

/* strategy names, indexed by NGX_HTTP_PA_STRATEGY_* */
extern ngx_str_t     ngx_http_prefix_aware_strategies[];

extern ngx_module_t  ngx_http_prefix_aware_module;


#endif /* _NGX_HTTP_PREFIX_AWARE_H_INCLUDED_ */
