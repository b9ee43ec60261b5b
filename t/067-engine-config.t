# metrics= and capacity=auto: a bad value stops nginx with a message naming
# the parameter and its range or the reason; the edge values are accepted.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

no_shuffle();
run_tests();

__DATA__

=== TEST 1: metrics_interval=5ms is below the range
--- http_config
    upstream up {
        prefix_aware metrics=/metrics metrics_interval=5ms;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "metrics_interval" value "5ms" in "prefix_aware", it must be a time from 10ms to 60s


=== TEST 2: metrics_interval=61s is above the range
--- http_config
    upstream up {
        prefix_aware metrics=/metrics metrics_interval=61s;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "metrics_interval" value "61s" in "prefix_aware", it must be a time from 10ms to 60s


=== TEST 3: metrics= is a path
--- http_config
    upstream up {
        prefix_aware metrics=metrics;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "metrics" value "metrics" in "prefix_aware", it must be "off" or a path from "/", of up to 256 characters


=== TEST 4: capacity=auto needs the index
--- http_config
    upstream up {
        prefix_aware index=off capacity=auto;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"capacity=auto" in "prefix_aware" of upstream "up" sets the capacity of the index, which is off


=== TEST 5: capacity=auto reads the metrics
--- http_config
    upstream up {
        prefix_aware capacity=auto metrics=off;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"capacity=auto" in "prefix_aware" of upstream "up" reads the engines' metrics, it cannot go with "metrics=off"


=== TEST 6: capacity=auto: with a fallback below the range
--- http_config
    upstream up {
        prefix_aware capacity=auto:1000;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "capacity=auto" value "1000" in "prefix_aware", it must be a number from 1024 to 100000000


=== TEST 7: capacity=automatic is not a value
--- http_config
    upstream up {
        prefix_aware capacity=automatic;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "capacity" value "automatic" in "prefix_aware", it must be a number from 1024 to 100000000, "auto" or "auto:" and a number


=== TEST 7a: load= is own or engine
--- http_config
    upstream up {
        prefix_aware metrics=/metrics load=theirs;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "load" value "theirs" in "prefix_aware", it must be "own" or "engine"



=== TEST 7b: load=engine needs the metrics
--- http_config
    upstream up {
        prefix_aware load=engine;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"load=engine" in "prefix_aware" of upstream "up" needs the engines' metrics ("metrics=") and the index



=== TEST 8: the edges are accepted, and capacity= after capacity=auto wins
--- http_config
    upstream a {
        prefix_aware capacity=auto:1024 metrics_interval=10ms;
        server 127.0.0.1:1985;
    }
    upstream b {
        prefix_aware capacity=auto:100000000 metrics=/m metrics_interval=60s;
        server 127.0.0.1:1985;
    }
    upstream c {
        prefix_aware capacity=auto capacity=4096 metrics=off load=own;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://a; }
--- request
GET /t
--- error_code: 200
--- response_body_like: b1



=== TEST 9: feedback=on corrects the index: not with index=off
--- http_config
    upstream up {
        prefix_aware index=off feedback=on;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"feedback=on" in "prefix_aware" of upstream "up" corrects the index, which is off



=== TEST 10: feedback= is on or off
--- http_config
    upstream up {
        prefix_aware feedback=yes;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "feedback" value "yes" in "prefix_aware", it must be "on" or "off"



=== TEST 11: feedback=off after feedback=on, and feedback=on with the index, are accepted
--- http_config
    upstream a {
        prefix_aware feedback=on;
        server 127.0.0.1:1985;
    }
    upstream b {
        prefix_aware index=off feedback=on feedback=off;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://a; }
    location /u { proxy_pass http://b; }
--- request
GET /t
--- error_code: 200
--- response_body_like: b1
