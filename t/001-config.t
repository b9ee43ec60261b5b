# The prefix_aware directive: every bad configuration stops nginx with a
# message naming the parameter and its range or the reason; the edge values
# and the standard server parameters are accepted.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

no_shuffle();
run_tests();

__DATA__

=== TEST 1: length=1023 is below the range
--- http_config
    upstream up {
        prefix_aware index=off length=1023;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "length" value "1023" in "prefix_aware", it must be a number from 1024 to 65536



=== TEST 2: length=65537 is above the range
--- http_config
    upstream up {
        prefix_aware index=off length=65537;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "length" value "65537" in "prefix_aware", it must be a number from 1024 to 65536



=== TEST 2a: with the index, length=4194305 is above the range
--- http_config
    upstream up {
        prefix_aware length=4194305;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "length" value "4194305" in "prefix_aware", it must be a number from 1024 to 65536, or to 4194304 with the index



=== TEST 2b: with the index, length=4194304 is accepted; index=off after it refuses it
--- http_config
    upstream up {
        prefix_aware length=4194304;
        server 127.0.0.1:1985;
    }
    upstream off {
        prefix_aware length=65537 index=1m index=off;
        server 127.0.0.1:1986;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "length" value "65537" in "prefix_aware", it must be a number from 1024 to 65536, or to 4194304 with the index



=== TEST 2c: with the index, length=4194304 is accepted and routes
--- http_config
    upstream up {
        prefix_aware length=4194304;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
POST /t
hello
--- response_body
b1
--- no_error_log
[error]
[emerg]



=== TEST 3: length=abc is not a number
--- http_config
    upstream up {
        prefix_aware index=off length=abc;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "length" value "abc" in "prefix_aware", it must be a number from 1024 to 65536



=== TEST 4: length= without a value
--- http_config
    upstream up {
        prefix_aware index=off length=;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "length" value "" in "prefix_aware", it must be a number from 1024 to 65536



=== TEST 5: threshold=0 is below the range
--- http_config
    upstream up {
        prefix_aware index=off threshold=0;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "threshold" value "0" in "prefix_aware", it must be a number from 1 to 1024



=== TEST 6: threshold=1025 is above the range
--- http_config
    upstream up {
        prefix_aware index=off threshold=1025;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "threshold" value "1025" in "prefix_aware", it must be a number from 1 to 1024



=== TEST 7: threshold=-1 is not a number
--- http_config
    upstream up {
        prefix_aware index=off threshold=-1;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "threshold" value "-1" in "prefix_aware", it must be a number from 1 to 1024



=== TEST 8: format=xml is not a format
--- http_config
    upstream up {
        prefix_aware index=off format=xml;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "format" value "xml" in "prefix_aware", it must be "auto", "body" or "openai"



=== TEST 9: an unknown parameter
--- http_config
    upstream up {
        prefix_aware index=off length=2048 lenght=4096;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid parameter "lenght=4096" in "prefix_aware", it takes length=, threshold=, format=, index=, block=, capacity=, balance=, cold=, match=, prefill=, strategy=, strategy_default=, models=, models_interval=, model_header=, model_fallback=, metrics=, metrics_interval=, load= and responses=



=== TEST 10: the directive twice in one upstream
--- http_config
    upstream up {
        prefix_aware index=off length=2048;
        prefix_aware index=off threshold=4;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware" directive is duplicate



=== TEST 11: a backup server before the directive
--- http_config
    upstream up {
        server 127.0.0.1:1985;
        server 127.0.0.1:1986 backup;
        prefix_aware index=off;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware" does not support backup servers: every server is on the ring, use "down" or remove it



=== TEST 12: a backup server after the directive
--- http_config
    upstream up {
        prefix_aware index=off;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986 backup;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
balancing method does not support parameter "backup"



=== TEST 13: the directive outside an upstream block
--- config
    location /t {
        prefix_aware index=off;
        return 200;
    }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware" directive is not allowed here



=== TEST 14: the same server twice in one upstream
--- http_config
    upstream up {
        prefix_aware index=off;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
prefix_aware: duplicate server "127.0.0.1:1985" in upstream "up", use "weight=" instead



=== TEST 15: the lowest length and threshold are accepted
--- http_config
    upstream up {
        prefix_aware index=off length=1024 threshold=1;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
POST /t
hello
--- response_body
b1
--- no_error_log
[error]
[emerg]



=== TEST 16: the highest length and threshold, every format, the defaults
--- http_config
    upstream up1 {
        prefix_aware index=off length=65536 threshold=1024 format=body;
        server 127.0.0.1:1985;
    }
    upstream up2 {
        prefix_aware index=off format=openai;
        server 127.0.0.1:1986;
    }
    upstream up3 {
        prefix_aware index=off format=auto;
        server 127.0.0.1:1987;
    }
    upstream up4 {
        prefix_aware index=off;
        server 127.0.0.1:1988;
    }
--- config
    location /t1 { proxy_pass http://up1; }
    location /t2 { proxy_pass http://up2; }
    location /t3 { proxy_pass http://up3; }
    location /t4 { proxy_pass http://up4; }
--- pipelined_requests eval
["POST /t1\nhello", "POST /t2\nhello", "POST /t3\nhello", "POST /t4\nhello"]
--- response_body eval
["b1\n", "b2\n", "b3\n", "b4\n"]
--- no_error_log
[error]
[emerg]



=== TEST 17: weight, max_fails, fail_timeout, max_conns and down are accepted
--- http_config
    upstream up {
        prefix_aware index=off length=4096 threshold=10;
        server 127.0.0.1:1985 weight=3 max_fails=2 fail_timeout=5s max_conns=100;
        server 127.0.0.1:1986 down;
    }
--- config
    location /t { proxy_pass http://up; }
--- pipelined_requests eval
["POST /t\nhello", "POST /t\nworld", "GET /t"]
--- response_body eval
["b1\n", "b1\n", "b1\n"]
--- no_error_log
[error]
[emerg]



=== TEST 18: a shared upstream zone works with the ring
--- http_config
    upstream up {
        zone up 64k;
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Route $prefix_aware_route always;
    }
--- request
POST /t
You are assistant number 01. Answer briefly.
--- response_headers
X-Route: affinity
--- response_body
b2
--- no_error_log
[error]



=== TEST 19: another balancing method after prefix_aware is warned about, and it is the one used
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        least_conn;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /t { proxy_pass http://up; }
--- user_files eval
[["ssi/seq.html", '<!--# include virtual="/t" wait="yes" -->' x 3]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-a
--- request
GET /ssi/seq.html
--- response_body eval
"b1\nb2\nb3\n"
--- error_log
load balancing method redefined
--- no_error_log
[error]
prefix_aware peer



=== TEST 20: upstream keepalive after prefix_aware: the ring still routes, connections are reused, in-flight counts go back to 0
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
        keepalive 8;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /st { prefix_aware_status; }
    location /t {
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_pass http://up;
    }
--- user_files eval
[["ssi/seq.html", ('<!--# include virtual="/t" wait="yes" -->' x 3)
                  . '<!--# include virtual="/st?format=prometheus" -->']]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-a
--- request
GET /ssi/seq.html
--- response_body_like eval
qr/\Ab1\nb1\nb1\n.*
   \nnginx_prefix_aware_server_inflight\{upstream="up",server="127.0.0.1:1985"\}\ 0\n
   nginx_prefix_aware_server_inflight\{upstream="up",server="127.0.0.1:1986"\}\ 0\n
   nginx_prefix_aware_server_inflight\{upstream="up",server="127.0.0.1:1987"\}\ 0\n
   .*\nnginx_prefix_aware_server_requests_total\{upstream="up",server="127.0.0.1:1985"\}\ 3\n/sx
--- grep_error_log eval
qr/prefix_aware peer: "[^"]+" route:\w+/
--- grep_error_log_out
prefix_aware peer: "127.0.0.1:1985" route:affinity
prefix_aware peer: "127.0.0.1:1985" route:affinity
prefix_aware peer: "127.0.0.1:1985" route:affinity
--- error_log
get keepalive peer: using connection
--- no_error_log
[error]



=== TEST 21: weight above 100 is refused: the ring has 160 points per unit
--- http_config
    upstream up {
        prefix_aware index=off;
        server 127.0.0.1:1985 weight=101;
        server 127.0.0.1:1986;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
prefix_aware: invalid "weight" value 101 of server "127.0.0.1:1985" in upstream "up", it must be a number from 1 to 100



=== TEST 22: a ring of more than 4194304 points is refused (300 servers of weight 100)
--- http_config eval
"upstream up {\n    prefix_aware;\n"
. join('', map { sprintf "    server 127.0.%d.%d:1985 weight=100;\n", $_ / 250, $_ % 250 + 1 } 0 .. 299)
. "}\n"
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
prefix_aware: the ring of upstream "up" would have more than 4194304 points (160 per unit of weight), lower the weights or split the upstream



=== TEST 23: 5,000 servers load, and a duplicate among them is named
--- http_config eval
"upstream up {\n    prefix_aware;\n"
. join('', map { sprintf "    server 127.%d.%d.1:1985;\n", $_ / 250 + 1, $_ % 250 } 0 .. 4999)
. "    server 127.3.7.1:1985;\n}\n"
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
prefix_aware: duplicate server "127.3.7.1:1985" in upstream "up", use "weight=" instead



=== TEST 24: 5,000 distinct servers load and route
--- http_config eval
"upstream up {\n    prefix_aware;\n"
. join('', map { sprintf "    server 127.%d.%d.1:1985 down;\n", $_ / 250 + 1, $_ % 250 } 0 .. 4998)
. "    server 127.0.0.1:1985;\n}\n"
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- response_body
b1
--- no_error_log
[error]


=== TEST 25: index=100k is below the range
--- http_config
    upstream up {
        prefix_aware index=100k;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "index" value "100k" in "prefix_aware", it must be "auto", "off" or a size from 256k to 4g


=== TEST 26: index=abc is not a size
--- http_config
    upstream up {
        prefix_aware index=abc;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "index" value "abc" in "prefix_aware", it must be "auto", "off" or a size from 256k to 4g


=== TEST 27: balance=0.5 is below the range
--- http_config
    upstream up {
        prefix_aware index=1m balance=0.5;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "balance" value "0.5" in "prefix_aware", it must be "off" or a number from 1.00 to 10.00


=== TEST 28: balance=11 is above the range
--- http_config
    upstream up {
        prefix_aware index=1m balance=11;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "balance" value "11" in "prefix_aware", it must be "off" or a number from 1.00 to 10.00


=== TEST 29: block=8 is below the range
--- http_config
    upstream up {
        prefix_aware index=1m block=8;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "block" value "8" in "prefix_aware", it must be a number from 16 to 4096


=== TEST 29b: stride=65 is above the range
--- http_config
    upstream up {
        prefix_aware index=1m stride=65;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "stride" value "65" in "prefix_aware", it must be a number from 1 to 64


=== TEST 30: capacity=10 is below the range
--- http_config
    upstream up {
        prefix_aware index=1m capacity=10;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "capacity" value "10" in "prefix_aware", it must be a number from 1024 to 100000000


=== TEST 31: cold=far is not a placement
--- http_config
    upstream up {
        prefix_aware index=1m cold=far;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "cold" value "far" in "prefix_aware", it must be "ring", "least", "auto" or "two"


=== TEST 31a: match=101 is above the range
--- http_config
    upstream up {
        prefix_aware index=1m match=101;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "match" value "101" in "prefix_aware", it must be a number from 0 to 100


=== TEST 31b: prefill=last is not a moment
--- http_config
    upstream up {
        prefix_aware index=1m prefill=last;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "prefill" value "last" in "prefix_aware", it must be "first" or "end"


=== TEST 31c: block larger than length is refused, naming both values
--- http_config
    upstream up {
        prefix_aware length=2048 block=4096;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"block=4096" in "prefix_aware" is larger than "length=2048": the index would hold no block, lower "block" or raise "length"


=== TEST 31d: block equal to length is one block, and accepted; block above length with index=off is not used and accepted
--- http_config
    upstream up {
        prefix_aware length=4096 block=4096;
        server 127.0.0.1:1985;
    }
    upstream off {
        prefix_aware index=off length=1024 block=4096;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /o { proxy_pass http://off; }
--- request
GET /t
--- response_body
b1
--- no_error_log
[error]
[emerg]


=== TEST 31e: place=near is not a placement
--- http_config
    upstream up {
        prefix_aware place=near;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "place" value "near" in "prefix_aware", it must be "deepest" or "cost"



=== TEST 32: every routing v2 parameter at once is accepted, and index=off
--- http_config
    upstream up {
        prefix_aware length=1024 index=256k block=16 capacity=1024 balance=1.5 cold=least match=0 prefill=end;
        server 127.0.0.1:1985;
    }
    upstream off {
        prefix_aware index=off balance=off;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /o { proxy_pass http://off; }
--- request
GET /t
--- response_body
b1
--- no_error_log
[error]



=== TEST 33: responses= below its range
--- http_config
    upstream up {
        prefix_aware responses=8;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "responses" value "8" in "prefix_aware", it must be a number from 16 to 16777216



=== TEST 34: responses= not a number
--- http_config
    upstream up {
        prefix_aware responses=many;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "responses" value "many" in "prefix_aware", it must be a number from 16 to 16777216



=== TEST 35: responses=off, the lowest and a million are accepted
--- http_config
    upstream up {
        prefix_aware responses=off;
        server 127.0.0.1:1985;
    }
    upstream low {
        prefix_aware responses=16;
        server 127.0.0.1:1985;
    }
    upstream high {
        prefix_aware index=off responses=1048576;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
    location /l { proxy_pass http://low; }
    location /h { proxy_pass http://high; }
--- request
GET /t
--- response_body
b1
--- no_error_log
[error]
