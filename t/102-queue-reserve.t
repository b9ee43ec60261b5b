# queue_reserve=N: the last N places of each server are kept for requests
# of flows that had nothing waiting when they came, so that a light
# tenant's request goes at once while a heavy tenant's backlog waits.
# One server of threshold=3, flow=$http_x_tenant; the backend's "/slow"
# answers after about a second and logs when each request started.
#
# 1. queue_reserve=1: tenant N sends three requests (they go: 3 in
#    flight), then three more, which wait (the 2nd and 3rd came while N's
#    others waited: "heavy"); as N's first three end, the heavy ones are
#    released only while the server has fewer than 3 - 1 in flight, so
#    one place stays free; tenant Q's request then goes at once (waited
#    0 ms) and starts before N's last.
# 2. without it, the same: N's last takes the place and Q's request
#    waits for one (it starts after N's last).  What 1 shows is the
#    reserve's doing.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

srand 100;

my $bport = free_port();

my $be = PrefixAware::Scenario->new(name => 'backend');
$be->start_logged_backends(b1 => $bport);

my $ng = PrefixAware::Scenario->new(name => 'reserve');
sub conf {
    $ng->one_server_conf($bport,
                         "threshold=3 queue=16 flow=\$http_x_tenant $_[0]");
}

sub inflight { ($ng->inflight('up') || {})->{"127.0.0.1:$bport"} // -1 }

# whether "a" started before "b" (the backend's log, once it has all 7); a
# request "/slow" with X-Tenant; six of tenant N: three go, three wait
sub before { $be->started_before($_[0], 7, $_[1], $_[2]) }
sub send_one { $ng->send_slow($_[0], $_[1], 'X-Tenant' => $_[2]) }
sub backlog {
    $ng->slow_backlog($_[0], "127.0.0.1:$bport", 'X-Tenant' => 'n');
}

# 1. queue_reserve=1

$ng->start(conf('queue_reserve=1'));
is $ng->status->{queue}{reserve}, 1, 'the status page shows queue_reserve';

my @c = backlog('r');
is $ng->waiting, 3, 'N: 3 in flight, 3 wait';

ok wait_until(sub { $ng->waiting == 1 }, 5),
   'as N\'s first ones end, two of its waiting ones are released';
sleep 0.2;
is $ng->waiting, 1, 'the third stays: it would take the reserved place';
is inflight(), 2, 'one place of three free on the server';

my $t0 = time;
push @c, send_one('r', 'q1', 'q');
my @r = map { $_->read(20) } @c;
is_deeply [ map { $_->{status} } @r ], [ (200) x 7 ], 'all answered';
$_->close for @c;

is $ng->waited('r-q1'), 0, 'Q\'s request did not wait';
ok before('r', 'q1', 'n6'), 'Q\'s request started before N\'s last'
    or diag explain $be->started('r');

# 2. without the reserve

$ng->reload(conf(''));
wait_until { ($ng->status->{queue} || {})->{reserve} == 0 } 5;

@c = backlog('o');
ok wait_until(sub { $ng->waiting == 0 }, 5),
   'without the reserve, N\'s three waiting ones are released together';
push @c, send_one('o', 'q1', 'q');
@r = map { $_->read(20) } @c;
is_deeply [ map { $_->{status} } @r ], [ (200) x 7 ], 'all answered';
$_->close for @c;

cmp_ok $ng->waited('o-q1'), '>', 200, 'Q\'s request waited for a place'
    or diag(join '', do { open my $fh, '<', $ng->root . '/logs/wait.log'; <$fh> });
ok before('o', 'n6', 'q1'), 'Q\'s request started after N\'s last'
    or diag explain $be->started('o');

my @bad = grep { /\[(alert|crit|emerg)\]/ } $ng->log;
is scalar(@bad), 0, 'no alert, crit or emerg in the error log';

$ng->stop;
$be->stop;

done_testing;
