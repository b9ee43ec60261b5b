# Servers that cannot take a request: a "down" server is never chosen; a
# server that refuses connections is retried past under proxy_next_upstream,
# along the ring; max_fails/fail_timeout keep a failed server out.  Nothing
# listens on 127.0.0.1:1989 and 1990.  Sequential requests with one key come
# from SSI includes with wait="yes", which inherit the page's id header.
# Expected backends found with the ring of src/.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

our @PROMPTS = map { sprintf "You are assistant number %02d. Answer briefly.", $_ } 1 .. 30;
# where the prompts go among b1, b2, b3, and with b2 down
our @ON3  = qw(b2 b2 b3 b2 b2 b1 b1 b1 b2 b2 b1 b1 b3 b1 b3
               b3 b2 b2 b2 b2 b1 b3 b3 b3 b2 b3 b3 b3 b2 b2);
our @DOWN = qw(b3 b1 b3 b3 b3 b1 b1 b1 b1 b3 b1 b1 b3 b1 b3
               b3 b3 b3 b1 b1 b1 b3 b3 b3 b1 b3 b3 b3 b1 b3);
our $SEQ = '<!--# include virtual="/t" wait="yes" -->';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a down server is never chosen; its keys go to the next server on the ring (route failover), the others stay
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986 down;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Route $prefix_aware_route always;
    }
--- pipelined_requests eval
[ map { "POST /t\n$_" } @::PROMPTS ]
--- response_body eval
for my $i (0 .. 29) {
    die "bad expectation $i\n"
        if $::DOWN[$i] eq 'b2' || ($::ON3[$i] ne 'b2' && $::DOWN[$i] ne $::ON3[$i]);
}
[ map { "$_\n" } @::DOWN ]
--- response_headers eval
[ map { $_ eq 'b2' ? "X-Route: failover" : "X-Route: affinity" } @::ON3 ]
--- no_error_log
[error]



=== TEST 2: every server down: 502, "no live upstreams"
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985 down;
        server 127.0.0.1:1986 down;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
POST /t
hello
--- error_code: 502
--- error_log
no live upstreams while connecting to upstream



=== TEST 3: the first choice refuses the connection: retried on the next server on the ring (b2, not b1 next in the file), the request succeeds
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1990;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /t {
        proxy_next_upstream error timeout;
        proxy_pass http://up;
        add_header X-Route $prefix_aware_route always;
    }
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /t
--- response_body
b2
--- response_headers
X-Route: failover
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1990" route:affinity
prefix_aware peer: "127.0.0.1:1986" route:failover
--- error_log
connect() failed (111: Connection refused) while connecting to upstream
upstream: "http://127.0.0.1:1990/t"



=== TEST 4: two refusing servers first on the ring: the retries walk on to the third distinct server
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1989;
        server 127.0.0.1:1990;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t { proxy_pass http://up; }
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /t
--- response_body
b3
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1989" route:affinity
prefix_aware peer: "127.0.0.1:1990" route:failover
prefix_aware peer: "127.0.0.1:1987" route:failover
--- error_log
upstream: "http://127.0.0.1:1989/t"
upstream: "http://127.0.0.1:1990/t"



=== TEST 5: max_fails=1 (the default): after one failure the server is skipped without a connect for fail_timeout
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1990;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /t { proxy_pass http://up; }
--- user_files eval
[["ssi/seq.html", $::SEQ x 3]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/seq.html
--- response_body eval
"b2\nb2\nb2\n"
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+|connect\(\) failed/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1990" route:affinity
connect() failed
prefix_aware peer: "127.0.0.1:1986" route:failover
prefix_aware peer: "127.0.0.1:1986" route:failover
prefix_aware peer: "127.0.0.1:1986" route:failover



=== TEST 6: max_fails=0: the refusing server stays first choice and is tried by every request
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1990 max_fails=0;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /t { proxy_pass http://up; }
--- user_files eval
[["ssi/seq.html", $::SEQ x 3]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /ssi/seq.html
--- response_body eval
"b2\nb2\nb2\n"
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+|connect\(\) failed/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1990" route:affinity
connect() failed
prefix_aware peer: "127.0.0.1:1986" route:failover
prefix_aware peer: "127.0.0.1:1990" route:affinity
connect() failed
prefix_aware peer: "127.0.0.1:1986" route:failover
prefix_aware peer: "127.0.0.1:1990" route:affinity
connect() failed
prefix_aware peer: "127.0.0.1:1986" route:failover



=== TEST 7: proxy_next_upstream off: no retry, 502
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1990;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /t {
        proxy_next_upstream off;
        proxy_pass http://up;
    }
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /t
--- error_code: 502
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1990" route:affinity
--- error_log
connect() failed (111: Connection refused) while connecting to upstream



=== TEST 8: proxy_next_upstream_tries 2 with two refusing servers first: 502 after two tries
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1989;
        server 127.0.0.1:1990;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_next_upstream_tries 2;
        proxy_pass http://up;
    }
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
--- request
GET /t
--- error_code: 502
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1989" route:affinity
prefix_aware peer: "127.0.0.1:1990" route:failover
