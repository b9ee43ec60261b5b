# A hung engine delays only itself (issue 42, item 7): one server accepts
# the connection to its /metrics and never answers, the other answers at
# once.  With load=engine a report counts for two intervals, and a poll of
# the hung server lasts its time-out (200 ms at these intervals); each
# server is polled on its own schedule, so the healthy engine's report
# stays within two intervals (at most 40 ms old at metrics_interval=20ms,
# 100 ms at 50ms) while the hung one's ages and is marked stale.  Two
# worker processes: the hung server has one poll at a time, not one per
# worker.
#
# 1. The healthy engines' reports are fresh (age_ms within two
#    intervals, "stale": false) in at least 95 % of samples of the status
#    page, at 20 ms and at 50 ms; the hung one is stale and failing.
# 2. The status page's "stale" says what the age says.
# 3. The hung server is polled once per time-out, not once per worker.
# 4. An engine that reported, then hangs, is stale within a few
#    intervals; the healthy one's report stays fresh.
# 5. After a reload (the old workers' polls of the hung servers still in
#    progress, their records in the zone kept) the new workers poll on
#    time, and the hung servers still once at a time.
# 6. kill -9 of every worker, each hung server's poll in progress: the
#    new workers take the polls over once the dead ones' time-out and an
#    interval have passed.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);
use PrefixAware::Raw;

my $healthy = free_port();
my $later = free_port();
my $hung = free_port();

my $raw = PrefixAware::Raw->start($hung => 'silent');

my $be = PrefixAware::Scenario->new(name => 'healthy');
my $html = $be->root . '/html';

{
    my $m = 'engine="0",model_name="m"';
    open my $fh, '>', "$html/metrics.txt" or die "$html: $!\n";
    print $fh "vllm:num_requests_running{$m} 2.0\n",
              "vllm:num_requests_waiting{$m} 3.0\n",
              "vllm:kv_cache_usage_perc{$m} 0.5\n";
    close $fh;
}

# "later" answers as "healthy" does until the file "hang" exists, then
# as "hung" does
$be->start(<<"_EOC_");
    server {
        listen 127.0.0.1:$healthy;
        listen 127.0.0.1:$later;
        location = /metrics {
            if (-f $html/hang-\$server_port) {
                rewrite ^ /hang last;
            }
            default_type text/plain;
            alias $html/metrics.txt;
        }
        location = /hang {
            internal;
            proxy_read_timeout 1h;
            proxy_pass http://127.0.0.1:$hung;
        }
        location / { return 200 "healthy\\n"; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'engine-hung', workers => 2);
my $listen = $ng->port;

my %interval = (e20 => 20, e50 => 50);

$ng->start(join('', map { <<"_EOC_" } sort keys %interval) . <<"_EOC_");
    upstream $_ {
        prefix_aware load=engine metrics=/metrics
                     metrics_interval=$interval{$_}ms;
        server 127.0.0.1:$healthy;
        server 127.0.0.1:$later;
        server 127.0.0.1:$hung;
    }
_EOC_
    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
    }
_EOC_

sub status {
    my $r = $ng->request(GET => '/status?format=json');
    return eval { JSON::PP::decode_json($r->{body}) } || {};
}

my %name = ("127.0.0.1:$healthy" => 'healthy', "127.0.0.1:$later" => 'later',
            "127.0.0.1:$hung" => 'hung');

# the engine part of each server of each upstream: {e20}{healthy}
sub engines {
    my $st = status();
    my %by;
    for my $up (keys %interval) {
        my $u = $st->{upstreams}{$up} or next;
        $by{$up}{ $name{ $_->{server} } } = $_->{engine}
            for @{ $u->{servers} };
    }
    return \%by;
}

# samples of the status page: how often each engine's report was fresh
# (at most two intervals old), and whether "stale" said so
sub sample {
    my ($n) = @_;
    my %r = (n => $n);

    for (1 .. $n) {
        my $e = engines();

        for my $up (keys %interval) {
            for my $b (qw(healthy later hung)) {
                my $x = $e->{$up}{$b} || {};
                my $age = $x->{age_ms} // 1e9;
                my $fresh = $age <= 2 * $interval{$up};

                $r{fresh}{$up}{$b}++ if $fresh;
                $r{stale}{$up}{$b}++ if $x->{stale};
                $r{agree}{$up}{$b}++ if defined $x->{stale}
                                        && !$x->{stale} == $fresh;
                $r{oldest}{$up}{$b} = $age
                    if $age > ($r{oldest}{$up}{$b} // 0);
            }
        }

        sleep rand 0.02;
    }

    return \%r;
}

sub pc { 100 * ($_[0] // 0) / $_[1] }

# the first poll of the hung server timed out, the others reported

my $e = wait_until {
    my $e = engines();
    (grep { !($e->{$_}{healthy}{reported} && $e->{$_}{later}{reported}
              && $e->{$_}{hung}{errors}) } keys %interval) ? undef : $e;
} 5;

ok $e, 'both upstreams polled the three servers' or diag explain engines();

# 1, 2. samples of the status page over about 5 s

my $t0 = time;
my $r = sample(300);
my $took = time - $t0;
my $end = engines();

for my $up (sort keys %interval) {
    for my $b (qw(healthy later)) {
        my $pc = pc($r->{fresh}{$up}{$b}, $r->{n});

        ok $pc >= 95, sprintf('%s: %s engine\'s report fresh (at most %d ms '
                              . 'old) in %.1f %% of %d samples, oldest %d ms',
                              $up, $b, 2 * $interval{$up}, $pc, $r->{n},
                              $r->{oldest}{$up}{$b} // -1);

        ok !$end->{$up}{$b}{failing} && !$end->{$up}{$b}{errors},
           "$up: ... it never failed";
    }

    for my $b (qw(healthy later hung)) {
        is $r->{agree}{$up}{$b} // 0, $r->{n},
           "$up: $b: \"stale\" is true exactly when the report is over two "
           . 'intervals old (or none)';
    }

    ok pc($r->{stale}{$up}{hung}, $r->{n}) == 100,
       sprintf('%s: the hung engine is stale in %.1f %% of the samples', $up,
               pc($r->{stale}{$up}{hung}, $r->{n}));
    ok $end->{$up}{hung}{failing}, "$up: ... and failing";

    # 3. one poll of the hung server at a time: it ends at its time-out

    my $polls = $end->{$up}{hung}{errors} - $e->{$up}{hung}{errors};
    my $most = int(1.2 * ($took / 0.2 + 2));

    ok $polls >= 1 && $polls <= $most,
       sprintf('%s: the hung server polled %d times in %.1f s (one at a '
               . 'time, each timed out at 200 ms: %d at most)', $up, $polls,
               $took, $most);
}

# 4. "later" hangs: its report goes stale, the healthy one's stays fresh

{
    open my $fh, '>', "$html/hang-$later" or die "$html: $!\n";
    close $fh;
}

$t0 = time;

my $went = wait_until {
    my $e = engines();
    !grep { !$e->{$_}{later}{stale} } keys %interval;
} 2;

ok $went, 'an engine that hangs after it reported goes stale';

$took = time - $t0;
ok $took < 0.5, sprintf('... within %.2f s (two intervals after its last '
                        . 'report)', $took);

$r = sample(100);

for my $up (sort keys %interval) {
    my $pc = pc($r->{fresh}{$up}{healthy}, $r->{n});

    ok $pc >= 95, sprintf('%s: with two hung engines the healthy one\'s '
                          . 'report fresh in %.1f %% of %d samples, oldest '
                          . '%d ms', $up, $pc, $r->{n},
                          $r->{oldest}{$up}{healthy} // -1);

    is $r->{stale}{$up}{later} // 0, $r->{n},
       "$up: the engine that hung is stale in every sample";
}

# 5. a reload

$ng->reload;

$e = engines();
$t0 = time;
$r = sample(100);
$took = time - $t0;
$end = engines();

for my $up (sort keys %interval) {
    my $pc = pc($r->{fresh}{$up}{healthy}, $r->{n});

    ok $pc >= 95, sprintf('%s: after a reload the healthy engine\'s report '
                          . 'fresh in %.1f %% of %d samples, oldest %d ms',
                          $up, $pc, $r->{n},
                          $r->{oldest}{$up}{healthy} // -1);

    my $polls = $end->{$up}{hung}{errors} - $e->{$up}{hung}{errors};
    my $most = int(1.2 * ($took / 0.2 + 2));

    ok $polls <= $most,
       sprintf('%s: ... the hung server polled %d times in %.1f s (%d at '
               . 'most)', $up, $polls, $took, $most);
}

like $ng->log, qr/server "127.0.0.1:$hung" of upstream "e20" gave no metrics at "\/metrics": timed out/,
    'the hung server is logged';

# 6. kill -9 of the workers, whose polls of the hung servers never end

my $old = $ng->workers;
$e = engines();

ok kill(KILL => @$old) == @$old, "kill -9 @$old";

my %dead = map { $_ => 1 } @$old;
my $new = wait_until {
    my $w = $ng->workers;
    @$w == 2 && !grep { $dead{$_} } @$w;
} 5;

ok $new, '... the master starts two new workers';

my $again = wait_until {
    my $x = engines();
    !grep { $x->{$_}{hung}{errors} <= $e->{$_}{hung}{errors} } keys %interval;
} 3;

ok $again, '... which poll the hung servers again: the dead workers\' '
           . 'polls lapsed';

$r = sample(50);

for my $up (sort keys %interval) {
    ok pc($r->{fresh}{$up}{healthy}, $r->{n}) >= 95,
       sprintf('%s: ... and the healthy engine\'s report fresh in %.1f %% '
               . 'of %d samples', $up, pc($r->{fresh}{$up}{healthy}, $r->{n}),
               $r->{n});
}

my @alerts = grep { /\[(?:alert|crit|emerg)\]/ && !/exited on signal 9\b/ }
             $ng->log;
ok !@alerts, 'no alert in the log but those of the killed workers'
    or diag join "\n", @alerts;

$ng->stop;
$be->stop;
$raw->stop;

done_testing;
