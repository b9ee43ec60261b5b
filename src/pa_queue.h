
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The order of the requests that wait for a server (queue=): a table of
 * places in shared memory that every worker reads, so that the order
 * holds for the whole host.  Strict priority first (higher first), then
 * fairness between flows (tenants) inside a priority by work: start-time
 * fair queuing (Goyal, Vin and Cheng, 1996), each request's start tag
 * the later of its band's virtual time and its flow's last finish tag,
 * its finish tag the start plus its cost (the prefill the module counts);
 * then the order of arrival.  Plain C, no nginx headers: the caller holds
 * the lock of the memory.
 */


#ifndef _PA_QUEUE_H_INCLUDED_
#define _PA_QUEUE_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


/* priorities counted apart on the status page; the others in one row */
#define PA_QUEUE_BANDS        8

/* priorities a variable may give: outside, the default (0) */
#define PA_QUEUE_PRIO_MIN     (-1000)
#define PA_QUEUE_PRIO_MAX     1000

/* 64-bit words of a place's servers: at most 4096 servers with masks */
#define PA_QUEUE_MAX_WORDS    64

/* wait time histogram: upper bounds in ms, then +Inf */
#define PA_QUEUE_HIST         13

/* why a request left the queue */
typedef enum {
    PA_QUEUE_RELEASED = 0,
    PA_QUEUE_FULL,            /* the queue had its bound of waiting */
    PA_QUEUE_TIMEOUT,         /* waited its time out */
    PA_QUEUE_SHEDDABLE,       /* a negative priority while saturated */
    PA_QUEUE_GONE,            /* the client went away while waiting */
    PA_QUEUE_LOST,            /* its worker died while it waited */
    PA_QUEUE_NREASONS
} pa_queue_reason_e;


typedef struct {
    uint64_t    seq;          /* admission order, 0: a free place */
    uint64_t    start;        /* start tag, in cost units */
    uint64_t    cost;
    uint64_t    since;        /* admitted, ms */
    int32_t     priority;
    uint32_t    owner;        /* the worker's pid */
    uint16_t    band;         /* row of bands[], PA_QUEUE_BANDS: other */
    uint16_t    heavy;        /* came while others of its flow waited */
    uint32_t    flow;         /* row of flows[] + 1, 0: none */
} pa_queue_slot_t;


typedef struct {
    uint64_t    hash;         /* 0: free */
    uint64_t    finish;       /* the last finish tag of the flow */
    int32_t     priority;
    uint32_t    waiting;
} pa_queue_flow_t;


typedef struct {
    int32_t     priority;
    uint32_t    used;
    uint64_t    vtime;        /* the start tag last released */
    uint64_t    waiting;
    uint64_t    released;
    uint64_t    passed;       /* went past the queue (pa_queue_pass()) */
    uint64_t    work;         /* cost released */
    uint64_t    left[PA_QUEUE_NREASONS];  /* [0]: released */
} pa_queue_band_t;


typedef struct {
    uint64_t    magic;
    uint32_t    nslots;
    uint32_t    nflows;       /* a power of 2 */
    uint32_t    nwords;       /* of each place's servers, 0: all */
    uint32_t    pad;
    uint64_t    seq;
    uint64_t    waiting;
    uint64_t    flows_waiting;  /* flows with requests waiting */
    uint64_t    max_waiting;  /* the most ever waiting at once */
    uint64_t    passed;       /* went past the queue (pa_queue_pass()) */
    uint64_t    left[PA_QUEUE_NREASONS];
    uint64_t    hist[PA_QUEUE_HIST];
    uint64_t    wait_sum;     /* ms, of the released */
    uint64_t    reaped;       /* ms, the last look for dead workers */
    pa_queue_band_t  bands[PA_QUEUE_BANDS + 1];
} pa_queue_head_t;


typedef struct {
    pa_queue_head_t  *head;
    pa_queue_slot_t  *slots;
    pa_queue_flow_t  *flows;
    uint64_t         *masks;  /* nwords a place: the servers it may use */
    uint32_t          reserve;  /* places a server kept from the heavy */
    uint32_t          high;   /* kept for priorities above 0 while any wait */
} pa_queue_t;


/* the wait histogram's upper bounds, ms */
extern const uint64_t  pa_queue_hist_ms[PA_QUEUE_HIST - 1];

/* the names of the reasons ("released", "full", ...) */
extern const char     *pa_queue_reasons[PA_QUEUE_NREASONS];

/*
 * the memory a table of "nslots" places takes, each with the bits of
 * the servers it may use in "nwords" 64-bit words (0: every place may
 * use every server)
 */
size_t pa_queue_size(uint32_t nslots, uint32_t nwords);

/*
 * the table in "mem": kept if it was made for "nslots" and "nwords" (1,
 * a reload), else made empty (0); -1 if "size" is too small or "nwords"
 * over PA_QUEUE_MAX_WORDS.  The handle's "reserve" and "high" are set to
 * 0 (the caller sets them: queue_reserve=, priority_reserve=)
 */
int pa_queue_attach(pa_queue_t *q, void *mem, size_t size, uint32_t nslots,
    uint32_t nwords);

/*
 * a place for a request, its start tag set by its flow ("flow" 0: a
 * flow of its own) and priority; the place's index, or -1 when every
 * place is taken (not counted: the caller counts PA_QUEUE_FULL)
 */
int32_t pa_queue_admit(pa_queue_t *q, int32_t priority, uint64_t flow,
    uint64_t cost, uint32_t owner, uint64_t now);

/*
 * the servers place "slot" may use: bit j of "mask" (nwords words) is
 * server j; NULL: every server (what pa_queue_admit() sets)
 */
void pa_queue_set_mask(pa_queue_t *q, uint32_t slot, const uint64_t *mask);

/*
 * the places that the free places of the servers go to, in the order:
 * "room[j]" free places on server j of "nservers" (taken as they are
 * given), each waiting place in order takes one on the server with the
 * most room among those it may use, and a place that may use none of
 * the servers with room is passed over (it does not hold back those
 * after it that can); at most "k" into "out", in order, ending at "stop"
 * if it is among them (-1: none); how many.  A place takes one only on a
 * server with more free places than are kept from it (pa_queue_kept())
 */
uint32_t pa_queue_pick(pa_queue_t *q, uint32_t *room, uint32_t nservers,
    uint32_t k, int64_t stop, uint32_t *out);

/*
 * the places of each server kept from the request of place "slot": the
 * handle's "reserve" if it is heavy (pa_queue_heavy()), and its "high"
 * if its priority is 0 or less (it waits, so requests wait)
 */
uint32_t pa_queue_kept(pa_queue_t *q, uint32_t slot);

/*
 * the same for a request of a flow ("hash", 0: none) that comes now,
 * before its admission: "high" only while requests wait; "*heavy" set
 * to whether the reserve is kept from it (pa_queue_heavy_new())
 */
uint32_t pa_queue_kept_new(pa_queue_t *q, int32_t priority, uint64_t hash,
    int *heavy);

/* a place left, for "reason", at "now": counted, its wait recorded */
void pa_queue_leave(pa_queue_t *q, uint32_t slot, pa_queue_reason_e reason,
    uint64_t now);

/* a request answered before it took a place (full, sheddable) */
void pa_queue_count(pa_queue_t *q, int32_t priority,
    pa_queue_reason_e reason);

/*
 * the requests of a flow ("hash" of a priority) that wait now; 0 if it
 * has no row (no request of it waits)
 */
uint32_t pa_queue_flow_waiting(pa_queue_t *q, int32_t priority,
    uint64_t hash);

/*
 * queue_reserve=: whether the request of place "slot" is "heavy", takes
 * no reserved place: it came while other requests of its flow waited,
 * and its flow has at least the mean of the requests waiting of the
 * flows that wait (a tenant's burst behind a heavier one's backlog is
 * not; when every flow waits alike, every such request is)
 */
int pa_queue_heavy(pa_queue_t *q, uint32_t slot);

/* the same for a request of a flow that comes now, before its admission */
int pa_queue_heavy_new(pa_queue_t *q, int32_t priority, uint64_t hash);

/*
 * whether a request of a flow ("hash" of a priority, not 0) that would
 * go past the queue (to its prefix holder over the cap) may: only while
 * its flow is not ahead of its band (its last finish tag at most the
 * band's time); its work "cost" is then charged to the flow, as if it had
 * been released, so that a flow that keeps passing falls behind the
 * others and waits in their order; counted "passed" in the band
 */
int pa_queue_pass(pa_queue_t *q, int32_t priority, uint64_t hash,
    uint64_t cost);

/* whether place "a" goes before place "b" */
int pa_queue_before(const pa_queue_slot_t *a, const pa_queue_slot_t *b);

/* the places waiting before "slot" */
uint32_t pa_queue_rank(pa_queue_t *q, uint32_t slot);

/* the "k" first places waiting, in order, into "out"; how many */
uint32_t pa_queue_top(pa_queue_t *q, uint32_t k, uint32_t *out);

/*
 * the rows of flows[] of the "k" flows with the most requests waiting,
 * the most first (ties: the lower row), into "out"; how many
 */
uint32_t pa_queue_top_flows(pa_queue_t *q, uint32_t k, uint32_t *out);

/*
 * the places of owners "alive" says are dead left (PA_QUEUE_LOST);
 * how many
 */
uint32_t pa_queue_reap(pa_queue_t *q, int (*alive)(uint32_t owner,
    void *ctx), void *ctx, uint64_t now);

/* the row of bands[] a priority is counted in (PA_QUEUE_BANDS: other) */
uint32_t pa_queue_band(pa_queue_t *q, int32_t priority, int create);

/* a priority from a decimal text; -1 if it is not one in range */
int pa_queue_priority(const unsigned char *p, size_t len, int32_t *prio);


#endif /* _PA_QUEUE_H_INCLUDED_ */
