# kill -9 of a worker of an older configuration while it drains: the
# master does not replace such a worker, so no new worker starts to give
# its counts back.  The workers that run give them back by themselves:
# each has a timer that looks for dead workers about every second
# ("giving back the in-flight counts of exited process" at notice level).
# Without it, the two requests the dead worker held would count until the
# next reload, and their server would look busy.
#
# worker_processes 1 (so the old worker is known), threshold=1; the
# backends run in a nginx of their own, "/slow3" answers after about three
# seconds.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2 b3);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'kill-draining', workers => 1);
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } sort keys %port;
my $listen = $ng->port;

my $http = <<"_EOC_";
    upstream up {
        prefix_aware index=off length=1024 threshold=1;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

$ng->start($http);

my @key = (headers => [ID_HEADER, 'tenant-d']);

sub inflight {
    my $in = $ng->inflight('up') || {};
    return { map { ($name{$_} => $in->{$_}) } keys %$in };
}

sub total {
    my $in = $ng->inflight('up') or return -1;
    my $sum = 0;
    $sum += $_ for values %$in;
    return $sum;
}

my ($old) = @{ $ng->workers };

# the old worker holds two requests of the key: at F, then spilled to S
my @held = map { $ng->conn } 1 .. 2;
$_->send(GET => '/slow3', @key) for @held;
ok wait_until(sub { total() == 2 }, 5), "worker $old holds two requests";
my $before = inflight();
is scalar(grep { $_ } values %$before), 2, 'on two servers';

# a reload: the old worker drains its two requests, a new one serves
$ng->reload;
my ($new) = @{ $ng->workers };
isnt $new, $old, "a new worker $new";
is_deeply $ng->old_workers, [$old], "the old worker $old is shutting down";
is total(), 2, 'the new worker sees the old one\'s two requests';

# kill -9 the draining worker: nothing replaces it
my $from = $ng->log_size;
ok kill(KILL => $old), "kill -9 $old";
ok wait_until(sub { !@{ $ng->old_workers } }, 5), 'the old worker is gone';

my $t0 = time;
ok wait_until(sub { total() == 0 }, 5),
   'its two counts are given back without another reload';
my $took = time - $t0;
cmp_ok $took, '<', 3, sprintf 'within %.1f s', $took;
is_deeply [ $ng->workers ], [ [$new] ], 'by the worker that runs, still the same';

like scalar $ng->log($from),
     qr/\[notice\] \d+#\d+: prefix_aware: giving back the in-flight counts of exited process $old\b/,
     'the error log says whose counts were given back';

is $_->read(5)->{status}, 0, 'a request the dead worker held is cut' for @held;
$_->close for @held;

# the key is at its first choice with nothing in flight there
$from = $ng->log_size;
my $r = $ng->request(GET => '/t', @key);
is $r->{status}, 200, 'the key is served';
my $d = $ng->decisions($from);
is_deeply [ map { [$_->{route}, $_->{first_inflight}] } @$d ], [ ['affinity', 0] ],
          'by affinity, 0 in flight at the first choice';
is total(), 0, '0 in flight everywhere';

my @alerts = grep { /\[(?:alert|crit|emerg)\]/ && !/exited on signal 9\b/ } $ng->log;
ok !@alerts, 'no alert in the error log but the one about the killed worker'
    or diag join "\n", @alerts;

$ng->stop;
$be->stop;

done_testing();
