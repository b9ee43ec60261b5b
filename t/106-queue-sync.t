# queue= on several nginx hosts with prefix_aware_sync (issue 45, item 6):
# each host queues its own requests, and the bounds it waits on include
# the other hosts' requests in flight (load=on).  Two nginx hosts, A and B,
# in front of one backend, threshold=1, each with its own queue.
#
# 1. A request through A holds the backend (3 s): on B's status page it
#    is the other hosts' one in flight there.
# 2. A request through B waits in B's queue (A's request fills the bound),
#    and A's queue stays empty: each host queues its own.
# 3. When A's request ends, B's is released (within a few of the sync's
#    intervals) and answered; B counts it released, A nothing.
# 4. Without sync (load=off), B does not wait for A's request.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

my %port = map { $_ => free_port() } qw(b1 sa sb);

my $be = PrefixAware::Scenario->new(name => 'qsback');
$be->start($be->backends(b1 => $port{b1}));

my $key = 'a secret the two hosts share';
my $peers = "peer=127.0.0.1:$port{sa} peer=127.0.0.1:$port{sb}";

sub host {
    my ($name, $load) = @_;
    my $ng = PrefixAware::Scenario->new(name => "qs$name");
    my $listen = $ng->port;

    $ng->start(<<"_EOC_");
    upstream up {
        prefix_aware threshold=1 queue=8 queue_timeout=20s;
        prefix_aware_sync 127.0.0.1:$port{"s$name"} "key=$key" $peers
                          interval=20ms load=$load;
        server 127.0.0.1:$port{b1};
    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location /slow3 { proxy_pass http://up; }
        location / { proxy_pass http://up; }
    }
_EOC_
    return $ng;
}

sub other_inflight {
    my ($ng) = @_;
    my $s = $ng->status->{servers} or return -1;
    return ($s->[0]{other_hosts} || {})->{inflight} // -1;
}

my %host = (a => host('a', 'on'), b => host('b', 'on'));

# 1.
my $ca = $host{a}->conn;
$ca->send(POST => '/slow3', body => rnd(500));
ok wait_until(sub { other_inflight($host{b}) == 1 }, 5),
   'A\'s request in flight is on B\'s status page';

# 2.
my $cb = $host{b}->conn;
my $t0 = time;
$cb->send(POST => '/x', body => rnd(500));
ok wait_until(sub { $host{b}->waiting == 1 }, 5),
   'a request through B waits in B\'s queue';
is $host{a}->waiting, 0, 'A\'s queue is empty';

# 3.
my $ra = $ca->read(10);
is $ra->{status}, 200, 'A\'s request answered';
my $rb = $cb->read(10);
my $took = time - $t0;
is $rb->{status}, 200, 'B\'s request released and answered';
ok $took > 1.5, sprintf('after A\'s ended (%.2f s)', $took);
$ca->close;
$cb->close;
is $host{b}->status->{queue}{released}, 1, 'B counts it released';
is $host{a}->status->{queue}{released} // 0, 0, 'A released nothing';
ok wait_until(sub { $host{b}->waiting == 0 && other_inflight($host{b}) == 0 },
              5), 'nothing waits, nothing of A\'s in flight on B';

$host{$_}->stop for qw(a b);

# 4.
%host = (a => host('a', 'off'), b => host('b', 'off'));
$ca = $host{a}->conn;
$ca->send(POST => '/slow3', body => rnd(500));
ok wait_until(sub {
       my $s = $host{a}->status->{servers} or return 0;
       ($s->[0]{inflight} // 0) == 1;
   }, 5), 'A\'s request in flight';
sleep 0.2;
$t0 = time;
my $r = $host{b}->request(POST => '/x', body => rnd(500));
is $r->{status}, 200, 'with load=off, B\'s request goes';
ok time - $t0 < 1, 'at once';
is $ca->read(10)->{status}, 200, 'A\'s answered';
$ca->close;

$host{$_}->stop for qw(a b);
$be->stop;

done_testing;
