
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target of src/pa_queue.c (make fuzz-queue): the input is a
 * program of operations on a table of 16 places, as workers make them
 * (admit with a priority, a flow and a cost; leave for a reason; the
 * first k; a rank; the reaping of dead owners; a priority read from
 * text).  After each, the table must hold together: "waiting" is the
 * places taken, the bands' and the flows' counts add up to it, the first
 * k are in order and each is ahead of every place not among them, the
 * first has rank 0, and a place that leaves is counted once.
 */


#include <stdlib.h>
#include <string.h>

#include "pa_queue.h"


#define NSLOTS  16


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);


static int
fuzz_alive(uint32_t owner, void *ctx)
{
    return (owner & 3) != 0;
}


static void
fuzz_check(pa_queue_t *q)
{
    uint32_t          i, j, k, n, taken, fw, top[NSLOTS];
    uint64_t          bands, left;
    pa_queue_head_t  *h;

    h = q->head;
    taken = 0;
    fw = 0;

    for (i = 0; i < NSLOTS; i++) {
        if (q->slots[i].seq) {
            taken++;

            if (q->slots[i].band > PA_QUEUE_BANDS) {
                abort();
            }
        }
    }

    if (taken != h->waiting) {
        abort();
    }

    bands = 0;

    for (i = 0; i <= PA_QUEUE_BANDS; i++) {
        bands += h->bands[i].waiting;
    }

    if (bands != h->waiting) {
        abort();
    }

    for (i = 0; i < h->nflows; i++) {
        fw += q->flows[i].waiting;
    }

    for (i = 0, n = 0; i < NSLOTS; i++) {
        n += (q->slots[i].seq && q->slots[i].flow) ? 1 : 0;

        /* queue_reserve=: a waiting place's flow is found by its hash */

        if (q->slots[i].seq && q->slots[i].flow) {
            j = q->slots[i].flow - 1;

            if (q->flows[j].waiting == 0
                || pa_queue_flow_waiting(q, q->flows[j].priority,
                                         q->flows[j].hash)
                   != q->flows[j].waiting)
            {
                abort();
            }
        }

        if (q->slots[i].seq && q->slots[i].heavy > 1) {
            abort();
        }
    }

    if (fw != n) {
        abort();
    }

    /* the flows that wait: rows with a request waiting, and flowless ones */

    for (i = 0, k = 0; i < h->nflows; i++) {
        k += q->flows[i].waiting ? 1 : 0;
    }

    if (h->flows_waiting != k + (taken - n)) {
        abort();
    }

    left = 0;

    for (i = 0; i < PA_QUEUE_NREASONS; i++) {
        left += h->left[i];
    }

    (void) left;

    for (k = 0; k <= NSLOTS; k++) {
        n = pa_queue_top(q, k, top);

        if (n != (k < taken ? k : taken)) {
            abort();
        }

        for (i = 1; i < n; i++) {
            if (!pa_queue_before(&q->slots[top[i - 1]], &q->slots[top[i]])) {
                abort();
            }
        }

        for (j = 0; j < NSLOTS && n; j++) {
            if (q->slots[j].seq == 0) {
                continue;
            }

            for (i = 0; i < n && top[i] != j; i++) { /* void */ }

            if (i == n && pa_queue_before(&q->slots[j], &q->slots[top[n - 1]]))
            {
                abort();
            }
        }
    }

    if (taken && (pa_queue_top(q, 1, top) != 1
                  || pa_queue_rank(q, top[0]) != 0))
    {
        abort();
    }
}


/*
 * the free places of 7 servers (bit j of "free": one on server j) go in
 * order to places that may use one: each taken may, at most one each,
 * in order, no more than the free places, each taking one; with bit 7,
 * queue_reserve=1: no heavy place takes one (no server has more than 1);
 * with bit 7 of "k", priority_reserve=1: no place of priority 0 or less
 */

static void
fuzz_pick(pa_queue_t *q, unsigned char free, unsigned char k)
{
    uint32_t  i, j, n, total, reserve, high, room[7], out[NSLOTS];

    total = 0;
    reserve = (free >> 7) & 1;
    high = (k >> 7) & 1;
    q->reserve = reserve;
    q->high = high;

    for (j = 0; j < 7; j++) {
        room[j] = (free >> j) & 1;
        total += room[j];
    }

    n = pa_queue_pick(q, room, 7, k % (NSLOTS + 1), -1, out);

    if (n > total || n > k % (NSLOTS + 1)) {
        abort();
    }

    for (i = 0; i < n; i++) {
        if (q->slots[out[i]].seq == 0
            || (i && !pa_queue_before(&q->slots[out[i - 1]],
                                      &q->slots[out[i]]))
            || (q->masks[out[i]] & free) == 0
            || (reserve && pa_queue_heavy(q, out[i]))
            || (high && q->slots[out[i]].priority <= 0))
        {
            abort();
        }
    }

    q->reserve = 0;
    q->high = 0;

    for (j = 0, total = 0; j < 7; j++) {
        total += room[j];
    }

    if (total + n != (uint32_t) __builtin_popcount(free & 0x7f)) {
        abort();
    }
}


int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    size_t            i;
    int32_t           prio, s;
    uint32_t          top[NSLOTS];
    uint64_t          now, before, mask;
    pa_queue_t        q;
    unsigned char    *mem;
    pa_queue_head_t  *h;

    mem = calloc(1, pa_queue_size(NSLOTS, 1));
    if (mem == NULL || pa_queue_attach(&q, mem, pa_queue_size(NSLOTS, 1),
                                       NSLOTS, 1) != 0)
    {
        abort();
    }

    h = q.head;
    now = 1000;

    for (i = 0; i + 4 <= size; i += 4) {
        now += data[i + 3];

        switch (data[i] % 6) {

        case 0:
        case 1:
            s = pa_queue_admit(&q, (int32_t) (data[i + 1] % 11) - 5,
                               data[i + 2] % 7, data[i + 3] * 100ULL,
                               data[i + 1] & 7, now);

            if (s < 0 && h->waiting < NSLOTS) {
                abort();
            }

            if (s >= 0 && (data[i + 2] & 0x80)) {
                mask = data[i + 2] & 0x7f;
                pa_queue_set_mask(&q, (uint32_t) s, &mask);
            }

            break;

        case 2:
            before = h->left[0] + h->left[1] + h->left[2] + h->left[3]
                     + h->left[4] + h->left[5];

            s = (int32_t) (data[i + 1] % NSLOTS);
            prio = q.slots[s].seq ? 1 : 0;

            pa_queue_leave(&q, (uint32_t) s,
                           (pa_queue_reason_e) (data[i + 2]
                                                % PA_QUEUE_NREASONS), now);

            if (h->left[0] + h->left[1] + h->left[2] + h->left[3]
                + h->left[4] + h->left[5] != before + (uint64_t) prio)
            {
                abort();
            }

            break;

        case 3:
            fuzz_pick(&q, data[i + 1], data[i + 2]);

            if (pa_queue_top(&q, 1, top) == 1) {
                pa_queue_leave(&q, top[0], PA_QUEUE_RELEASED, now);
            }

            break;

        case 4:
            if (data[i + 1] & 1) {
                (void) pa_queue_reap(&q, fuzz_alive, NULL, now);
                break;
            }

            /* a request that would pass the queue: its flow charged */

            before = h->waiting;

            if (pa_queue_pass(&q, (int32_t) (data[i + 1] % 11) - 5,
                              data[i + 2] % 7, data[i + 3] * 100ULL)
                && (data[i + 2] % 7) == 0)
            {
                abort();                  /* no flow never passes */
            }

            if (h->waiting != before) {
                abort();
            }

            break;

        default:
            (void) pa_queue_priority(&data[i + 1], data[i + 2] % 4, &prio);
            pa_queue_count(&q, (int32_t) data[i + 1] - 128,
                           PA_QUEUE_SHEDDABLE);
            break;
        }

        fuzz_check(&q);
    }

    /* a text priority, whatever it is: in range or refused */

    if (size && pa_queue_priority(data, size, &prio) == 0
        && (prio < PA_QUEUE_PRIO_MIN || prio > PA_QUEUE_PRIO_MAX))
    {
        abort();
    }

    free(mem);

    return 0;
}
