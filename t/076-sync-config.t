# prefix_aware_sync's configuration errors: each names the parameter and
# what it must be; the module never starts sharing half configured.

use Test::Nginx::Socket 'no_plan';

repeat_each(1);
no_shuffle();
run_tests();

__DATA__

=== TEST 1: a key is needed
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware_sync" directive needs "key_file=" (or "key="), a secret the hosts share



=== TEST 2: a key of 15 characters is too short
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=123456789012345
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "key" in "prefix_aware_sync", it must be 16 to 256 characters long



=== TEST 3: a peer is needed
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware_sync" directive needs at least one "peer="



=== TEST 4: interval out of its range
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 interval=2s;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "interval" value "2s" in "prefix_aware_sync", it must be a time from 10ms to 1s



=== TEST 5: a peer without a port
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid peer "127.0.0.1" in "prefix_aware_sync", it must be an address and a UDP port



=== TEST 6: before prefix_aware
--- http_config
    upstream up {
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992;
        prefix_aware;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware_sync" directive must come after "prefix_aware" in the upstream



=== TEST 7: with index=off there is nothing to share
--- http_config
    upstream up {
        prefix_aware index=off;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware_sync" in upstream "up" shares the index, which is off



=== TEST 8: two upstreams on one address
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
    upstream up2 {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /t2 { proxy_pass http://up2; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware_sync" in upstream "up2": address "127.0.0.1:1991" is taken by another upstream



=== TEST 9: an unknown parameter
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 load=maybe;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid parameter "load=maybe" in "prefix_aware_sync"



=== TEST 10: duplicate
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992;
        prefix_aware_sync 127.0.0.1:1993 key=1234567890123456
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware_sync" directive is duplicate



=== TEST 11: a good one starts (interval at its floor, 10ms), and the status page shows it
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 interval=10ms load=work;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /st
--- response_body_like: "sync": \{ "listen": "127.0.0.1:1991", "peers": 1, "hosts": 0, "senders": 0, "interval_ms": 10, "skew_ms": 1000, "load": "work",
--- no_error_log
[alert]



=== TEST 12a: skew out of its range
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 skew=5ms;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "skew" value "5ms" in "prefix_aware_sync", it must be a time from 10ms to 60s



=== TEST 12b: skew as set shows on the status page
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 skew=250ms;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /st
--- response_body_like: "skew_ms": 250,
--- no_error_log
[alert]



=== TEST 12: interval=1ms: below the floor of 10ms (each worker would wake 1000 times a second)
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 interval=1ms;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log
invalid "interval" value "1ms" in "prefix_aware_sync", it must be a time from 10ms to 1s



=== TEST 13: interval=9ms: below the floor too
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 interval=9ms;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log
invalid "interval" value "9ms" in "prefix_aware_sync", it must be a time from 10ms to 1s



=== TEST 14: key= twice
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          key=abcdefghijklmnop peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log
"key=" in "prefix_aware_sync" is duplicate: the key is given once, by "key_file=" or "key="



=== TEST 15: key= and key_file= together
--- user_files
>>> sync.key
00112233445566778899aabbccddeeff
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          key_file=../html/sync.key peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log
"key_file=" in "prefix_aware_sync" is duplicate: the key is given once, by "key_file=" or "key="



=== TEST 16: key_file= twice
--- user_files
>>> sync.key
00112233445566778899aabbccddeeff
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key_file=../html/sync.key
                          key_file=../html/sync.key peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log
"key_file=" in "prefix_aware_sync" is duplicate: the key is given once, by "key_file=" or "key="



=== TEST 17: a key file that is not there
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key_file=../html/none.key
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log eval
qr/"key_file" ".*\/conf\/\.\.\/html\/none\.key" of "prefix_aware_sync" cannot be opened \(2: No such file or directory\)/



=== TEST 18: a key file of 30 hex digits (120 bits) is too short
--- user_files
>>> sync.key
00112233445566778899aabbccddee
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key_file=../html/sync.key
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log eval
qr/invalid "key_file" ".*sync\.key" of "prefix_aware_sync", it must hold at least 128 bits: 32 or more hex digits, or the base64 of 16 or more bytes/



=== TEST 19: a key file of an odd number of hex digits
--- user_files
>>> sync.key
00112233445566778899aabbccddeeff0
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key_file=../html/sync.key
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log eval
qr/invalid "key_file" ".*sync\.key" of "prefix_aware_sync", it must hold at least 128 bits/



=== TEST 20: a key file of the base64 of 15 bytes is too short
--- user_files
>>> sync.key
AAECAwQFBgcICQoLDA0O
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key_file=../html/sync.key
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log eval
qr/invalid "key_file" ".*sync\.key" of "prefix_aware_sync", it must hold at least 128 bits/



=== TEST 21: a pass-phrase in a key file is neither hex nor base64
--- user_files
>>> sync.key
correct horse battery staple!
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key_file=../html/sync.key
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log eval
qr/invalid "key_file" ".*sync\.key" of "prefix_aware_sync", it must hold at least 128 bits/



=== TEST 22: an empty key file
--- user_files
>>> sync.key

--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key_file=../html/sync.key
                          peer=127.0.0.1:1992;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log eval
qr/invalid "key_file" ".*sync\.key" of "prefix_aware_sync", it must hold at least 128 bits/



=== TEST 23: a key file of 32 hex digits, relative to the configuration's directory; readable by all: a warning
--- user_files
>>> sync.key
  00112233445566778899AABBCCDDEEFF

--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:$TEST_NGINX_RAND_PORT_1 key_file=../html/sync.key
                          peer=127.0.0.1:$TEST_NGINX_RAND_PORT_2;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /st
--- response_body_like: "sync": \{ "listen": "127.0.0.1:\d+", "peers": 1,
--- error_log eval
qr/\[warn\] .*"key_file" ".*sync\.key" of "prefix_aware_sync" can be read by every user of the machine/
--- no_error_log
[alert]
[emerg]



=== TEST 24: a key file of base64 over two lines (openssl rand -base64 48 wraps at 64)
--- user_files
>>> sync.key
q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq83v
EjRWeJq83vEjRWeJq83vEjRWeJq8
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:$TEST_NGINX_RAND_PORT_1 key_file=../html/sync.key
                          peer=127.0.0.1:$TEST_NGINX_RAND_PORT_2;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /st
--- response_body_like: "sync": \{ "listen": "127.0.0.1:\d+", "peers": 1,
--- no_error_log
[alert]
[emerg]



=== TEST 25: rcvbuf= that is not a size
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 rcvbuf=lots;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log
invalid "rcvbuf" value "lots" in "prefix_aware_sync", it must be a size from 4k to 1g



=== TEST 26: rcvbuf= below 4k
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 rcvbuf=1k;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /t
--- must_die
--- error_log
invalid "rcvbuf" value "1k" in "prefix_aware_sync", it must be a size from 4k to 1g



=== TEST 27: rcvbuf=64k is set on the listening socket: the kernel has twice it, and no drops
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:$TEST_NGINX_RAND_PORT_1 key=1234567890123456
                          peer=127.0.0.1:$TEST_NGINX_RAND_PORT_2 rcvbuf=64k;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /st
--- response_body_like: "sync_socket": \{ "rcvbuf": 131072, "kernel_drops": 0 \},
--- no_error_log
[alert]
[emerg]



=== TEST 28: the kernel's counts on the Prometheus page
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:$TEST_NGINX_RAND_PORT_1 key=1234567890123456
                          peer=127.0.0.1:$TEST_NGINX_RAND_PORT_2 rcvbuf=64k;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /st?format=prometheus
--- response_body_like: nginx_prefix_aware_sync_rcvbuf_bytes\{upstream="up"\} 131072\n(?s:.*)nginx_prefix_aware_sync_kernel_drops_total\{upstream="up"\} 0\n
--- no_error_log
[alert]
[emerg]
