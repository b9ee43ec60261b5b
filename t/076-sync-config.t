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
"prefix_aware_sync" directive needs "key=", a secret the hosts share



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
invalid "interval" value "2s" in "prefix_aware_sync", it must be a time from 1ms to 1s



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



=== TEST 11: a good one starts, and the status page shows it
--- http_config
    upstream up {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:1991 key=1234567890123456
                          peer=127.0.0.1:1992 interval=5ms load=work;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /st { prefix_aware_status; }
--- request
GET /st
--- response_body_like: "sync": \{ "listen": "127.0.0.1:1991", "peers": 1, "hosts": 0, "senders": 0, "interval_ms": 5, "skew_ms": 1000, "load": "work",
--- no_error_log
[alert]



=== TEST 12: skew out of its range
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



=== TEST 13: skew as set shows on the status page
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
