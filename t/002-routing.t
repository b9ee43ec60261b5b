# Routing by the first "length" bytes of the body: prefixes are pinned to
# a backend, bytes past "length" never move a request, a byte before it
# can; the ring does not depend on the order of the server lines, and a
# new server takes keys only for itself.  The expected backends were found
# with the ring of src/ for the fixed backend ports of PrefixAware::Backends.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

# 30 prompts and where each goes among b1, b2, b3 with length=1024
our @PROMPTS = map { sprintf "You are assistant number %02d. Answer briefly.", $_ } 1 .. 30;
our @ON3 = qw(b2 b2 b3 b2 b2 b1 b1 b1 b2 b2 b1 b1 b3 b1 b3
              b3 b2 b2 b2 b2 b1 b3 b3 b3 b2 b3 b3 b3 b2 b2);
# ... and among b1, b2, b3, b4: the 7 that move all move to b4
our @ON4 = qw(b2 b2 b3 b4 b2 b4 b1 b1 b2 b2 b1 b1 b3 b1 b3
              b4 b2 b2 b2 b2 b4 b3 b3 b3 b4 b4 b3 b4 b2 b2);

# 1024 bytes, then a byte-1023 variant, then 976 bytes of some suffix
our $P = 'p' x 1023;

no_shuffle();
run_tests();

__DATA__

=== TEST 1: 30 prefixes, each sent 3 times, interleaved: each stays on one backend, and they cover all backends
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
        add_header X-Route $prefix_aware_route always;
        add_header X-Source $prefix_aware_source always;
    }
--- pipelined_requests eval
[ map { "POST /t\n$::PROMPTS[$_ % 30]" } 0 .. 89 ]
--- response_body eval
[ map { "$::ON3[$_ % 30]\n" } 0 .. 89 ]
--- response_headers eval
[ ("X-Route: affinity\nX-Source: body") x 90 ]
--- no_error_log
[error]



=== TEST 2: the 30 prefixes spread over all three backends (7, 13 and 10 of them)
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t { proxy_pass http://up; }
--- pipelined_requests eval
[ map { "POST /t\n$::PROMPTS[$_]" } 0 .. 29 ]
--- response_body eval
my %n;
$n{$_}++ for @::ON3;
die "the expectations do not cover every backend\n"
    unless $n{b1} == 7 && $n{b2} == 13 && $n{b3} == 10;
[ map { "$_\n" } @::ON3 ]
--- no_error_log
[error]



=== TEST 3: bodies of 2000 bytes that differ only after byte 1024 go to the same backend with the same hash
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
--- pipelined_requests eval
[ map { "POST /t\n" . $::P . "a$_" }
  's' x 976, 't' x 976, CORE::join('', map { chr(65 + $_ % 26) } 1 .. 976),
  ('s' x 975) . 'X', 'z' . ('s' x 975) ]
--- response_body eval
[ ("b1\n") x 5 ]
--- response_headers eval
[ ("X-Hash: aad88eaa9c3e5cd1") x 5 ]
--- no_error_log
[error]



=== TEST 4: a change at byte 1023 (length - 1) moves the request to another backend
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
--- pipelined_requests eval
[ "POST /t\n" . $::P . "a" . ('s' x 976),
  "POST /t\n" . $::P . "b" . ('s' x 976),
  "POST /t\n" . $::P . "a" . ('s' x 976) ]
--- response_body eval
["b1\n", "b2\n", "b1\n"]
--- response_headers eval
["X-Hash: aad88eaa9c3e5cd1", "X-Hash: d475fd9826e64c7e", "X-Hash: aad88eaa9c3e5cd1"]
--- no_error_log
[error]



=== TEST 5: a body shorter than length is hashed whole; bytes after exactly length bytes do not count
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
--- pipelined_requests eval
[ "POST /t\nhello", "POST /t\n" . ('q' x 1023), "POST /t\n" . ('q' x 1024),
  "POST /t\n" . ('q' x 1024) . 'z' ]
--- response_body eval
["b1\n", "b1\n", "b3\n", "b3\n"]
--- response_headers eval
["X-Hash: 9555e8555c62dcfd", "X-Hash: 8424c77f4b0f0ecb", "X-Hash: da88fb6823527caf",
 "X-Hash: da88fb6823527caf"]
--- no_error_log
[error]



=== TEST 6: the default length is 4096: there, bytes after 1024 do count
--- http_config
    upstream up {
        prefix_aware index=off;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
--- pipelined_requests eval
[ "POST /t\n" . $::P . "a" . ('s' x 976), "POST /t\n" . $::P . "a" . ('t' x 976) ]
--- response_headers eval
["X-Hash: 792a9a814217c48f", "X-Hash: 2edb656f9b7f0697"]
--- response_body eval
["b3\n", "b2\n"]
--- no_error_log
[error]



=== TEST 7: the ring does not depend on the order of the server lines
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1987;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /t { proxy_pass http://up; }
--- pipelined_requests eval
[ map { "POST /t\n$::PROMPTS[$_]" } 0 .. 29 ]
--- response_body eval
[ map { "$_\n" } @::ON3 ]
--- no_error_log
[error]



=== TEST 8: a fourth server takes 7 of the 30 prefixes, and no prefix moves between the other three
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
        server 127.0.0.1:1988;
    }
--- config
    location /t { proxy_pass http://up; }
--- pipelined_requests eval
[ map { "POST /t\n$::PROMPTS[$_]" } 0 .. 29 ]
--- response_body eval
for my $i (0 .. 29) {
    die "bad expectation $i\n" unless $::ON4[$i] eq $::ON3[$i] || $::ON4[$i] eq 'b4';
}
[ map { "$_\n" } @::ON4 ]
--- no_error_log
[error]



=== TEST 9: the same prefix sent with other methods and URIs goes to the same backend
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t { proxy_pass http://up; }
    location /other { proxy_pass http://up; }
--- pipelined_requests eval
[ "POST /t\n$::PROMPTS[2]", "PUT /other?x=1\n$::PROMPTS[2]", "PATCH /t/deeper\n$::PROMPTS[2]" ]
--- response_body eval
["b3\n", "b3\n", "b3\n"]
--- no_error_log
[error]



=== TEST 10: a GET without body or id goes to the least-loaded server, route no_key
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location ~ ^/(t|v1/models)$ {
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Route $prefix_aware_route always;
        add_header X-Source $prefix_aware_source always;
    }
--- pipelined_requests eval
["GET /t", "GET /v1/models", "GET /t"]
--- response_body_like eval
["^b[123]\n\\z", "^b[123]\n\\z", "^b[123]\n\\z"]
--- response_headers eval
[ ("!X-Hash\nX-Route: no_key\nX-Source: none") x 3 ]
--- no_error_log
[error]



=== TEST 11: the debug log has the key hash, its source, and the server chosen and why
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t { proxy_pass http://up; }
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-a
--- request
POST /t
What is the capital of France?
--- response_body
b2
--- error_log
prefix_aware key: 941207e8a96e9977 source:body id:1
prefix_aware peer: "127.0.0.1:1986" route:affinity hash:941207e8a96e9977 first in flight:0 threshold:10
--- no_error_log
[error]
