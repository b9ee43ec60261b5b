
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * An engine's /metrics page, a line at a time: a line is a sample
 * ("name{label="value",...} value [timestamp]"), a comment ("# HELP",
 * "# TYPE", "# EOF") or blank.  Only the names of pa_prom_names are read;
 * their values are parsed here, without the C library's locale.
 */


#include <stddef.h>
#include <string.h>

#include "pa_prom.h"


#define PA_PROM_INFO     PA_PROM_NFIELDS  /* vllm:cache_config_info */

/* digits of a mantissa kept (10^19 - 1 < 2^64), and the exponents' clamp */
#define PA_PROM_DIGITS   19
#define PA_PROM_EXP_MAX  100000


typedef struct {
    const char  *name;
    size_t       len;
    unsigned     field;
} pa_prom_name_t;


static const char *pa_prom_skip(const char *p, const char *end);
static const char *pa_prom_word(const char *p, const char *end);
static int pa_prom_number(const char *p, const char *end, double *v,
    uint64_t *work);
static int pa_prom_labels(const char **pp, const char *end, double *want,
    uint64_t *work);
static void pa_prom_take(pa_prom_t *pp, unsigned field, double v);


#define pa_prom_name(s, f)  { s, sizeof(s) - 1, f }

static const pa_prom_name_t  pa_prom_names[] = {
    pa_prom_name("vllm:cache_config_info", PA_PROM_INFO),
    pa_prom_name("vllm:num_requests_waiting", PA_PROM_WAITING),
    pa_prom_name("vllm:num_requests_running", PA_PROM_RUNNING),
    pa_prom_name("vllm:kv_cache_usage_perc", PA_PROM_USAGE),
    pa_prom_name("vllm:gpu_cache_usage_perc", PA_PROM_USAGE),
    pa_prom_name("sglang:max_total_num_tokens", PA_PROM_CAPACITY),
    pa_prom_name("sglang:num_queue_reqs", PA_PROM_WAITING),
    pa_prom_name("sglang:num_running_reqs", PA_PROM_RUNNING),
    pa_prom_name("sglang:token_usage", PA_PROM_USAGE),
    { NULL, 0, 0 }
};


/* exact in a double */
static const double  pa_prom_pow10[] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
    1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
};


void
pa_prom_init(pa_prom_t *pp)
{
    memset(pp, 0, offsetof(pa_prom_t, line));
}


void
pa_prom_feed(pa_prom_t *pp, const unsigned char *p, size_t n)
{
    size_t                len;
    const unsigned char  *nl;

    while (n) {
        nl = memchr(p, '\n', n);
        len = nl ? (size_t) (nl - p) : n;

        if (!pp->skip) {
            if (pp->len + len > PA_PROM_LINE_MAX) {
                pp->skip = 1;
                pp->len = 0;
                pp->longs++;

            } else {
                memcpy(pp->line + pp->len, p, len);
                pp->len += len;
            }
        }

        if (nl == NULL) {
            return;
        }

        if (!pp->skip) {
            pa_prom_line(pp, pp->line, pp->len);
        }

        pp->skip = 0;
        pp->len = 0;

        p = nl + 1;
        n -= len + 1;
    }
}


unsigned
pa_prom_finish(pa_prom_t *pp)
{
    if (pp->len && !pp->skip) {
        pa_prom_line(pp, pp->line, pp->len);
    }

    pp->len = 0;
    pp->skip = 0;

    if (pp->nusage) {
        pp->value[PA_PROM_USAGE] /= pp->nusage;
        pp->nusage = 0;
    }

    return pp->seen;
}


void
pa_prom_line(pa_prom_t *pp, const char *p, size_t n)
{
    double                 v, want[3];
    size_t                 len;
    const char            *end, *name;
    const pa_prom_name_t  *pn;

    end = p + n;
    pp->work += n;

    if (end > p && end[-1] == '\r') {
        end--;
    }

    p = pa_prom_skip(p, end);

    if (p == end || *p == '#') {
        return;
    }

    pp->lines++;

    name = p;
    p = pa_prom_word(p, end);
    len = p - name;

    for (pn = pa_prom_names; pn->name; pn++) {
        if (pn->len == len && memcmp(pn->name, name, len) == 0) {
            break;
        }
    }

    if (pn->name == NULL) {
        return;
    }

    want[0] = -1;
    want[1] = -1;
    want[2] = -1;

    if (p < end && *p == '{') {
        if (pa_prom_labels(&p, end, want, &pp->work) != 0) {
            pp->rejected++;
            return;
        }
    }

    if (p == end || (*p != ' ' && *p != '\t')) {
        pp->rejected++;
        return;
    }

    p = pa_prom_skip(p, end);
    name = p;

    while (p < end && *p != ' ' && *p != '\t') {
        p++;
    }

    if (pa_prom_number(name, p, &v, &pp->work) != 0) {
        pp->rejected++;
        return;
    }

    if (pn->field != PA_PROM_INFO) {
        pa_prom_take(pp, pn->field, v);
        return;
    }

    /*
     * vLLM's cache configuration is in its labels, the value is 1: the
     * tokens it holds are kv_cache_size_tokens where it gives them (vLLM
     * 0.11 and later: a hybrid model's blocks do not all hold block_size
     * tokens), block_size x num_gpu_blocks before
     */

    if (want[2] < 0) {
        if (want[0] < 1 || want[0] > 65536 || want[1] < 1) {
            pp->rejected++;
            return;
        }

        want[2] = want[0] * want[1];
    }

    pa_prom_take(pp, PA_PROM_CAPACITY, want[2]);
}


/* a sum over series is held at the bound of one series */

static void
pa_prom_take(pa_prom_t *pp, unsigned field, double v)
{
    double  min, max;

    switch (field) {

    case PA_PROM_CAPACITY:
        min = PA_PROM_CAPACITY_MIN;
        max = PA_PROM_CAPACITY_MAX;
        break;

    case PA_PROM_USAGE:
        min = 0;
        max = 1;
        break;

    default:
        min = 0;
        max = PA_PROM_COUNT_MAX;
        break;
    }

    if (!(v >= min && v <= max)) {
        pp->rejected++;
        return;
    }

    if (!(pp->seen & (1u << field))) {
        pp->value[field] = 0;
    }

    pp->seen |= 1u << field;

    if (field == PA_PROM_USAGE) {

        /* a mean, at most 1 */

        pp->value[field] += v;
        pp->nusage++;
        return;
    }

    if (pp->value[field] > max - v) {
        pp->value[field] = max;
        pp->clamped |= 1u << field;
        return;
    }

    pp->value[field] += v;
}


/*
 * {name="value",...}: the values of block_size, num_gpu_blocks and
 * kv_cache_size_tokens are given in want[0..2] as numbers (-1 where
 * absent or not a number, as vLLM's "None"); 0 on a well-formed set,
 * "*pp" after its "}"
 */

static int
pa_prom_labels(const char **pp, const char *end, double *want,
    uint64_t *work)
{
    double      *w;
    const char  *p, *name, *val;
    size_t       len;

    p = *pp + 1;

    for ( ;; ) {
        p = pa_prom_skip(p, end);

        if (p == end) {
            return -1;
        }

        if (*p == '}') {
            *pp = p + 1;
            return 0;
        }

        name = p;
        p = pa_prom_word(p, end);
        len = p - name;

        if (len == 0) {
            return -1;
        }

        p = pa_prom_skip(p, end);

        if (p == end || *p++ != '=') {
            return -1;
        }

        p = pa_prom_skip(p, end);

        if (p == end || *p++ != '"') {
            return -1;
        }

        val = p;

        while (p < end && *p != '"') {
            if (*p == '\\') {
                p++;

                if (p == end) {
                    return -1;
                }
            }

            p++;
        }

        if (p == end) {
            return -1;
        }

        w = NULL;

        if (len == 10 && memcmp(name, "block_size", 10) == 0) {
            w = &want[0];

        } else if (len == 14 && memcmp(name, "num_gpu_blocks", 14) == 0) {
            w = &want[1];

        } else if (len == 20
                   && memcmp(name, "kv_cache_size_tokens", 20) == 0)
        {
            w = &want[2];
        }

        if (w && pa_prom_number(val, p, w, work) != 0) {
            *w = -1;
        }

        p = pa_prom_skip(p + 1, end);

        if (p < end && *p == ',') {
            p++;
        }
    }
}


/*
 * a decimal number as Go's and Python's clients print them: [+-]digits
 * [.digits][e[+-]digits]; NaN and the infinities are refused.  One pass
 * over its characters: the first PA_PROM_DIGITS significant digits are
 * the mantissa, exact in an integer (the rest only move the point), the
 * exponents are clamped at PA_PROM_EXP_MAX as their digits are read, and
 * the scaling takes at most PA_PROM_SCALE_MAX steps, counted in "work":
 * a value over 1e300 is refused and one under 1e-300 is 0 without a
 * step.  With up to 15 significant digits and the point moved by at most
 * 22 places (all an engine prints), the value is the nearest double, as
 * strtod() gives it
 */

static int
pa_prom_number(const char *p, const char *end, double *v, uint64_t *work)
{
    int       neg, eneg, sig, digits, exp, e;
    double    r;
    uint64_t  m;

    neg = 0;

    if (p < end && (*p == '+' || *p == '-')) {
        neg = (*p == '-');
        p++;
    }

    m = 0;
    sig = 0;
    exp = 0;
    digits = 0;

    while (p < end && *p >= '0' && *p <= '9') {
        if (sig < PA_PROM_DIGITS) {
            m = m * 10 + (*p - '0');
            sig += (m != 0);

        } else if (exp < PA_PROM_EXP_MAX) {
            exp++;
        }

        p++;
        digits++;
    }

    if (p < end && *p == '.') {
        p++;

        while (p < end && *p >= '0' && *p <= '9') {
            if (sig < PA_PROM_DIGITS) {
                m = m * 10 + (*p - '0');
                sig += (m != 0);

                if (exp > -PA_PROM_EXP_MAX) {
                    exp--;
                }
            }

            p++;
            digits++;
        }
    }

    if (digits == 0) {
        return -1;
    }

    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        eneg = 0;

        if (p < end && (*p == '+' || *p == '-')) {
            eneg = (*p == '-');
            p++;
        }

        if (p == end || *p < '0' || *p > '9') {
            return -1;
        }

        e = 0;

        while (p < end && *p >= '0' && *p <= '9') {
            if (e < PA_PROM_EXP_MAX) {
                e = e * 10 + (*p - '0');
            }

            p++;
        }

        exp += eneg ? -e : e;
    }

    if (p != end) {
        return -1;
    }

    /* m x 10^exp is at least 10^(exp + sig - 1), less than 10^(exp + sig) */

    if (m == 0 || exp + sig < -299) {
        r = 0;

    } else if (exp + sig > 301) {
        return -1;

    } else {
        r = (double) m;

        while (exp > 22) {
            r *= 1e22;
            exp -= 22;
            (*work)++;
        }

        while (exp < -22) {
            r /= 1e22;
            exp += 22;
            (*work)++;
        }

        r = (exp < 0) ? r / pa_prom_pow10[-exp] : r * pa_prom_pow10[exp];
        (*work)++;

        if (r > 1e300) {
            return -1;
        }
    }

    *v = neg ? -r : r;

    return 0;
}


static const char *
pa_prom_skip(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }

    return p;
}


/* a metric's or a label's name: [a-zA-Z_:][a-zA-Z0-9_:]* */

static const char *
pa_prom_word(const char *p, const char *end)
{
    while (p < end
           && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
               || (*p >= '0' && *p <= '9') || *p == '_' || *p == ':'))
    {
        p++;
    }

    return p;
}
