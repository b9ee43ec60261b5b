
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The prefix index: matching block hashes in the shared region, the
 * readers' side.  Recording them is in pa_index.c, the layout of a
 * bucket and the helpers both share in pa_index_int.h.  Plain C, no
 * nginx headers.
 */


#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "pa_index_int.h"


static uint32_t pa_index_probe(pa_index_t *idx, uint64_t hash,
    uint32_t limit, uint32_t *servers);


uint32_t
pa_index_match(pa_index_t *idx, const uint64_t *hashes, uint32_t n,
    uint32_t *depth, uint32_t nservers, uint32_t *found, uint32_t *nfound)
{
    memset(depth, 0, nservers * sizeof(uint32_t));

    return pa_index_match_found(idx, hashes, n, depth, nservers, found,
                                nfound);
}


uint32_t
pa_index_match_found(pa_index_t *idx, const uint64_t *hashes, uint32_t n,
    uint32_t *depth, uint32_t nservers, uint32_t *found, uint32_t *nfound)
{
    int32_t   i;
    uint32_t  k, m, nf, lo, hi, mid, limit, first, left, full, s, max;
    uint32_t  servers[8], first_servers[8];

    nf = 0;

    if (nfound != NULL) {
        *nfound = 0;
    }

    limit = (nservers < idx->nservers) ? nservers : idx->nservers;

    if (n == 0 || limit == 0) {
        return 0;
    }

    /* a cold prefix costs one read */

    first = pa_index_probe(idx, hashes[0], limit, first_servers);
    if (first == 0) {
        return 0;
    }

    /*
     * block i's hash stands for blocks 1..i, so the held blocks are a
     * prefix, as far as the table remembers them: the deepest one is
     * found by bisection, the last block first, as a repeated prompt
     * holds them all
     */

    lo = 1;
    hi = n;

    if (pa_index_probe(idx, hashes[n - 1], limit, servers) == 0) {
        hi = n - 1;

        while (lo < hi) {
            mid = lo + (hi - lo + 1) / 2;

            if (pa_index_probe(idx, hashes[mid - 1], limit, servers) > 0) {
                lo = mid;

            } else {
                hi = mid - 1;
            }
        }

    } else {
        lo = n;
    }

    /*
     * down from the deepest held block, each server's depth is the first
     * block it is met at.  when block 1 has room for more holders, every
     * server that holds a block is among them: the walk stops once they
     * are all met.  else some servers were pushed out of block 1's list
     * and only the walk to block 1 finds them.
     */

    full = (first == idx->holders);
    max = 0;

    for (i = (int32_t) lo - 1; i >= 0 && i >= (int32_t) lo - PA_INDEX_WALK;
         i--)
    {
        pa_index_prefetch(idx, hashes[i]);
    }

    for (i = (int32_t) lo - 1; i >= 0; i--) {

        if (i >= PA_INDEX_WALK) {
            pa_index_prefetch(idx, hashes[i - PA_INDEX_WALK]);
        }

        m = (i == 0) ? first : pa_index_probe(idx, hashes[i], limit,
                                              servers);

        for (k = 0; k < m; k++) {
            s = (i == 0) ? first_servers[k] : servers[k];

            if (depth[s] != 0) {
                continue;
            }

            depth[s] = (uint32_t) i + 1;
            max = (max == 0) ? depth[s] : max;

            if (found != NULL) {
                found[nf] = s;
            }

            nf++;
        }

        if (!full) {
            left = 0;

            for (k = 0; k < first; k++) {
                left += (depth[first_servers[k]] == 0);
            }

            if (left == 0) {
                break;
            }
        }
    }

    if (nfound != NULL) {
        *nfound = nf;
    }

    return max;
}


/* the valid holders of a block hash, at most idx->holders of them */

static uint32_t
pa_index_probe(pa_index_t *idx, uint64_t hash, uint32_t limit,
    uint32_t *servers)
{
    size_t           ent, sv;
    uint32_t         e, k, h, m, s, tag;
    pa_index_copy_t  c;

    if (pa_index_read(pa_index_bucket(idx, hash), &c) != 0) {
        return 0;
    }

    h = idx->holders;
    tag = (uint32_t) (hash >> 32);

    for (e = 0; e < idx->ways; e++) {
        ent = PA_INDEX_BUCKET_HEAD + (size_t) e * idx->entry_size;

        if (pa_index_get32(&c, ent) != tag) {
            continue;
        }

        sv = ent + 4 + 4 * h;
        m = 0;

        for (k = 0; k < h; k++) {
            s = pa_index_get16(&c, sv + 2 * k);

            /* the id is checked: the region is trusted for nothing */

            if (s >= limit) {
                continue;
            }

            if (pa_index_life_at(idx, s, pa_index_get32(&c, ent + 4 + 4 * k),
                                 c.w[1])
                >= 0)
            {
                servers[m++] = s;
            }
        }

        if (m > 0) {
            return m;
        }
    }

    return 0;
}
