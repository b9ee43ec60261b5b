# The key is the same whatever way the body came: in memory or in a client
# body temp file, with Content-Length or chunked in pieces of any size.
# Without a body (or with an empty one) and without an id the request goes
# to the least-loaded server; an unbuffered body is not used, with a warn.
# Expected hashes: XXH3-64 of the first "length" bytes (found with the
# functions of src/, which the unit tests check against xxhash).

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

# 72000 bytes; a second body with the same first 65536 bytes
our $BIG = join '', map { sprintf "%05d:the long shared system prompt;", $_ } 0 .. 1999;
our $BIG2 = substr($BIG, 0, 65536) . ('tail' x 100);

# a body in chunked transfer encoding, cut in pieces of the given sizes
# (the last size repeats)
sub chunked {
    my ($body, @sizes) = @_;
    my $out = '';
    my $i = 0;
    while (length $body) {
        my $n = $sizes[$i < @sizes ? $i : -1];
        my $piece = substr $body, 0, $n, '';
        $out .= sprintf("%x\r\n", length $piece) . "$piece\r\n";
        $i++;
    }
    return $out . "0\r\n\r\n";
}

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a 72 KB body in memory (client_body_buffer_size 128k), length=65536
--- http_config
    upstream up {
        prefix_aware index=off length=65536;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /mem {
        client_body_buffer_size 128k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
    }
--- request eval
"POST /mem\n$::BIG"
--- response_headers
X-Hash: 9b7d07e9db1abe09
X-Source: body
--- response_body
b3
--- no_error_log
a client request body is buffered to a temporary file
[error]



=== TEST 2: the same body in a client body temp file (client_body_buffer_size 1k) has the same hash and backend
--- http_config
    upstream up {
        prefix_aware index=off length=65536;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /file {
        client_body_buffer_size 1k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
    }
--- request eval
"POST /file\n$::BIG"
--- response_headers
X-Hash: 9b7d07e9db1abe09
X-Source: body
--- response_body
b3
--- error_log
a client request body is buffered to a temporary file
--- no_error_log
[error]



=== TEST 3: in a temp file, bytes after length do not count either
--- http_config
    upstream up {
        prefix_aware index=off length=65536;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /file {
        client_body_buffer_size 1k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
--- request eval
"POST /file\n$::BIG2"
--- response_headers
X-Hash: 9b7d07e9db1abe09
--- response_body
b3
--- error_log
a client request body is buffered to a temporary file
--- no_error_log
[error]



=== TEST 4: client_body_in_file_only, and a short length read from the file: same hashes as in memory
--- http_config
    upstream up {
        prefix_aware index=off length=65536;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
    upstream short {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /only {
        client_body_in_file_only clean;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
    location /short-file {
        client_body_buffer_size 1k;
        proxy_pass http://short;
        add_header X-Hash $prefix_aware_hash always;
    }
    location /short-mem {
        client_body_buffer_size 128k;
        proxy_pass http://short;
        add_header X-Hash $prefix_aware_hash always;
    }
--- pipelined_requests eval
["POST /only\n$::BIG", "POST /short-file\n$::BIG", "POST /short-mem\n$::BIG"]
--- response_headers eval
["X-Hash: 9b7d07e9db1abe09", "X-Hash: 7da4e2cc2a445a1f", "X-Hash: 7da4e2cc2a445a1f"]
--- response_body eval
["b3\n", "b1\n", "b1\n"]
--- no_error_log
[error]



=== TEST 5: the body chunked in pieces of 1000, 7, 30000 and 3333 bytes, in memory: same hash as with Content-Length
--- http_config
    upstream up {
        prefix_aware index=off length=65536;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /mem {
        client_body_buffer_size 128k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
    }
--- more_headers
Transfer-Encoding: chunked
--- request eval
"POST /mem\n" . ::chunked($::BIG, 1000, 7, 30000, 3333)
--- response_headers
X-Hash: 9b7d07e9db1abe09
X-Source: body
--- response_body
b3
--- no_error_log
[error]



=== TEST 6: the body chunked in pieces of 500 bytes into a temp file: same hash
--- http_config
    upstream up {
        prefix_aware index=off length=65536;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /file {
        client_body_buffer_size 1k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
--- more_headers
Transfer-Encoding: chunked
--- request eval
"POST /file\n" . ::chunked($::BIG, 500)
--- response_headers
X-Hash: 9b7d07e9db1abe09
--- response_body
b3
--- error_log
a client request body is buffered to a temporary file
--- no_error_log
[error]



=== TEST 7: a short body chunked a byte at a time has the hash of the same body with Content-Length
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
["Transfer-Encoding: chunked", ""]
--- pipelined_requests eval
["POST /t\n" . ::chunked("hello", 1), "POST /t\nhello"]
--- response_headers eval
["X-Hash: 9555e8555c62dcfd", "X-Hash: 9555e8555c62dcfd"]
--- response_body eval
["b1\n", "b1\n"]
--- no_error_log
[error]



=== TEST 8: an empty body (Content-Length: 0 or chunked) without id: least loaded, route no_key
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
["Content-Length: 0", "Transfer-Encoding: chunked", ""]
--- pipelined_requests eval
["POST /t", "POST /t\n0\r\n\r\n", "GET /t"]
--- response_headers eval
[ ("!X-Hash\nX-Route: no_key\nX-Source: none") x 3 ]
--- response_body_like eval
[ ("^b[123]\n\\z") x 3 ]
--- no_error_log
[error]



=== TEST 9: an empty body with an id is keyed by the id alone, as a GET with that id
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
["Content-Length: 0\nX-Amzn-SageMaker-Prefix-Aware-Id: tenant-a",
 "X-Amzn-SageMaker-Prefix-Aware-Id: tenant-a"]
--- pipelined_requests eval
["POST /t", "GET /t"]
--- response_headers eval
[ ("X-Hash: c39ca3aa2450f14f\nX-Route: affinity\nX-Source: none") x 2 ]
--- response_body eval
["b1\n", "b1\n"]
--- no_error_log
[error]



=== TEST 10: proxy_request_buffering off: a body that is still arriving is not used, least loaded, with a warn
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
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Route $prefix_aware_route always;
        add_header X-Source $prefix_aware_source always;
    }
--- request eval
"POST /t\n$::BIG"
--- response_headers
!X-Hash
X-Route: no_key
X-Source: none
--- response_body_like
^b[123]$
--- error_log
prefix_aware: the request body is not buffered (proxy_request_buffering off?), routing by the id header or to the least loaded server
--- no_error_log
[error]



=== TEST 11: proxy_request_buffering off with an id: keyed by the id alone
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
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Route $prefix_aware_route always;
    }
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-a
--- request eval
"POST /t\n$::BIG"
--- response_headers
X-Hash: c39ca3aa2450f14f
X-Route: affinity
--- response_body
b1
--- error_log
the request body is not buffered
--- no_error_log
[error]



=== TEST 12: proxy_request_buffering off, but the body came whole with the header: nginx buffered it, it is keyed by body and id
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
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
    }
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-a
--- request
POST /t
hello
--- response_headers
X-Hash: f76f2f3f7e3cc68c
X-Source: body
--- response_body
b2
--- no_error_log
the request body is not buffered
[error]



=== TEST 13: with the index, the key is the chain's tail: the same in memory and in a temp file, bytes after length do not count
--- http_config
    upstream up {
        prefix_aware length=65536;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /mem {
        client_body_buffer_size 128k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
    location /file {
        client_body_buffer_size 1k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
--- pipelined_requests eval
["POST /mem\n$::BIG", "POST /file\n$::BIG", "POST /mem\n$::BIG2",
 "POST /file\n" . substr($::BIG, 0, 65000)]
--- response_headers eval
["X-Hash: 5f007bab5c128309", "X-Hash: 5f007bab5c128309",
 "X-Hash: 5f007bab5c128309", "X-Hash: 480cbb1b2220ece2"]
--- response_body eval
["b2\n", "b2\n", "b2\n", "b2\n"]
--- no_error_log
[error]



=== TEST 14: with the index, an OpenAI message whose 6,000 characters come before its role (kept past the stack's 4 KB, in a pool): the same key in memory and in a temp file
--- http_config
    upstream up {
        prefix_aware length=8192;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /mem/v1/chat/completions {
        client_body_buffer_size 128k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
    }
    location /file/v1/chat/completions {
        client_body_buffer_size 1k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
    }
--- pipelined_requests eval
my $m = '{"model":"m","messages":[{"content":"' . ('abcdef ' x 857)
    . '","role":"user"}]}';
(my $n = $m) =~ s/"messages"/"stream":true,"messages"/;
["POST /mem/v1/chat/completions\n$m", "POST /file/v1/chat/completions\n$m",
 "POST /mem/v1/chat/completions\n$n"]
--- response_headers eval
["X-Hash: d4b1b6dcbe77c042\nX-Source: chat", "X-Hash: d4b1b6dcbe77c042\nX-Source: chat",
 "X-Hash: d4b1b6dcbe77c042\nX-Source: chat"]
--- no_error_log
[error]
