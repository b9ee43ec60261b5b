# Hostile input: every request gets a clear status or the documented
# fallback, and nothing crashes (no [alert] or [crit] in the error log;
# make test-asan runs this under AddressSanitizer and UBSan).
#
# Already covered elsewhere, not repeated here:
#   ids that are too long, empty, non-ASCII, with control bytes, or given
#   twice: t/004-id.t TESTs 5-9 (400 with the reason, not proxied);
#   bodies in temp files and chunked in pieces of 1000, 7, 30000, 3333 and
#   500 bytes: t/003-body.t; a change at byte length-1 and bytes after
#   length: t/002-routing.t TESTs 3-5; OpenAI bodies that are not JSON, not
#   objects, have "messages" as a string or an array of strings, invalid
#   UTF-8 (0xe9, 0xff) or 65 levels of nesting: t/020-openai.t TESTs 11-12.
#
# Backends h1, h2, h3: servers of the test nginx on 127.0.0.1:2013..2015
# answering "hN\n".  Raw-body hashes (XXH3 of the first "length" bytes)
# were found with the functions of src/; OpenAI keys are compared with one
# another through logs/pa.log, as in t/020-openai.t.

use Test::Nginx::Socket 'no_plan';

our $UPSTREAM = <<'_EOC_';
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2013;
        server 127.0.0.1:2014;
        server 127.0.0.1:2015;
    }
_EOC_

our $COMMON = <<'_EOC_';
    log_format pa '$prefix_aware_source $prefix_aware_hash $sent_http_x_hash '
                  '$prefix_aware_route $upstream_addr';
    server {
        listen 127.0.0.1:2013;
        listen 127.0.0.1:2014;
        listen 127.0.0.1:2015;
        access_log off;
        client_max_body_size 4m;
        location / {
            if ($server_port = 2013) { return 200 "h1\n"; }
            if ($server_port = 2014) { return 200 "h2\n"; }
            return 200 "h3\n";
        }
    }
_EOC_

# the front: the variables in headers and in logs/pa.log
our $FRONT = <<'_EOC_';
    location / {
        client_max_body_size 4m;
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
    location = /status {
        prefix_aware_status;
        access_log off;
    }
_EOC_

add_block_preprocessor(sub {
    my $block = shift;
    my $http = $block->http_config // $UPSTREAM;
    $block->set_value(http_config => $http . $COMMON);
    $block->set_value(config => $FRONT) unless defined $block->config;
});

# A pattern for the whole of logs/pa.log (see t/020-openai.t): one spec
# "SOURCE:CLASS" per request; requests of one class have one hash (and
# backend), different classes different hashes; "-" is a line not checked.
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
        $re .= "\Q$src\E ";
        if ($seen{$c}) {
            $re .= "\\k<h$c> \\k<h$c> affinity \\k<u$c>\\n";
        } else {
            my $not = join '|', map { "\\k<h$_>" } @classes;
            $re .= "(?!(?:$not) )" if @classes;
            $re .= "(?<h$c>[0-9a-f]{16}) \\k<h$c> affinity (?<u$c>127\\.0\\.0\\.1:201[345])\\n";
            $seen{$c} = 1;
            push @classes, $c;
        }
    }
    return qr/$re\z/;
}

# a body in chunked transfer encoding, in pieces of the given sizes (the
# sizes repeat from the start when they run out)
sub chunked {
    my ($body, @sizes) = @_;
    my ($out, $i) = ('', 0);
    while (length $body) {
        my $piece = substr $body, 0, $sizes[$i++ % @sizes], '';
        $out .= sprintf("%x\r\n", length $piece) . "$piece\r\n";
    }
    return $out . "0\r\n\r\n";
}

sub chat {
    my ($content, $extra) = @_;
    return qq({"model":"m","messages":[{"role":"user","content":"$content"}])
         . (defined $extra ? ",$extra" : '') . '}';
}

# length=1024: 1023 bytes, then 1024 bytes ending in "b" or "c", then more
our $A = 'a' x 1023;
our @SIZES = ('', 'x', $A, "${A}b", "${A}c", "${A}bz", "${A}b" . ('z' x 3000));
our @SIZE_HASH = ('', 'eaf06c6480b2cd11', '1ed5a78138cf3f85', '548efb293c229f77',
                  'baa0716933dce728', '548efb293c229f77', '548efb293c229f77');
our @SIZE_TO = qw(- h2 h3 h3 h1 h3 h3);

# 16000 bytes; its first 4096 hash to 9b8f1f7b49b5b344, first choice h2
our $TEXT = join '', map { sprintf "%04d:odd chunks;", $_ } 0 .. 999;
our @ODD = ([1, 3, 4093, 1, 4097, 2, 5, 4099], [1], [3], [4093], [4097, 1]);

our $CHAT = chat(join(' ', map { "Sentence $_ of a long shared prompt." } 1 .. 60));

# a million characters of content
our $MB = 'x' x (1024 * 1024);

# 1000 levels of arrays, of objects
our $DEEP_A = ('[' x 1000) . (']' x 1000);
our $DEEP_O = ('{"a":' x 1000) . '1' . ('}' x 1000);

our $DIGITS = join '', map { $_ % 10 } 1 .. 5000;

check_accum_error_log();
no_shuffle();
no_root_location();
run_tests();

__DATA__

=== TEST 1: bodies of 0, 1, 1023 (length-1), 1024 (length) bytes, 1024 bytes with another last byte, 1025 (length+1) and 4024 bytes: only the first 1024 bytes count; no body, no key
--- pipelined_requests eval
[ map { "POST /t\n$_" } @::SIZES ]
--- response_headers eval
[ "!X-Hash\nX-Route: no_key\nX-Source: none",
  map { "X-Hash: $_\nX-Route: affinity\nX-Source: body" } @::SIZE_HASH[1 .. $#::SIZE_HASH] ]
--- response_body eval
[ qr/\Ah[123]\n\z/, map { "$_\n" } @::SIZE_TO[1 .. $#::SIZE_TO] ]
--- no_error_log
[error]
[alert]
[crit]



=== TEST 2: the same bodies in client body temp files have the same keys
--- config
    location / {
        client_body_in_file_only clean;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
    }
--- pipelined_requests eval
[ map { "POST /t\n$_" } @::SIZES ]
--- response_headers eval
[ "!X-Hash\nX-Source: none",
  map { "X-Hash: $_\nX-Source: body" } @::SIZE_HASH[1 .. $#::SIZE_HASH] ]
--- response_body eval
[ qr/\Ah[123]\n\z/, map { "$_\n" } @::SIZE_TO[1 .. $#::SIZE_TO] ]
--- no_error_log
[error]
[alert]
[crit]



=== TEST 3: length=4096, 16000 bytes chunked in odd pieces (1, 3, 4093, 1, 4097, 2, 5, 4099 ...; all of 1 byte: 16000 buffers; all of 3; 4093; 4097 and 1), in memory: the hash of the same body with Content-Length
--- http_config
    upstream up {
        prefix_aware index=off length=4096;
        server 127.0.0.1:2013;
        server 127.0.0.1:2014;
        server 127.0.0.1:2015;
    }
--- config
    location / {
        client_body_buffer_size 128k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
--- more_headers eval
[ "", ("Transfer-Encoding: chunked") x @::ODD ]
--- pipelined_requests eval
[ "POST /t\n$::TEXT", map { "POST /t\n" . ::chunked($::TEXT, @$_) } @::ODD ]
--- response_headers eval
[ ("X-Hash: 9b8f1f7b49b5b344") x (1 + @::ODD) ]
--- response_body eval
[ ("h2\n") x (1 + @::ODD) ]
--- no_error_log
a client request body is buffered to a temporary file
[error]
[alert]
[crit]



=== TEST 4: the same odd pieces into a client body temp file (client_body_buffer_size 1k): the same hash
--- http_config
    upstream up {
        prefix_aware index=off length=4096;
        server 127.0.0.1:2013;
        server 127.0.0.1:2014;
        server 127.0.0.1:2015;
    }
--- config
    location / {
        client_body_buffer_size 1k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
    }
--- more_headers eval
[ ("Transfer-Encoding: chunked") x @::ODD ]
--- pipelined_requests eval
[ map { "POST /t\n" . ::chunked($::TEXT, @$_) } @::ODD ]
--- response_headers eval
[ ("X-Hash: 9b8f1f7b49b5b344") x @::ODD ]
--- response_body eval
[ ("h2\n") x @::ODD ]
--- error_log
a client request body is buffered to a temporary file
--- no_error_log
[error]
[alert]
[crit]



=== TEST 5: a chat body chunked in pieces of 1 byte (the JSON parser is fed a byte at a time), 3 bytes, and 4093 and 1: the OpenAI key of the same body with Content-Length
--- more_headers eval
[ "", ("Transfer-Encoding: chunked") x 3, "" ]
--- pipelined_requests eval
[ "POST /v1/chat/completions\n$::CHAT",
  "POST /v1/chat/completions\n" . ::chunked($::CHAT, 1),
  "POST /v1/chat/completions\n" . ::chunked($::CHAT, 3),
  "POST /v1/chat/completions\n" . ::chunked($::CHAT, 4093, 1),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 4, "" ]
--- response_body eval
[ (qr/\Ah[123]\n\z/) x 4, ::log_like(qw(chat:A chat:A chat:A chat:A)) ]
--- no_error_log
not an OpenAI request body
[error]
[alert]
[crit]



=== TEST 6: bodies over client_max_body_size (1k): 413 before the module sees them, with Content-Length or chunked; nothing is counted, nothing is in flight
--- config
    location / {
        client_max_body_size 1k;
        proxy_pass http://up;
    }
    location = /status {
        prefix_aware_status;
    }
--- more_headers eval
[ "", "Transfer-Encoding: chunked", "" ]
--- request eval
[ "POST /v1/chat/completions\n" . ::chat('x' x 2000),
  "POST /t\n" . ::chunked('y' x 2000, 500),
  "GET /status" ]
--- error_code eval
[ 413, 413, 200 ]
--- response_body_like eval
my $zero = '"keys"\s*:\s*\{\s*"none"\s*:\s*0\s*,\s*"body"\s*:\s*0\s*,\s*"openai"\s*:\s*0\s*\}';
[ qr/413 Request Entity Too Large/, qr/413 Request Entity Too Large/,
  qr/\A(?!.*"(?:inflight|requests)"\s*:\s*[1-9])(?=.*$zero)/s ]
--- grep_error_log eval
qr/client intended to send too large (?:chunked )?body: [\d+]+ bytes/
--- grep_error_log_out eval
qr/\Aclient intended to send too large body: 2055 bytes\n(?:client intended to send too large chunked body: 1000\+500 bytes\n)?\z/
--- no_error_log
prefix_aware get peer
prefix_aware key
[alert]
[crit]



=== TEST 7: a NUL in the id header: nginx itself answers 400 ("client sent invalid header line") and closes; the module never runs
--- more_headers eval
"X-Amzn-SageMaker-Prefix-Aware-Id: tenant\0nul"
--- request
GET /t
--- error_code: 400
--- response_body_like chomp
400 Bad Request
--- error_log
client sent invalid header line
--- no_error_log
prefix_aware
[alert]
[crit]



=== TEST 8: NUL elsewhere: "\u0000" in prompt_cache_key is no tenant id, routed without it; a NUL byte in a raw body is just a byte; a raw NUL inside a JSON string is not JSON: fallback
--- pipelined_requests eval
[ "POST /v1/chat/completions\n" . ::chat('hi', '"prompt_cache_key":"tenant\\u0000nul"'),
  "POST /invocations\nbefore\0after",
  "POST /v1/chat/completions\n" . ::chat("hi\0there") ]
--- error_code eval
[ 200, 200, 200 ]
--- response_headers eval
[ "X-Source: chat", "X-Hash: 395240fe14d07584\nX-Source: body", "X-Source: body" ]
--- response_body_like eval
[ qr/\Ah[123]\n\z/, qr/\Ah[123]\n\z/, qr/\Ah[123]\n\z/ ]
--- error_log
prefix_aware: prompt_cache_key is not a string of 1 to 64 printable ASCII characters, routed without it
prefix_aware: not an OpenAI request body (not json), keyed by its raw bytes
--- no_error_log
[error]
[alert]
[crit]



=== TEST 9: UTF-8 that yajl lets pass but is not UTF-8 (overlong C0 AF and E0 80 AF, surrogates ED A0 80 and \udc00, above U+10FFFF: F4 90 80 80 and F5, in a value, in a key, in a field that is not read), and what yajl rejects (FF, a truncated C3): fallback to the raw bytes, served; the valid edge characters are text
--- pipelined_requests eval
my @bad = ("a\xc0\xafb", "a\xe0\x80\xafb", "a\xed\xa0\x80b", "a\\udc00b",
           "a\xf4\x90\x80\x80b", "a\xf5\x80\x80\x80b", "a\xffb", "a\xc3");
[ (map { "POST /v1/chat/completions\n" . ::chat($_) } @bad),
  "POST /v1/chat/completions\n" . ::chat('ok', qq("k\xc0\xaf":1)),
  "POST /v1/chat/completions\n" . ::chat('ok', qq("tools":[{"name":"\xed\xbf\xbf"}])),
  "POST /v1/chat/completions\n" . ::chat("\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"),
  "POST /v1/chat/completions\n" . ::chat("\\u0080\\u07ff\\u0800\\ud7ff\\ue000\\uffff\\ud800\\udc00\\udbff\\udfff"),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: body\nX-Route: affinity") x 10, ("X-Source: chat") x 2, "" ]
--- response_body eval
[ (qr/\Ah[123]\n\z/) x 12,
  ::log_like((map { "body:F$_" } 1 .. 10), 'chat:V', 'chat:V') ]
--- grep_error_log eval
qr/prefix_aware: not an OpenAI request body \([^)]*\)/
--- grep_error_log_out eval
"prefix_aware: not an OpenAI request body (not json)\n" x 10
--- no_error_log
[error]
[alert]
[crit]



=== TEST 10: 1000 levels of arrays or objects, in a field or in a content part; 1000 levels at the top; 100000 "[" never closed: fallback at once ("too deep", "not an object"), served
--- pipelined_requests eval
[ "POST /v1/chat/completions\n" . ::chat('hi', qq("x":$::DEEP_A)),
  "POST /v1/chat/completions\n" . ::chat('hi', qq("x":$::DEEP_O)),
  qq(POST /v1/chat/completions\n{"messages":[{"role":"user","content":[$::DEEP_A]}]}),
  "POST /v1/chat/completions\n$::DEEP_A",
  "POST /v1/chat/completions\n" . ::chat('hi', '"x":' . ('[' x 100000)),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: body") x 5, "" ]
--- response_body eval
[ (qr/\Ah[123]\n\z/) x 5, ::log_like(qw(body:A body:B body:C body:D body:A)) ]
--- grep_error_log eval
qr/prefix_aware: not an OpenAI request body \([^)]*\)/
--- grep_error_log_out
prefix_aware: not an OpenAI request body (too deep)
prefix_aware: not an OpenAI request body (too deep)
prefix_aware: not an OpenAI request body (too deep)
prefix_aware: not an OpenAI request body (not an object)
prefix_aware: not an OpenAI request body (too deep)
--- no_error_log
[error]
[alert]
[crit]



=== TEST 11: huge numbers (1e999999, 1E-999999, 5000 digits, minus 5000 digits) in fields that are not read leave the key alone; a "model" that is a number counts as no model; a 5000-digit token id counts as its first 1024 digits
--- pipelined_requests eval
my $p = qq("temperature":1e999999,"top_p":1E-999999,"max_tokens":$::DIGITS,"seed":-$::DIGITS);
[ "POST /v1/chat/completions\n" . ::chat('hi'),
  "POST /v1/chat/completions\n" . ::chat('hi', $p),
  qq(POST /v1/chat/completions\n{"messages":[{"role":"user","content":"hi"}]}),
  qq(POST /v1/chat/completions\n{"model":1e999999,"messages":[{"role":"user","content":"hi"}]}),
  qq(POST /v1/completions\n{"model":"m","prompt":[$::DIGITS]}),
  qq(POST /v1/completions\n{"model":"m","prompt":[) . substr($::DIGITS, 0, 1024) . '7' x 100 . ']}',
  qq(POST /v1/completions\n{"model":"m","prompt":[) . substr($::DIGITS, 0, 1023) . '7' x 100 . ']}',
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 4, ("X-Source: completions") x 3, "" ]
--- response_body eval
[ (qr/\Ah[123]\n\z/) x 7,
  ::log_like(qw(chat:A chat:A chat:B chat:B completions:C completions:C completions:D)) ]
--- no_error_log
not an OpenAI request body
[error]
[alert]
[crit]



=== TEST 12: a content string of 1 MB is read in pieces, to its end (there is no scan cap): alone or after a system message, its first characters are the key; two megabytes that differ in their first character have two keys, two that differ after the first 1024 characters one; a model after it counts; nothing falls back
--- pipelined_requests eval
my $sys = '{"role":"system","content":"You are terse."}';
my $tail = substr($::MB, 0, 2000) . ('z' x (length($::MB) - 2000));
[ "POST /v1/chat/completions\n" . ::chat($::MB),
  "POST /v1/chat/completions\n" . ::chat('y' . substr($::MB, 1)),
  qq(POST /v1/chat/completions\n{"model":"m","messages":[$sys,{"role":"user","content":"$::MB"}]}),
  qq(POST /v1/chat/completions\n{"model":"m","messages":[$sys,{"role":"user","content":"y) . substr($::MB, 1) . '"}]}',
  qq(POST /v1/chat/completions\n{"model":"m","messages":[$sys,{"role":"user","content":"$tail"}]}),
  qq(POST /v1/chat/completions\n{"messages":[$sys,{"role":"user","content":"$::MB"}],"model":"m"}),
  qq(POST /v1/chat/completions\n{"messages":[$sys,{"role":"user","content":"$::MB"}],"model":"m2"}),
  qq(POST /v1/chat/completions\n{"model":"m","messages":[$sys,{"role":"user","content":"z"}]}),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 8, "" ]
--- response_body eval
[ (qr/\Ah[123]\n\z/) x 8, ::log_like(qw(chat:A chat:B chat:C chat:D chat:C chat:C chat:E chat:F)) ]
--- timeout: 10
--- no_error_log
not an OpenAI request body
[error]
[alert]
[crit]



=== TEST 13: duplicate keys: of two "model" the last counts; two "messages" are both read, as one array holding both; two "prompt" likewise; of two "prompt_cache_key" the last counts (an invalid one then a valid one: the valid one is the id; a valid one then an invalid one: no id)
--- pipelined_requests eval
my $m1 = '"messages":[{"role":"user","content":"one"}]';
my $m2 = '"messages":[{"role":"user","content":"two"}]';
[ qq(POST /v1/chat/completions\n{"model":"a","model":"b",$m1}),
  qq(POST /v1/chat/completions\n{"model":"b",$m1}),
  qq(POST /v1/chat/completions\n{"model":"b",$m1,$m2}),
  qq(POST /v1/chat/completions\n{"model":"b","messages":[{"role":"user","content":"one"},{"role":"user","content":"two"}]}),
  qq(POST /v1/chat/completions\n{"model":"b",$m2}),
  qq(POST /v1/completions\n{"model":"b","prompt":"one","prompt":"two"}),
  qq(POST /v1/completions\n{"model":"b","prompt":["one","two"]}),
  qq(POST /v1/chat/completions\n{"model":"b",$m1,"prompt_cache_key":42,"prompt_cache_key":"t1"}),
  qq(POST /v1/chat/completions\n{"model":"b",$m1,"prompt_cache_key":"t1"}),
  qq(POST /v1/chat/completions\n{"model":"b",$m1,"prompt_cache_key":"t1","prompt_cache_key":42}),
  "GET /pa.log" ]
--- error_code eval
[ (200) x 11 ]
--- response_headers eval
[ ("X-Source: chat") x 5, ("X-Source: completions") x 2, ("X-Source: chat") x 3, "" ]
--- response_body eval
[ (qr/\Ah[123]\n\z/) x 10,
  ::log_like(qw(chat:A chat:A chat:B chat:B chat:C completions:D completions:D chat:E chat:E chat:A)) ]
--- no_error_log
not an OpenAI request body
[error]
[alert]
[crit]



=== TEST 14: "messages" that is not an array of objects (besides the string and the array of strings of t/020): an object, null, a number, true, [null], [[]], [42]: fallback ("bad type"), served; an empty array is read: its key is the model's
--- pipelined_requests eval
my @bad = ('{}', 'null', '42', 'true', '[null]', '[[]]', '[42]');
[ (map { qq(POST /v1/chat/completions\n{"model":"m","messages":$_}) } @bad),
  qq(POST /v1/chat/completions\n{"model":"m","messages":[]}),
  qq(POST /v1/chat/completions\n{"messages":[],"model":"m","temperature":0}),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: body") x 7, ("X-Source: chat") x 2, "" ]
--- response_body eval
[ (qr/\Ah[123]\n\z/) x 9, ::log_like((map { "body:F$_" } 1 .. 7), 'chat:E', 'chat:E') ]
--- grep_error_log eval
qr/prefix_aware: not an OpenAI request body \([^)]*\)/
--- grep_error_log_out eval
"prefix_aware: not an OpenAI request body (bad type)\n" x 7
--- no_error_log
[error]
[alert]
[crit]
