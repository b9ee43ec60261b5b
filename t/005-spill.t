# Bounded loads: a server with "threshold" requests in flight is passed
# over for the next one on the ring (spill); when every server is at the
# threshold the least loaded takes the request, ties going in ring order.
# Concurrency comes from SSI: the includes of a page run at the same time
# and inherit the page's id header, so they all have the same key.  The
# backends' /slow answers after about a second, so the includes overlap.
#
# The key of id "tenant-d" alone (no body) meets the servers in the ring
# order b3, b2, b1 (b2, b1 with two servers); found with the ring of src/.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

our $INC = '<!--# include virtual="/slow" -->';
our $PEER = qr/prefix_aware peer: "[^"]+" route:\w+ hash:\w+ first in flight:\d+/;

no_shuffle();
run_tests();

__DATA__

=== TEST 1: threshold=2 and 6 concurrent requests with one key: 2 at the first choice, the rest spill along the ring
--- http_config
    upstream up {
        prefix_aware index=off length=1024 threshold=2;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/spill.html", $::INC x 6]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/spill.html
--- response_body eval
"b3\nb3\nb2\nb2\nb1\nb1\n"
--- grep_error_log eval
$::PEER
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1987" route:affinity hash:77f315a3357910b0 first in flight:0
prefix_aware peer: "127.0.0.1:1987" route:affinity hash:77f315a3357910b0 first in flight:1
prefix_aware peer: "127.0.0.1:1986" route:spill hash:77f315a3357910b0 first in flight:2
prefix_aware peer: "127.0.0.1:1986" route:spill hash:77f315a3357910b0 first in flight:2
prefix_aware peer: "127.0.0.1:1985" route:spill hash:77f315a3357910b0 first in flight:2
prefix_aware peer: "127.0.0.1:1985" route:spill hash:77f315a3357910b0 first in flight:2
--- timeout: 6
--- no_error_log
[error]



=== TEST 2: all busy (threshold=1, 2 servers, 4 concurrent): the least loaded takes it, ties in ring order
--- http_config
    upstream up {
        prefix_aware index=off length=1024 threshold=1;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/busy.html", $::INC x 4]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/busy.html
--- response_body eval
"b2\nb1\nb2\nb1\n"
--- grep_error_log eval
$::PEER
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1986" route:affinity hash:77f315a3357910b0 first in flight:0
prefix_aware peer: "127.0.0.1:1985" route:spill hash:77f315a3357910b0 first in flight:1
prefix_aware peer: "127.0.0.1:1986" route:affinity hash:77f315a3357910b0 first in flight:1
prefix_aware peer: "127.0.0.1:1985" route:spill hash:77f315a3357910b0 first in flight:2
--- timeout: 6
--- no_error_log
[error]



=== TEST 3: all busy with 3 servers: the fifth request goes to the least loaded b2 (1 in flight), not to b3 (2)
--- http_config
    upstream up {
        prefix_aware index=off length=1024 threshold=1;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/busy3.html", $::INC x 5]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/busy3.html
--- response_body eval
"b3\nb2\nb1\nb3\nb2\n"
--- grep_error_log eval
qr/route:\w+ hash:\w+ first in flight:\d+/
--- grep_error_log_out
route:affinity hash:77f315a3357910b0 first in flight:0
route:spill hash:77f315a3357910b0 first in flight:1
route:spill hash:77f315a3357910b0 first in flight:1
route:affinity hash:77f315a3357910b0 first in flight:1
route:spill hash:77f315a3357910b0 first in flight:2
--- timeout: 6
--- no_error_log
[error]



=== TEST 4: once the spilled requests are done the counts are back to 0: the next request is at the first choice again
--- http_config
    upstream up {
        prefix_aware index=off length=1024 threshold=1;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
    location /t {
        proxy_pass http://up;
        add_header X-Route $prefix_aware_route always;
    }
--- user_files eval
[["ssi/busy.html", $::INC x 4]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- pipelined_requests eval
["GET /ssi/busy.html", "GET /t", "GET /ssi/busy.html"]
--- response_body eval
["b2\nb1\nb2\nb1\n", "b2\n", "b2\nb1\nb2\nb1\n"]
--- response_headers eval
["", "X-Route: affinity", ""]
--- timeout: 8
--- no_error_log
[error]



=== TEST 5: below the threshold (default 10) 6 concurrent requests all stay at the first choice
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/calm.html", $::INC x 6]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/calm.html
--- response_body eval
"b3\n" x 6
--- grep_error_log eval
qr/route:\w+/
--- grep_error_log_out eval
"route:affinity\n" x 6
--- timeout: 6
--- no_error_log
[error]



=== TEST 6: without a key, concurrent requests go to the least loaded: 3 requests, 3 different servers
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/nokey.html", $::INC x 3]]
--- request
GET /ssi/nokey.html
--- response_body_like eval
qr/\A(b[123])\n(?!\1)(b[123])\n(?!\1|\2)b[123]\n\z/
--- grep_error_log eval
qr/route:\w+/
--- grep_error_log_out eval
"route:no_key\n" x 3
--- timeout: 6
--- no_error_log
[error]



=== TEST 7: max_conns=1 on the first choice: the second concurrent request fails over past it even below the threshold
--- http_config
    upstream up {
        prefix_aware index=off length=1024 threshold=10;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987 max_conns=1;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/maxconns.html", $::INC x 3]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/maxconns.html
--- response_body eval
"b3\nb2\nb2\n"
--- grep_error_log eval
qr/route:\w+/
--- grep_error_log_out
route:affinity
route:failover
route:failover
--- timeout: 6
--- no_error_log
[error]



=== TEST 8: without a key the least loaded is counted per weight: of 4 concurrent requests the weight=2 server takes 2
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985 weight=2;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/weighted.html", $::INC x 4]]
--- request
GET /ssi/weighted.html
--- response_body_like eval
qr/\A(?=(?:.*?b1\n){2})(?!(?:.*?b1\n){3})(?=.*?b2\n)(?=.*?b3\n)(?:b[123]\n){4}\z/s
--- grep_error_log eval
qr/route:\w+/
--- grep_error_log_out eval
"route:no_key\n" x 4
--- timeout: 6
--- no_error_log
[error]
