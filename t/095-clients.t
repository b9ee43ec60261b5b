# End to end with the official clients, as a user runs them (issue 44):
# the `openai` and `@anthropic-ai/sdk` npm packages (t/js/, pinned in its
# package-lock.json, installed by `make deps-test`) through nginx with the
# module to four simulated vLLM instances (bench/sim/llmsim.py), each with
# a Responses store of its own that answers 404 for an id it did not make.
#
# - responses.create, JSON and stream (and the stream helper), store, 10
#   turns on previous_response_id, retrieve, delete, background + cancel;
# - messages.create, messages.stream and countTokens, system and tools;
# - 100 stored conversations of 10 turns at once, then a retrieve of
#   every answer: through the module's default every turn and retrieve
#   succeeds (issue 44 item 4: a stored response's follow-ups go to its
#   server), and through round robin, some break (a measurement: printed);
#   then the same through two nginx hosts in prefix_aware_sync, each
#   conversation's turns and the retrieves alternating between them.
#
# The engines run at --time-scale 0.01 (a hundred times faster than the
# modelled GPU), so the suite takes about half a minute.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use File::Temp ();
use JSON::PP ();
use POSIX ();
use PrefixAware::Scenario qw(free_port wait_until);
use IO::Socket::INET;

my $root = "$FindBin::Bin/..";
my $js = "$root/t/js";
my $node = $ENV{TEST_NODE} || 'node';

# the clients are installed by `make deps-test` (npm ci): without them the
# suite cannot say anything, and says so as a failure
BAIL_OUT("t/js/node_modules missing: run make deps-test (npm ci in t/js)")
    unless -d "$js/node_modules/openai" && -d "$js/node_modules/\@anthropic-ai/sdk";

# --- four engines ------------------------------------------------------

my @ports = map { free_port() } 1 .. 4;
my $simlog = File::Temp->new(TEMPLATE => 'pa-llmsim-XXXXXX', TMPDIR => 1);
my $sim = fork // die "fork: $!\n";
if (!$sim) {
    open STDOUT, '>', $simlog->filename or POSIX::_exit(1);
    open STDERR, '>&', \*STDOUT;
    { exec '/usr/bin/python3', "$root/bench/sim/llmsim.py",
          '--ports', join(',', @ports), '--names', 'i0,i1,i2,i3',
          '--time-scale', '0.01', '--max-seconds', '600' };
    POSIX::_exit(127);
}
END {
    if ($sim) {
        kill TERM => $sim;
        waitpid $sim, 0;
    }
}

sub listening {
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$_[0]",
                                  Proto => 'tcp');
    return $s ? 1 : 0;
}

ok wait_until(sub { !grep { !listening($_) } @ports }, 20),
    'llmsim: four instances listen'
    or BAIL_OUT("llmsim did not start: " . do {
        local $/; open my $f, '<', $simlog->filename; <$f> // '' });

# --- nginx: the module's default, and round robin ------------------------

my $servers = join '', map { "        server 127.0.0.1:$_;\n" } @ports;
my $ng = PrefixAware::Scenario->new(name => 'clients');
my $pa = $ng->port;
my $rr = free_port();

$ng->start(<<"_EOC_");
    upstream pa {
        prefix_aware;
$servers    }

    upstream rr {
$servers    }

    server {
        listen 127.0.0.1:$pa;
        client_max_body_size 16m;
        location / {
            proxy_pass http://pa;
            proxy_http_version 1.1;
            proxy_buffering off;
        }
    }

    server {
        listen 127.0.0.1:$rr;
        client_max_body_size 16m;
        location / {
            proxy_pass http://rr;
            proxy_http_version 1.1;
            proxy_buffering off;
        }
    }
_EOC_

# runs t/js/e2e.mjs; -> its JSON line, decoded
sub client {
    my @args = @_;
    my $out = `cd $js && $node e2e.mjs @args 2>&1`;
    my ($line) = $out =~ /^(\{.*\})\s*$/m;
    my $res = eval { JSON::PP::decode_json($line // '') };
    if (!$res) {
        diag("e2e.mjs @args: $out");
        return {};
    }
    diag("e2e.mjs $args[0]: fatal: $res->{fatal}: $res->{message}")
        if $res->{fatal};
    return $res;
}

# --- the Responses API ---------------------------------------------------

my $r = client('responses', "http://127.0.0.1:$pa");
is $r->{create}{status}, 'completed', 'responses.create: completed';
ok $r->{create}{id_ok} && length($r->{create}{text} // '') > 0,
    'responses.create: an id and output_text';
is_deeply $r->{stream}{events}, [qw(response.created response.in_progress
    response.output_item.added response.content_part.added
    response.output_text.delta response.output_text.done
    response.content_part.done response.output_item.done
    response.completed)], 'responses.create stream: the events in order';
ok $r->{stream}{same_text} && $r->{stream}{status} eq 'completed',
    'responses.create stream: the deltas make the completed text';
is $r->{stream_helper}{status}, 'completed', 'responses.stream: completed';
is $r->{turns}{ok}, 10, '10 turns on previous_response_id'
    or diag explain $r->{turns};
ok $r->{retrieve}{id_ok} && $r->{retrieve}{prev_ok},
    'responses.retrieve: the last turn';
cmp_ok $r->{retrieve}{cached} // 0, '>', 0.8 * ($r->{retrieve}{input_tokens} // 1),
    'the 11th turn hit the engine cache for its history';
ok $r->{deleted} && "$r->{deleted}" eq '1'
    && $r->{after_delete} eq 'HTTP 404', 'responses.delete: then 404'
    or diag explain [$r->{deleted}, $r->{after_delete}];
is $r->{unknown}, 'HTTP 404', 'an unknown id: 404';
is_deeply $r->{background}, { queued => 'queued', cancelled => 'cancelled' },
    'background, then responses.cancel';

# --- Anthropic Messages --------------------------------------------------

my $m = client('messages', "http://127.0.0.1:$pa");
is $m->{create}{type}, 'message', 'messages.create: a message';
is $m->{create}{stop}, 'max_tokens', 'messages.create: its stop reason';
ok length($m->{create}{text} // '') > 0, 'messages.create: text';
is_deeply $m->{stream}{events}, [qw(message_start content_block_start
    content_block_delta content_block_stop message_delta message_stop)],
    'messages.stream: the events in order';
ok $m->{stream}{text} && $m->{stream}{text} eq $m->{stream}{final_text},
    'messages.stream: the deltas make the final message';
cmp_ok $m->{stream}{cached} // 0, '>', 0,
    'messages.stream: the same prompt again hit the cache (routed alike)';
is $m->{count_tokens}, $m->{create}{input_tokens},
    'messages.countTokens: the prompt tokens of messages.create';

# --- 100 stored conversations of 10 turns at once ------------------------

my $s = client('stored', "http://127.0.0.1:$pa", 100, 10);
sub report {
    my ($name, $x) = @_;
    my $j = JSON::PP->new->canonical;
    diag(sprintf "%s: %d of %d turns, %d of %d retrieves, %d of %d "
         . "conversations broken; turn errors %s, retrieve errors %s", $name,
         map({ $_ // 0 } @$x{qw(turns_ok turns retrieves_ok retrieves
                                broken conversations)}),
         $j->encode($x->{errors} // {}), $j->encode($x->{retrieve_errors} // {}));
}
report('module default', $s);
is $s->{turns_ok}, 1000, 'module default: every turn of 100 x 10 succeeds';
ok $s->{retrieves} && $s->{retrieves_ok} == $s->{retrieves},
    'module default: every responses.retrieve succeeds';

my $b = client('stored', "http://127.0.0.1:$rr", 100, 10);
report('round robin', $b);
my $answered = ($b->{turns_ok} // 0) + ($b->{errors}{'HTTP 404'} // 0);
is $answered, 1000, 'round robin: every turn answered, 200 or 404';
cmp_ok $b->{broken} // 0, '>', 0,
    'round robin: stored conversations break (the engines\' own stores)';

# --- two nginx hosts in sync: turns alternate between them ---------------

# a client behind an L4 balancer reaches either host: an id host A learned
# must route host B's follow-up (the ids travel in prefix_aware_sync's
# datagrams as soon as they are learned)

my %sp = (a => free_port(), b => free_port());
my $key = 'the hosts share this secret';
my $peers = "peer=127.0.0.1:$sp{a} peer=127.0.0.1:$sp{b}";
my %host;

for my $h (qw(a b)) {
    $host{$h} = PrefixAware::Scenario->new(name => "clients-$h",
                                           workers => 2);
    my $port = $host{$h}->port;
    $host{$h}->start(<<"_EOC_");
    upstream pa {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:$sp{$h} "key=$key" $peers;
$servers    }

    server {
        listen 127.0.0.1:$port;
        client_max_body_size 16m;
        location / {
            proxy_pass http://pa;
            proxy_http_version 1.1;
            proxy_buffering off;
        }
        location = /st { prefix_aware_status; }
    }
_EOC_
}

my $two = client('stored', 'http://127.0.0.1:' . $host{a}->port, 100, 10,
                 'http://127.0.0.1:' . $host{b}->port);
report('two hosts in sync', $two);
for my $h (qw(a b)) {
    my $r = $host{$h}->request(GET => '/st');
    my $u = eval { JSON::PP::decode_json($r->{body})->{upstreams}{pa} } // {};
    diag(sprintf "host %s: %d ids learned, %d synced, %d unknown; %d "
         . "datagrams read for a request (drained)", $h,
         map({ $_ // 0 } $u->{responses}{learned}, $u->{responses}{synced},
             $u->{responses}{unknown}, $u->{sync}{drained}));
}
# the ids travel as datagrams, sent as soon as an id is read and before
# its answer is written; a follow-up whose id a host does not know reads
# the datagrams waiting on the sync socket first (whichever worker the
# kernel woke for them may be busy), so no turn loses its server
is $two->{turns_ok}, 1000,
    'two hosts in sync, turns alternating: every turn succeeds';
ok $two->{retrieves} && $two->{retrieves_ok} == $two->{retrieves},
    'two hosts in sync: the retrieves, alternating, succeed';

for my $x ($ng, $host{a}, $host{b}) {
    my @bad = grep { /\[(alert|crit|emerg)\]/ } $x->log;
    is scalar(@bad), 0, 'no alert, crit or emerg in the error log'
        or diag join "\n", @bad[0 .. ($#bad < 4 ? $#bad : 4)];
    $x->stop;
}

done_testing;
