# OpenAI-compatible bodies (format=auto on .../completions, format=openai):
# the key is the first "length" characters of the message text (roles
# and contents, or the prompt), mixed with "model" and "cache_salt";
# "prompt_cache_key" is a tenant id, validated, and the id header wins
# over it; bodies that are not usable JSON fall back to the raw-byte key
# and are served.
#
# Hashes are compared with one another, not with constants: the front
# location logs "$prefix_aware_source $prefix_aware_hash $sent_http_x_hash
# $prefix_aware_route $upstream_addr" of each request to logs/pa.log, and
# the last request of a block reads that file back (see log_like below).
# Backends b1, b2, b3 are servers of the test nginx on 127.0.0.1:1991..1993
# answering "bN\n".

use Test::Nginx::Socket 'no_plan';

our %PORT = (b1 => 1991, b2 => 1992, b3 => 1993);

our $UPSTREAM = <<'_EOC_';
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1991;
        server 127.0.0.1:1992;
        server 127.0.0.1:1993;
    }
_EOC_

our $COMMON = <<'_EOC_';
    log_format pa '$prefix_aware_source $prefix_aware_hash $sent_http_x_hash '
                  '$prefix_aware_route $upstream_addr';
_EOC_

for my $name (sort keys %PORT) {
    $COMMON .= <<"_EOC_";
    server {
        listen 127.0.0.1:$PORT{$name};
        access_log off;
        location / {
            return 200 "$name\\n";
        }
    }
_EOC_
}

# the front: the three variables in headers and in logs/pa.log
our $FRONT = <<'_EOC_';
    location / {
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Route $prefix_aware_route always;
        add_header X-Source $prefix_aware_source always;
        access_log logs/pa.log pa;
    }
    location = /pa.log {
        root logs;
        access_log off;
    }
_EOC_

add_block_preprocessor(sub {
    my $block = shift;
    my $http = $block->http_config // $UPSTREAM;
    $block->set_value(http_config => $http . $COMMON);
    $block->set_value(config => $FRONT) unless defined $block->config;
});

# A pattern for the whole of logs/pa.log, one line a request, from specs
# "SOURCE:CLASS": the source logged, and a letter such that requests of
# one class have the same hash (and went to the same backend) and requests
# of different classes have different hashes.  The header X-Hash must be
# the variable's value, the route "affinity".  A spec "-" is a line that
# is not checked (a request answered 400 logs no hash).
sub log_like {
    my @specs = @_;
    my (%seen, @classes);
    my $re = '\A';
    for my $spec (@specs) {
        if ($spec eq '-') {
            $re .= '[^\n]*\n';
            next;
        }
        my ($src, $c) = split /:/, $spec;
        die "bad spec $spec" if !defined $c || $c !~ /^\w+$/;
        $re .= "\Q$src\E ";
        if ($seen{$c}) {
            $re .= "\\k<h$c> \\k<h$c> affinity \\k<u$c>\\n";
        } else {
            my $not = join '|', map { "\\k<h$_>" } @classes;
            $re .= "(?!(?:$not) )" if @classes;
            $re .= "(?<h$c>[0-9a-f]{16}) \\k<h$c> affinity (?<u$c>127\\.0\\.0\\.1:199[123])\\n";
            $seen{$c} = 1;
            push @classes, $c;
        }
    }
    return qr/$re\z/;
}

# a chat body; %o: model, extra (raw JSON members appended)
sub chat {
    my ($messages, %o) = @_;
    my $m = join ',', map {
        my ($role, $content) = @$_;
        qq{{"role":"$role","content":"$content"}}
    } @$messages;
    my $model = exists $o{model} ? $o{model} : 'llama-3.1-8b-instruct';
    my $body = '{';
    $body .= qq{"model":"$model",} if defined $model;
    $body .= qq{"messages":[$m]};
    $body .= ",$o{extra}" if defined $o{extra};
    return $body . '}';
}

our $SYS = 'You are a helpful assistant. Answer in one sentence.';
our $Q = 'What is the capital of France?';

# the same conversation in other ways: other parameters, key order,
# whitespace, escapes, parts
# ("tools" are part of a chat key since issue 44: t/022-apis.t)
our @SAME = (
    qq({"model":"llama-3.1-8b-instruct","messages":[{"role":"system","content":"$SYS"},{"role":"user","content":"$Q"}],"temperature":0.7,"max_tokens":64,"stream":false}),
    qq({"stream":true,"stream_options":{"include_usage":true},"max_tokens":512,"temperature":0,"messages":[{"content":"$SYS","role":"system"},{"role":"user","content":"$Q","name":"alice"}],"model":"llama-3.1-8b-instruct","seed":7}),
    qq({\n\t"messages" : [\n\t\t{ "role" : "system" , "content" : "$SYS" } ,\n\t\t{ "role" : "user" , "content" : "$Q" }\n\t] ,\n\t"top_p" : 0.9 ,\n\t"n" : 2 ,\n\t"tool_choice" : "none" ,\n\t"user" : "u-1" ,\n\t"model" : "llama-3.1-8b-instruct"\n}),
    qq({"model":"llama\\u002d3.1-8b-instruct","messages":[{"role":"\\u0073ystem","content":"You are a helpful assistant.\\u0020Answer in one sentence."},{"role":"user","content":"What is the capital of France\\u003f"}]}),
    qq({"model":"llama-3.1-8b-instruct","messages":[{"role":"system","content":[{"type":"text","text":"$SYS"}]},{"role":"user","content":[{"type":"text","text":"$Q"}]}],"logprobs":true}),
);

# 1019 CJK characters: with the role "user" (4 characters) 1023
our $ZH = '中' x 1019;
our $ZH_ESC = '\u4e2d' x 1019;
# 1004 emoji (4 bytes each), after a system message of 6 + 10 characters
# and the role "user": 1024 characters
our $EMO = '😀' x 1004;
our $EMO10 = '😀' x 10;
our $EMO10_ESC = '\ud83d\ude00' x 10;

# 300000 bytes of a field that is not part of the key
our $PAD = 'x' x 300000;

# an SSE stream as an OpenAI-compatible server sends it
our $SSE = join '', map({
    qq(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"llama-3.1-8b-instruct","choices":[{"index":0,"delta":{"content":"tok$_ "},"finish_reason":null}]}\n\n)
} 1 .. 40), qq(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"llama-3.1-8b-instruct","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n), "data: [DONE]\n\n";

# bodies that are not usable OpenAI JSON, and the reason logged
our @BAD = (
    ['model=llama&prompt=hello', 'not json'],
    ['["messages",{"role":"user"}]', 'not an object'],
    ['"just a string"', 'not an object'],
    [qq({"model":"m","messages":[{"role":"user","content":"hello, wor), 'not json'],
    [qq({"model":"m","messages":"hello"}), 'bad type'],
    [qq({"model":"m","messages":["hello"]}), 'bad type'],
    [qq({"model":"m","prompt":42}), 'bad type'],
    [qq({"model":"m","prompt":[{"text":"hello"}]}), 'bad type'],
    [qq({"model":"m","prompt":[[1,2,"three"]]}), 'bad type'],
    [qq({"model":"m","messages":[{"role":"user","content":"caf\xe9 \xff\xfe"}]}), 'not json'],
    [qq({"model":"m","messages":[{"role":"user","content":"hi"}],"x":) . ('[' x 100) . (']' x 100) . '}', 'too deep'],
    [qq({"model":"m","inputs":"hello"}), 'no text'],
    ['{}', 'no text'],
    [qq({"model":"m","messages":[{"role":"user","content":"hi"}]} trailing), 'not json'],
);

# the error log is checked after each of the pipelined requests, which
# were all served by then: each check must see all of it
check_accum_error_log() if defined &check_accum_error_log;
no_shuffle();
no_root_location();
run_tests();

__DATA__

=== TEST 1: the same chat with other parameters, key order, whitespace, escapes and text parts has one hash and one backend; other text moves it
--- pipelined_requests eval
[ (map { "POST /v1/chat/completions\n$_" } @::SAME),
  "POST /v1/chat/completions\n" . ::chat([[system => $::SYS], [user => 'What is the capital of Spain?']]),
  "POST /v1/chat/completions\n" . ::chat([[system => "you are a helpful assistant. Answer in one sentence."], [user => $::Q]]),
  "POST /v1/chat/completions\n" . ::chat([[user => $::SYS], [user => $::Q]]),
  "POST /v1/chat/completions\n" . ::chat([[system => $::Q], [user => $::SYS]]),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat\nX-Route: affinity") x 9, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 9,
  ::log_like(qw(chat:A chat:A chat:A chat:A chat:A chat:B chat:C chat:D chat:E)) ]
--- no_error_log
[error]
not an OpenAI request body



=== TEST 2: completions: the same prompt with other parameters and whitespace has one hash; another prompt another
--- pipelined_requests eval
[ qq(POST /v1/completions\n{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","max_tokens":7,"temperature":0}),
  qq(POST /v1/completions\n{ "temperature" : 1.5 , "echo" : true , "prompt" : "Say this is a test" , "model" : "gpt-3.5-turbo-instruct" , "stream" : true }),
  qq(POST /v1/completions\n{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test!"}),
  qq(POST /v1/completions\n{"model":"gpt-3.5-turbo-instruct","prompt":[1,2,3]}),
  qq(POST /v1/completions\n{"model":"gpt-3.5-turbo-instruct","prompt":[1,2,4],"n":3}),
  qq(POST /v1/completions\n{"n":1,"prompt":[1,2,4],"model":"gpt-3.5-turbo-instruct"}),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: completions") x 6, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 6,
  ::log_like(qw(completions:A completions:A completions:B completions:C completions:D completions:D)) ]
--- no_error_log
[error]
not an OpenAI request body



=== TEST 3: length=1024 counts characters: role "user" (4) + 1019 CJK characters; the 1024th character moves the key, the 1025th does not; \u4e2d is 中; the role counts where it is written
--- pipelined_requests eval
[ "POST /v1/chat/completions\n" . ::chat([[user => $::ZH . "Aa"]]),
  "POST /v1/chat/completions\n" . ::chat([[user => $::ZH . "Ba"]]),
  "POST /v1/chat/completions\n" . ::chat([[user => $::ZH . "Ab"]]),
  "POST /v1/chat/completions\n" . ::chat([[user => $::ZH . "A" . ('尾' x 5000)]]),
  "POST /v1/chat/completions\n" . ::chat([[user => $::ZH_ESC . "A\\u5c3e"]]),
  "POST /v1/chat/completions\n" . ::chat([[user => $::ZH_ESC . "\\u0042"]]),
  "POST /v1/chat/completions\n" . ::chat([[user => substr($::ZH, 3) . "ABa"]]),
  "POST /v1/chat/completions\n" . ::chat([[usr => $::ZH . "Aa"]]),
  "POST /v1/chat/completions\n" . ::chat([[users => $::ZH . "Aa"]]),
  "POST /v1/chat/completions\n" . ::chat([[users => $::ZH . "Ba"]]),
  qq(POST /v1/chat/completions\n{"messages":[{"content":"$::ZH) . qq(Ab","role":"user"}],"model":"llama-3.1-8b-instruct"}),
  qq(POST /v1/chat/completions\n{"messages":[{"content":[{"type":"text","text":"$::ZH) . qq(Ba"}],"role":"user"}],"model":"llama-3.1-8b-instruct"}),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 12, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 12,
  ::log_like(qw(chat:A chat:B chat:A chat:A chat:A chat:B chat:C chat:D chat:E chat:E chat:A chat:B)) ]
--- no_error_log
[error]



=== TEST 4: emoji over two messages: "system" (6) + 10 emoji + "user" (4) + 1004 emoji make 1024 characters; separators are not counted
--- pipelined_requests eval
[ "POST /v1/chat/completions\n" . ::chat([[system => $::EMO10], [user => $::EMO . "x"]]),
  "POST /v1/chat/completions\n" . ::chat([[system => $::EMO10], [user => $::EMO . "y"]]),
  "POST /v1/chat/completions\n" . ::chat([[system => $::EMO10_ESC], [user => $::EMO . "z"]]),
  "POST /v1/chat/completions\n" . ::chat([[system => $::EMO10], [user => substr($::EMO, 4) . "x"]]),
  "POST /v1/chat/completions\n" . ::chat([[system => $::EMO10], [user => substr($::EMO, 4) . "y"]]),
  "POST /v1/chat/completions\n" . ::chat([[system => "$::EMO10$::EMO10"], [user => substr($::EMO, 40) . "x"]]),
  "GET /pa.log" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 6,
  ::log_like(qw(chat:A chat:A chat:A chat:B chat:C chat:D)) ]
--- no_error_log
[error]



=== TEST 5: completions count characters too: 1023 "é" then the 1024th character counts, the 1025th does not; token ids count as their digits (256 x "1000" = 1024)
--- pipelined_requests eval
my $e = 'é' x 1023;
my $t = CORE::join ',', ('1000') x 255;
[ qq(POST /v1/completions\n{"model":"m","prompt":"${e}Aa"}),
  qq(POST /v1/completions\n{"model":"m","prompt":"${e}Ba"}),
  qq(POST /v1/completions\n{"model":"m","prompt":"${e}Ab"}),
  qq(POST /v1/completions\n{"model":"m","prompt":[$t,1000,7]}),
  qq(POST /v1/completions\n{"model":"m","prompt":[$t,1000,8,9]}),
  qq(POST /v1/completions\n{"model":"m","prompt":[$t,1001,7]}),
  qq(POST /v1/completions\n{"model":"m","prompt":[[$t,1000,7]]}),
  qq(POST /v1/completions\n{"model":"m","prompt":[[$t,1001,7],[5]]}),
  "GET /pa.log" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 8,
  ::log_like(qw(completions:A completions:B completions:A completions:C completions:C completions:D completions:C completions:D)) ]
--- no_error_log
[error]



=== TEST 6: model and cache_salt are part of the key wherever they are; other models and salts, or none, have other keys
--- pipelined_requests eval
my $m = [[system => $::SYS], [user => $::Q]];
[ "POST /v1/chat/completions\n" . ::chat($m, model => 'llama-3.1-8b-instruct'),
  "POST /v1/chat/completions\n" . ::chat($m, model => undef, extra => '"model":"llama-3.1-8b-instruct"'),
  "POST /v1/chat/completions\n" . ::chat($m, model => 'llama-3.1-70b-instruct'),
  "POST /v1/chat/completions\n" . ::chat($m, model => 'my-lora-adapter'),
  "POST /v1/chat/completions\n" . ::chat($m, model => undef),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"cache_salt":"salt-1"'),
  qq(POST /v1/chat/completions\n{"cache_salt":"salt-1","messages":[{"role":"system","content":"$::SYS"},{"role":"user","content":"$::Q"}],"temperature":1,"model":"llama-3.1-8b-instruct"}),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"cache_salt":"salt-2"'),
  "GET /pa.log" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 8,
  ::log_like(qw(chat:A chat:A chat:B chat:C chat:D chat:E chat:E chat:F)) ]
--- no_error_log
[error]



=== TEST 7: prompt_cache_key is a tenant id: keys route apart; the X-Amzn-SageMaker-Prefix-Aware-Id header means the same and wins when both are there
--- pipelined_requests eval
my $m = [[system => $::SYS], [user => $::Q]];
[ "POST /v1/chat/completions\n" . ::chat($m),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"prompt_cache_key":"tenant-1"'),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"prompt_cache_key":"tenant-2"'),
  qq(POST /v1/chat/completions\n{"prompt_cache_key":"tenant-1","temperature":0.2,"messages":[{"role":"system","content":"$::SYS"},{"role":"user","content":"$::Q"}],"model":"llama-3.1-8b-instruct"}),
  "POST /v1/chat/completions\n" . ::chat($m),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"prompt_cache_key":"tenant-2"'),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"prompt_cache_key":"tenant-1"'),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"prompt_cache_key":"tenant-1"'),
  "GET /pa.log" ]
--- more_headers eval
[ "", "", "", "",
  "X-Amzn-SageMaker-Prefix-Aware-Id: tenant-1",
  "X-Amzn-SageMaker-Prefix-Aware-Id: tenant-1",
  "X-Amzn-SageMaker-Prefix-Aware-Id: tenant-2",
  "X-Amzn-SageMaker-Prefix-Aware-Id: tenant-3",
  "" ]
--- response_headers eval
[ ("X-Source: chat") x 8, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 8,
  ::log_like(qw(chat:A chat:B chat:C chat:B chat:B chat:B chat:C chat:D)) ]
--- no_error_log
[error]



=== TEST 8: an invalid prompt_cache_key is not a tenant id: the request is routed without it (the inference server may accept it), counted and logged at info; a valid id header still counts; null counts as absent; 64 characters are fine
--- pipelined_requests eval
my $m = [[user => 'hello']];
my @bad = ('"' . ('k' x 65) . '"', '42', '""', '["tenant-1"]', '"caf\u00e9"', '"tab\there"');
[ (map { "POST /v1/chat/completions\n" . ::chat($m, extra => qq("prompt_cache_key":$_)) } @bad),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"prompt_cache_key":42'),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"prompt_cache_key":null'),
  "POST /v1/chat/completions\n" . ::chat($m),
  "POST /v1/chat/completions\n" . ::chat($m, extra => '"prompt_cache_key":"' . ('k' x 64) . '"'),
  "GET /pa.log" ]
--- more_headers eval
[ ("") x 6, "X-Amzn-SageMaker-Prefix-Aware-Id: tenant-1", "", "", "", "" ]
--- error_code eval
[ (200) x 11 ]
--- response_headers eval
[ ("X-Source: chat\nX-Route: affinity") x 10, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 10,
  ::log_like(('chat:A') x 6, 'chat:B', 'chat:A', 'chat:A', 'chat:C') ]
--- grep_error_log eval
qr/prefix_aware: prompt_cache_key [^,]*, routed without it/
--- grep_error_log_out eval
"prefix_aware: prompt_cache_key is not a string of 1 to 64 printable ASCII characters, routed without it\n" x 7
--- no_error_log
[error]
bad request



=== TEST 9: format=auto reads paths ending in /completions as OpenAI JSON, anything else by raw bytes
--- pipelined_requests eval
my $b = ::chat([[user => 'hello']]);
[ "POST /v1/chat/completions\n$b",
  "POST /v1/completions\n$b",
  "POST /openai/deployments/gpt/chat/completions?api-version=2024-02-01\n$b",
  "POST /invocations\n$b",
  "POST /generate\n$b",
  "POST /v1/chat/completions/\n$b",
  "POST /v1/chat/completions.json\n$b",
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 3, ("X-Source: body") x 4, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 7,
  ::log_like(qw(chat:A chat:A chat:A body:B body:B body:B body:B)) ]
--- no_error_log
[error]



=== TEST 10: format=body keys a chat path by raw bytes; format=openai reads any path as JSON; the keys are those of auto
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1991;
        server 127.0.0.1:1992;
        server 127.0.0.1:1993;
    }
    upstream up_body {
        prefix_aware index=off length=1024 format=body;
        server 127.0.0.1:1991;
        server 127.0.0.1:1992;
        server 127.0.0.1:1993;
    }
    upstream up_openai {
        prefix_aware index=off length=1024 format=openai;
        server 127.0.0.1:1991;
        server 127.0.0.1:1992;
        server 127.0.0.1:1993;
    }
--- config
    location /auto/ {
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
        access_log logs/pa.log pa;
    }
    location /body/ {
        proxy_pass http://up_body;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
        access_log logs/pa.log pa;
    }
    location /openai/ {
        proxy_pass http://up_openai;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
        access_log logs/pa.log pa;
    }
    location = /pa.log {
        root logs;
    }
--- pipelined_requests eval
my $b = ::chat([[user => 'hello']]);
[ "POST /auto/v1/chat/completions\n$b",
  "POST /body/v1/chat/completions\n$b",
  "POST /openai/invocations\n$b",
  "POST /auto/invocations\n$b",
  "POST /openai/generate\nnot json",
  "GET /pa.log" ]
--- response_headers eval
[ "X-Source: chat", "X-Source: body", "X-Source: chat", "X-Source: body", "X-Source: body", "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 5,
  ::log_like(qw(chat:A body:B chat:A body:B body:C)) ]
--- error_log
prefix_aware: not an OpenAI request body (not json), keyed by its raw bytes
--- no_error_log
[error]



=== TEST 11: every unusable body falls back to its raw-byte key, with an info line, and is served
--- pipelined_requests eval
[ (map { ("POST /v1/chat/completions\n$_->[0]", "POST /invocations\n$_->[0]") } @::BAD),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: body\nX-Route: affinity") x (2 * @::BAD), "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x (2 * @::BAD),
  ::log_like(map { ("body:F$_", "body:F$_") } 0 .. $#::BAD) ]
--- grep_error_log eval
qr/prefix_aware: not an OpenAI request body \([^)]*\), keyed by its raw bytes/
--- grep_error_log_out eval
CORE::join '', map { "prefix_aware: not an OpenAI request body ($_->[1]), keyed by its raw bytes\n" } @::BAD
--- no_error_log
[error]



=== TEST 12: nesting: 64 levels are read, 65 fall back
--- pipelined_requests eval
[ "POST /v1/chat/completions\n" . ::chat([[user => 'hi']], extra => '"x":' . ('[' x 63) . (']' x 63)),
  "POST /v1/chat/completions\n" . ::chat([[user => 'hi']], extra => '"x":' . ('[' x 64) . (']' x 64)),
  "POST /v1/chat/completions\n" . ::chat([[user => 'hi']], extra => '"x":' . ('{"a":' x 63) . '1' . ('}' x 63)),
  "POST /v1/chat/completions\n" . ::chat([[user => 'hi']], extra => '"x":' . ('{"a":' x 64) . '1' . ('}' x 64)),
  "POST /v1/chat/completions\n" . ::chat([[user => 'hi']]),
  "GET /pa.log" ]
--- response_headers eval
[ "X-Source: chat", "X-Source: body", "X-Source: chat", "X-Source: body", "X-Source: chat", "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 5,
  ::log_like(qw(chat:A body:B chat:A body:C chat:A)) ]
--- grep_error_log eval
qr/not an OpenAI request body \([^)]*\)/
--- grep_error_log_out
not an OpenAI request body (too deep)
not an OpenAI request body (too deep)
--- no_error_log
[error]



=== TEST 13: a 20 KB chat body in a client body temp file has the key it has in memory; a model at its end still counts
--- config
    location /mem/ {
        client_body_buffer_size 64k;
        proxy_pass http://up;
        add_header X-Source $prefix_aware_source always;
        add_header X-Hash $prefix_aware_hash always;
        access_log logs/pa.log pa;
    }
    location /file/ {
        client_body_buffer_size 1k;
        proxy_pass http://up;
        add_header X-Source $prefix_aware_source always;
        add_header X-Hash $prefix_aware_hash always;
        access_log logs/pa.log pa;
    }
    location = /pa.log {
        root logs;
    }
--- pipelined_requests eval
my $doc = CORE::join ' ', map { "Paragraph $_ of the shared document, which every request of this test carries." } 1 .. 270;
my @m = ([system => $::SYS], [user => $doc], [assistant => 'Noted.'], [user => 'Summarize it.']);
my $m1 = ::chat(\@m, model => undef, extra => '"temperature":0,"model":"m1"');
my $m2 = ::chat(\@m, model => undef, extra => '"temperature":0,"model":"m2"');
die "not 20 KB" if length $m1 < 20000;
[ "POST /mem/v1/chat/completions\n$m1",
  "POST /file/v1/chat/completions\n$m1",
  "POST /mem/v1/chat/completions\n$m2",
  "POST /file/v1/chat/completions\n$m2",
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 4, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 4,
  ::log_like(qw(chat:A chat:A chat:B chat:B)) ]
--- error_log
a client request body is buffered to a temporary file
--- no_error_log
[error]



=== TEST 14: there is no scan cap: a model after 300 KB of another field counts as it does before them; 300 KB before the messages hide nothing
--- pipelined_requests eval
my $m = '"messages":[{"role":"user","content":"hello"}]';
[ qq(POST /v1/chat/completions\n{$m,"pad":"$::PAD","model":"m1"}),
  qq(POST /v1/chat/completions\n{$m,"pad":"$::PAD","model":"m2"}),
  qq(POST /v1/chat/completions\n{"model":"m2",$m}),
  qq(POST /v1/chat/completions\n{"pad":"$::PAD",$m}),
  qq(POST /v1/chat/completions\n{$m}),
  qq(POST /invocations\n{"pad":"$::PAD",$m}),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 5, "X-Source: body", "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 6,
  ::log_like(qw(chat:A chat:B chat:B chat:C chat:C body:D)) ]
--- no_error_log
[error]
not an OpenAI request body



=== TEST 15: a streamed ("stream": true) response passes through unchanged with proxy_buffering off
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1994;
    }
    server {
        listen 127.0.0.1:1994;
        access_log off;
        location / {
            root html;
            default_type text/event-stream;
            sendfile off;
            limit_rate 8k;
            try_files /sse.txt =404;
            # the static module answers POST with 405: serve it as a GET
            error_page 405 =200 $uri;
        }
    }
--- config
    location / {
        proxy_pass http://up;
        proxy_buffering off;
        proxy_http_version 1.1;
        add_header X-Source $prefix_aware_source always;
    }
--- user_files eval
[ [ 'sse.txt' => $::SSE ] ]
--- request eval
"POST /v1/chat/completions\n" . ::chat([[user => 'Count to forty.']], extra => '"stream":true,"stream_options":{"include_usage":true}')
--- response_headers
Content-Type: text/event-stream
X-Source: chat
--- response_body eval
$::SSE
--- no_error_log
[error]
