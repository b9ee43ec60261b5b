# feedback=on: the engine's answer says what it reused of the prompt
# (usage.prompt_tokens_details.cached_tokens, as vLLM and SGLang give it),
# read as the answer passes, against the depth the index predicted there.
#
# 1. A shortfall of a block recorded only just before (a prefill that may
#    still run) is counted and cuts nothing.
# 2. A shortfall of a block 16 blocks old, in a cache of 32 (capacity=1024
#    tokens, block=128): the server's cache life is cut to 16 blocks, so a
#    prompt recorded 24 blocks ago is forgotten (depth 0), where the same
#    sequence without feedback still matches it (depth 8).  The status
#    page shows the counts and the learned capacity, in JSON and
#    Prometheus text.
# 3. The same from the last event of a stream (server-sent events).
# 4. Answers without usage, errors and answers that cannot be read say
#    nothing; confirmations give the cut back, 1/16 of it each, until the
#    capacity holds again.
# (Configuration errors are in t/067-engine-config.t.)

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port);

my $bport = free_port();

my $be = PrefixAware::Scenario->new(name => 'feedback-engine');
sub usage_json {
    my ($cached) = @_;
    return '{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,'
         . '"text":"ok","finish_reason":"stop"}],"usage":{"prompt_tokens":256,'
         . '"total_tokens":266,"completion_tokens":10,'
         . '"prompt_tokens_details":{"cached_tokens":' . $cached . '}}}';
}

my $sse = join '',
    'data: {"choices":[{"text":"o"}],"usage":null}\\n\\n',
    'data: {"choices":[],"usage":{"prompt_tokens":256,"completion_tokens":1,'
    . '"prompt_tokens_details":{"cached_tokens":0}}}\\n\\n',
    'data: [DONE]\\n\\n';

# the answers, to POST too
$be->start(<<"_EOC_");
    server {
        listen 127.0.0.1:$bport;
        default_type application/json;
        location /hit { return 200 '@{[ usage_json(256) ]}'; }
        location /miss { return 200 '@{[ usage_json(0) ]}'; }
        location /none { return 200 '{"choices":[{"text":"ok"}]}'; }
        location /sse-miss {
            default_type text/event-stream;
            return 200 '$sse';
        }
        location /err { return 500 '{"cached_tokens":0}'; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'feedback', workers => 2);
my $listen = $ng->port;

my $http = <<"_EOC_";
    upstream fb {
        prefix_aware capacity=1024 feedback=on;
        server 127.0.0.1:$bport;
    }

    upstream nofb {
        prefix_aware capacity=1024;
        server 127.0.0.1:$bport;
    }

    upstream sse {
        prefix_aware capacity=1024 feedback=on;
        server 127.0.0.1:$bport;
    }

    server {
        listen 127.0.0.1:$listen;
        add_header X-Depth \$prefix_aware_depth;
        location = /status { prefix_aware_status; }
        location /fb/ { proxy_pass http://fb/; }
        location /nofb/ { proxy_pass http://nofb/; }
        location /sse/ { proxy_pass http://sse/; }
    }
_EOC_

$ng->start($http);

srand(68);

# a prompt of 1,024 bytes: 8 blocks of 128
sub prompt { join '', map { chr(97 + int rand 26) } 1 .. 1024 }

sub send_to {
    my ($path, $body) = @_;
    my $r = $ng->request(POST => $path, body => $body);
    return ($r->{status}, $r->{headers}{'x-depth'} // '', $r->{body});
}

sub fb_of {
    my ($up) = @_;
    my $r = $ng->request(GET => '/status?format=json');
    my $st = JSON::PP::decode_json($r->{body});
    return $st->{upstreams}{$up}{servers}[0]{feedback};
}

my %p = map { $_ => prompt() } qw(A B C D E F G);

# the same sequence on both upstreams, with and without feedback
my %depth;

for my $up (qw(fb nofb)) {
    my @d;
    push @d, (send_to("/$up/hit", $p{A}))[1];
    push @d, (send_to("/$up/miss", $p{A}))[1];     # 1. young: counted only
    push @d, (send_to("/$up/hit", $p{$_}))[1] for qw(B C);
    push @d, (send_to("/$up/miss", $p{A}))[1];     # 2. 16 blocks old
    push @d, (send_to("/$up/hit", $p{$_}))[1] for qw(D E);
    push @d, (send_to("/$up/hit", $p{B}))[1];      # B is 24 blocks old
    $depth{$up} = \@d;
}

is "@{$depth{nofb}}", '0 8 0 0 8 0 0 8',
   'without feedback: A matched 8 blocks, and B again, 24 blocks later';
is "@{$depth{fb}}", '0 8 0 0 8 0 0 0',
   'with feedback: B is forgotten after the shortfall of A at 16 blocks';

my $f = fb_of('fb');
is $f->{shortfall}, 2, 'two shortfalls counted';
is $f->{confirmed}, 0, 'none confirmed';
is $f->{learned_capacity}, 512, 'learned capacity 16 blocks = 512 tokens';
is $f->{forgotten_blocks}, 16, '16 blocks of cache life taken';
ok !defined fb_of('nofb'), 'no feedback object without feedback=on';

my $prom = $ng->request(GET => '/status?format=prometheus')->{body};
like $prom, qr/^nginx_prefix_aware_feedback_total\{upstream="fb",server="[^"]+",result="shortfall"\} 2$/m,
     'Prometheus: shortfalls';
like $prom, qr/^nginx_prefix_aware_feedback_learned_capacity_tokens\{upstream="fb",server="[^"]+"\} 512$/m,
     'Prometheus: learned capacity';
like $prom, qr/^nginx_prefix_aware_feedback_forgotten_blocks_total\{upstream="fb",server="[^"]+"\} 16$/m,
     'Prometheus: forgotten blocks';
unlike $prom, qr/feedback_total\{upstream="nofb"/, 'none for nofb';

SKIP: {
    skip 'promtool is not installed (make deps-test)', 1
        if system('command -v promtool >/dev/null 2>&1') != 0;
    open my $fh, '|-', 'promtool check metrics >/dev/null 2>&1' or die;
    print $fh $prom;
    close $fh;
    is $?, 0, 'promtool check metrics accepts the text';
}

# 3. the last event of a stream
my @s;
push @s, (send_to('/sse/hit', $p{$_}))[1] for qw(A B C);
my (undef, $sd, $body) = send_to('/sse/sse-miss', $p{A});
like $body, qr/\[DONE\]/, 'the stream passes whole';
is $sd, '8', 'A matched on sse';
$f = fb_of('sse');
is $f->{shortfall}, 1, 'a shortfall from the last event of a stream';
is $f->{learned_capacity}, 512, '... cuts the life to 16 blocks';

# 4. nothing to read: no usage, an error
my $before = fb_of('fb');
my ($st) = send_to('/fb/none', $p{F});
($st) = send_to('/fb/none', $p{F});
is $st, 200, 'an answer without usage';
($st) = send_to('/fb/err', $p{F});
is $st, 500, 'an error';
$f = fb_of('fb');
is $f->{shortfall} + $f->{confirmed},
   $before->{shortfall} + $before->{confirmed}, '... say nothing';

# confirmations: 1/16 of the cut each, then no limit
send_to('/fb/hit', $p{G});
my $n = 0;
for (1 .. 40) {
    send_to('/fb/hit', $p{G});
    $n++;
    last if !defined fb_of('fb')->{learned_capacity};
}
$f = fb_of('fb');
ok !defined $f->{learned_capacity}, "the cut is given back after $n confirmations";
ok $n >= 16 && $n <= 17, '... 16 of them';
is $f->{confirmed}, $n, 'confirmations counted';

my $err = $ng->log;
unlike $err, qr/\[(alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;

$be->stop;

done_testing;
