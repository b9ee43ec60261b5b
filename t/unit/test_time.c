
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * pa_age(), pa_older(): a time a few milliseconds in the reader's future
 * (another worker's cached clock ahead of this one's) is 0 old, never a
 * wrapped 2^64 - 3; ordinary ages and the bound's edges as computed.
 */


#include "unit.h"
#include "pa_time.h"


int
main(void)
{
    CHECK(pa_age(1000, 400) == 600);
    CHECK(pa_age(1000, 1000) == 0);

    /* another worker's clock 3 ms ahead: not 2^64 - 3 old */

    CHECK(pa_age(1000, 1003) == 0);
    CHECK(!pa_older(1000, 1003, 100));

    /* the bound is "more than" */

    CHECK(!pa_older(1100, 1000, 100));
    CHECK(pa_older(1101, 1000, 100));

    /* near the top of the range and across it */

    CHECK(pa_age(5, UINT64_MAX - 4) == 10);
    CHECK(pa_age(UINT64_MAX - 4, 5) == 0);
    CHECK(pa_older(5, UINT64_MAX - 200, 100));

    return UNIT_DONE();
}
