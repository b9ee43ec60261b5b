# models=discover against /v1/models answers of real size: the model cards
# of vLLM (with their "permission" array, 510-560 bytes each) and SGLang,
# 128 of them, which are larger than the 64 KB the poller used to read
# whole; an answer of 5,000 cards (2.7 MB: 128 ids kept, the rest counted);
# one that grows over the 4 MB limit (refused, logged once with its
# reason, the last list kept for 3 intervals, then the server counts as
# serving every model); the 128 vLLM cards sent in small
# pieces (the status line cut in two); and a chunked answer to the
# HTTP/1.0 request (refused, with its reason).  nginx runs with two
# workers and a master.

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use JSON::PP ();
use POSIX ();
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

my $base = 'meta-llama/Llama-3.1-8B-Instruct';
my $snap = '/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-'
         . 'Instruct/snapshots/0e9e39f249a16976918f6564b8830bc894c89659';

# a vLLM card as vllm/entrypoints/openai/protocol.py's ModelCard and
# ModelPermission serialize it (compact, in field order): the base model,
# or a LoRA adapter with its path as root and the base as parent
sub vllm_card {
    my ($i, $id) = @_;
    my ($root, $parent, $len) = $i == 0
        ? ($snap, 'null', '131072')
        : (sprintf('/srv/adapters/%s/v1', $id),
           qq{"$base"}, 'null');
    return sprintf '{"id":"%s","object":"model","created":%d,'
        . '"owned_by":"vllm","root":"%s","parent":%s,"max_model_len":%s,'
        . '"permission":[{"id":"modelperm-%032x","object":"model_permission",'
        . '"created":%d,"allow_create_engine":false,"allow_sampling":true,'
        . '"allow_logprobs":true,"allow_search_indices":false,'
        . '"allow_view":true,"allow_fine_tuning":false,"organization":"*",'
        . '"group":null,"is_blocking":false}]}',
        $id, 1733000000 + $i, $root, $parent, $len, 0x5eed0000 + $i,
        1733000000 + $i;
}

# SGLang's ModelCard: id, object, created, owned_by, root, parent,
# max_model_len
sub sglang_card {
    my ($i, $id) = @_;
    return sprintf '{"id":"%s","object":"model","created":%d,'
        . '"owned_by":"sglang","root":"%s","parent":%s,'
        . '"max_model_len":32768}',
        $id, 1733000000 + $i, $i ? "/loras/$id" : $id,
        $i ? '"Qwen/Qwen2.5-7B-Instruct"' : 'null';
}

# adapters named by tenant and task: cards of 510 to 560 bytes
my @tenant = qw(acme globex initech umbrella-research hooli-platform);
my @task = qw(text-to-sql support-chat summarize code-review legal-contracts
              translate);

sub ids {
    my ($prefix, $n, $first) = @_;
    return ($first, map { sprintf '%s-%s-%s-%04d', $tenant[$_ % 5],
                                  $task[$_ % 6], $prefix, $_ } 1 .. $n - 1);
}

sub answer {
    my ($card, @ids) = @_;
    my $i = 0;
    return '{"object":"list","data":['
         . join(',', map { $card->($i++, $_) } @ids) . ']}';
}

my @vllm_ids = ids('lora', 128, $base);
my $vllm = answer(\&vllm_card, @vllm_ids);
my @sizes = sort { $a <=> $b } map { length vllm_card($_, $vllm_ids[$_]) } 1 .. 127;
my @sglang_ids = ids('qwen-lora', 128, 'Qwen/Qwen2.5-7B-Instruct');
my $sglang = answer(\&sglang_card, @sglang_ids);
my $many = answer(\&vllm_card, ids('many', 5000, $base));
my $huge = answer(\&vllm_card, ids('huge', 9000, $base));

cmp_ok $sizes[0], '>=', 510, "vLLM adapter cards are $sizes[0] to $sizes[-1] bytes";
cmp_ok $sizes[-1], '<=', 560, 'at most 560';
cmp_ok length $vllm, '>', 65536, sprintf '128 vLLM cards: %d bytes, over 64 KB', length $vllm;
cmp_ok length $many, '<', 4 * 1024 * 1024, sprintf '5,000 cards: %d bytes, under 4 MB', length $many;
cmp_ok length $huge, '>', 4 * 1024 * 1024, sprintf '9,000 cards: %d bytes, over 4 MB', length $huge;

my %port = map { $_ => free_port() } qw(vllm sglang many huge dribble chunked);

# the misbehaving servers nginx cannot play: the answer in pieces of 499
# bytes 2 ms apart, its status line cut after "HTTP/1.1 2"; a chunked
# answer (to an HTTP/1.0 request)

my $raw = fork // die "fork: $!\n";

if ($raw == 0) {
    my %mode = ($port{dribble} => 'dribble', $port{chunked} => 'chunked');
    my $sel = IO::Select->new;
    my %of;
    for my $p (keys %mode) {
        my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                      LocalPort => $p, Proto => 'tcp',
                                      Listen => 64, ReuseAddr => 1)
            or POSIX::_exit(1);
        $sel->add($l);
        $of{fileno $l} = $mode{$p};
    }
    $SIG{PIPE} = 'IGNORE';
    $SIG{TERM} = sub { POSIX::_exit(0) };
    for (;;) {
        for my $l ($sel->can_read) {
            my $c = $l->accept or next;
            my $req = '';
            while ($req !~ /\r\n\r\n/) {
                my $n = sysread $c, $req, 4096, length $req;
                last unless $n;
            }
            setsockopt $c, IPPROTO_TCP, TCP_NODELAY, 1;
            if ($of{fileno $l} eq 'dribble') {
                my $a = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      . "Content-Length: " . length($vllm) . "\r\n"
                      . "Connection: close\r\n\r\n$vllm";
                syswrite $c, substr($a, 0, 10);
                sleep 0.01;
                for (my $o = 10; $o < length $a; $o += 499) {
                    syswrite $c, substr($a, $o, 499) or last;
                    sleep 0.001;
                }
            } else {
                my $a = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      . "Transfer-Encoding: chunked\r\n\r\n";
                for (my $o = 0; $o < length $vllm; $o += 4000) {
                    my $piece = substr $vllm, $o, 4000;
                    $a .= sprintf("%x\r\n", length $piece) . "$piece\r\n";
                }
                syswrite $c, "${a}0\r\n\r\n";
            }
            close $c;
        }
    }
}

END { kill 'TERM', $raw if $raw; waitpid $raw, 0 if $raw }

my $be = PrefixAware::Scenario->new(name => 'backends');
my $html = $be->root . '/html';

sub put {
    my ($b, $body) = @_;
    my $f = "$html/models-$b.json";
    open my $fh, '>', "$f.tmp" or die "$f: $!\n";
    print $fh $body;
    close $fh;
    rename "$f.tmp", $f or die "$f: $!\n";
}

# the server of upstream "huge" lists the 128 vLLM cards first
my %file = (vllm => $vllm, sglang => $sglang, many => $many, huge => $vllm);
put($_ => $file{$_}) for keys %file;

$be->start(join '', map { <<"_EOC_" } sort keys %file);
    server {
        listen 127.0.0.1:$port{$_};
        location = /v1/models {
            default_type application/json;
            alias $html/models-$_.json;
        }
        location / { return 200 "$_\\n"; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'cards', workers => 2);
my $listen = $ng->port;

$ng->start(join('', map { <<"_EOC_" } sort keys %port) . <<"_EOC_");
    upstream $_ {
        prefix_aware index=off models=discover models_interval=1s model_header=X-Model;
        server 127.0.0.1:$port{$_};
    }
_EOC_
    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
    }
_EOC_

sub status {
    my $r = $ng->request(GET => '/status');
    return eval { JSON::PP::decode_json($r->{body}) } || {};
}

# the upstream's models: { servers => the one server's answers, list => ... }
sub models {
    my ($up) = @_;
    my $ms = status()->{upstreams}{$up}{models} or return {};
    return { server => $ms->{servers}[0] || {}, list => $ms->{list} || [],
             full => $ms->{full} };
}

sub listed {
    my ($up) = @_;
    return [ sort map { $_->{name} } grep { $_->{set} eq 'discovered' }
             @{ models($up)->{list} } ];
}

# the lists are in within a round or two

ok wait_until(sub { (models('vllm')->{server}{answered} // 0) > 0 }, 5),
   'the server with 128 vLLM cards answered';

for my $t ([ vllm => \@vllm_ids ], [ sglang => \@sglang_ids ],
           [ dribble => \@vllm_ids ])
{
    my ($up, $ids) = @$t;
    ok wait_until(sub { (models($up)->{server}{answered} // 0) > 0 }, 5),
       "$up: answered";
    my $s = models($up)->{server};
    is $s->{models}, 128, "$up: 128 models listed";
    ok !$s->{failing} && !$s->{serves_all}, "$up: not failing, not serving all";
    is_deeply listed($up), [ sort @$ids ], "$up: the 128 ids, each discovered";
}

# 5,000 cards: 128 kept, the others counted, the server not failing

{
    ok wait_until(sub { (models('many')->{server}{answered} // 0) > 0 }, 5),
       '5,000 cards: answered';
    my $m = models('many');
    is $m->{server}{models}, 5000, 'the status counts its 5,000 models';
    ok !$m->{server}{failing}, 'not failing';
    is scalar @{ listed('many') }, 128, '128 of them kept';
    cmp_ok $m->{full}, '>=', 4872, "the others counted as full: $m->{full}";
}

# an answer that grows over 4 MB: refused with its reason, logged once,
# the last list kept for 3 intervals, then the server serves every model

{
    ok wait_until(sub { (models('huge')->{server}{answered} // 0) > 0 }, 5),
       'upstream "huge": its server lists 128 models first';
    put(huge => $huge);
    my $t0 = time;
    my $h = "127\\.0\\.0\\.1:$port{huge}";
    ok wait_until(sub { $ng->log =~ /server "$h" of upstream "huge" does not list/ }, 3),
       'its answer of 9,000 cards is refused';
    my $s = models('huge')->{server};
    ok $s->{failing} && !$s->{serves_all}, 'failing, keeping its last list';
    is scalar @{ listed('huge') }, 128, 'the 128 models of its last list';
    ok wait_until(sub { models('huge')->{server}{serves_all} }, 5),
       'then it counts as serving every model';
    my $dt = time - $t0;
    cmp_ok $dt, '>=', 1.5, sprintf 'after 3 intervals from its last answer: %.2fs', $dt;
    sleep 1.5;
    my $log = $ng->log;
    my @warn = $log =~ /(server "$h" of upstream "huge" does not list its models[^\n]*)/g;
    is scalar @warn, 1, 'the failure is logged once over several polls';
    like $warn[0] // '', qr/: answer over 4 MB$/, 'with its reason: answer over 4 MB';
    like $log, qr/server "$h" of upstream "huge" has not listed its models for 3 intervals/,
         'and the fallback is logged';
}

# a chunked answer to HTTP/1.0: refused, with its reason

{
    ok wait_until(sub { models('chunked')->{server}{failing} }, 5),
       'a chunked answer: the server is failing';
    like $ng->log, qr/server "127\.0\.0\.1:$port{chunked}" of upstream "chunked" does not list its models: a transfer coding in an answer to HTTP\/1\.0/,
         'logged with its reason';
}

unlike $ng->log, qr/server "127\.0\.0\.1:$port{$_}" of upstream "$_" does not list/,
       "$_: never failed" for qw(vllm sglang many dribble);

unlike $ng->log, qr/\[(alert|crit|emerg)\]/, 'no alert in the error log';

diag join "\n", $ng->log =~ /^.*(?:does not list|models: server \d+:).*$/mg
    if !Test::More->builder->is_passing;

$ng->stop;
$be->stop;

done_testing;
