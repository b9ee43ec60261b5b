# The keys of Responses (/v1/responses) and Anthropic Messages
# (/v1/messages, /v1/messages/count_tokens) and the tools of chat (issue
# 44): the same conversation as chat, Responses and Anthropic has one key
# whatever the body's field order; the tools come before the messages;
# $prefix_aware_source names the API; count_tokens is routed by its key
# and not recorded in the index; unusable bodies fall back to the raw-byte
# key; the memory bound holds for hostile bodies.  As t/020-openai.t: the
# front logs "$prefix_aware_source $prefix_aware_hash $sent_http_x_hash
# $prefix_aware_route $upstream_addr" to logs/pa.log.

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

our $SYS = 'You are a helpful assistant. Answer in one sentence.';
our $Q = 'What is the capital of France?';

our $TOOL_CHAT = '{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}';
our $TOOL_RESP = '{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{ "type": "object", "properties": {"city": {"type":"string"}}, "required":["city"]},"strict":true}';
our $TOOL_ANTH = '{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"cache_control":{"type":"ephemeral"}}';
our $TOOL2_CHAT = '{"type":"function","function":{"name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}';

# the same conversation in each API's shape and field order
our @SAME = (
    [ '/v1/chat/completions', qq({"model":"m","messages":[{"role":"system","content":"$SYS"},{"role":"user","content":"$Q"}]}) ],
    [ '/v1/chat/completions', qq({"messages":[{"content":"$SYS","role":"system"},{"role":"user","content":[{"type":"text","text":"$Q"}]}],"stream":true,"model":"m"}) ],
    [ '/v1/responses', qq({"model":"m","instructions":"$SYS","input":"$Q"}) ],
    [ '/v1/responses', qq({"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"$Q"}]}],"stream":true,"model":"m","instructions":"$SYS"}) ],
    [ '/v1/responses', qq({"model":"m","input":[{"role":"system","content":"$SYS"},{"role":"user","content":"$Q"}]}) ],
    [ '/v1/messages', qq({"model":"m","max_tokens":64,"system":"$SYS","messages":[{"role":"user","content":"$Q"}]}) ],
    [ '/v1/messages', qq({"messages":[{"role":"user","content":[{"type":"text","text":"$Q","cache_control":{"type":"ephemeral"}}]}],"model":"m","stream":true,"metadata":{"user_id":"u-1"},"system":[{"type":"text","text":"$SYS"}]}) ],
);

# the error log is checked after each of the pipelined requests, which
# were all served by then: each check must see all of it
check_accum_error_log() if defined &check_accum_error_log;
no_shuffle();
no_root_location();
run_tests();

__DATA__

=== TEST 1: the same conversation as chat, Responses and Anthropic Messages, in any field order, streamed or not, has one key; $prefix_aware_source names the API; another question another key
--- pipelined_requests eval
[ (map { "POST $_->[0]\n$_->[1]" } @::SAME),
  qq(POST /v1/responses\n{"model":"m","instructions":"$::SYS","input":"What is the capital of Spain?"}),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 2, ("X-Source: responses") x 3, ("X-Source: messages") x 2, "X-Source: responses", "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 8,
  ::log_like(qw(chat:A chat:A responses:A responses:A responses:A messages:A messages:A responses:B)) ]
--- no_error_log
[error]
not an OpenAI request body



=== TEST 2: tools: the same tool in each API's shape, before or after the messages, is the same key; no tools, or other tools, another key; tools shared by agents whose messages differ keep them apart
--- pipelined_requests eval
my $m = qq("messages":[{"role":"system","content":"$::SYS"},{"role":"user","content":"$::Q"}]);
[ qq(POST /v1/chat/completions\n{"model":"m",$m,"tools":[$::TOOL_CHAT],"tool_choice":"auto"}),
  qq(POST /v1/chat/completions\n{"tools":[$::TOOL_CHAT],"model":"m",$m}),
  qq(POST /v1/responses\n{"tools":[$::TOOL_RESP],"input":"$::Q","model":"m","instructions":"$::SYS"}),
  qq(POST /v1/messages\n{"model":"m","messages":[{"role":"user","content":"$::Q"}],"tools":[$::TOOL_ANTH],"system":"$::SYS"}),
  qq(POST /v1/chat/completions\n{"model":"m",$m}),
  qq(POST /v1/chat/completions\n{"model":"m",$m,"tools":[$::TOOL2_CHAT]}),
  qq(POST /v1/chat/completions\n{"model":"m",$m,"tools":[$::TOOL_CHAT,$::TOOL2_CHAT]}),
  qq(POST /v1/chat/completions\n{"model":"m","messages":[{"role":"user","content":"other"}],"tools":[$::TOOL_CHAT]}),
  "GET /pa.log" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 8,
  ::log_like(qw(chat:A chat:A responses:A messages:A chat:B chat:C chat:D chat:E)) ]
--- no_error_log
[error]
not an OpenAI request body



=== TEST 3: paths with format=auto: /v1/responses with a prefix, not /v1/responses/{id}; /v1/messages/count_tokens keys as its message; format=openai reads "input" on any path
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
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
    location / {
        proxy_pass http://up;
        add_header X-Source $prefix_aware_source always;
        add_header X-Hash $prefix_aware_hash always;
        access_log logs/pa.log pa;
    }
    location /openai/ {
        proxy_pass http://up_openai;
        add_header X-Source $prefix_aware_source always;
        add_header X-Hash $prefix_aware_hash always;
        access_log logs/pa.log pa;
    }
    location = /pa.log {
        root logs;
    }
--- pipelined_requests eval
my $r = qq({"model":"m","instructions":"$::SYS","input":"$::Q"});
my $a = qq({"model":"m","system":"$::SYS","messages":[{"role":"user","content":"$::Q"}]});
[ "POST /v1/responses\n$r",
  "POST /gateway/openai/v1/responses\n$r",
  "POST /v1/responses/resp_123\n$r",
  "POST /v1/messages/count_tokens\n$a",
  "POST /v1/messages\n$a",
  "POST /openai/invocations\n$r",
  "POST /openai/v1/messages\n$a",
  "GET /pa.log" ]
--- response_headers eval
[ "X-Source: responses", "X-Source: responses", "X-Source: body", "X-Source: messages", "X-Source: messages", "X-Source: responses", "X-Source: messages", "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 7,
  ::log_like(qw(responses:A responses:A body:B messages:A messages:A responses:A messages:A)) ]
--- no_error_log
[error]



=== TEST 4: /v1/messages/count_tokens is routed by its key but not recorded in the index: the message after it finds nothing, the one after that its prefix
--- http_config
    upstream up {
        prefix_aware length=65536 block=16;
        server 127.0.0.1:1991;
        server 127.0.0.1:1992;
        server 127.0.0.1:1993;
    }
--- config
    location / {
        proxy_pass http://up;
        add_header X-Source $prefix_aware_source always;
        add_header X-Depth $prefix_aware_depth always;
    }
--- pipelined_requests eval
my $doc = CORE::join ' ', map { "Paragraph $_ of a shared document." } 1 .. 40;
my $a = qq({"model":"m","system":"$::SYS","messages":[{"role":"user","content":"$doc"}]});
[ "POST /v1/messages/count_tokens\n$a",
  "POST /v1/messages/count_tokens\n$a",
  "POST /v1/messages\n$a",
  "POST /v1/messages\n$a" ]
--- response_headers eval
[ "X-Source: messages\nX-Depth: 0", "X-Source: messages\nX-Depth: 0",
  "X-Source: messages\nX-Depth: 0", "X-Source: messages" ]
--- response_headers_like eval
[ "X-Depth: 0", "X-Depth: 0", "X-Depth: 0", "X-Depth: [1-9][0-9]*" ]
--- no_error_log
[error]



=== TEST 5: bodies of the new shapes that are not usable fall back to their raw-byte key, with an info line, and are served
--- pipelined_requests eval
[ qq(POST /v1/responses\n{"model":"m","input":5}),
  qq(POST /v1/responses\n{"model":"m","input":null}),
  qq(POST /v1/responses\n{"model":"m","input":["hi"]}),
  qq(POST /v1/responses\n{"model":"m","input":"hi","instructions":{"a":1}}),
  qq(POST /v1/responses\n{"model":"m","input":"hi","tools":"get_weather"}),
  qq(POST /v1/chat/completions\n{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[1]}),
  qq(POST /v1/messages\n{"model":"m","system":5,"messages":[{"role":"user","content":"hi"}]}),
  qq(POST /v1/messages\n{"model":"m","system":"s"}),
  qq(POST /v1/messages\n{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":) . ('[' x 70) . (']' x 70) . '}]}',
  qq(POST /v1/messages\n{"model":"m","messages":[{"role":"user","content":"hi"}]),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: body") x 10, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 10,
  ::log_like(qw(body:A body:B body:C body:D body:E body:F body:G body:H body:I body:J)) ]
--- grep_error_log eval
qr/not an OpenAI request body \([^)]*\)/
--- grep_error_log_out
not an OpenAI request body (bad type)
not an OpenAI request body (bad type)
not an OpenAI request body (bad type)
not an OpenAI request body (bad type)
not an OpenAI request body (bad type)
not an OpenAI request body (bad type)
not an OpenAI request body (bad type)
not an OpenAI request body (no text)
not an OpenAI request body (too deep)
not an OpenAI request body (not json)
--- no_error_log
[error]



=== TEST 6: hostile: an "input" of 100,000 empty items, 100,000 empty messages, 100,000 empty tools, before the instructions and tools they wait for, are keyed and served (the empty items and the empty messages are the same text: one key); 900 KB of input before the instructions, in memory and in a temp file, has one key, its first characters'
--- config
    location /mem/ {
        client_max_body_size 16m;
        client_body_buffer_size 4m;
        proxy_pass http://up;
        add_header X-Source $prefix_aware_source always;
        add_header X-Hash $prefix_aware_hash always;
        access_log logs/pa.log pa;
    }
    location /file/ {
        client_max_body_size 16m;
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
my $big = 'a' x (900 * 1024);
[ "POST /mem/v1/responses\n{\"input\":[" . CORE::join(',', ('{}') x 100000) . "],\"instructions\":\"s\",\"tools\":[]}",
  "POST /file/v1/responses\n{\"input\":[" . CORE::join(',', ('{}') x 100000) . "],\"instructions\":\"s\",\"tools\":[]}",
  "POST /mem/v1/messages\n{\"messages\":[" . CORE::join(',', ('{}') x 100000) . "],\"system\":\"s\"}",
  "POST /mem/v1/chat/completions\n{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[" . CORE::join(',', ('{}') x 100000) . "]}",
  "POST /mem/v1/responses\n{\"input\":[{\"role\":\"user\",\"content\":\"$big\"}],\"tools\":[],\"instructions\":\"$::SYS\"}",
  "POST /file/v1/responses\n{\"input\":[{\"role\":\"user\",\"content\":\"$big\"}],\"tools\":[],\"instructions\":\"$::SYS\"}",
  "POST /file/v1/responses\n{\"instructions\":\"$::SYS\",\"input\":[{\"role\":\"user\",\"content\":\"" . ('a' x 2000) . "\"}]}",
  "GET /pa.log" ]
--- response_headers eval
[ "X-Source: responses", "X-Source: responses", "X-Source: messages", "X-Source: chat", ("X-Source: responses") x 3, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 7,
  ::log_like(qw(responses:A responses:A messages:A chat:C responses:D responses:D responses:D)) ]
--- timeout: 30
--- no_error_log
[error]
not an OpenAI request body
