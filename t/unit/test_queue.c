
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of src/pa_queue.c: the order of the requests that wait
 * (priority, then fairness by work between flows, then arrival), the
 * bound, the accounting of why each left, the reaping of dead owners.
 */


#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pa_queue.h"
#include "unit.h"


static int
alive_odd(uint32_t owner, void *ctx)
{
    (*(int *) ctx)++;
    return owner % 2;
}


/* releases the first place, as the balancer would; its flow or -1 */

static int32_t
release_first(pa_queue_t *q, uint64_t *flow_of, uint64_t now)
{
    uint32_t  top;

    if (pa_queue_top(q, 1, &top) != 1) {
        return -1;
    }

    pa_queue_leave(q, top, PA_QUEUE_RELEASED, now);

    return (int32_t) flow_of[top];
}


int
main(void)
{
    int         calls, heavy;
    void       *mem;
    size_t      size;
    int32_t     s[64], prio, f;
    uint32_t    top[8], n, i, k;
    uint64_t    flow_of[64], served[4], work[4];
    pa_queue_t  q, q2;

    size = pa_queue_size(16, 0);
    mem = calloc(1, size);
    CHECK(mem != NULL);

    CHECK(pa_queue_attach(&q, mem, size - 100, 16, 0) == -1);
    CHECK(pa_queue_attach(&q, mem, size, 16, 0) == 0);
    CHECK(pa_queue_attach(&q2, mem, size, 16, 0) == 1);   /* kept, a reload */
    CHECK(pa_queue_attach(&q2, mem, size, 8, 0) == 0);    /* other size: new */
    CHECK(pa_queue_attach(&q, mem, size, 16, 0) == 0);

    /* one flow, one priority: the order of arrival */

    for (i = 0; i < 4; i++) {
        s[i] = pa_queue_admit(&q, 0, 7, 100, 1, 1000 + i);
        CHECK(s[i] >= 0);
    }

    CHECK(q.head->waiting == 4);
    CHECK(pa_queue_rank(&q, (uint32_t) s[0]) == 0);
    CHECK(pa_queue_rank(&q, (uint32_t) s[3]) == 3);

    n = pa_queue_top(&q, 8, top);
    CHECK(n == 4);
    CHECK(top[0] == (uint32_t) s[0] && top[3] == (uint32_t) s[3]);

    /* priority first: a later request of a higher priority goes first */

    s[4] = pa_queue_admit(&q, 5, 9, 100000, 1, 2000);
    CHECK(pa_queue_rank(&q, (uint32_t) s[4]) == 0);
    CHECK(pa_queue_rank(&q, (uint32_t) s[0]) == 1);

    n = pa_queue_top(&q, 2, top);
    CHECK(n == 2 && top[0] == (uint32_t) s[4] && top[1] == (uint32_t) s[0]);

    /* released after 30 ms: counted, in the histogram's 50 ms bucket */

    pa_queue_leave(&q, (uint32_t) s[4], PA_QUEUE_RELEASED, 2030);
    CHECK(q.head->left[PA_QUEUE_RELEASED] == 1);
    CHECK(q.head->hist[4] == 1);
    CHECK(q.head->wait_sum == 30);
    CHECK(q.head->waiting == 4);

    /* left twice: counted once */
    pa_queue_leave(&q, (uint32_t) s[4], PA_QUEUE_RELEASED, 2040);
    CHECK(q.head->left[PA_QUEUE_RELEASED] == 1);

    /* a client gone, a timeout: each by its reason and band */

    pa_queue_leave(&q, (uint32_t) s[1], PA_QUEUE_GONE, 3000);
    pa_queue_leave(&q, (uint32_t) s[2], PA_QUEUE_TIMEOUT, 3000);
    CHECK(q.head->left[PA_QUEUE_GONE] == 1);
    CHECK(q.head->left[PA_QUEUE_TIMEOUT] == 1);
    CHECK(q.head->bands[pa_queue_band(&q, 0, 0)].left[PA_QUEUE_GONE] == 1);
    CHECK(q.head->waiting == 2);

    pa_queue_count(&q, -1, PA_QUEUE_SHEDDABLE);
    CHECK(q.head->left[PA_QUEUE_SHEDDABLE] == 1);
    CHECK(q.head->bands[pa_queue_band(&q, -1, 0)].left[PA_QUEUE_SHEDDABLE]
          == 1);

    pa_queue_leave(&q, (uint32_t) s[0], PA_QUEUE_RELEASED, 3000);
    pa_queue_leave(&q, (uint32_t) s[3], PA_QUEUE_RELEASED, 3000);
    CHECK(q.head->waiting == 0);

    /* the bound: 16 places, the 17th refused */

    for (i = 0; i < 16; i++) {
        s[i] = pa_queue_admit(&q, 0, 0, 1, 1, 4000);
        CHECK(s[i] >= 0);
    }

    CHECK(pa_queue_admit(&q, 0, 0, 1, 1, 4000) == -1);
    CHECK(q.head->max_waiting == 16);

    /* dead owners reaped: the even pids' places */

    for (i = 0; i < 16; i++) {
        q.slots[s[i]].owner = (i < 6) ? 2 : 3;
    }

    calls = 0;
    CHECK(pa_queue_reap(&q, alive_odd, &calls, 5000) == 6);
    CHECK(calls >= 2 && calls <= 3);  /* one call a run of an owner */
    CHECK(q.head->waiting == 10);
    CHECK(q.head->left[PA_QUEUE_LOST] == 6);

    for (i = 0; i < 16; i++) {
        pa_queue_leave(&q, (uint32_t) s[i], PA_QUEUE_RELEASED, 5000);
    }

    CHECK(q.head->waiting == 0);

    /*
     * fairness by work: flow 1 (noisy) queues 8 requests of cost 1000,
     * flows 2 and 3 two each of cost 1000 and flow 4 eight of cost 250
     * (small prompts), all before any is released.  Served in order of
     * start tags, the quiet flows are not behind the noisy one's backlog:
     * after 8 releases, each flow has had about the same work
     */

    CHECK(pa_queue_attach(&q, mem, size, 16, 0) == 1);

    memset(flow_of, 0, sizeof(flow_of));
    k = 0;

    for (i = 0; i < 4; i++) {
        /* the noisy one arrives first */
        s[k] = pa_queue_admit(&q, 0, 1, 1000, 1, 6000);
        flow_of[s[k]] = 1;
        k++;
    }

    for (i = 0; i < 2; i++) {
        s[k] = pa_queue_admit(&q, 0, 2, 1000, 1, 6001);
        flow_of[s[k]] = 2;
        k++;
        s[k] = pa_queue_admit(&q, 0, 3, 1000, 1, 6001);
        flow_of[s[k]] = 3;
        k++;
    }

    for (i = 0; i < 4; i++) {
        s[k] = pa_queue_admit(&q, 0, 4, 250, 1, 6002);
        CHECK(s[k] >= 0);
        flow_of[s[k]] = 4;
        k++;
    }

    CHECK(q.head->waiting == 12);

    memset(served, 0, sizeof(served));
    memset(work, 0, sizeof(work));

    for (i = 0; i < 7; i++) {
        f = release_first(&q, flow_of, 7000);
        CHECK(f >= 1 && f <= 4);
        if (f >= 1 && f <= 4) {
            served[f - 1]++;
            work[f - 1] += (f == 4) ? 250 : 1000;
        }
    }

    /* 7 first: one each of flows 1-3, the four small ones of flow 4 */
    CHECK_MSG(served[0] == 1 && served[1] == 1 && served[2] == 1
              && served[3] == 4, "served %lu %lu %lu %lu",
              (unsigned long) served[0], (unsigned long) served[1],
              (unsigned long) served[2], (unsigned long) served[3]);
    CHECK(work[3] == 1000);

    /* then flows 1, 2, 3 in turn: the noisy one's rest last */

    for (i = 0; i < 2; i++) {
        f = release_first(&q, flow_of, 7000);
        CHECK(f == 1 || f == 2 || f == 3);
        f = release_first(&q, flow_of, 7000);
        CHECK(f == 1 || f == 2 || f == 3);
    }

    f = release_first(&q, flow_of, 7000);
    CHECK(f == 1);
    CHECK(q.head->waiting == 0);

    /* the flows with the most waiting: N 3, Q 1 (then none after) */

    s[0] = pa_queue_admit(&q, 0, 31, 10, 1, 7100);
    s[1] = pa_queue_admit(&q, 0, 32, 10, 1, 7100);
    s[2] = pa_queue_admit(&q, 0, 32, 10, 1, 7100);
    s[3] = pa_queue_admit(&q, 0, 32, 10, 1, 7100);
    s[4] = pa_queue_admit(&q, 0, 0, 10, 1, 7100);      /* no flow */
    n = pa_queue_top_flows(&q, 8, top);
    CHECK(n == 2);

    /* queue_reserve=: the flows' counts, and who came while its flow waited */

    CHECK(pa_queue_flow_waiting(&q, 0, 32) == 3);
    CHECK(pa_queue_flow_waiting(&q, 0, 31) == 1);
    CHECK(pa_queue_flow_waiting(&q, 0, 33) == 0);
    CHECK(pa_queue_flow_waiting(&q, 5, 32) == 0);     /* another priority */
    CHECK(pa_queue_flow_waiting(&q, 0, 0) == 0);
    CHECK(!pa_queue_heavy(&q, (uint32_t) s[0]));
    CHECK(!pa_queue_heavy(&q, (uint32_t) s[1]));
    CHECK(pa_queue_heavy(&q, (uint32_t) s[2]));
    CHECK(pa_queue_heavy(&q, (uint32_t) s[3]));
    CHECK(!pa_queue_heavy(&q, (uint32_t) s[4]));
    CHECK(q.head->flows_waiting == 3);

    /*
     * a burst of a flow behind a heavier one's backlog is not heavy: flow
     * 32 with 6 waiting, 31 with 2, one without a flow (9 of 3 flows)
     */

    s[5] = pa_queue_admit(&q, 0, 32, 10, 1, 7100);
    s[6] = pa_queue_admit(&q, 0, 32, 10, 1, 7100);
    s[7] = pa_queue_admit(&q, 0, 32, 10, 1, 7100);
    CHECK(pa_queue_heavy_new(&q, 0, 31) == 0);
    CHECK(pa_queue_heavy_new(&q, 0, 32) == 1);
    CHECK(pa_queue_heavy_new(&q, 0, 34) == 0);
    s[8] = pa_queue_admit(&q, 0, 31, 10, 1, 7100);
    CHECK(q.head->flows_waiting == 3 && q.head->waiting == 9);
    CHECK(!pa_queue_heavy(&q, (uint32_t) s[8]));
    CHECK(pa_queue_heavy(&q, (uint32_t) s[7]));

    for (i = 5; i < 9; i++) {
        pa_queue_leave(&q, (uint32_t) s[i], PA_QUEUE_RELEASED, 7150);
    }
    CHECK(n == 2 && q.flows[top[0]].hash == 32 && q.flows[top[0]].waiting == 3
          && q.flows[top[1]].hash == 31 && q.flows[top[1]].waiting == 1);
    CHECK(pa_queue_top_flows(&q, 1, top) == 1 && q.flows[top[0]].hash == 32);
    CHECK(pa_queue_top_flows(&q, 0, top) == 0);

    for (i = 0; i < 5; i++) {
        pa_queue_leave(&q, (uint32_t) s[i], PA_QUEUE_RELEASED, 7200);
    }

    CHECK(pa_queue_top_flows(&q, 8, top) == 0);
    CHECK(q.head->flows_waiting == 0);

    /*
     * a request that would pass the queue: while its flow is not ahead of
     * its band, charged as if released; a flow that keeps passing falls
     * behind and waits, ordered after a flow that did not pass
     */

    CHECK(pa_queue_pass(&q, 0, 0, 10) == 0);          /* no flow: waits */
    CHECK(pa_queue_pass(&q, 0, 41, 500) == 1);
    CHECK(pa_queue_pass(&q, 0, 41, 500) == 0);        /* ahead now */
    CHECK(pa_queue_pass(&q, 0, 42, 500) == 1);        /* another flow */
    CHECK(q.head->passed == 2);
    CHECK(q.head->bands[pa_queue_band(&q, 0, 0)].passed == 2);
    s[9] = pa_queue_admit(&q, 0, 41, 10, 1, 7300);
    s[10] = pa_queue_admit(&q, 0, 43, 10, 1, 7300);
    CHECK(s[9] >= 0 && s[10] >= 0);
    CHECK(pa_queue_rank(&q, (uint32_t) s[10]) == 0);  /* 41 passed: after */
    CHECK(pa_queue_rank(&q, (uint32_t) s[9]) == 1);
    pa_queue_leave(&q, (uint32_t) s[10], PA_QUEUE_RELEASED, 7310);
    pa_queue_leave(&q, (uint32_t) s[9], PA_QUEUE_RELEASED, 7310);
    CHECK(pa_queue_pass(&q, 0, 43, 10) == 1);   /* behind the band's time */
    CHECK(pa_queue_pass(&q, 0, 41, 10) == 0);   /* its last still ahead */
    CHECK(q.head->waiting == 0 && q.head->flows_waiting == 0);

    /* a flow that timed out gives back its tag: it is not penalized */

    s[0] = pa_queue_admit(&q, 0, 5, 500, 1, 8000);
    pa_queue_leave(&q, (uint32_t) s[0], PA_QUEUE_TIMEOUT, 9000);
    s[0] = pa_queue_admit(&q, 0, 6, 500, 1, 9000);
    s[1] = pa_queue_admit(&q, 0, 5, 500, 1, 9001);
    CHECK(q.slots[s[0]].start == q.slots[s[1]].start);
    CHECK(pa_queue_rank(&q, (uint32_t) s[1]) == 1);   /* arrival breaks */
    pa_queue_leave(&q, (uint32_t) s[0], PA_QUEUE_RELEASED, 9002);
    pa_queue_leave(&q, (uint32_t) s[1], PA_QUEUE_RELEASED, 9002);

    /* more flows than the table's rows: still admitted, in order */

    for (i = 0; i < 16; i++) {
        s[i] = pa_queue_admit(&q, 0, 100 + i, 10, 1, 9100);
        CHECK(s[i] >= 0);
    }

    for (i = 0; i < 16; i++) {
        pa_queue_leave(&q, (uint32_t) s[i], PA_QUEUE_RELEASED, 9200);
    }

    for (i = 0; i < 64; i++) {
        s[0] = pa_queue_admit(&q, 0, 1000 + i, 10, 1, 9300);
        CHECK(s[0] >= 0);
        pa_queue_leave(&q, (uint32_t) s[0], PA_QUEUE_RELEASED, 9300);
    }

    /* bands: 8 rows, then "other" */

    for (i = 0; i < 12; i++) {
        s[i] = pa_queue_admit(&q, 10 + i, 0, 1, 1, 9400);
    }

    CHECK(pa_queue_band(&q, 21, 0) == PA_QUEUE_BANDS);
    CHECK(q.head->bands[PA_QUEUE_BANDS].waiting >= 4);
    CHECK(pa_queue_rank(&q, (uint32_t) s[11]) == 0);   /* 21 highest */

    /* priorities as text */

    CHECK(pa_queue_priority((const unsigned char *) "-5", 2, &prio) == 0
          && prio == -5);
    CHECK(pa_queue_priority((const unsigned char *) "+7", 2, &prio) == 0
          && prio == 7);
    CHECK(pa_queue_priority((const unsigned char *) "1000", 4, &prio) == 0
          && prio == 1000);
    CHECK(pa_queue_priority((const unsigned char *) "1001", 4, &prio) == -1);
    CHECK(pa_queue_priority((const unsigned char *) "-", 1, &prio) == -1);
    CHECK(pa_queue_priority((const unsigned char *) "", 0, &prio) == -1);
    CHECK(pa_queue_priority((const unsigned char *) "1x", 2, &prio) == -1);
    CHECK(pa_queue_priority((const unsigned char *) "999999999", 9, &prio)
          == -1);

    free(mem);

    /* the servers each place may use: model sets */

    CHECK(pa_queue_attach(&q, NULL, 0, 16, PA_QUEUE_MAX_WORDS + 1) == -1);

    size = pa_queue_size(16, 2);
    mem = calloc(1, size);
    CHECK(mem != NULL);
    CHECK(pa_queue_attach(&q, mem, size - 8, 16, 2) == -1);
    CHECK(pa_queue_attach(&q, mem, size, 16, 2) == 0);
    CHECK(pa_queue_attach(&q, mem, size, 16, 2) == 1);
    CHECK(pa_queue_attach(&q, mem, size, 16, 1) == 0);   /* other words */
    CHECK(pa_queue_attach(&q, mem, size, 16, 2) == 0);

    {
        uint32_t  room[70], out[16];
        uint64_t  ma[2] = { 0x3, 0 }, mb[2] = { 0xc, 0 }, mc[2] = { 0, 0x20 };

        /* A1, A2 on servers 0-1; B1 on 2-3; C1 on server 69; D1: all */

        s[0] = pa_queue_admit(&q, 0, 0, 1, 1, 100);
        s[1] = pa_queue_admit(&q, 0, 0, 1, 1, 101);
        s[2] = pa_queue_admit(&q, 0, 0, 1, 1, 102);
        s[3] = pa_queue_admit(&q, 0, 0, 1, 1, 103);
        s[4] = pa_queue_admit(&q, 0, 0, 1, 1, 104);
        pa_queue_set_mask(&q, (uint32_t) s[0], ma);
        pa_queue_set_mask(&q, (uint32_t) s[1], ma);
        pa_queue_set_mask(&q, (uint32_t) s[2], mb);
        pa_queue_set_mask(&q, (uint32_t) s[3], mc);
        CHECK(q.masks[(size_t) s[4] * 2] == ~0ULL);         /* D1 */

        /* only B's server has room: B1 goes, A1 and A2 do not hold it */

        memset(room, 0, sizeof(room));
        room[2] = 1;
        CHECK(pa_queue_pick(&q, room, 70, 8, -1, out) == 1);
        CHECK(out[0] == (uint32_t) s[2] && room[2] == 0);

        /* one on A's, one on B's: A1 then B1, not A2 */

        room[0] = 1;
        room[3] = 1;
        CHECK(pa_queue_pick(&q, room, 70, 8, -1, out) == 2);
        CHECK(out[0] == (uint32_t) s[0] && out[1] == (uint32_t) s[2]);

        /* server 69 (the second word): C1, then D1 takes what is left */

        memset(room, 0, sizeof(room));
        room[69] = 1;
        room[5] = 1;
        CHECK(pa_queue_pick(&q, room, 70, 8, -1, out) == 2);
        CHECK(out[0] == (uint32_t) s[3] && out[1] == (uint32_t) s[4]);

        /* stop: ends at the place asked for; k bounds */

        memset(room, 0, sizeof(room));
        room[0] = 3;
        room[2] = 3;
        CHECK(pa_queue_pick(&q, room, 70, 8, s[1], out) == 2);
        CHECK(out[1] == (uint32_t) s[1] && room[0] == 1);
        CHECK(pa_queue_pick(&q, room, 70, 1, -1, out) == 1);
        CHECK(out[0] == (uint32_t) s[0]);

        /* more room on a server: the place takes the one with the most */

        memset(room, 0, sizeof(room));
        room[0] = 1;
        room[1] = 4;
        CHECK(pa_queue_pick(&q, room, 70, 1, -1, out) == 1);
        CHECK(room[1] == 3 && room[0] == 1);

        /* nothing free: none */

        memset(room, 0, sizeof(room));
        CHECK(pa_queue_pick(&q, room, 70, 8, -1, out) == 0);

        /*
         * priority_reserve=2: the last 2 places of each server are kept
         * from priorities 0 and less while requests wait; E1 (priority
         * 3, on every server) takes one, D1 only where 3 are free
         */

        q.high = 2;
        s[5] = pa_queue_admit(&q, 3, 0, 1, 1, 105);
        CHECK(pa_queue_kept(&q, (uint32_t) s[4]) == 2);
        CHECK(pa_queue_kept(&q, (uint32_t) s[5]) == 0);

        memset(room, 0, sizeof(room));
        room[5] = 2;
        CHECK(pa_queue_pick(&q, room, 70, 8, -1, out) == 1);
        CHECK(out[0] == (uint32_t) s[5] && room[5] == 1);

        room[5] = 0;
        room[6] = 3;                      /* E1 takes one: 2 left, kept */
        CHECK(pa_queue_pick(&q, room, 70, 8, -1, out) == 1);

        room[6] = 4;
        CHECK(pa_queue_pick(&q, room, 70, 8, -1, out) == 2);
        CHECK(out[0] == (uint32_t) s[5] && out[1] == (uint32_t) s[4]);
        CHECK(room[6] == 2);

        /* a request that comes: kept only while requests wait */

        CHECK(pa_queue_kept_new(&q, 0, 0, &heavy) == 2 && !heavy);
        CHECK(pa_queue_kept_new(&q, 1, 0, &heavy) == 0 && !heavy);
        CHECK(pa_queue_kept_new(&q, -1, 0, &heavy) == 2);

        for (i = 0; i < 6; i++) {
            pa_queue_leave(&q, (uint32_t) s[i], PA_QUEUE_RELEASED, 110);
        }

        CHECK(q.head->waiting == 0);
        CHECK(pa_queue_kept_new(&q, 0, 0, &heavy) == 0);

        /* with queue_reserve=: both are kept from a heavy one */

        q.reserve = 1;
        s[0] = pa_queue_admit(&q, 0, 77, 1, 1, 120);
        s[1] = pa_queue_admit(&q, 0, 77, 1, 1, 121);
        CHECK(pa_queue_kept(&q, (uint32_t) s[0]) == 2);
        CHECK(pa_queue_kept(&q, (uint32_t) s[1]) == 3);
        CHECK(pa_queue_kept_new(&q, 0, 77, &heavy) == 3 && heavy);
        CHECK(pa_queue_kept_new(&q, 2, 77, &heavy) == 0 && !heavy);
        pa_queue_leave(&q, (uint32_t) s[0], PA_QUEUE_RELEASED, 130);
        pa_queue_leave(&q, (uint32_t) s[1], PA_QUEUE_RELEASED, 130);
        q.reserve = 0;
        q.high = 0;
    }

    free(mem);

    return UNIT_DONE();
}
