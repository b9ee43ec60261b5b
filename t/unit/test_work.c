
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * pa_work_engine(), pa_work_fresh(): the work an engine's report adds to
 * a server's, as the peer's work (ngx_http_prefix_aware_peer.c) takes
 * it: the mean of the known requests for the others, saturating where
 * "(n - known) * (work / known)" wrapped; a report stored by a worker
 * whose cached clock is ahead of the reader's is fresh, not 2^64 - 3 ms
 * old.
 */


#include "unit.h"
#include "pa_work.h"


static void
test_engine(void)
{
    uint64_t  work, known, n;

    /* no more requests than the hosts know of: their own work */

    CHECK(pa_work_engine(1000, 4, 4, 300) == 1000);
    CHECK(pa_work_engine(1000, 4, 2, 300) == 1000);
    CHECK(pa_work_engine(0, 0, 0, 300) == 0);

    /* 6 others at the mean, 250; none known: "unit" each */

    CHECK(pa_work_engine(1000, 4, 10, 300) == 2500);
    CHECK(pa_work_engine(0, 0, 3, 300) == 900);

    /*
     * a mean of 2^60 units (a server's own counter gone wild) and 10^7
     * requests reported: the old expression wrapped to less than the
     * server's own work; now its own work, as it is over PA_WORK_MAX
     */

    work = (uint64_t) 1 << 60;
    known = 1;
    n = 10000000;

    CHECK(work + (n - known) * (work / known) < work);
    CHECK(pa_work_engine(work, known, n, 300) == work);

    /* the engine's share held at PA_WORK_MAX */

    CHECK(pa_work_engine(1 << 20, 1, 10000000, 300) == PA_WORK_MAX);
    CHECK(pa_work_engine(0, 0, UINT64_MAX, UINT64_MAX) == PA_WORK_MAX);
    CHECK(pa_work_engine(PA_WORK_MAX - 1, 1, 3, 300) == PA_WORK_MAX);
    CHECK(pa_work_engine(PA_WORK_MAX, 1, 3, 300) == PA_WORK_MAX);

    /* and below it, exact */

    CHECK(pa_work_engine(1 << 20, 1, 1024, 300)
          == ((uint64_t) 1 << 20) * 1024);

    CHECK(pa_mul_sat(0, UINT64_MAX) == 0);
    CHECK(pa_mul_sat(UINT64_MAX, 1) == UINT64_MAX);
    CHECK(pa_mul_sat((uint64_t) 1 << 32, (uint64_t) 1 << 32) == UINT64_MAX);
    CHECK(pa_mul_sat((uint64_t) 1 << 31, (uint64_t) 1 << 32)
          == (uint64_t) 1 << 63);
}


static void
test_fresh(void)
{
    /* interval 1000: a report counts while at most 2000 ms old */

    CHECK(pa_work_fresh(5000, 4000, 1000));
    CHECK(pa_work_fresh(5000, 3000, 1000));
    CHECK(!pa_work_fresh(5001, 3000, 1000));

    /* never reported */

    CHECK(!pa_work_fresh(5000, 0, 1000));

    /*
     * stored by a worker whose cached clock is 3 ms ahead: fresh (the
     * unsigned "now - reported > 2 * interval" was 2^64 - 3 and dropped
     * it for an interval)
     */

    CHECK((uint64_t) 5000 - 5003 > 2 * 1000);
    CHECK(pa_work_fresh(5000, 5003, 1000));
}


int
main(void)
{
    test_engine();
    test_fresh();

    return UNIT_DONE();
}
