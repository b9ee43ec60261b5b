
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The order of the requests that wait (src/pa_queue.h).  Every function
 * runs under the caller's lock of the table; the work is a pass over the
 * places (at most queue= of them), made while some wait.
 */


#include <string.h>

#include "pa_queue.h"


#define PA_QUEUE_MAGIC  0x70615f7175657567ULL     /* "pa_queug": v3 */


static uint32_t pa_queue_flow_find(pa_queue_t *q, int32_t priority,
    uint64_t hash, uint32_t *spare);
static uint32_t pa_queue_flow(pa_queue_t *q, int32_t priority,
    uint64_t hash);
static uint64_t pa_queue_mix(uint64_t h, int32_t priority);
static int64_t pa_queue_place(const uint32_t *room, uint32_t nservers,
    const uint64_t *m);
static int pa_queue_fits(pa_queue_t *q, uint32_t slot, const uint32_t *room,
    uint32_t nservers, uint32_t reserve);


const uint64_t  pa_queue_hist_ms[PA_QUEUE_HIST - 1] = {
    1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000
};

const char  *pa_queue_reasons[PA_QUEUE_NREASONS] = {
    "released", "full", "timeout", "sheddable", "gone", "lost"
};


static uint32_t
pa_queue_nflows(uint32_t nslots)
{
    uint32_t  n;

    for (n = 16; n < 2 * (uint64_t) nslots; n <<= 1) {
        /* void */
    }

    return n;
}


size_t
pa_queue_size(uint32_t nslots, uint32_t nwords)
{
    return sizeof(pa_queue_head_t) + 64
           + (size_t) nslots * sizeof(pa_queue_slot_t)
           + (size_t) pa_queue_nflows(nslots) * sizeof(pa_queue_flow_t)
           + (size_t) nslots * nwords * sizeof(uint64_t);
}


int
pa_queue_attach(pa_queue_t *q, void *mem, size_t size, uint32_t nslots,
    uint32_t nwords)
{
    uint32_t          nflows;
    uintptr_t         p;
    pa_queue_head_t  *h;

    if (nslots == 0 || nwords > PA_QUEUE_MAX_WORDS
        || size < pa_queue_size(nslots, nwords))
    {
        return -1;
    }

    nflows = pa_queue_nflows(nslots);

    p = ((uintptr_t) mem + 63) & ~(uintptr_t) 63;
    h = (pa_queue_head_t *) p;

    q->head = h;
    q->slots = (pa_queue_slot_t *) (h + 1);
    q->flows = (pa_queue_flow_t *) (q->slots + nslots);
    q->masks = (uint64_t *) (q->flows + nflows);
    q->reserve = 0;
    q->high = 0;

    if (h->magic == PA_QUEUE_MAGIC && h->nslots == nslots
        && h->nflows == nflows && h->nwords == nwords)
    {
        return 1;
    }

    memset(h, 0, sizeof(pa_queue_head_t));
    memset(q->slots, 0, (size_t) nslots * sizeof(pa_queue_slot_t));
    memset(q->flows, 0, (size_t) nflows * sizeof(pa_queue_flow_t));
    memset(q->masks, 0, (size_t) nslots * nwords * sizeof(uint64_t));

    h->nslots = nslots;
    h->nflows = nflows;
    h->nwords = nwords;
    h->magic = PA_QUEUE_MAGIC;

    return 0;
}


uint32_t
pa_queue_band(pa_queue_t *q, int32_t priority, int create)
{
    uint32_t          i;
    pa_queue_band_t  *b;

    b = q->head->bands;

    for (i = 0; i < PA_QUEUE_BANDS; i++) {
        if (b[i].used && b[i].priority == priority) {
            return i;
        }
    }

    if (!create) {
        return PA_QUEUE_BANDS;
    }

    for (i = 0; i < PA_QUEUE_BANDS; i++) {
        if (!b[i].used) {
            b[i].used = 1;
            b[i].priority = priority;
            return i;
        }
    }

    return PA_QUEUE_BANDS;
}


static uint64_t
pa_queue_mix(uint64_t h, int32_t priority)
{
    h ^= (uint64_t) (uint32_t) priority * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;

    return h;
}


/*
 * the row of a flow of a priority + 1, 0 if it has none; with "spare",
 * also the row a new flow would take + 1 (0: none): the first on its
 * probe whose flow waits no more and whose finish its band's time has
 * passed (it would start at the band's time anyway), else the empty row
 * that ends the probe
 */

static uint32_t
pa_queue_flow_find(pa_queue_t *q, int32_t priority, uint64_t hash,
    uint32_t *spare)
{
    uint32_t          i, n, mask;
    uint64_t          vtime;
    pa_queue_flow_t  *f;

    mask = q->head->nflows - 1;
    vtime = 0;

    if (spare) {
        *spare = 0;
        vtime = q->head->bands[pa_queue_band(q, priority, 0)].vtime;
    }

    i = (uint32_t) pa_queue_mix(hash, priority) & mask;

    for (n = 0; n <= mask; n++, i = (i + 1) & mask) {
        f = &q->flows[i];

        if (f->hash == 0) {
            if (spare && *spare == 0) {
                *spare = i + 1;
            }

            return 0;
        }

        if (f->hash == hash && f->priority == priority) {
            return i + 1;
        }

        if (spare && *spare == 0 && f->waiting == 0 && f->finish <= vtime) {
            *spare = i + 1;
        }
    }

    return 0;
}


/*
 * the row of a flow of a priority + 1, made if new; 0 if the table has
 * no row for it (every row is a flow that waits or was served ahead of
 * its band: it starts at its band's time, as a new flow would)
 */

static uint32_t
pa_queue_flow(pa_queue_t *q, int32_t priority, uint64_t hash)
{
    uint32_t          row, spare;
    pa_queue_flow_t  *f;

    row = pa_queue_flow_find(q, priority, hash, &spare);

    if (row != 0 || spare == 0) {
        return row;
    }

    f = &q->flows[spare - 1];
    f->hash = hash;
    f->priority = priority;
    f->finish = 0;
    f->waiting = 0;

    return spare;
}


uint32_t
pa_queue_flow_waiting(pa_queue_t *q, int32_t priority, uint64_t hash)
{
    uint32_t  row;

    if (hash == 0) {
        return 0;
    }

    row = pa_queue_flow_find(q, priority, hash, NULL);

    return row ? q->flows[row - 1].waiting : 0;
}


int
pa_queue_heavy(pa_queue_t *q, uint32_t slot)
{
    pa_queue_slot_t  *s;

    s = &q->slots[slot];

    return s->heavy && s->flow
           && (uint64_t) q->flows[s->flow - 1].waiting
              * q->head->flows_waiting >= q->head->waiting;
}


int
pa_queue_heavy_new(pa_queue_t *q, int32_t priority, uint64_t hash)
{
    uint64_t  w;

    w = pa_queue_flow_waiting(q, priority, hash);

    return w && (w + 1) * q->head->flows_waiting >= q->head->waiting + 1;
}


uint32_t
pa_queue_kept(pa_queue_t *q, uint32_t slot)
{
    uint32_t  kept;

    kept = (q->reserve && pa_queue_heavy(q, slot)) ? q->reserve : 0;

    if (q->slots[slot].priority <= 0) {
        kept += q->high;
    }

    return kept;
}


uint32_t
pa_queue_kept_new(pa_queue_t *q, int32_t priority, uint64_t hash,
    int *heavy)
{
    uint32_t  kept;

    *heavy = q->reserve && hash && pa_queue_heavy_new(q, priority, hash);

    kept = *heavy ? q->reserve : 0;

    if (priority <= 0 && q->head->waiting) {
        kept += q->high;
    }

    return kept;
}


int
pa_queue_pass(pa_queue_t *q, int32_t priority, uint64_t hash, uint64_t cost)
{
    uint32_t          fi, b;
    uint64_t          vtime;
    pa_queue_flow_t  *f;

    if (hash == 0) {
        return 0;
    }

    b = pa_queue_band(q, priority, 1);
    vtime = q->head->bands[b].vtime;
    fi = pa_queue_flow(q, priority, hash);

    if (fi == 0) {
        return 0;
    }

    f = &q->flows[fi - 1];

    if (f->finish > vtime) {
        return 0;
    }

    f->finish = vtime + (cost ? cost : 1);

    q->head->passed++;
    q->head->bands[b].passed++;

    return 1;
}


int32_t
pa_queue_admit(pa_queue_t *q, int32_t priority, uint64_t flow,
    uint64_t cost, uint32_t owner, uint64_t now)
{
    uint32_t          i, n, b, fi;
    uint64_t          start;
    pa_queue_head_t  *h;
    pa_queue_slot_t  *s;
    pa_queue_flow_t  *f;

    h = q->head;

    if (h->waiting >= h->nslots) {
        return -1;
    }

    n = h->nslots;
    i = (uint32_t) (h->seq % n);

    for (s = NULL; n; n--, i = (i + 1) % h->nslots) {
        if (q->slots[i].seq == 0) {
            s = &q->slots[i];
            break;
        }
    }

    if (s == NULL) {
        return -1;
    }

    if (cost == 0) {
        cost = 1;
    }

    b = pa_queue_band(q, priority, 1);
    start = h->bands[b].vtime;
    fi = flow ? pa_queue_flow(q, priority, flow) : 0;
    s->heavy = 0;

    if (fi == 0 || q->flows[fi - 1].waiting == 0) {
        h->flows_waiting++;
    }

    if (fi) {
        f = &q->flows[fi - 1];
        s->heavy = (f->waiting > 0);

        if (f->finish > start) {
            start = f->finish;
        }

        f->finish = start + cost;
        f->waiting++;
    }

    s->seq = ++h->seq;
    s->start = start;
    s->cost = cost;
    s->since = now;
    s->priority = priority;
    s->owner = owner;
    s->band = (uint16_t) b;
    s->flow = fi;

    pa_queue_set_mask(q, i, NULL);

    h->waiting++;
    h->bands[b].waiting++;

    if (h->waiting > h->max_waiting) {
        h->max_waiting = h->waiting;
    }

    return (int32_t) i;
}


void
pa_queue_set_mask(pa_queue_t *q, uint32_t slot, const uint64_t *mask)
{
    uint32_t   nw;
    uint64_t  *m;

    nw = q->head->nwords;

    if (nw == 0 || slot >= q->head->nslots) {
        return;
    }

    m = &q->masks[(size_t) slot * nw];

    if (mask) {
        memcpy(m, mask, nw * sizeof(uint64_t));

    } else {
        memset(m, 0xff, nw * sizeof(uint64_t));
    }
}


/* of the servers with room, the one with the most that "m" may use */

static int64_t
pa_queue_place(const uint32_t *room, uint32_t nservers, const uint64_t *m)
{
    int64_t   best;
    uint32_t  j;

    best = -1;

    for (j = 0; j < nservers; j++) {
        if (room[j] == 0
            || (m && !(m[j / 64] & ((uint64_t) 1 << (j % 64)))))
        {
            continue;
        }

        if (best < 0 || room[j] > room[best]) {
            best = j;
        }
    }

    return best;
}


/* a server place "slot" may use has more than "reserve" free places */

static int
pa_queue_fits(pa_queue_t *q, uint32_t slot, const uint32_t *room,
    uint32_t nservers, uint32_t reserve)
{
    uint32_t         j, nw;
    const uint64_t  *m;

    nw = q->head->nwords;
    m = nw ? &q->masks[(size_t) slot * nw] : NULL;

    for (j = 0; j < nservers; j++) {
        if (room[j] > reserve
            && (m == NULL || (m[j / 64] & ((uint64_t) 1 << (j % 64)))))
        {
            return 1;
        }
    }

    return 0;
}


uint32_t
pa_queue_pick(pa_queue_t *q, uint32_t *room, uint32_t nservers,
    uint32_t k, int64_t stop, uint32_t *out)
{
    int64_t           j;
    uint32_t          i, w, n, nw, best, kept;
    uint64_t          total, free[PA_QUEUE_MAX_WORDS];
    const uint64_t   *m;
    pa_queue_slot_t  *s;

    nw = q->head->nwords;
    total = 0;

    if (nw && nservers > nw * 64) {
        nservers = nw * 64;       /* no place may use those after */
    }

    memset(free, 0, nw * sizeof(uint64_t));

    for (j = 0; j < nservers; j++) {
        if (room[j]) {
            total += room[j];

            if (nw) {
                free[j / 64] |= (uint64_t) 1 << (j % 64);
            }
        }
    }

    n = 0;

    while (n < k && total) {

        /* the first place after the last taken that may use a free one */

        best = UINT32_MAX;

        for (i = 0; i < q->head->nslots; i++) {
            s = &q->slots[i];

            if (s->seq == 0
                || (n && !pa_queue_before(&q->slots[out[n - 1]], s))
                || (best != UINT32_MAX
                    && !pa_queue_before(s, &q->slots[best])))
            {
                continue;
            }

            if (nw) {
                m = &q->masks[(size_t) i * nw];

                for (w = 0; w < nw; w++) {
                    if (m[w] & free[w]) {
                        break;
                    }
                }

                if (w == nw) {
                    continue;
                }
            }

            kept = pa_queue_kept(q, i);

            if (kept && !pa_queue_fits(q, i, room, nservers, kept)) {
                continue;
            }

            best = i;
        }

        if (best == UINT32_MAX) {
            break;
        }

        out[n++] = best;

        j = pa_queue_place(room, nservers,
                           nw ? &q->masks[(size_t) best * nw] : NULL);

        if (j < 0) {
            break;                /* cannot be: it may use a free one */
        }

        total--;

        if (--room[j] == 0 && nw) {
            free[j / 64] &= ~((uint64_t) 1 << (j % 64));
        }

        if ((int64_t) best == stop) {
            break;
        }
    }

    return n;
}


void
pa_queue_leave(pa_queue_t *q, uint32_t slot, pa_queue_reason_e reason,
    uint64_t now)
{
    uint32_t          k;
    uint64_t          wait;
    pa_queue_band_t  *b;
    pa_queue_head_t  *h;
    pa_queue_slot_t  *s;
    pa_queue_flow_t  *f;

    h = q->head;

    if (slot >= h->nslots || q->slots[slot].seq == 0) {
        return;
    }

    s = &q->slots[slot];
    b = &h->bands[s->band];

    if (s->flow == 0 && h->flows_waiting) {
        h->flows_waiting--;
    }

    if (s->flow) {
        f = &q->flows[s->flow - 1];

        if (f->waiting) {
            f->waiting--;

            if (f->waiting == 0 && h->flows_waiting) {
                h->flows_waiting--;
            }
        }

        /* not served: the flow's last tag back, if it is the last */

        if (reason != PA_QUEUE_RELEASED && f->finish == s->start + s->cost) {
            f->finish = s->start;
        }
    }

    if (reason == PA_QUEUE_RELEASED) {
        if (s->start > b->vtime) {
            b->vtime = s->start;
        }

        b->released++;
        b->work += s->cost;

        wait = (now > s->since) ? now - s->since : 0;

        for (k = 0; k < PA_QUEUE_HIST - 1; k++) {
            if (wait <= pa_queue_hist_ms[k]) {
                break;
            }
        }

        h->hist[k]++;
        h->wait_sum += wait;
    }

    b->left[reason]++;
    h->left[reason]++;

    if (b->waiting) {
        b->waiting--;
    }

    if (h->waiting) {
        h->waiting--;
    }

    memset(s, 0, sizeof(pa_queue_slot_t));
}


void
pa_queue_count(pa_queue_t *q, int32_t priority, pa_queue_reason_e reason)
{
    uint32_t  b;

    b = pa_queue_band(q, priority, 1);

    q->head->bands[b].left[reason]++;
    q->head->left[reason]++;
}


int
pa_queue_before(const pa_queue_slot_t *a, const pa_queue_slot_t *b)
{
    if (a->priority != b->priority) {
        return a->priority > b->priority;
    }

    if (a->start != b->start) {
        return a->start < b->start;
    }

    return a->seq < b->seq;
}


uint32_t
pa_queue_rank(pa_queue_t *q, uint32_t slot)
{
    uint32_t          i, n;
    pa_queue_slot_t  *s;

    s = &q->slots[slot];
    n = 0;

    for (i = 0; i < q->head->nslots; i++) {
        if (i != slot && q->slots[i].seq
            && pa_queue_before(&q->slots[i], s))
        {
            n++;
        }
    }

    return n;
}


uint32_t
pa_queue_top(pa_queue_t *q, uint32_t k, uint32_t *out)
{
    uint32_t          i, j, n;
    pa_queue_slot_t  *s;

    n = 0;

    if (k == 0) {
        return 0;
    }

    for (i = 0; i < q->head->nslots; i++) {
        s = &q->slots[i];

        if (s->seq == 0) {
            continue;
        }

        if (n == k && !pa_queue_before(s, &q->slots[out[n - 1]])) {
            continue;
        }

        j = (n < k) ? n++ : n - 1;

        while (j > 0 && pa_queue_before(s, &q->slots[out[j - 1]])) {
            out[j] = out[j - 1];
            j--;
        }

        out[j] = i;
    }

    return n;
}


uint32_t
pa_queue_top_flows(pa_queue_t *q, uint32_t k, uint32_t *out)
{
    uint32_t          i, j, n;
    pa_queue_flow_t  *f;

    n = 0;

    if (k == 0) {
        return 0;
    }

    for (i = 0; i < q->head->nflows; i++) {
        f = &q->flows[i];

        if (f->hash == 0 || f->waiting == 0) {
            continue;
        }

        if (n == k && f->waiting <= q->flows[out[n - 1]].waiting) {
            continue;
        }

        j = (n < k) ? n++ : n - 1;

        while (j > 0 && f->waiting > q->flows[out[j - 1]].waiting) {
            out[j] = out[j - 1];
            j--;
        }

        out[j] = i;
    }

    return n;
}


uint32_t
pa_queue_reap(pa_queue_t *q, int (*alive)(uint32_t owner, void *ctx),
    void *ctx, uint64_t now)
{
    int               live;
    uint32_t          i, n, last;

    n = 0;
    last = 0;
    live = 1;

    q->head->reaped = now;

    for (i = 0; i < q->head->nslots; i++) {
        if (q->slots[i].seq == 0) {
            continue;
        }

        if (q->slots[i].owner != last) {
            last = q->slots[i].owner;
            live = alive(last, ctx);
        }

        if (!live) {
            pa_queue_leave(q, i, PA_QUEUE_LOST, now);
            n++;
        }
    }

    return n;
}


int
pa_queue_priority(const unsigned char *p, size_t len, int32_t *prio)
{
    int       neg;
    int64_t   v;
    size_t    i;

    if (len == 0 || len > 8) {
        return -1;
    }

    neg = 0;
    i = 0;

    if (p[0] == '-' || p[0] == '+') {
        neg = (p[0] == '-');
        i = 1;

        if (len == 1) {
            return -1;
        }
    }

    for (v = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }

        v = v * 10 + (p[i] - '0');
    }

    if (neg) {
        v = -v;
    }

    if (v < PA_QUEUE_PRIO_MIN || v > PA_QUEUE_PRIO_MAX) {
        return -1;
    }

    *prio = (int32_t) v;

    return 0;
}
