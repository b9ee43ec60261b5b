# Faults of the backends, each followed by the status page: whatever
# happened to the request, no in-flight count is left behind.
#
# Backends (fixed ports: a server's place on the ring depends on its
# name; the walks below were found with the ring of src/ and are checked
# by the debug log here):
#
#     g1 127.0.0.1:2001, g2 127.0.0.1:2002   answer "gN\n"
#     e502 127.0.0.1:2004, e503 127.0.0.1:2005   answer 502 / 503
#     127.0.0.1:2006   resets the connection (RST) once it read the request
#     127.0.0.1:2007   sends a header and 8 of 100 body bytes, then RST
#     127.0.0.1:2008, 127.0.0.1:2012   read the request, never answer
#     127.0.0.1:2010, 127.0.0.1:2011   nothing listens: connection refused
#
# 2006, 2007, 2008 and 2012 are PrefixAware::Raw (a child process of this
# script); the others are servers of the test nginx.  The id
# "tenant-20" alone is the key of every request; its walks:
#
#     2006 2002 2001 | 2007 2001 | 2008 2002 2001 | 2004 2005 2001
#
# and of the body "prompt 6" with that id: 2006 2002 2001.
#
# Each block ends with GET /status on a connection of its own: the JSON
# must show every server with "inflight":0 (see ::status_like below) and
# the expected state and counters.
# The log is checked after each response, accumulated since nginx
# started, so a grep that spans several requests is a pattern whose tail
# is optional.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Raw;

our $ID = 'X-Amzn-SageMaker-Prefix-Aware-Id: tenant-20';

our $RAW = PrefixAware::Raw->start(2006 => 'reset', 2007 => 'cut',
                                   2008 => 'silent', 2012 => 'silent');

our $BACKENDS = <<'_EOC_';
    server {
        listen 127.0.0.1:2001;
        listen 127.0.0.1:2002;
        listen 127.0.0.1:2004;
        listen 127.0.0.1:2005;
        access_log off;
        location / {
            if ($server_port = 2004) { return 502 "e502\n"; }
            if ($server_port = 2005) { return 503 "e503\n"; }
            if ($server_port = 2001) { return 200 "g1\n"; }
            return 200 "g2\n";
        }
    }
_EOC_

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(http_config => ($block->http_config // '') . $BACKENDS);
});

# A pattern for the status JSON (pretty-printed: any white space between
# tokens): each server given as "name state inflight requests affinity
# spill failover no_key" is there with these values (and no route
# "state": no stored response here), and no server of any upstream has a
# count in flight.
sub status_like {
    my $re = '\A(?!.*"inflight"\s*:\s*[1-9])';
    for (@_) {
        my ($n, $st, $if, $rq, $af, $sp, $fo, $nk) = split ' ';
        my @tok = ('{', '"server"', ':', "\"$n\"", ',', '"address"', ':', "\"$n\"", ',',
                   '"weight"', ':', 1, ',', '"state"', ':', "\"$st\"", ',',
                   '"inflight"', ':', $if, ',', '"requests"', ':', $rq, ',',
                   '"affinity"', ':', $af, ',', '"spill"', ':', $sp, ',',
                   '"failover"', ':', $fo, ',', '"no_key"', ':', $nk, ',',
                   '"state_routed"', ':', 0, '}');
        $re .= '(?=.*' . join('\s*', map { quotemeta } @tok) . ')';
    }
    return qr/$re/s;
}

# every check of a block sees the whole log since nginx started, so a
# grep after the status request sees the fault's lines too
check_accum_error_log();
no_shuffle();
run_tests();

__DATA__

=== TEST 1: the first choice resets the connection before answering: retried on the next server on the ring (2002, not 2001 next in the file), 200; 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2006;
        server 127.0.0.1:2001;
        server 127.0.0.1:2002;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Route $prefix_aware_route always;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, "" ]
--- request eval
[ "GET /t", "GET /status" ]
--- response_headers eval
[ "X-Route: failover", "" ]
--- response_body eval
[ "g2\n", ::status_like("127.0.0.1:2006 failed 0 1 1 0 0 0",
                        "127.0.0.1:2002 up 0 1 0 0 1 0",
                        "127.0.0.1:2001 up 0 0 0 0 0 0") ]
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+|recv\(\) failed \(104: Connection reset by peer\) while reading response header from upstream/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:2006" route:affinity
recv() failed (104: Connection reset by peer) while reading response header from upstream
prefix_aware peer: "127.0.0.1:2002" route:failover
--- no_error_log
[alert]
[crit]



=== TEST 2: the backend resets in the middle of the response body: the client has the 200 header, then the connection closes (proxy_buffering off passes the 8 bytes first, buffering on drops them); no retry once the response began; 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2007;
        server 127.0.0.1:2001;
    }
--- config
    location /buffered {
        proxy_pass http://up;
    }
    location /streamed {
        proxy_buffering off;
        proxy_pass http://up;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, $::ID, "" ]
--- request eval
[ "GET /buffered", "GET /streamed", "GET /status" ]
--- response_headers eval
[ "Content-Length: 100", "Content-Length: 100", "" ]
--- response_body eval
[ "", "partial-",
  ::status_like("127.0.0.1:2007 up 0 2 2 0 0 0", "127.0.0.1:2001 up 0 0 0 0 0 0") ]
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+|(?:readv|recv)\(\) failed \(104: Connection reset by peer\) while reading upstream/
--- grep_error_log_out eval
my $peer = qq{prefix_aware peer: "127.0.0.1:2007" route:affinity\n};
my $rst = qq{ failed (104: Connection reset by peer) while reading upstream\n};
qr/\A\Q${peer}readv()$rst\E(?:\Q${peer}recv()$rst\E)?\z/
--- no_error_log
[alert]
[crit]



=== TEST 3: the first choice never answers (proxy_read_timeout 300ms): "upstream timed out", retried on the next server on the ring, 200; 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2008;
        server 127.0.0.1:2001;
        server 127.0.0.1:2002;
    }
--- config
    location /t {
        proxy_read_timeout 300ms;
        proxy_pass http://up;
        add_header X-Route $prefix_aware_route always;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, "" ]
--- request eval
[ "GET /t", "GET /status" ]
--- response_headers eval
[ "X-Route: failover", "" ]
--- response_body eval
[ "g2\n", ::status_like("127.0.0.1:2008 failed 0 1 1 0 0 0",
                        "127.0.0.1:2002 up 0 1 0 0 1 0",
                        "127.0.0.1:2001 up 0 0 0 0 0 0") ]
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+|upstream timed out \(110: Connection timed out\) while reading response header from upstream/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:2008" route:affinity
upstream timed out (110: Connection timed out) while reading response header from upstream
prefix_aware peer: "127.0.0.1:2002" route:failover
--- timeout: 3
--- no_error_log
[alert]
[crit]



=== TEST 4: 502 then 503 along the ring (proxy_next_upstream error timeout http_502 http_503): the third server answers 200; both are then "failed" (max_fails=1), so the next request goes straight to the third; 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2001;
        server 127.0.0.1:2004;
        server 127.0.0.1:2005;
    }
--- config
    location /t {
        proxy_next_upstream error timeout http_502 http_503;
        proxy_pass http://up;
        add_header X-Route $prefix_aware_route always;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, $::ID, "" ]
--- request eval
[ "GET /t", "GET /t", "GET /status" ]
--- response_headers eval
[ "X-Route: failover", "X-Route: failover", "" ]
--- response_body eval
[ "g1\n", "g1\n",
  ::status_like("127.0.0.1:2004 failed 0 1 1 0 0 0",
                "127.0.0.1:2005 failed 0 1 0 0 1 0",
                "127.0.0.1:2001 up 0 2 0 0 2 0") ]
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+|upstream server temporarily disabled while reading response header from upstream/
--- grep_error_log_out eval
my $first = <<'_EOS_';
prefix_aware peer: "127.0.0.1:2004" route:affinity
upstream server temporarily disabled while reading response header from upstream
prefix_aware peer: "127.0.0.1:2005" route:failover
upstream server temporarily disabled while reading response header from upstream
prefix_aware peer: "127.0.0.1:2001" route:failover
_EOS_
my $second = qq{prefix_aware peer: "127.0.0.1:2001" route:failover\n};
qr/\A\Q$first\E(?:\Q$second\E)?\z/
--- no_error_log
[alert]
[crit]



=== TEST 5: every server answers 502 or 503: after both tries the client has the last answer (503), at once; the last one is not marked failed (its answer was passed on); 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2004;
        server 127.0.0.1:2005;
    }
--- config
    location /t {
        proxy_next_upstream error timeout http_502 http_503;
        proxy_pass http://up;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, "" ]
--- request eval
[ "GET /t", "GET /status" ]
--- error_code eval
[ 503, 200 ]
--- response_body eval
[ "e503\n", ::status_like("127.0.0.1:2004 failed 0 1 1 0 0 0",
                          "127.0.0.1:2005 up 0 1 0 0 1 0") ]
--- timeout: 1
--- no_error_log
[alert]
[crit]



=== TEST 6: all servers refuse connections: a 502 at once; the next request finds them all failed: "no live upstreams", 502 at once, and the failures are forgotten for a quick recovery; 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2010;
        server 127.0.0.1:2011;
    }
--- config
    location /t {
        proxy_pass http://up;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, $::ID, "" ]
--- request eval
[ "GET /t", "GET /t", "GET /status" ]
--- error_code eval
[ 502, 502, 200 ]
--- response_body_like eval
[ qr/502 Bad Gateway/, qr/502 Bad Gateway/,
  ::status_like("127.0.0.1:2010 up 0 1 1 0 0 0",
                "127.0.0.1:2011 up 0 1 0 0 1 0") ]
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+|connect\(\) failed \(111: Connection refused\)|no live upstreams|prefix_aware: no usable server/
--- grep_error_log_out eval
my $first = <<'_EOS_';
prefix_aware peer: "127.0.0.1:2010" route:affinity
connect() failed (111: Connection refused)
prefix_aware peer: "127.0.0.1:2011" route:failover
connect() failed (111: Connection refused)
_EOS_
my $second = "prefix_aware: no usable server\nno live upstreams\n";
qr/\A\Q$first\E(?:\Q$second\E)?\z/
--- timeout: 1
--- no_error_log
[alert]
[crit]



=== TEST 7: all servers never answer: each try times out (proxy_read_timeout 300ms), then 504 after about 600 ms, no hang; 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2008;
        server 127.0.0.1:2012;
    }
--- config
    location /t {
        proxy_read_timeout 300ms;
        proxy_pass http://up;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, "" ]
--- request eval
[ "GET /t", "GET /status" ]
--- error_code eval
[ 504, 200 ]
--- response_body_like eval
[ qr/504 Gateway Time-out/, ::status_like("127.0.0.1:2008 failed 0 1 1 0 0 0",
                                         "127.0.0.1:2012 failed 0 1 0 0 1 0") ]
--- grep_error_log eval
qr/upstream timed out \(110: Connection timed out\) while reading response header from upstream/
--- grep_error_log_out eval
"upstream timed out (110: Connection timed out) while reading response header from upstream\n" x 2
--- timeout: 2
--- no_error_log
[alert]
[crit]



=== TEST 8: proxy_next_upstream_tries 1 with the resetting server first: no retry, 502 at once; 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2006;
        server 127.0.0.1:2001;
        server 127.0.0.1:2002;
    }
--- config
    location /t {
        proxy_next_upstream_tries 1;
        proxy_pass http://up;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, "" ]
--- request eval
[ "GET /t", "GET /status" ]
--- error_code eval
[ 502, 200 ]
--- response_body_like eval
[ qr/502 Bad Gateway/, ::status_like("127.0.0.1:2006 failed 0 1 1 0 0 0",
                                    "127.0.0.1:2001 up 0 0 0 0 0 0",
                                    "127.0.0.1:2002 up 0 0 0 0 0 0") ]
--- timeout: 1
--- no_error_log
[alert]
[crit]



=== TEST 9: a POST (as LLM requests are) reset after it was sent: not retried (502) unless proxy_next_upstream has non_idempotent, then it walks the ring like a GET (200 from 2002); 0 in flight after
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2006 max_fails=0;
        server 127.0.0.1:2001;
        server 127.0.0.1:2002;
    }
--- config
    location /plain {
        proxy_pass http://up;
    }
    location /retry {
        proxy_next_upstream error timeout non_idempotent;
        proxy_pass http://up;
        add_header X-Route $prefix_aware_route always;
    }
    location = /status { prefix_aware_status; }
--- more_headers eval
[ $::ID, $::ID, "" ]
--- request eval
[ "POST /plain\nprompt 6", "POST /retry\nprompt 6", "GET /status" ]
--- error_code eval
[ 502, 200, 200 ]
--- response_headers eval
[ "", "X-Route: failover", "" ]
--- response_body_like eval
[ qr/502 Bad Gateway/, qr/\Ag2\n\z/,
  ::status_like("127.0.0.1:2006 up 0 2 2 0 0 0",
                "127.0.0.1:2002 up 0 1 0 0 1 0",
                "127.0.0.1:2001 up 0 0 0 0 0 0") ]
--- no_error_log
[alert]
[crit]
