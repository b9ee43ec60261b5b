
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * libFuzzer target of src/pa_sync.c (make fuzz-sync): any bytes as a
 * datagram of prefix_aware_sync, read twice: as they are (the tag must
 * refuse them) and with a good tag written over their last 8 bytes, so
 * that the entries' reader meets every shape a writer with the key could
 * send.  Every entry read keeps n <= PA_SYNC_MAX_HASHES, cached <= n <=
 * size; and (ASan) nothing is read past the datagram.  A datagram that
 * opens is then offered twice to a table of senders kept across inputs
 * (its clock from the input's first bytes): taken once at most, never
 * twice, whatever the table holds.
 */


#include <stdlib.h>
#include <string.h>

#include "pa_sync.h"


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);


static pa_sync_peer_t  fuzz_table[4];


int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    int               rc;
    unsigned          slot;
    uint64_t          tag, wall, hashes[PA_SYNC_MAX_HASHES];
    unsigned char    *copy;
    pa_sync_key_t     key;
    pa_sync_msg_t     m;
    pa_sync_load_t    l;
    pa_sync_state_t   st;
    pa_sync_record_t  r;

    key.k0 = 0x0706050403020100ULL;
    key.k1 = 0x0f0e0d0c0b0a0908ULL;

    copy = malloc(size ? size : 1);
    if (copy == NULL) {
        abort();
    }

    memcpy(copy, data, size);

    (void) pa_sync_open(&m, copy, size, &key, 0);

    if (size >= PA_SYNC_HEAD + PA_SYNC_TAG && size <= PA_SYNC_MTU) {
        tag = pa_siphash(&key, copy, size - PA_SYNC_TAG);
        memcpy(copy + size - PA_SYNC_TAG, &tag, 8);   /* little-endian */

        /* the upstream as the datagram says, so that the entries are read */

        memcpy(&tag, copy + 16, 8);
        rc = pa_sync_open(&m, copy, size, &key, tag);

        if (rc == PA_SYNC_OK) {
            memcpy(&wall, copy + 8, 8);
            wall = m.sent + (wall % 3000) - 1500;
            slot = 99;

            rc = pa_sync_admit(fuzz_table, 4, &m, wall, 1000, &slot);

            if ((rc == PA_SYNC_OK) != (slot < 4)
                || (rc != PA_SYNC_OK && rc != PA_SYNC_ESTALE
                    && rc != PA_SYNC_EREPLAY && rc != PA_SYNC_EFULL)
                || (rc == PA_SYNC_OK
                    && pa_sync_admit(fuzz_table, 4, &m, wall, 1000, &slot)
                       != PA_SYNC_EREPLAY))
            {
                abort();
            }

            fuzz_table[m.sent % 4].live = (m.seq & 1);

            while ((rc = pa_sync_next_record(&m, &r, hashes)) == 1) {
                if (r.n > PA_SYNC_MAX_HASHES || r.cached > r.n
                    || r.size < r.n)
                {
                    abort();
                }
            }

            while ((rc = pa_sync_next_load(&m, &l)) == 1) {
                /* void */
            }

            while ((rc = pa_sync_next_state(&m, &st)) == 1) {
                if (st.server == 0 || st.id == 0) {
                    abort();
                }
            }
        }
    }

    free(copy);

    return 0;
}
