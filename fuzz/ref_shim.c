
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The reference extractor's result, copied field by field: fuzz.mk
 * compiles this with the reference's own pa_openai.h (and its functions
 * renamed ref_oai_*), so its pa_oai_result_t is the reference's.
 */


#include <string.h>

#include "pa_openai.h"
#include "fuzz_fields.h"


void ref_oai_fields(pa_oai_t *x, d_fields_t *f);


void
ref_oai_fields(pa_oai_t *x, d_fields_t *f)
{
    pa_oai_result_t  res;

    memset(&res, 0, sizeof(pa_oai_result_t));
    pa_oai_finish(x, &res);

    D_FIELDS_COPY(f, &res);
}
