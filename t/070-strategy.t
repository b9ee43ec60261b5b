# strategy=: prefix, least_outstanding and random from one directive, fixed
# or per request from a variable.  Concurrency comes from SSI as in
# t/005-spill.t: the includes of a page run at the same time and share the
# page's id header, so they have the same key, whose home with three
# servers is b3 ("tenant-d", see t/005-spill.t).  /slow answers after
# about a second, so the includes overlap; /t answers at once.
#
# Each test fails without the feature: nginx refuses the parameter, or the
# prefix strategy would send every request with the key to b3.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

our $SLOW = '<!--# include virtual="/slow" -->';
our $FAST = '<!--# include virtual="/t" -->';

no_shuffle();
worker_connections(1024);
check_accum_error_log();
run_tests();

__DATA__

=== TEST 1: an unknown strategy names the parameter and the values
--- http_config
    upstream up {
        prefix_aware index=off strategy=round_robin;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "strategy" value "round_robin" in "prefix_aware", it must be "prefix", "least_outstanding", "random" or a $variable



=== TEST 2: an unknown default
--- http_config
    upstream up {
        prefix_aware index=off strategy=$arg_s strategy_default=fastest;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "strategy_default" value "fastest" in "prefix_aware", it must be "prefix", "least_outstanding" or "random"



=== TEST 3: a default without a variable
--- http_config
    upstream up {
        prefix_aware index=off strategy_default=random;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"strategy_default" in "prefix_aware" follows a variable: "strategy=$name strategy_default=random"



=== TEST 4: a variable name with a character no variable has
--- http_config
    upstream up {
        prefix_aware index=off strategy=$arm-b;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "strategy" value "$arm-b" in "prefix_aware", a variable's name has letters, digits and "_" only



=== TEST 5: a variable nginx does not know
--- http_config
    upstream up {
        prefix_aware index=off strategy=$no_such_arm;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
unknown "no_such_arm" variable



=== TEST 6: strategy=prefix: three concurrent requests with one key stay at its home b3
--- http_config
    upstream up {
        prefix_aware index=off length=1024 strategy=prefix;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/p.html", $::SLOW x 3]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/p.html
--- response_body eval
"b3\n" x 3
--- timeout: 6
--- no_error_log
[error]



=== TEST 7: least_outstanding: the same three go to three servers, the home first (affinity), the others spill
--- http_config
    upstream up {
        prefix_aware index=off length=1024 strategy=least_outstanding;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/lo.html", $::SLOW x 3]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/lo.html
--- response_body_like eval
qr/\A(b[123])\n(?!\1)(b[123])\n(?!\1|\2)b[123]\n\z/
--- grep_error_log eval
qr/prefix_aware strategy \w+: server \d+, 0 in flight/
--- grep_error_log_out eval
"prefix_aware strategy least_outstanding: server 0, 0 in flight\n"
. "prefix_aware strategy least_outstanding: server 1, 0 in flight\n"
. "prefix_aware strategy least_outstanding: server 2, 0 in flight\n"
--- timeout: 6
--- no_error_log
[error]



=== TEST 8: least_outstanding counts per weight: of 4 concurrent requests the weight=2 server takes 2
--- http_config
    upstream up {
        prefix_aware index=off length=1024 strategy=least_outstanding;
        server 127.0.0.1:1985 weight=2;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/low.html", $::SLOW x 4]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/low.html
--- response_body_like eval
qr/\A(?=(?:.*?b1\n){2})(?!(?:.*?b1\n){3})(?=.*?b2\n)(?=.*?b3\n)(?:b[123]\n){4}\z/s
--- timeout: 6
--- no_error_log
[error]



=== TEST 9: random: 60 requests with one key reach every server (all at b3 by prefix; each server missed with p < 1e-10)
--- http_config
    upstream up {
        prefix_aware index=off length=1024 strategy=random;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /t { proxy_pass http://up; }
--- user_files eval
[["ssi/r.html", $::FAST x 60]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/r.html
--- response_body_like eval
qr/\A(?=.*?b1\n)(?=.*?b2\n)(?=.*?b3\n)(?:b[123]\n){60}\z/s
--- no_error_log
[error]



=== TEST 10: random never takes a down server
--- http_config
    upstream up {
        prefix_aware index=off length=1024 strategy=random;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986 down;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /t { proxy_pass http://up; }
--- user_files eval
[["ssi/rd.html", $::FAST x 40]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/rd.html
--- response_body_like eval
qr/\A(?=.*?b1\n)(?=.*?b3\n)(?:b[13]\n){40}\z/s
--- no_error_log
[error]



=== TEST 11: random and least_outstanding retry on another server, never the refused one again
--- http_config
    upstream r {
        prefix_aware index=off length=1024 strategy=random;
        server 127.0.0.1:1990;
        server 127.0.0.1:1985;
    }
    upstream lo {
        prefix_aware index=off length=1024 strategy=least_outstanding;
        server 127.0.0.1:1990;
        server 127.0.0.1:1985;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /r { proxy_pass http://r/t; }
    location /lo { proxy_pass http://lo/t; }
--- user_files eval
[["ssi/f.html", '<!--# include virtual="/r" -->' x 10
                . '<!--# include virtual="/lo" -->' x 10]]
--- request
GET /ssi/f.html
--- response_body eval
"b1\n" x 20
--- error_log
connect() failed (111: Connection refused)



=== TEST 12: random under threshold=1: three concurrent requests take three servers, six take two each
--- http_config
    upstream up {
        prefix_aware index=off length=1024 threshold=1 strategy=random;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/r3.html", $::SLOW x 3], ["ssi/r6.html", $::SLOW x 6]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request eval
["GET /ssi/r3.html", "GET /ssi/r6.html"]
--- response_body_like eval
[qr/\A(b[123])\n(?!\1)(b[123])\n(?!\1|\2)b[123]\n\z/,
 qr/\A(?=(?:.*?b1\n){2})(?=(?:.*?b2\n){2})(?=(?:.*?b3\n){2})(?:b[123]\n){6}\z/s]
--- timeout: 8
--- no_error_log
[error]



=== TEST 13: $prefix_aware_strategy names the strategy; route is told against the key's home
--- http_config
    upstream up {
        prefix_aware index=off length=1024 strategy=least_outstanding;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Strategy $prefix_aware_strategy;
        add_header X-Route $prefix_aware_route;
    }
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /t
--- response_headers_like
X-Strategy: least_outstanding
X-Route: affinity|spill



=== TEST 14: strategy=$variable from a map: each value its strategy, an unknown one the default, counted and logged
--- http_config
    map $http_x_arm $arm {
        default "";
        lo least_outstanding;
        p prefix;
        bad fastest;
    }
    upstream up {
        prefix_aware index=off length=1024 strategy=$arm strategy_default=least_outstanding;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
    location /t {
        proxy_pass http://up;
        add_header X-Strategy $prefix_aware_strategy;
    }
--- user_files eval
[["ssi/v.html", $::SLOW x 3]]
--- more_headers eval
["X-Arm: bad\nX-Amzn-SageMaker-Prefix-Aware-Id: tenant-d",
 "X-Arm: p\nX-Amzn-SageMaker-Prefix-Aware-Id: tenant-d",
 "X-Arm: lo\nX-Amzn-SageMaker-Prefix-Aware-Id: tenant-d",
 "X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d"]
--- request eval
["GET /t", "GET /ssi/v.html", "GET /ssi/v.html", "GET /t"]
--- response_body_like eval
[qr/\Ab[123]\n\z/,
 qr/\A(?:b3\n){3}\z/,
 qr/\A(b[123])\n(?!\1)(b[123])\n(?!\1|\2)b[123]\n\z/,
 qr/\Ab[123]\n\z/]
--- response_headers_like eval
["X-Strategy: least_outstanding", "", "", "X-Strategy: least_outstanding"]
--- timeout: 8
--- error_log
prefix_aware: unknown strategy "fastest" from "$arm", routed by "least_outstanding"
--- no_error_log
[error]



=== TEST 15: least_outstanding keeps threshold a hard bound with weights: per unit of weight the weight=3 server is the least loaded at 2 in flight, but the other is below threshold=2 and takes the fourth
--- http_config
    upstream up {
        prefix_aware index=off length=1024 threshold=2 strategy=least_outstanding;
        server 127.0.0.1:1985 weight=3;
        server 127.0.0.1:1986;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/lot.html", $::SLOW x 4]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/lot.html
--- response_body_like eval
qr/\A(?=(?:.*?b1\n){2})(?=(?:.*?b2\n){2})(?:b[12]\n){4}\z/s
--- timeout: 6
--- no_error_log
[error]
