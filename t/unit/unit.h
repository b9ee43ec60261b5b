
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * A minimal harness for the C unit tests of src/: CHECK() counts, and
 * UNIT_DONE() prints "unit: N passed, N failed" and gives the exit code.
 */


#ifndef _UNIT_H_INCLUDED_
#define _UNIT_H_INCLUDED_


#include <stdio.h>


static int  unit_passed;
static int  unit_failed;


#define CHECK(cond)                                                           \
    do {                                                                      \
        if (cond) {                                                           \
            unit_passed++;                                                    \
        } else {                                                              \
            unit_failed++;                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n",                      \
                    __FILE__, __LINE__, #cond);                               \
        }                                                                     \
    } while (0)


#define CHECK_MSG(cond, ...)                                                  \
    do {                                                                      \
        if (cond) {                                                           \
            unit_passed++;                                                    \
        } else {                                                              \
            unit_failed++;                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ",                      \
                    __FILE__, __LINE__, #cond);                               \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)


#define UNIT_DONE()                                                           \
    (printf("unit: %d passed, %d failed\n", unit_passed, unit_failed),        \
     unit_failed ? 1 : 0)


#endif /* _UNIT_H_INCLUDED_ */
