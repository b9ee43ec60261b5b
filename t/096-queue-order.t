# queue=: who goes next.  One server of threshold=1, so that one request
# at a time is released; two workers, the requests of each test sent
# alternately through both, so that the order is the whole host's.  The
# backend logs when each request started; the first request of each test
# takes the server on "/slow3" (about three seconds, room to queue the
# others while it runs, on a slow machine too), the others on "/slow"
# (about a second).
#
# 1. priority: with priority=$http_x_priority, a later request of
#    priority 5 goes before earlier ones of priority 0; one of priority
#    -1 (sheddable) is answered 429 at once while the server is busy.
# 2. fairness by work between tenants (the id header): tenant N queues
#    three prompts of 8,000 bytes, then tenant Q three of 2,000: Q's go
#    after N's first and before N's second (by request count they would
#    alternate).
# 3. flow=$variable: the same with the tenant in another header.
# 4. the counts by priority on the status page and in Prometheus.
# 5. the queue on the HTML page, in a headless browser.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd ID_HEADER);

srand 96;

my $bport = free_port();

my $be = PrefixAware::Scenario->new(name => 'backend');
$be->start_logged_backends(b1 => $bport);

my $ng = PrefixAware::Scenario->new(name => 'order', workers => 2);
my $listen = $ng->port;

sub conf {
    my ($params) = @_;
    return <<"_EOC_";
    upstream up {
        prefix_aware threshold=1 queue=16 $params;
        server 127.0.0.1:$bport;
    }

    server {
        listen 127.0.0.1:$listen reuseport;
        location = /pid { return 200 "\$pid\\n"; }
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_
}

$ng->start(conf('priority=$http_x_priority'));

my ($wa, $wb) = @{ $ng->workers };

# sends each [name, headers, body] on a connection of worker A, B, A, ...;
# the first one alone first, to take the server; returns the connections
sub queue_up {
    my ($tag, @req) = @_;
    my @c;
    my $i = 0;
    my $t0 = time;
    for my $q (@req) {
        my ($name, $h, $body) = @$q;
        my $c = $ng->conn_on($i++ % 2 ? $wb : $wa) or die "no connection\n";
        my $loc = $i == 1 ? '/slow3' : '/slow';
        $c->send(POST => "$loc?t=$tag-$name", headers => $h,
                 body => $body // rnd(100));
        push @c, $c;
        if ($i == 1) {
            wait_until { ($ng->inflight('up') || {})->{"127.0.0.1:$bport"} }
                5;
        } else {
            my $n = $i - 1;
            wait_until { $ng->waiting >= $n } 5;
        }
    }
    my $took = time - $t0;
    diag sprintf "%s: %d queued in %.2f s, while the first ran (3 s)?",
                 $tag, $i - 1, $took
        if $took > 2.5;
    return @c;
}

# 1. priority

my @c = queue_up('p', [ 'first', [] ], [ 'b0', [ 'X-Priority' => 0 ] ],
                 [ 'c0', [ 'X-Priority' => 0 ] ],
                 [ 'd5', [ 'X-Priority' => 5 ] ]);
is $ng->waiting, 3, '3 wait';

my $t0 = time;
my $r = $ng->request(POST => '/slow?t=p-shed', headers => [ 'X-Priority' => -1 ],
                     body => rnd(100));
is $r->{status}, 429, 'priority -1 while the server is busy: 429';
ok time - $t0 < 0.5, 'at once';
like $r->{body}, qr/sheddable/, 'the reason';
ok $r->{headers}{'retry-after'}, 'with Retry-After';

my @r = map { $_->read(20) } @c;
is_deeply [ map { $_->{status} } @r ], [ 200, 200, 200, 200 ], 'all answered';
$_->close for @c;
is_deeply $be->started('p'), [ qw(first d5 b0 c0) ],
          'priority 5 went before the earlier ones of 0';

my $st = $ng->status->{queue} || {};
my %band = map { ($_->{priority} => $_) } @{ $st->{bands} };
is $band{5}{released}, 1, 'band 5: 1 released';
is $band{0}{released}, 2, 'band 0: 2 released';
is $band{-1}{shed}{sheddable}, 1, 'band -1: 1 shed as sheddable';
is $st->{waiting}, 0, 'nothing waits';

# 2. fairness by work, tenants by the id header

my $big = rnd(8000);
my $small = rnd(2000);
@c = queue_up('f', [ 'first', [] ],
              (map { [ "n$_", [ ID_HEADER, 'tenant-n' ], $big ] } 1 .. 3),
              (map { [ "q$_", [ ID_HEADER, 'tenant-q' ], $small ] } 1 .. 3));
$st = $ng->status->{queue} || {};
my @fl = @{ $st->{flows} || [] };
my $sum = 0;
$sum += $_->{waiting} for @fl;
ok @fl == 2 && $sum == $st->{waiting}
   && !grep({ $_->{flow} !~ /^[0-9a-f]{16}$/ } @fl),
   "the flows waiting most: the two tenants, $sum waiting"
    or diag explain $st;
@r = map { $_->read(30) } @c;
is_deeply [ map { $_->{status} } @r ], [ (200) x 7 ], 'all answered';
$_->close for @c;
is_deeply $be->started('f'), [ qw(first n1 q1 q2 q3 n2 n3) ],
          'the small prompts of Q went before the rest of N\'s large ones';

# 3. flow=$variable

$ng->reload(conf('flow=$http_x_tenant'));
($wa, $wb) = @{ $ng->workers };
@c = queue_up('v', [ 'first', [] ],
              (map { [ "n$_", [ 'X-Tenant' => 'n' ], $big ] } 1 .. 2),
              (map { [ "q$_", [ 'X-Tenant' => 'q' ], $small ] } 1 .. 2));
@r = map { $_->read(30) } @c;
is_deeply [ map { $_->{status} } @r ], [ (200) x 5 ], 'all answered';
$_->close for @c;
is_deeply $be->started('v'), [ qw(first n1 q1 q2 n2) ], 'flow=$http_x_tenant';

# 4. Prometheus

$r = $ng->request(GET => '/status?format=prometheus');
like $r->{body}, qr/^nginx_prefix_aware_queue_left_total\{upstream="up",priority="5",reason="released"\} 1$/m,
     'released by priority';
like $r->{body}, qr/^nginx_prefix_aware_queue_left_total\{upstream="up",priority="-1",reason="sheddable"\} 1$/m,
     'sheddable by priority';
like $r->{body}, qr/^nginx_prefix_aware_queue_waiting\{upstream="up",priority="0"\} 0$/m,
     'waiting by priority';
like $r->{body}, qr/^nginx_prefix_aware_queue_passed_total\{upstream="up",priority="5"\} 0$/m,
     'passed by priority';
like $r->{body}, qr/^nginx_prefix_aware_queue_wait_seconds_count\{upstream="up"\} \d+$/m,
     'the wait histogram';

# 5. the HTML page (Debian's chromium, as t/069-status-html.t)

SKIP: {
    skip 'chromium is not installed', 3
        unless system('command -v chromium >/dev/null 2>&1') == 0;
    my $url = "http://127.0.0.1:$listen/status?format=html";
    my $dom = `chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=@{[ $ng->root ]}/chromium --virtual-time-budget=5000 --dump-dom '$url' 2>/dev/null`;
    (my $text = $dom) =~ s/<[^>]*>/ /g;
    $text =~ s/\s+/ /g;
    like $text, qr/queue: 0 waiting of 16, released \d+, passed 0, shed: full 0, timeout 0, sheddable 1, gone 0, lost 0/,
         'the page shows the queue';
    like $text, qr/ 5 0 1 0 0 0 0 0 0 \d+ /,
         'a row of priority 5: 1 released, none passed';
    like $text, qr/wait \(ms\) requests/, 'the wait histogram';
}

my @bad = grep { /\[(alert|crit|emerg)\]|exited on signal/ } $ng->log;
is_deeply \@bad, [], 'no alert, crash';

$ng->stop;
$be->stop;

done_testing;
