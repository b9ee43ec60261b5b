
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Unit tests of src/pa_strategy.c: weighted random among usable servers
 * below threshold.
 */


#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pa_strategy.h"
#include "unit.h"


#define NPICKS  200000


typedef struct {
    int        usable[8];
    uint64_t   inflight[8];
    unsigned   calls[8];
} test_probe_t;


static int
probe(void *ctx, uint32_t server, uint64_t *inflight)
{
    test_probe_t  *t = ctx;

    t->calls[server]++;
    *inflight = t->inflight[server];

    return t->usable[server] ? PA_SERVER_USABLE : PA_SERVER_UNUSABLE;
}


/* |got - want| within "tol" of want, as a fraction */
static int
near(unsigned got, double want, double tol)
{
    double  d;

    d = (double) got - want;

    return (d < 0 ? -d : d) <= tol * want;
}


int
main(void)
{
    int            rc;
    uint32_t       i, n, weights[8] = { 1, 2, 3, 4, 0, 1, 1, 1 };
    uint64_t       state, a, b;
    unsigned       count[8];
    pa_pick_t      pick;
    test_probe_t   t;

    /* the generator: reproducible, and two states give two sequences */

    a = 1;
    b = 1;
    CHECK(pa_random_next(&a) == pa_random_next(&b));
    b = 2;
    CHECK(pa_random_next(&a) != pa_random_next(&b));

    /* weights 1, 2, 3, 4: shares of 10 %, 20 %, 30 %, 40 %, within 2 % */

    memset(&t, 0, sizeof(t));
    memset(count, 0, sizeof(count));
    for (i = 0; i < 4; i++) {
        t.usable[i] = 1;
    }

    state = 42;
    n = 0;

    for (i = 0; i < NPICKS; i++) {
        rc = pa_random_pick(4, weights, 10, &state, probe, &t, &pick);
        if (rc == 0 && pick.server < 4) {
            count[pick.server]++;
            n++;
        }
    }

    CHECK(n == NPICKS);

    for (i = 0; i < 4; i++) {
        CHECK_MSG(near(count[i], NPICKS * (i + 1) / 10.0, 0.02),
                  "server %u: %u of %u", i, count[i], NPICKS);
    }

    /* each server probed once a pick */

    CHECK(t.calls[0] == NPICKS && t.calls[3] == NPICKS);

    /* no weights: uniform; an unusable and a full server are never taken */

    memset(&t, 0, sizeof(t));
    memset(count, 0, sizeof(count));
    for (i = 0; i < 5; i++) {
        t.usable[i] = 1;
    }
    t.usable[1] = 0;
    t.inflight[3] = 10;
    t.inflight[4] = 9;

    for (i = 0; i < NPICKS; i++) {
        rc = pa_random_pick(5, NULL, 10, &state, probe, &t, &pick);
        CHECK(rc == 0);
        count[pick.server]++;
    }

    CHECK(count[1] == 0);
    CHECK(count[3] == 0);
    CHECK_MSG(near(count[0], NPICKS / 3.0, 0.03), "%u", count[0]);
    CHECK_MSG(near(count[2], NPICKS / 3.0, 0.03), "%u", count[2]);
    CHECK_MSG(near(count[4], NPICKS / 3.0, 0.03), "%u", count[4]);

    /* a weight of 0 counts as 1 */

    memset(&t, 0, sizeof(t));
    memset(count, 0, sizeof(count));
    t.usable[4] = 1;
    t.usable[5] = 1;

    for (i = 0; i < NPICKS; i++) {
        rc = pa_random_pick(6, weights, 10, &state, probe, &t, &pick);
        CHECK(rc == 0);
        count[pick.server]++;
    }

    CHECK(count[4] + count[5] == NPICKS);
    CHECK_MSG(near(count[4], NPICKS / 2.0, 0.03), "%u", count[4]);

    /* all full: 1 (the caller takes the least loaded); none usable: -1 */

    memset(&t, 0, sizeof(t));
    t.usable[0] = 1;
    t.usable[2] = 1;
    t.inflight[0] = 3;
    t.inflight[2] = 5;

    rc = pa_random_pick(3, NULL, 3, &state, probe, &t, &pick);
    CHECK(rc == 1);
    CHECK(pick.route == PA_ROUTE_NONE);

    rc = pa_random_pick(3, NULL, 6, &state, probe, &t, &pick);
    CHECK(rc == 0 && (pick.server == 0 || pick.server == 2));
    CHECK(pick.inflight == t.inflight[pick.server]);
    CHECK(pick.route == PA_ROUTE_NO_KEY);

    memset(&t, 0, sizeof(t));
    rc = pa_random_pick(3, NULL, 6, &state, probe, &t, &pick);
    CHECK(rc == -1);

    rc = pa_random_pick(0, NULL, 6, &state, probe, &t, &pick);
    CHECK(rc == -1);

    return UNIT_DONE();
}
