# priority_reserve=N: while requests wait, the last N places of each
# server are kept for requests of a priority above 0, so that a high
# request goes at once rather than waiting for the next place to free.
# One server of threshold=3, priority=$http_x_priority; the backend's
# "/slow" answers after about a second and logs when each request
# started.
#
# 1. priority_reserve=1: six requests of priority 0: with nothing
#    waiting the first three take every place (3 in flight: no reserve
#    under capacity), the next three wait; as the first three end, two
#    of the waiting ones are released (the server under 3 - 1), the third
#    stays, one place free; a request of priority 1 then goes at once
#    (waited 0 ms) and starts before the last of priority 0; one of
#    priority -1 (below 0: kept from it too) is refused while they wait.
# 2. without it, the same: the last of priority 0 takes the place and
#    the high request waits for one.  What 1 shows is the reserve's doing.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

srand 104;

my $bport = free_port();

my $be = PrefixAware::Scenario->new(name => 'backend');
$be->start_logged_backends(b1 => $bport);

my $ng = PrefixAware::Scenario->new(name => 'prio');
sub conf {
    $ng->one_server_conf($bport, "threshold=3 queue=16 "
                         . "priority=\$http_x_priority $_[0]");
}

sub inflight { ($ng->inflight('up') || {})->{"127.0.0.1:$bport"} // -1 }

# whether "a" started before "b" (the backend's log, once it has all 7); a
# request "/slow" with X-Priority; six of priority 0: three go, three wait
sub before { $be->started_before($_[0], 7, $_[1], $_[2]) }
sub send_one { $ng->send_slow($_[0], $_[1], 'X-Priority' => $_[2]) }
sub backlog {
    $ng->slow_backlog($_[0], "127.0.0.1:$bport", 'X-Priority' => 0);
}

# 1. priority_reserve=1

$ng->start(conf('priority_reserve=1'));
is $ng->status->{queue}{priority_reserve}, 1,
   'the status page shows priority_reserve';

my @c = backlog('r');
is $ng->waiting, 3, 'priority 0: 3 in flight (nothing waited), 3 wait';

ok wait_until(sub { $ng->waiting == 1 }, 5),
   'as the first ones end, two of the waiting ones are released';
sleep 0.2;
is $ng->waiting, 1, 'the third stays: it would take the reserved place';
is inflight(), 2, 'one place of three free on the server';

my $low = $ng->request(POST => '/?t=r-low',
                       headers => [ 'X-Priority' => -1 ], body => rnd(100));
is $low->{status}, 429, 'priority -1 is refused: the free place is kept';

push @c, send_one('r', 'h1', 1);
my @r = map { $_->read(20) } @c;
is_deeply [ map { $_->{status} } @r ], [ (200) x 7 ], 'all answered';
$_->close for @c;

is $ng->waited('r-h1'), 0, 'the high request did not wait';
ok before('r', 'h1', 'n6'), 'the high request started before the last low'
    or diag explain $be->started('r');

# 2. without the reserve

$ng->reload(conf(''));
wait_until {
    (($ng->status->{queue} || {})->{priority_reserve} // -1) == 0
} 5;

@c = backlog('o');
ok wait_until(sub { $ng->waiting == 0 }, 5),
   'without the reserve, the three waiting ones are released together';
push @c, send_one('o', 'h1', 1);
@r = map { $_->read(20) } @c;
is_deeply [ map { $_->{status} } @r ], [ (200) x 7 ], 'all answered';
$_->close for @c;

cmp_ok $ng->waited('o-h1'), '>', 200, 'the high request waited for a place'
    or diag(join '', do { open my $fh, '<', $ng->root . '/logs/wait.log'; <$fh> });
ok before('o', 'n6', 'h1'), 'the high request started after the last low'
    or diag explain $be->started('o');

ok wait_until(sub { $ng->waiting == 0 && inflight() == 0 }, 5),
   'counts back to zero';

my @bad = grep { /\[(alert|crit|emerg)\]/ } $ng->log;
is scalar(@bad), 0, 'no alert, crit or emerg in the error log';

$ng->stop;
$be->stop;

done_testing;
