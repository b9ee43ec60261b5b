# Sanity tests of the test runner itself (t/lib/Test/Nginx/Socket.pm),
# against plain nginx: no module needed.  Also passes under openresty's
# Test::Nginx::Socket (put its lib/ first in @INC).
#
#   TEST_NGINX_BINARY=/usr/sbin/nginx prove -I t/lib t/000-runner.t

use Test::Nginx::Socket;

repeat_each(2);

# tests per repeat: the sum over the blocks below
plan tests => repeat_each() * 37;

# a backend answering 418 to everything: the front end proxies a request
# body to it (so nginx reads the body), intercepts the 418 and echoes
# $request_body from a named location
add_block_preprocessor(sub {
    my $block = shift;
    if (!defined $block->http_config) {
        $block->set_value("http_config", <<'_EOC_');
    server {
        listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
        location / { return 418; }
    }
_EOC_
    }
});

no_shuffle() if $ENV{RUNNER_NO_SHUFFLE};
run_tests();

__DATA__

=== TEST 1: return a plain string
--- config
    location = /hello { return 200 "hello\n"; }
--- request
GET /hello
--- response_headers
Content-Type: text/plain
!X-Nope
--- response_body
hello
--- no_error_log
[error]



=== TEST 2: 404 with error_log, grep_error_log and response_body_like
--- config
    location = /hello { return 200 "hello\n"; }
--- request
GET /missing/a
--- error_code: 404
--- response_body_like: 404 Not Found
--- error_log eval
qr{open\(\) "[^"]*/missing/a" failed \(2: No such file or directory\)}
--- grep_error_log eval: qr{/missing/\w+" failed}
--- grep_error_log_out
/missing/a" failed



=== TEST 3: more_headers reach nginx
--- config
    location = /h { return 200 "foo=$http_x_foo\n"; }
--- more_headers
X-Foo: bar
# a comment line
--- request
GET /h
--- response_headers_like
Content-Length: \d+
--- response_body
foo=bar



=== TEST 4: request body with an automatic Content-Length
--- config
    location = /body {
        client_body_buffer_size 1m;
        client_body_in_single_buffer on;
        proxy_pass http://127.0.0.1:$TEST_NGINX_RAND_PORT_1;
        proxy_intercept_errors on;
        error_page 418 = @echo;
    }
    location @echo {
        return 200 "len=$http_content_length body=[$request_body]\n";
    }
--- request
POST /body
hello world
--- response_body
len=11 body=[hello world]
--- no_error_log
[error]



=== TEST 5: chunked request body is sent as given
--- config
    location = /body {
        client_body_buffer_size 1m;
        client_body_in_single_buffer on;
        proxy_pass http://127.0.0.1:$TEST_NGINX_RAND_PORT_1;
        proxy_intercept_errors on;
        error_page 418 = @echo;
    }
    location @echo {
        return 200 "te=$http_transfer_encoding body=[$request_body]\n";
    }
--- more_headers
Transfer-Encoding: chunked
--- request eval
"POST /body
5\r
hello\r
6\r
 world\r
0\r
\r
"
--- response_body
te=chunked body=[hello world]
--- no_error_log
[error]



=== TEST 6: nginx must die on a bad directive
--- config
    location = /hello { bogus_directive on; }
--- request
GET /hello
--- must_die
--- error_log eval
qr/\[emerg\] .*unknown directive "bogus_directive"/



=== TEST 7: pipelined requests
--- config
    location = /a { return 200 "a\n"; }
    location = /b { return 201 "b\n"; }
--- pipelined_requests eval
["GET /a", "GET /b"]
--- error_code eval
[200, 201]
--- response_body eval
["a\n", "b\n"]



=== TEST 8: user_files, $TEST_NGINX_* in sections and $ServerPort
--- config
    location = /hello { return 200 "hello\n"; }
--- user_files
>>> dir/port.txt
port=$TEST_NGINX_SERVER_PORT
--- request
GET /dir/port.txt
--- response_headers
Content-Type: text/plain
--- response_body
port=$ServerPort



=== TEST 9: raw_request
--- config
    location = /hello { return 200 "hello\n"; }
--- raw_request eval
"GET /hello HTTP/1.0\r
Host: localhost\r
\r
"
--- response_body
hello



=== TEST 10: several requests, each on its own connection
--- config
    location = /a { return 200 "a\n"; }
--- request eval
["GET /a", "GET /nope"]
--- error_code eval
[200, 404]
--- response_body_like eval
["^a\$", "404 Not Found"]



=== TEST 11: chunked response is decoded, main_config and log_level
--- main_config
    worker_rlimit_nofile 1024;
--- config
    location = /sub { return 200 "sub\n"; }
    location = /t {
        ssi on;
        ssi_types text/plain;
        return 200 'x<!--# include virtual="/sub" -->y\n';
    }
--- log_level: info
--- request
GET /t
--- response_headers
Transfer-Encoding: chunked
--- response_body
xsub
y
--- no_error_log
[debug]
