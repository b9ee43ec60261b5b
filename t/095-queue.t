# queue=: when every server is at threshold, a request waits in nginx
# (no upstream connection) until one falls under, then is routed; past
# the queue's bound or its time out it is answered 429 (or 503) with
# Retry-After.  Two servers of threshold=1 (two places); the backends'
# "/slow" answers after about a second, "/slow2" after about two.
#
# 1. wait then release: 4 at once, 2 go, 2 wait and are answered 200
#    after the first two, $prefix_aware_wait in the access log.
# 2. full: queue=2, the 5th request is answered 429 at once, with
#    Retry-After and a one-line reason, logged and counted.
# 3. time out: the waiting request is answered 429 after queue_timeout.
# 4. client abort: a waiting client that closes frees its place at once.
# 5. queue_status=503.
# 6. across workers: a request waiting in worker B is released when a
#    request of worker A frees a server.
# 7. under capacity nothing waits: no count moves.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                       sort keys %port;

my $ng = PrefixAware::Scenario->new(name => 'queue', workers => 2);
my $listen = $ng->port;

sub conf {
    my ($params) = @_;
    return <<"_EOC_";
    log_format wait '\$status \$prefix_aware_wait \$request_uri \$upstream_addr flow=\$prefix_aware_flow';

    upstream up {
        prefix_aware index=off threshold=1 $params;
$servers    }

    server {
        listen 127.0.0.1:$listen reuseport;
        access_log logs/wait.log wait;
        location = /pid { return 200 "\$pid\\n"; }
        location = /status { access_log off; prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_
}

$ng->start(conf('queue=2 queue_timeout=10s'));

sub status {
    my $r = $ng->request(GET => '/status?format=json');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return {};
    return $st->{upstreams}{up}{queue} || {};
}

sub waiting { status()->{waiting} // -1 }

# n requests sent at once on their own connections
sub send_n {
    my ($n, $path, @h) = @_;
    my @c = map { $ng->conn } 1 .. $n;
    for my $i (0 .. $#c) {
        $c[$i]->send(GET => "$path?n=$i", headers => [@h]);
        sleep 0.1;
    }
    return @c;
}

my $st = status();
is $st->{size}, 2, 'the status page shows the queue';
is $st->{waiting}, 0, 'nothing waits';

# 1. wait then release

my $t0 = time;
my @c = send_n(4, '/slow');
ok wait_until(sub { waiting() == 2 }, 5), '2 requests wait';
my @r = map { $_->read(15) } @c;
$_->close for @c;
is_deeply [ map { $_->{status} } @r ], [ 200, 200, 200, 200 ],
          'the 4 requests were answered 200';
my $took = time - $t0;
ok $took >= 1.8, sprintf('the waiting ones after the first (%.1f s)', $took);
$st = status();
is $st->{waiting}, 0, 'nothing waits after';
is $st->{released}, 2, '2 released';
is $st->{wait_ms}{sum} > 500 ? 1 : 0, 1, "waited $st->{wait_ms}{sum} ms in all";

my @log;
wait_until {
    @log = do { open my $fh, '<', $ng->root . '/logs/wait.log'; <$fh> };
    (grep { / \/slow/ } @log) == 4;
} 5;
my @waits = map { /^200 (\d+) \/slow/ ? $1 : () } @log;
is scalar(grep { $_ >= 500 } @waits), 2, "\$prefix_aware_wait: @waits";
is scalar(grep { $_ == 0 } @waits), 2, '0 for those that did not wait';
my @addr = map { /^200 \d+ \/slow\S* (\S+) / ? $1 : () } @log;
is scalar(grep { /^127\.0\.0\.1:\d+$/ } @addr), 4,
   "\$upstream_addr: one server each, waited or not (@addr)";

# $prefix_aware_flow: the tenant id's hash; empty without one
my $nlog = @log;
my $r0 = $ng->request(GET => '/', headers => [ ID_HEADER, 'tenant-x' ]);
wait_until {
    @log = do { open my $fh, '<', $ng->root . '/logs/wait.log'; <$fh> };
    @log == $nlog + 1;
} 5;
$r0 = $ng->request(GET => '/');
wait_until {
    @log = do { open my $fh, '<', $ng->root . '/logs/wait.log'; <$fh> };
    @log == $nlog + 2;
} 5;
like $log[-2], qr/ flow=[0-9a-f]{16}$/, '$prefix_aware_flow with an id';
like $log[-1], qr/ flow=$/, 'empty without';

# 2. full

@c = send_n(4, '/slow2');
ok wait_until(sub { waiting() == 2 }, 5), 'the queue is full';
my $from = $ng->log_size;
my $t1 = time;
my $r = $ng->request(GET => '/slow2');
ok time - $t1 < 1, 'the 5th answered at once';
is $r->{status}, 429, 'with 429';
is $r->{headers}{'retry-after'}, '1', 'Retry-After: 1';
like $r->{body}, qr/^every server is busy and the queue is full\n\z/,
     'a one-line reason';
like $ng->log($from), qr/\[warn\].*prefix_aware: 429 answered after 0 ms in the queue of upstream "up" \(full\)/,
     'logged';
is status()->{shed}{full}, 1, 'counted as full';
@r = map { $_->read(15) } @c;
$_->close for @c;
is_deeply [ map { $_->{status} } @r ], [ 200, 200, 200, 200 ],
          'the others answered 200';
ok wait_until(sub { waiting() == 0 }, 5), 'nothing waits';

# 3. time out

$ng->reload(conf('queue=4 queue_timeout=700ms queue_retry=7'));
@c = send_n(2, '/slow2');
$t1 = time;
my $c3 = $ng->conn;
$c3->send(GET => '/slow2');
$r = $c3->read(10);
$took = time - $t1;
is $r->{status}, 429, 'waited its time out: 429';
ok $took >= 0.6 && $took < 1.5, sprintf('after %.2f s', $took);
is $r->{headers}{'retry-after'}, '7', 'Retry-After: 7 (queue_retry=7)';
like $r->{body}, qr/time out/, 'the reason';
$st = status();
is $st->{shed}{timeout}, 1, 'counted as timeout';
is $st->{waiting}, 0, 'nothing waits';
$c3->close;
@r = map { $_->read(15) } @c;
$_->close for @c;

# 4. client abort

@c = send_n(2, '/slow2');
$c3 = $ng->conn;
$c3->send(GET => '/slow2');
ok wait_until(sub { waiting() == 1 }, 5), 'one waits';
$c3->close;
ok wait_until(sub { waiting() == 0 }, 1), 'its client closed: its place freed';
is status()->{shed}{gone}, 1, 'counted as gone';
@r = map { $_->read(15) } @c;
$_->close for @c;
is_deeply [ map { $_->{status} } @r ], [ 200, 200 ], 'the others answered';

# 5. queue_status=503

$ng->reload(conf('queue=1 queue_status=503 queue_retry=0'));
@c = send_n(3, '/slow');
ok wait_until(sub { waiting() == 1 }, 5), 'the queue of 1 is full';
$r = $ng->request(GET => '/slow');
is $r->{status}, 503, 'queue_status=503';
ok !exists $r->{headers}{'retry-after'}, 'queue_retry=0: no Retry-After';
@r = map { $_->read(15) } @c;
$_->close for @c;
is_deeply [ map { $_->{status} } @r ], [ 200, 200, 200 ], 'the others answered';

# 6. across workers

$ng->reload(conf('queue=8'));
my ($wa, $wb) = @{ $ng->workers };
my @a = map { $ng->conn_on($wa) } 1 .. 2;
my $b = $ng->conn_on($wb);
ok @a == 2 && $b, 'connections on both workers';
$a[0]->send(GET => '/slow');
$a[1]->send(GET => '/slow2');
sleep 0.2;
$t1 = time;
$b->send(GET => '/slow');
ok wait_until(sub { waiting() == 1 }, 5), 'worker B\'s request waits';
$r = $b->read(10);
$took = time - $t1;
is $r->{status}, 200, 'released by the server worker A freed';
ok $took < 2.6, sprintf('within %.2f s: when the first of A\'s ended, '
                        . 'not the second', $took);
$_->read(10) for @a;
$_->close for @a, $b;

# 7. under capacity

$st = status();
my $released = $st->{released};
for (1 .. 5) {
    $r = $ng->request(GET => '/');
    die "not 200\n" unless $r->{status} == 200;
}
$st = status();
is $st->{released}, $released, 'under capacity: nothing went through the queue';
is $st->{waiting}, 0, 'nothing waits';

my @bad = grep { /\[(alert|crit|emerg)\]|exited on signal/ } $ng->log;
is_deeply \@bad, [], "no alert, crash";

$ng->stop;
$be->stop;

done_testing;
