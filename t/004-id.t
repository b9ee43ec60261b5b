# The tenant id header X-Amzn-SageMaker-Prefix-Aware-Id: it is mixed into
# the key, so the same body with other ids goes elsewhere; it must be 1 to
# 64 printable ASCII characters, else the request gets a 400 with a one-line
# reason, is not proxied, and the connection stays usable.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

our $Q = 'What is the capital of France?';
our $H = 'X-Amzn-SageMaker-Prefix-Aware-Id';
# every printable ASCII class: space inside, quotes, backslash, braces
our $ODD = q{a b~!"#$%&'()*+,-./:;<=>?@[\]^_`{|}};

no_shuffle();
run_tests();

__DATA__

=== TEST 1: the same body with no id and with three ids goes to three different backends
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Route $prefix_aware_route always;
    }
--- more_headers eval
["", "$::H: tenant-a", "$::H: tenant-b", "$::H: tenant-c", "$::H: tenant-a"]
--- pipelined_requests eval
[ ("POST /t\n$::Q") x 5 ]
--- response_headers eval
["X-Hash: 3244e87bb25876ba", "X-Hash: 941207e8a96e9977", "X-Hash: 361f7b6f7f837a94",
 "X-Hash: ca8414e7c860ebb7", "X-Hash: 941207e8a96e9977"]
--- response_body eval
["b3\n", "b2\n", "b3\n", "b1\n", "b2\n"]
--- no_error_log
[error]



=== TEST 2: the header name is case-insensitive
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
--- more_headers eval
["x-amzn-sagemaker-prefix-aware-id: tenant-a", "X-AMZN-SAGEMAKER-PREFIX-AWARE-ID: tenant-a"]
--- pipelined_requests eval
[ ("POST /t\n$::Q") x 2 ]
--- response_headers eval
[ ("X-Hash: 941207e8a96e9977") x 2 ]
--- response_body eval
["b2\n", "b2\n"]
--- no_error_log
[error]



=== TEST 3: an id of 64 characters, and one of every kind of printable character, are accepted
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
--- more_headers eval
["$::H: " . ('x' x 64), "$::H: $::ODD"]
--- pipelined_requests eval
[ ("POST /t\n$::Q") x 2 ]
--- response_headers eval
["X-Hash: 5835e3c2cce8df97", "X-Hash: 5e848f94ce9d5231"]
--- response_body eval
["b2\n", "b1\n"]
--- no_error_log
[error]



=== TEST 4: a GET with an id is keyed by the id alone
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Route $prefix_aware_route always;
        add_header X-Source $prefix_aware_source always;
    }
--- more_headers eval
["$::H: tenant-c", "$::H: " . ('x' x 64)]
--- pipelined_requests eval
["GET /t", "GET /t"]
--- response_headers eval
["X-Hash: df468d9829d5021b\nX-Route: affinity\nX-Source: none",
 "X-Hash: f51d99daa8aaa8fc\nX-Route: affinity\nX-Source: none"]
--- response_body eval
["b1\n", "b3\n"]
--- no_error_log
[error]



=== TEST 5: an id of 65 characters: 400 with the reason, not proxied
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
    }
--- more_headers eval
"$::H: " . ('x' x 65)
--- request eval
"POST /t\n$::Q"
--- error_code: 400
--- response_headers
Content-Type: text/plain
--- response_body
id is longer than 64 characters
--- error_log
prefix_aware: bad request: id is longer than 64 characters
--- no_error_log
prefix_aware get peer
http upstream connect
[error]



=== TEST 6: an id with a non-ASCII byte (UTF-8 e-acute): 400, not proxied
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
    }
--- more_headers eval
"$::H: caf\xc3\xa9"
--- request eval
"POST /t\n$::Q"
--- error_code: 400
--- response_body
id has a non-printable or non-ASCII byte
--- error_log
prefix_aware: bad request: id has a non-printable or non-ASCII byte
--- no_error_log
prefix_aware get peer
[error]



=== TEST 7: ids with a byte 0xff, 0x7f, 0x01 or a tab: 400 each
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
    }
--- more_headers eval
["$::H: a\xffb", "$::H: a\x7fb", "$::H: a\x01b", "$::H: a\tb"]
--- pipelined_requests eval
[ ("GET /t") x 4 ]
--- error_code eval
[400, 400, 400, 400]
--- response_body eval
[ ("id has a non-printable or non-ASCII byte\n") x 4 ]
--- no_error_log
prefix_aware get peer
[error]



=== TEST 8: an empty id: 400, not proxied
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
    }
--- more_headers eval
"$::H: "
--- request eval
"POST /t\n$::Q"
--- error_code: 400
--- response_body
id is empty
--- error_log
prefix_aware: bad request: id is empty
--- no_error_log
prefix_aware get peer
[error]



=== TEST 9: the id header twice, even with equal values: 400, not proxied
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
    }
--- more_headers eval
"$::H: tenant-a\nx-amzn-sagemaker-prefix-aware-id: tenant-a"
--- request eval
"POST /t\n$::Q"
--- error_code: 400
--- response_body
duplicate X-Amzn-SageMaker-Prefix-Aware-Id header
--- error_log
prefix_aware: bad request: duplicate X-Amzn-SageMaker-Prefix-Aware-Id header
--- no_error_log
prefix_aware get peer
[error]



=== TEST 10: after a 400 the keep-alive connection serves the next pipelined requests
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
    }
--- more_headers eval
["$::H: " . ('x' x 65), "$::H: tenant-a", "$::H: ", "$::H: tenant-c"]
--- pipelined_requests eval
["POST /t\n$::Q", "POST /t\n$::Q", "GET /t", "POST /t\n$::Q"]
--- error_code eval
[400, 200, 400, 200]
--- response_body eval
["id is longer than 64 characters\n", "b2\n", "id is empty\n", "b1\n"]
--- response_headers eval
["Connection: keep-alive", "Connection: keep-alive", "Connection: keep-alive", "Connection: close"]
--- no_error_log
[error]



=== TEST 11: a 400 with a 64 KB body that went to a temp file: the body is consumed, the next request is served
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        client_body_buffer_size 1k;
        proxy_pass http://up;
    }
--- more_headers eval
["$::H: ", "$::H: tenant-a"]
--- pipelined_requests eval
["POST /t\n" . ('z' x 65536), "POST /t\n$::Q"]
--- error_code eval
[400, 200]
--- response_body eval
["id is empty\n", "b2\n"]
--- no_error_log
[error]



=== TEST 12: a HEAD request with a bad id: 400 without a body
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
    }
--- more_headers eval
"$::H: " . ('x' x 65)
--- request
HEAD /t
--- error_code: 400
--- response_body
--- no_error_log
prefix_aware get peer
[error]



=== TEST 13: a bad id with proxy_request_buffering off and a body still arriving: 400 at once, the connection is closed
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_request_buffering off;
        proxy_pass http://up;
    }
--- more_headers eval
"$::H: "
--- request eval
"POST /t\n" . ('z' x 200000)
--- error_code: 400
--- response_headers
Connection: close
--- response_body
id is empty
--- no_error_log
prefix_aware get peer
[error]
