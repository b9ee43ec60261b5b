# OpenAI-compatible bodies with one long string: a 1 MB (and an 8 MB)
# message, or a 1 MB model, read through a real nginx, in memory and in
# client body temp files.  Earlier releases stopped parsing at 256 KiB +
# 4 x length, so a prompt_cache_key, model or cache_salt after such a
# string was never seen: tenants shared one key and field order changed
# it.  Now the body is read to its end: what comes after the long string
# counts, and the key does not depend on the string's length.
#
# Hashes are compared with one another through logs/pa.log, as in
# t/020-openai.t (see log_like there).  Backends b1, b2, b3 are servers
# of the test nginx on 127.0.0.1:2021..2023 answering "bN\n".

use Test::Nginx::Socket 'no_plan';

our %PORT = (b1 => 2021, b2 => 2022, b3 => 2023);

our $UPSTREAM = <<'_EOC_';
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:2021;
        server 127.0.0.1:2022;
        server 127.0.0.1:2023;
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
        client_max_body_size 16m;
        location / {
            return 200 "$name\\n";
        }
    }
_EOC_
}

# the front (its server has client_max_body_size 30M): /mem/ keeps bodies
# in memory, /file/ in temp files
our $FRONT = <<'_EOC_';
    location /mem/ {
        client_body_buffer_size 16m;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
        add_header X-Source $prefix_aware_source always;
        access_log logs/pa.log pa;
    }
    location /file/ {
        client_body_buffer_size 8k;
        proxy_pass http://up;
        add_header X-Hash $prefix_aware_hash always;
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
    $block->set_value(http_config => $UPSTREAM . $COMMON);
    $block->set_value(config => $FRONT);
});

# the whole of logs/pa.log, from specs "SOURCE:CLASS" (see t/020-openai.t)
sub log_like {
    my @specs = @_;
    my (%seen, @classes);
    my $re = '\A';
    for my $spec (@specs) {
        my ($src, $c) = split /:/, $spec;
        die "bad spec $spec" if !defined $c || $c !~ /^\w+$/;
        $re .= "\Q$src\E ";
        if ($seen{$c}) {
            $re .= "\\k<h$c> \\k<h$c> affinity \\k<u$c>\\n";
        } else {
            my $not = join '|', map { "\\k<h$_>" } @classes;
            $re .= "(?!(?:$not) )" if @classes;
            $re .= "(?<h$c>[0-9a-f]{16}) \\k<h$c> affinity (?<u$c>127\\.0\\.0\\.1:202[123])\\n";
            $seen{$c} = 1;
            push @classes, $c;
        }
    }
    return qr/$re\z/;
}

# a retrieved document of about "size" bytes, with escapes and UTF-8;
# the first 1024 characters of any two are the same
sub doc {
    my ($size) = @_;
    my $p = 'Paragraph of the retrieved document, caf\u00e9 \u4e2d\u6587 '
          . "\xe2\x80\x94 \\\"quoted\\\"\\n";
    my $d = $p x (int($size / length $p) + 1);
    return substr($d, 0, $size - 40) . ' end of the document.';
}

our $DOC1 = doc(1024 * 1024);
our $DOC8 = doc(8 * 1024 * 1024);

# a chat body whose first message is the document; %o: pck, model,
# salt, the fields first or last, other fields, a text part, white space
sub long_chat {
    my ($doc, %o) = @_;
    my ($c, $s) = $o{ws} ? (' : ', " ,\n\t ") : (':', ',');
    my $content = $o{part} ? qq([{"type"${c}"text"$s"text"$c"$doc"}])
                           : qq("$doc");
    my $m = qq("messages"$c\[{"role"$c"user"$s"content"$c$content}$s)
          . qq({"role"$c"assistant"$s"content"$c"Noted."}$s)
          . qq({"role"$c"user"$s"content"$c"Summarise it."}]);
    my @f;
    push @f, qq("model"$c"$o{model}") if defined $o{model};
    push @f, qq("prompt_cache_key"$c"$o{pck}") if defined $o{pck};
    push @f, qq("cache_salt"$c"$o{salt}") if defined $o{salt};
    push @f, qq("temperature"${c}0.7), qq("stream"${c}false) if $o{extra};
    return $o{first} ? '{' . join($s, @f, $m) . '}'
                     : '{' . join($s, $m, @f) . '}';
}

# the error log is checked after each of the pipelined requests
check_accum_error_log() if defined &check_accum_error_log;
no_shuffle();
no_root_location();
run_tests();

__DATA__

=== TEST 1: a 1 MB message first: the prompt_cache_key after it is seen, tenantA and tenantB route apart; order, other fields, white space and a text part change nothing; in memory and in temp files alike
--- pipelined_requests eval
my $a = ::long_chat($::DOC1, model => 'llama-3', pck => 'tenantA');
my $b = ::long_chat($::DOC1, model => 'llama-3', pck => 'tenantB');
my $a2 = ::long_chat($::DOC1, model => 'llama-3', pck => 'tenantA', first => 1, extra => 1, part => 1);
my $a3 = ::long_chat($::DOC1, model => 'llama-3', pck => 'tenantA', ws => 1);
my $n = ::long_chat($::DOC1, model => 'llama-3');
[ "POST /mem/v1/chat/completions\n$a",
  "POST /mem/v1/chat/completions\n$b",
  "POST /file/v1/chat/completions\n$a",
  "POST /file/v1/chat/completions\n$b",
  "POST /file/v1/chat/completions\n$a2",
  "POST /mem/v1/chat/completions\n$a3",
  "POST /file/v1/chat/completions\n$n",
  "POST /mem/v1/chat/completions\n$n",
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 8, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 8,
  ::log_like(qw(chat:A chat:B chat:A chat:B chat:A chat:A chat:C chat:C)) ]
--- error_log
a client request body is buffered to a temporary file
--- timeout: 30
--- no_error_log
not an OpenAI request body
[error]
[alert]
[crit]



=== TEST 2: the model and cache_salt after a 1 MB message count, before it or after it alike; the same text with an 8 MB message (the first 1024 characters are the same) has the 1 MB message's key
--- pipelined_requests eval
[ "POST /file/v1/chat/completions\n" . ::long_chat($::DOC1, model => 'm1', pck => 'tenantA'),
  "POST /file/v1/chat/completions\n" . ::long_chat($::DOC1, model => 'm2', pck => 'tenantA'),
  "POST /file/v1/chat/completions\n" . ::long_chat($::DOC1, model => 'm2', pck => 'tenantA', first => 1),
  "POST /file/v1/chat/completions\n" . ::long_chat($::DOC1, model => 'm2', pck => 'tenantA', salt => 's1'),
  "POST /file/v1/chat/completions\n" . ::long_chat($::DOC1, model => 'm2', pck => 'tenantA', salt => 's1', first => 1, extra => 1),
  "POST /file/v1/chat/completions\n" . ::long_chat($::DOC8, model => 'm2', pck => 'tenantA', salt => 's1'),
  "POST /file/v1/chat/completions\n" . ::long_chat($::DOC8, model => 'm2', pck => 'tenantB', salt => 's1'),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 7, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 7,
  ::log_like(qw(chat:A chat:B chat:B chat:C chat:C chat:C chat:D)) ]
--- timeout: 60
--- no_error_log
not an OpenAI request body
[error]
[alert]
[crit]



=== TEST 3: a 1 MB model first: the messages after it are the key, and the model counts as it does last
--- pipelined_requests eval
my $m = '"messages":[{"role":"user","content":"hello"}]';
my $big = 'm' x (1024 * 1024);
[ qq(POST /file/v1/chat/completions\n{"model":"$big",$m,"prompt_cache_key":"tenantA"}),
  qq(POST /file/v1/chat/completions\n{"prompt_cache_key":"tenantA",$m,"model":"$big"}),
  qq(POST /file/v1/chat/completions\n{"model":"$big",$m,"prompt_cache_key":"tenantB"}),
  qq(POST /file/v1/chat/completions\n{"model":"m",$m,"prompt_cache_key":"tenantA"}),
  qq(POST /file/v1/chat/completions\n{"model":"$big","messages":[{"role":"user","content":"bye"}],"prompt_cache_key":"tenantA"}),
  "GET /pa.log" ]
--- response_headers eval
[ ("X-Source: chat") x 5, "" ]
--- response_body eval
[ (qr/\Ab[123]\n\z/) x 5,
  ::log_like(qw(chat:A chat:A chat:B chat:C chat:D)) ]
--- timeout: 30
--- no_error_log
not an OpenAI request body
[error]
[alert]
[crit]
