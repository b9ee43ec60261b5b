# queue=: requests that wait through a reload and through the death of
# their worker.  One server of threshold=2, two workers; "/slow2" answers
# after about two seconds.
#
# 1. nginx -s reload while 6 requests wait (in both workers): the old
#    workers keep theirs until released, in one order with the new
#    workers' (the table is kept: same queue=); every request is answered
#    200, and the counts (waiting, in flight) return to zero.
# 2. kill -9 of a worker whose 4 requests wait: the other worker, which
#    has requests waiting, gives their places back within a second or so
#    (counted "lost", logged), its own are then released and answered,
#    and the counts return to zero.
# 3. kill -9 of the only worker with requests waiting: the module's
#    reaper (one worker a second) gives their places back.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

my $bport = free_port();

my $be = PrefixAware::Scenario->new(name => 'backend');
$be->start($be->backends(b1 => $bport));

my $ng = PrefixAware::Scenario->new(name => 'qworkers', workers => 2);
my $listen = $ng->port;

my $conf = <<"_EOC_";
    upstream up {
        prefix_aware index=off threshold=2 queue=64 queue_timeout=30s;
        server 127.0.0.1:$bport;
    }

    server {
        listen 127.0.0.1:$listen reuseport;
        location = /pid { return 200 "\$pid\\n"; }
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

$ng->start($conf);

sub status {
    my $r = $ng->request(GET => '/status?format=json');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return {};
    return $st->{upstreams}{up} || {};
}

sub waiting { (status()->{queue} || {})->{waiting} // -1 }

sub inflight {
    my $s = status()->{servers} or return -1;
    my $n = 0;
    $n += $_->{inflight} for @$s;
    return $n;
}

# 1. reload

my ($wa, $wb) = @{ $ng->workers };
my @c;
for my $i (0 .. 7) {
    my $c = $ng->conn_on($i % 2 ? $wb : $wa) or die "no connection\n";
    $c->send(GET => "/slow2?r=$i");
    push @c, $c;
    sleep 0.05;
}

ok wait_until(sub { waiting() == 6 }, 5), '6 wait, 2 in flight';

$ng->reload;
ok 1, 'reloaded';

# two more, on the new workers, wait behind the old workers' six
my @n = map { $ng->conn } 1 .. 2;
$_->send(GET => '/slow2?new') for @n;
ok wait_until(sub { waiting() == 8 }, 5),
   'the new workers\' requests wait in the same table';

my @r = map { $_->read(40) } @c, @n;
is_deeply [ map { $_->{status} } @r ], [ (200) x 10 ],
          'every request answered 200';
$_->close for @c, @n;

ok wait_until(sub { waiting() == 0 && inflight() == 0 }, 5),
   'nothing waits, nothing in flight';
my $q = status()->{queue};
is $q->{released}, 8, '8 released';
is $q->{shed}{lost} + $q->{shed}{gone} + $q->{shed}{timeout}, 0, 'none lost';
ok wait_until(sub { !@{ $ng->old_workers } }, 10), 'the old workers exited';

# 2. kill -9

($wa, $wb) = @{ $ng->workers };
my @b = map { $ng->conn_on($wb) } 1 .. 4;
$b[$_]->send(GET => "/slow2?b=$_") for 0, 1;
ok wait_until(sub { inflight() == 2 }, 5), 'worker B: 2 in flight';
my @a = map { $ng->conn_on($wa) } 1 .. 4;
$_->send(GET => '/slow2?a') for @a;
ok wait_until(sub { waiting() == 4 }, 5), 'worker A: 4 wait';
$b[$_]->send(GET => "/slow2?b=$_") for 2, 3;
ok wait_until(sub { waiting() == 6 }, 5), 'worker B: 2 wait';

my $from = $ng->log_size;
ok kill(KILL => $wa), "kill -9 worker A ($wa)";
my $t0 = time;
ok wait_until(sub { waiting() == 2 }, 5), 'worker A\'s places given back';
my $took = time - $t0;
ok $took < 3, sprintf("within %.2f s", $took);
like $ng->log($from),
     qr/\[warn\].*prefix_aware: 4 requests waiting in a worker that died left the queue of upstream "up"/,
     'logged';
is status()->{queue}{shed}{lost}, 4, 'counted as lost';

@r = map { $_->read(20) } @b;
is_deeply [ map { $_->{status} } @r ], [ (200) x 4 ],
          'worker B\'s requests answered';
is_deeply [ map { $_->read(2)->{status} } @a ], [ (0) x 4 ],
          'worker A\'s connections closed with it';
$_->close for @a, @b;

ok wait_until(sub { waiting() == 0 && inflight() == 0 }, 5),
   'nothing waits, nothing in flight';

# 3. kill -9 of the only worker with requests waiting: the reaper of the
#    other gives its places back

($wa, $wb) = @{ $ng->workers };
@b = map { $ng->conn_on($wb) } 1 .. 2;
$_->send(GET => '/slow2?b') for @b;
ok wait_until(sub { inflight() == 2 }, 5), 'worker B: 2 in flight';
@a = map { $ng->conn_on($wa) } 1 .. 3;
$_->send(GET => '/slow2?a') for @a;
ok wait_until(sub { waiting() == 3 }, 5), 'worker A alone: 3 wait';
ok kill(KILL => $wa), "kill -9 worker A ($wa)";
$t0 = time;
ok wait_until(sub { waiting() == 0 }, 5), 'its places given back';
ok time - $t0 < 3, sprintf('within %.2f s', time - $t0);
is status()->{queue}{shed}{lost}, 7, 'counted as lost: 4 + 3';
$_->read(10) for @b;
$_->close for @a, @b;
ok wait_until(sub { waiting() == 0 && inflight() == 0 }, 5),
   'nothing waits, nothing in flight';

my @bad = grep { /\[(alert|crit|emerg)\]/ && !/exited on signal 9/ } $ng->log;
is_deeply \@bad, [], "no alert but the kill's";

$ng->stop;
$be->stop;

done_testing;
