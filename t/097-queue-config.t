# queue=, queue_timeout=, queue_poll=, queue_status=, queue_retry=,
# queue_reserve=, priority=, priority_reserve= and flow=: configuration
# errors name the parameter and its range; queue=off is the default
# (nothing waits, t/095-queue.t).

use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__
=== TEST 1: queue=0 is below the range
--- http_config
    upstream up {
        prefix_aware queue=0;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "queue" value "0" in "prefix_aware", it must be a number from 1 to 65536



=== TEST 2: queue=65537 is above the range
--- http_config
    upstream up {
        prefix_aware queue=65537;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "queue" value "65537" in "prefix_aware", it must be a number from 1 to 65536



=== TEST 3: queue_timeout out of range
--- http_config
    upstream up {
        prefix_aware queue=8 queue_timeout=2h;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "queue_timeout" value "2h" in "prefix_aware", it must be a time from 1ms to 1h



=== TEST 4: queue_poll out of range
--- http_config
    upstream up {
        prefix_aware queue=8 queue_poll=2s;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "queue_poll" value "2s" in "prefix_aware", it must be a time from 1ms to 1s



=== TEST 5: queue_status other than 429 or 503
--- http_config
    upstream up {
        prefix_aware queue=8 queue_status=500;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "queue_status" value "500" in "prefix_aware", it must be 429 or 503



=== TEST 6: queue_retry out of range
--- http_config
    upstream up {
        prefix_aware queue=8 queue_retry=3601;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "queue_retry" value "3601" in "prefix_aware", it must be a number from 0 to 3600



=== TEST 7: priority not a variable
--- http_config
    upstream up {
        prefix_aware queue=8 priority=5;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "priority" value "5" in "prefix_aware", it must be a $variable



=== TEST 8: flow not a variable
--- http_config
    upstream up {
        prefix_aware queue=8 flow=tenant;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "flow" value "tenant" in "prefix_aware", it must be a $variable



=== TEST 9: queue parameters without queue=N
--- http_config
    upstream up {
        prefix_aware queue_timeout=1s;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
prefix_aware: queue_timeout=, queue_poll=, queue_status=, queue_retry=, queue_reserve=, priority=, priority_reserve= and flow= need queue=N in upstream "up"



=== TEST 10: priority without queue=N
--- http_config
    upstream up {
        prefix_aware priority=$http_x_p;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
need queue=N in upstream "up"



=== TEST 11: queue=off after queue=N turns it off; the status page has no queue
--- http_config
    upstream up {
        prefix_aware queue=8 queue=off;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { prefix_aware_status; }
--- request
GET /t?format=json
--- response_body_unlike
"queue"
--- no_error_log
[error]



=== TEST 12: every parameter given: the status page shows them
--- http_config
    upstream up {
        prefix_aware queue=8 queue_timeout=3s queue_poll=2ms queue_status=503 queue_retry=4 queue_reserve=3 priority=$http_x_p priority_reserve=2 flow=$http_x_t;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { prefix_aware_status; }
--- request
GET /t?format=json
--- response_body_like chomp
"queue": \{ "size": 8, "timeout_ms": 3000, "poll_ms": 2, "status": 503, "retry_after": 4, "reserve": 3, "priority_reserve": 2, "priority": "\$http_x_p", "flow": "\$http_x_t", "waiting": 0,
--- no_error_log
[error]



=== TEST 13: queue_reserve out of range
--- http_config
    upstream up {
        prefix_aware queue=8 queue_reserve=1024;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "queue_reserve" value "1024" in "prefix_aware", it must be a number from 0 to 1023



=== TEST 14: queue_reserve not below threshold
--- http_config
    upstream up {
        prefix_aware threshold=4 queue=8 queue_reserve=4;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
prefix_aware: queue_reserve=4 and priority_reserve=0 together must be less than threshold=4 in upstream "up"



=== TEST 15: queue_reserve without queue=N
--- http_config
    upstream up {
        prefix_aware queue_reserve=2;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
need queue=N in upstream "up"



=== TEST 16: priority_reserve out of range
--- http_config
    upstream up {
        prefix_aware queue=8 priority=$http_x_p priority_reserve=-1;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "priority_reserve" value "-1" in "prefix_aware", it must be a number from 0 to 1023



=== TEST 17: queue_reserve and priority_reserve together not below threshold
--- http_config
    upstream up {
        prefix_aware threshold=6 queue=8 queue_reserve=3 priority=$http_x_p priority_reserve=3;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
prefix_aware: queue_reserve=3 and priority_reserve=3 together must be less than threshold=6 in upstream "up"



=== TEST 18: priority_reserve without priority=
--- http_config
    upstream up {
        prefix_aware queue=8 priority_reserve=2;
        server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
prefix_aware: priority_reserve= needs priority=$var in upstream "up"
