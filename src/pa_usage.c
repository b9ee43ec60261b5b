
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The cached_tokens of an engine's answer, read as it streams by (see
 * pa_usage.h).  Plain C, no nginx headers.
 */


#include <string.h>

#include "pa_usage.h"


static const char  pa_usage_key[] = "\"cached_tokens\"";

#define PA_USAGE_KEY_LEN  (sizeof(pa_usage_key) - 1)

/* the states after the key: before the colon, before the value, in it */
#define PA_USAGE_COLON    (PA_USAGE_KEY_LEN)
#define PA_USAGE_VALUE    (PA_USAGE_KEY_LEN + 1)
#define PA_USAGE_NUMBER   (PA_USAGE_KEY_LEN + 2)


static void pa_usage_end(pa_usage_t *u, unsigned char c);


void
pa_usage_init(pa_usage_t *u)
{
    memset(u, 0, sizeof(pa_usage_t));
}


void
pa_usage_feed(pa_usage_t *u, const unsigned char *p, size_t n)
{
    unsigned char        c;
    const unsigned char  *last;

    for (last = p + n; p < last; p++) {
        c = *p;

        if (u->state < PA_USAGE_KEY_LEN) {

            /* only the first and last bytes of the key are quotes */

            if (c == (unsigned char) pa_usage_key[u->state]) {
                u->state++;

            } else {
                u->state = (c == '"') ? 1 : 0;
            }

            continue;
        }

        switch (u->state) {

        case PA_USAGE_COLON:
            if (c == ':') {
                u->state = PA_USAGE_VALUE;

            } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
                u->state = (c == '"') ? 1 : 0;
            }

            break;

        case PA_USAGE_VALUE:
            if (c >= '0' && c <= '9') {
                u->cur = c - '0';
                u->state = PA_USAGE_NUMBER;

            } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
                u->rejected++;
                u->state = (c == '"') ? 1 : 0;
            }

            break;

        default: /* PA_USAGE_NUMBER */
            if (c >= '0' && c <= '9') {
                if (u->cur <= PA_USAGE_MAX) {
                    u->cur = u->cur * 10 + (c - '0');
                }

                break;
            }

            pa_usage_end(u, c);
            u->state = (c == '"') ? 1 : 0;
            break;
        }
    }
}


int
pa_usage_finish(pa_usage_t *u, uint64_t *tokens)
{
    if (u->state == PA_USAGE_NUMBER) {
        pa_usage_end(u, ' ');
    }

    u->state = 0;

    if (u->seen == 0) {
        return 0;
    }

    *tokens = u->value;

    return 1;
}


/* the number ended at "c": a JSON integer ends with , } ] or white space */

static void
pa_usage_end(pa_usage_t *u, unsigned char c)
{
    if (u->cur > PA_USAGE_MAX
        || (c != ',' && c != '}' && c != ']' && c != ' ' && c != '\t'
            && c != '\r' && c != '\n'))
    {
        u->rejected++;
        return;
    }

    u->value = u->cur;
    u->seen++;
}
