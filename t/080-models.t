# Models and LoRA adapters, declared sets: "prefix_aware_model NAME
# SERVER...;" keeps a model's requests on its servers.  The request's model
# is the model_header= header, else the OpenAI body's "model".  Within the
# set the ring walk, bounded-load spill and retries are the usual ones; a
# model with no set uses all servers; no usable server in the set is a 503
# naming the model, or all servers with model_fallback=all.  Bad lines stop
# nginx with a message naming the value.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

our $INC = '<!--# include virtual="/slow" -->';
our @IDS = map { "X-Amzn-SageMaker-Prefix-Aware-Id: k$_" } 1 .. 8;

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a server that is not in the upstream
--- http_config
    upstream up {
        prefix_aware index=off;
        prefix_aware_model a 127.0.0.1:1985 127.0.0.1:1999;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
unknown server "127.0.0.1:1999" in "prefix_aware_model a" of upstream "up", it must be written as in a "server" line



=== TEST 2: a model declared twice
--- http_config
    upstream up {
        prefix_aware index=off;
        prefix_aware_model lora-a 127.0.0.1:1985;
        prefix_aware_model lora-a 127.0.0.1:1986;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
duplicate model "lora-a" in "prefix_aware_model"



=== TEST 3: a model without servers
--- http_config
    upstream up {
        prefix_aware index=off;
        prefix_aware_model lora-a;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid number of arguments in "prefix_aware_model" directive



=== TEST 4: prefix_aware_model before prefix_aware
--- http_config
    upstream up {
        prefix_aware_model lora-a 127.0.0.1:1985;
        prefix_aware index=off;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
"prefix_aware_model" must come after "prefix_aware" in the upstream



=== TEST 5: model_fallback= other than none or all
--- http_config
    upstream up {
        prefix_aware index=off model_fallback=any;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "model_fallback" value "any" in "prefix_aware", it must be "none" or "all"



=== TEST 6: models= other than discover
--- http_config
    upstream up {
        prefix_aware index=off models=list;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "models" value "list" in "prefix_aware", it must be "discover"



=== TEST 7: models_interval= below 100ms
--- http_config
    upstream up {
        prefix_aware index=off models_interval=50ms;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
invalid "models_interval" value "50ms" in "prefix_aware", it must be a time from 100ms to 1h



=== TEST 8: an empty model_header=
--- http_config
    upstream up {
        prefix_aware index=off model_header=;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- must_die
--- error_log
empty "model_header" in "prefix_aware"



=== TEST 9: without a model, eight ids spread over the three servers (the reference for the next test)
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1986;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Model "[$prefix_aware_model]" always;
    }
--- more_headers eval
\@::IDS
--- pipelined_requests eval
[("GET /t") x 8]
--- response_body eval
["b3\n", "b1\n", "b3\n", "b1\n", "b1\n", "b2\n", "b1\n", "b3\n"]
--- response_headers eval
[("X-Model: []") x 8]
--- no_error_log
[error]



=== TEST 10: the same ids with the model in a header: all on the model's only server
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1986;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Model "[$prefix_aware_model]" always;
        add_header X-Route $prefix_aware_route always;
    }
--- more_headers eval
[map { "$_\nX-Model: lora-a" } @::IDS]
--- pipelined_requests eval
[("GET /t") x 8]
--- response_body eval
[("b2\n") x 8]
--- response_headers eval
[("X-Model: [lora-a]\nX-Route: affinity") x 8]
--- no_error_log
[error]



=== TEST 11: the OpenAI body's model; the header, when there is one, wins
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1986;
        prefix_aware_model lora-b 127.0.0.1:1987;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /v1/ {
        proxy_pass http://up;
        add_header X-Model "[$prefix_aware_model]" always;
    }
--- more_headers eval
["", "", "", "X-Model: lora-a"]
--- pipelined_requests eval
["POST /v1/chat/completions\n{\"model\":\"lora-a\",\"messages\":[{\"role\":\"user\",\"content\":\"one\"}]}",
 "POST /v1/completions\n{\"prompt\":\"two\",\"model\":\"lora-b\"}",
 "POST /v1/completions\n{\"prompt\":\"three\",\"model\":\"lora-\\u0062\"}",
 "POST /v1/completions\n{\"prompt\":\"four\",\"model\":\"lora-b\"}"]
--- response_body eval
["b2\n", "b3\n", "b3\n", "b2\n"]
--- response_headers eval
["X-Model: [lora-a]", "X-Model: [lora-b]", "X-Model: [lora-b]",
 "X-Model: [lora-a]"]
--- no_error_log
[error]



=== TEST 12: a model with no set (and a request with no model) uses all servers
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1986;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t {
        proxy_pass http://up;
        add_header X-Model "[$prefix_aware_model]" always;
    }
--- more_headers eval
[map { "$_\nX-Model: lora-z" } @::IDS]
--- pipelined_requests eval
[("GET /t") x 8]
--- response_body eval
["b3\n", "b1\n", "b3\n", "b1\n", "b1\n", "b2\n", "b1\n", "b3\n"]
--- response_headers eval
[("X-Model: [lora-z]") x 8]
--- no_error_log
[error]



=== TEST 13: spill stays in the set: threshold=1, 4 concurrent requests of one key, the set is b1 and b2 of three
--- http_config
    upstream up {
        prefix_aware index=off threshold=1 model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1985 127.0.0.1:1986;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /ssi/ { ssi on; root $TEST_NGINX_SERVER_ROOT/html; }
    location /slow { proxy_pass http://up; }
--- user_files eval
[["ssi/spill.html", $::INC x 4]]
--- more_headers
X-Amzn-SageMaker-Prefix-Aware-Id: tenant-d
X-Model: lora-a
--- request
GET /ssi/spill.html
--- response_body eval
"b2\nb1\nb2\nb1\n"
--- grep_error_log eval
qr/route:\w+/
--- grep_error_log_out
route:affinity
route:spill
route:affinity
route:spill
--- timeout: 6
--- no_error_log
[error]



=== TEST 14: every server of the set down: 503 naming the model
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1986 127.0.0.1:1987;
        prefix_aware_model lora-b 127.0.0.1:1985;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986 down;
        server 127.0.0.1:1987 down;
    }
--- config
    location /t { proxy_pass http://up; }
--- more_headers
X-Model: lora-a
--- request
GET /t
--- error_code: 503
--- response_body
no server of model "lora-a" is usable
--- error_log
no server of model "lora-a" is usable, answered 503
--- no_error_log
[error]



=== TEST 15: other models of the same upstream are served meanwhile
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1986 127.0.0.1:1987;
        prefix_aware_model lora-b 127.0.0.1:1985;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986 down;
        server 127.0.0.1:1987 down;
    }
--- config
    location /t { proxy_pass http://up; }
--- more_headers
X-Model: lora-b
--- request
GET /t
--- response_body
b1
--- no_error_log
[error]
[warn]



=== TEST 16: the set's only server fails (max_fails=1): 502 for the request that finds out, then 503 until fail_timeout
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1990;
        server 127.0.0.1:1985;
        server 127.0.0.1:1990 max_fails=1 fail_timeout=30s;
    }
--- config
    location /t { proxy_pass http://up; }
--- more_headers
X-Model: lora-a
--- pipelined_requests eval
["GET /t", "GET /t", "GET /t"]
--- error_code eval
[502, 503, 503]
--- response_body_like eval
[".*", "no server of model \"lora-a\" is usable\n", "no server of model \"lora-a\" is usable\n"]



=== TEST 17: model_fallback=all: with the set down, the request goes to the other servers
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model model_fallback=all;
        prefix_aware_model lora-a 127.0.0.1:1986;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986 down;
    }
--- config
    location /t { proxy_pass http://up; }
--- more_headers
X-Model: lora-a
--- request
GET /t
--- response_body
b1
--- error_log
no server of model "lora-a" is usable, sent to all servers (model_fallback=all)
--- no_error_log
[error]



=== TEST 18: the status page: each declared set, requests per model, those with no server, those with no known set
--- http_config
    upstream up {
        prefix_aware index=off model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1986;
        prefix_aware_model "lora \"b\"" 127.0.0.1:1985 127.0.0.1:1987;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986 down;
        server 127.0.0.1:1987;
    }
--- config
    location /t { proxy_pass http://up; }
    location /status { prefix_aware_status; }
--- more_headers eval
["X-Model: lora-a", "X-Model: lora \"b\"", "X-Model: lora \"b\"", "X-Model: x", "", ""]
--- pipelined_requests eval
["GET /t", "GET /t", "GET /t", "GET /t", "GET /status",
 "GET /status?format=prometheus"]
--- response_body_like eval
[".*", "b[13]", "b[13]", "b[123]",
 qr/"models": \{ "discover": false, "interval_ms": 10000, "fallback": "none",\n        "unknown": 1, "full": 0, "share": 42,\n        "list": \[\n          \{ "name": "lora-a", "set": "declared", "requests": 1, "no_server": 1, "last_seen": 0,\n            "servers": \[ "127.0.0.1:1986" \] \},\n          \{ "name": "lora \\"b\\"", "set": "declared", "requests": 2, "no_server": 0, "last_seen": 0,\n            "servers": \[ "127.0.0.1:1985", "127.0.0.1:1987" \] \}\n        \],\n        "servers": \[\n        \] \},/,
 qr/nginx_prefix_aware_model_requests_total\{upstream="up",model="lora-a",set="declared"\} 1\nnginx_prefix_aware_model_requests_total\{upstream="up",model="lora \\"b\\"",set="declared"\} 2\n.*nginx_prefix_aware_model_no_server_total\{upstream="up",model="lora-a"\} 1\n.*nginx_prefix_aware_model_server\{upstream="up",model="lora-a",server="127.0.0.1:1986"\} 1\nnginx_prefix_aware_model_server\{upstream="up",model="lora \\"b\\"",server="127.0.0.1:1985"\} 1\nnginx_prefix_aware_model_server\{upstream="up",model="lora \\"b\\"",server="127.0.0.1:1987"\} 1\n.*nginx_prefix_aware_models_unknown_total\{upstream="up"\} 1\n.*nginx_prefix_aware_models_full_total\{upstream="up"\} 0\n/s]
--- error_code eval
[503, 200, 200, 200, 200, 200]



=== TEST 19: discovery keeps 128 models: a server that lists 130 leaves 2 out (counted); a server without /v1/models serves all
--- http_config eval
my $ids = CORE::join ',', map { qq({"id":"m$_"}) } 1 .. 130;
<<"_EOC_";
    upstream up {
        prefix_aware index=off models=discover models_interval=10s model_header=X-Model;
        server 127.0.0.1:1991;
        server 127.0.0.1:1985;
    }
    server {
        listen 127.0.0.1:1991;
        location = /v1/models { return 200 '{"object":"list","data":[$ids]}'; }
        location / { return 200 "lister\\n"; }
    }
_EOC_
--- config
    location /t { proxy_pass http://up; }
    location /delay { proxy_pass http://127.0.0.1:1985/slow; }
    location /status { prefix_aware_status; }
--- pipelined_requests eval
["GET /delay", "GET /status"]
--- response_body_like eval
[".*", qr/"unknown": 0, "full": 2, "share": 64,\n.*"name": "m128", "set": "discovered".*"servers": \[\n          \{ "server": "127.0.0.1:1985", "answered": 0, "failing": true, "serves_all": true, "models": 0, "refused": 0 \},\n          \{ "server": "127.0.0.1:1991", "answered": \d+, "failing": false, "serves_all": false, "models": 130, "refused": 2 \}\n/s]
--- timeout: 5



=== TEST 20: routing v2 (index=) stays in the set too
--- http_config
    upstream up {
        prefix_aware index=1m block=16 model_header=X-Model;
        prefix_aware_model lora-a 127.0.0.1:1986;
        server 127.0.0.1:1985;
        server 127.0.0.1:1986;
        server 127.0.0.1:1987;
    }
--- config
    location /t { proxy_pass http://up; }
--- more_headers
X-Model: lora-a
--- pipelined_requests eval
[map { "POST /t\nprompt number $_ with a common beginning long enough for blocks" } 1 .. 6]
--- response_body eval
[("b2\n") x 6]
--- no_error_log
[error]
