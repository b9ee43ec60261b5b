
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The fields fuzz_openai_diff.c compares, in a layout of their own: the
 * reference extractor fills the result struct of its own header, which
 * has fewer fields than today's, so each side copies its result here
 * (fuzz/ref_shim.c for the reference, compiled with the reference's
 * header).
 */


#ifndef _FUZZ_FIELDS_H_INCLUDED_
#define _FUZZ_FIELDS_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>
#include <string.h>


typedef struct {
    int              status;
    uint64_t         hash;
    size_t           chars;
    size_t           scanned;
    unsigned         has_pck;
    unsigned         pck_invalid;
    size_t           pck_len;
    unsigned char    pck[64];
} d_fields_t;


/* from a result of either layout ("r" a pointer to it) */
#define D_FIELDS_COPY(f, r)                                                   \
    do {                                                                      \
        memset((f), 0, sizeof(d_fields_t));                                   \
        (f)->status = (int) (r)->status;                                      \
        (f)->hash = (r)->hash;                                                \
        (f)->chars = (r)->chars;                                              \
        (f)->scanned = (r)->scanned;                                          \
        (f)->has_pck = (r)->has_pck;                                          \
        (f)->pck_invalid = (r)->pck_invalid;                                  \
        (f)->pck_len = (r)->pck_len;                                          \
        memcpy((f)->pck, (r)->pck, sizeof((f)->pck));                         \
    } while (0)


#endif /* _FUZZ_FIELDS_H_INCLUDED_ */
