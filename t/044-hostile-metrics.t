# A hostile or broken engine's /metrics page (issue 42, items 5 and 9):
#
# 1. An 8 MB page of "sglang:num_queue_reqs 0e-9999": each number once
#    cost up to 9999 divisions (10.6 s of a worker's CPU a page, polled
#    every second; the proxied requests of that worker waited 184 ms at
#    the median, and its polls timed out).  Now the page is read as any
#    other of its size: the report is taken (0 waiting), and over 4
#    seconds of polls the worker spends about the CPU a page of "1" of
#    the same size costs it (measured first, in the same worker, so that
#    a loaded machine or a sanitizer build slows both), and answers at
#    once.
# 2. Sums over many series are held at one series' bound: an 8 MB page of
#    "vllm:num_requests_waiting 9000000" reports 10000000 waiting (it said
#    2.2e12), one of "vllm:num_requests_waiting 1" the number of its
#    lines, below the bound.
#
# One worker, the default interval (1 s), as in the issue's measurement.

use strict;
use warnings;

use JSON::PP ();
use POSIX ();
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

my %port = map { $_ => free_port() } qw(b1 b2 b3);

my $be = PrefixAware::Scenario->new(name => 'hostile-engines');
my $html = $be->root . '/html';

# a page of "line" repeated to just under 8 MB (the largest answer read is
# 8 MB); returns its number of lines
sub page {
    my ($b, $line) = @_;
    my $n = int(8_000_000 / length $line);
    open my $fh, '>', "$html/metrics-$b.txt" or die "$html: $!\n";
    print $fh $line x $n;
    close $fh;
    return $n;
}

page(b2 => "vllm:num_requests_waiting 9000000\n");
my $ones = page(b3 => "vllm:num_requests_waiting 1\n");

$be->start(join '', map { <<"_EOC_" } sort keys %port);
    server {
        listen 127.0.0.1:$port{$_};
        location = /metrics {
            default_type text/plain;
            alias $html/metrics-$_.txt;
        }
        location / { return 200 "pong\\n"; }
    }
_EOC_

sub status {
    my ($ng) = @_;
    my $r = $ng->request(GET => '/status?format=json');
    return eval { JSON::PP::decode_json($r->{body}) } || {};
}

# the engine part of an upstream's only server
sub engine {
    my ($ng, $up) = @_;
    my $u = status($ng)->{upstreams}{$up} or return {};
    return $u->{servers}[0]{engine} || {};
}

# utime + stime of a process, in seconds
my $tck = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;

sub cpu {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return;
    my $stat = <$fh>;
    close $fh;
    $stat =~ s/^.*\)\s+//s;
    my @f = split ' ', $stat;
    return ($f[11] + $f[12]) / $tck;
}

# 4 seconds of /ping, every 40 ms, while the page is polled every second:
# the worker's CPU, /ping's times, the polls made and failed
sub measure {
    my ($ng, $worker, $what) = @_;

    my $polls0 = status($ng)->{upstreams}{hostile}{metrics}{polls} // 0;
    my $errors0 = engine($ng, 'hostile')->{errors} // 0;
    my $cpu0 = cpu($worker);
    my $t0 = time;
    my (@ms, $failed);

    while (time - $t0 < 4) {
        my $t = time;
        my $r = $ng->request(GET => '/ping', timeout => 2);
        push @ms, (time - $t) * 1000;
        $failed++ if $r->{status} != 200 || $r->{body} ne "pong\n";
        sleep 0.04;
    }

    my %m = (wall => time - $t0, cpu => cpu($worker) - $cpu0,
             failed => $failed // 0, n => scalar @ms);

    $m{polls} = (status($ng)->{upstreams}{hostile}{metrics}{polls} // 0)
                - $polls0;
    $m{errors} = (engine($ng, 'hostile')->{errors} // 0) - $errors0;

    @ms = sort { $a <=> $b } @ms;
    $m{p50} = $ms[ int(@ms / 2) ];
    $m{p99} = $ms[ int(@ms * 0.99) ];

    diag sprintf '%s: worker CPU %.0f ms in %.1f s, %d polls, %d errors; '
                 . '/ping P50 %.1f ms, P99 %.1f ms, max %.1f ms, %d failed '
                 . 'of %d', $what, $m{cpu} * 1000, $m{wall}, $m{polls},
                 $m{errors}, $m{p50}, $m{p99}, $ms[-1], $m{failed}, $m{n};

    return \%m;
}

# 1. one worker, polled every second: a page of "1" as a measure of what
#    8 MB cost, then the page of "0e-9999"

page(b1 => "sglang:num_queue_reqs 1\n");

my $ng = PrefixAware::Scenario->new(name => 'hostile-metrics', workers => 1);

$ng->start(<<"_EOC_");
    upstream hostile {
        prefix_aware load=engine metrics=/metrics;
        server 127.0.0.1:$port{b1};
    }

    server {
        listen 127.0.0.1:@{[ $ng->port ]};
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://hostile; }
    }
_EOC_

my ($worker) = @{ $ng->workers };
ok $worker, "one worker, $worker";

my $read = wait_until { (engine($ng, 'hostile')->{waiting} // 0) > 0 } 8;
ok $read, 'the page of "1" is read';

my $normal = measure($ng, $worker, '8 MB of "1"');

# the same size, each line "0e-9999" (the file replaced at once)

my $n = int(8_000_000 / length "sglang:num_queue_reqs 0e-9999\n");
open my $fh, '>', "$html/hostile.tmp" or die "$html: $!\n";
print $fh "sglang:num_queue_reqs 0e-9999\n" x $n;
close $fh;
rename "$html/hostile.tmp", "$html/metrics-b1.txt" or die "$html: $!\n";

my $e = wait_until {
    my $e = engine($ng, 'hostile');
    (defined $e->{waiting} && $e->{waiting} == 0 && !$e->{failing})
        ? $e : undef;
} 8;

ok $e, 'the page of "0e-9999" is read within its poll (0 waiting)'
    or diag explain engine($ng, 'hostile');
is $e && $e->{rejected}, 0, '... nothing refused';

my $m = measure($ng, $worker, '8 MB of "0e-9999"');

ok $m->{polls} >= 3, "the page was polled $m->{polls} times";
is $m->{errors}, 0, '... and read every time (no poll timed out)';
ok $m->{cpu} < 2 * $normal->{cpu} + 0.25,
    sprintf('the worker spent %.0f ms of CPU in %.1f s, against %.0f ms '
            . 'for the page of "1"', $m->{cpu} * 1000, $m->{wall},
            $normal->{cpu} * 1000);
ok !$m->{failed}, '/ping answered every time';
ok $m->{p50} < 50, sprintf('/ping P50 %.1f ms (under 50 ms)', $m->{p50});
ok $m->{p99} < 500, sprintf('/ping P99 %.1f ms (under 500 ms)', $m->{p99});

unlike $ng->log, qr/\[(alert|crit|emerg)\]/, 'no alert in the log';

$ng->stop;

# 2. sums over many series

my $ng2 = PrefixAware::Scenario->new(name => 'hostile-sums', workers => 1);

$ng2->start(<<"_EOC_");
    upstream many {
        prefix_aware metrics=/metrics metrics_interval=500ms;
        server 127.0.0.1:$port{b2};
    }

    upstream ones {
        prefix_aware metrics=/metrics metrics_interval=500ms;
        server 127.0.0.1:$port{b3};
    }

    server {
        listen 127.0.0.1:@{[ $ng2->port ]};
        location = /status { prefix_aware_status; }
    }
_EOC_

$read = wait_until { engine($ng2, 'many')->{reported}
                     && engine($ng2, 'ones')->{reported} } 8;
ok $read, 'both pages are read';

is engine($ng2, 'many')->{waiting}, 10000000,
    '235,294 series of 9000000 waiting: held at 10000000';
is engine($ng2, 'ones')->{waiting}, $ones,
    "$ones series of 1 waiting: their sum, below the bound";

my $prom = $ng2->request(GET => '/status?format=prometheus')->{body};
like $prom, qr/^nginx_prefix_aware_engine_waiting_requests\{upstream="many",[^}]*\} 10000000$/m,
    'Prometheus: the same';

unlike $ng2->log, qr/\[(alert|crit|emerg)\]/, 'no alert in the log';

$ng2->stop;
$be->stop;

done_testing;
