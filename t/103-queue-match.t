# queue_reserve=N: a light request (its flow had nothing waiting) whose
# prefix holder takes it over the cap (cap=cost: a match that saves more
# prefill than it still computes) goes there at once, as without a queue,
# though every server is at "threshold"; the queue holds what would spill
# or go cold.  One server of threshold=2, flow=$http_x_tenant; the
# backend's "/slow" answers after about a second.
#
# 1. queue_reserve=1: tenant Q's document is on the server (one request
#    answered); tenant N fills the server (2 in flight) and a third of its
#    requests waits; Q's next request with the same document goes at once
#    (waited 0 ms) and is answered before N's first two, its work charged
#    to its flow; Q's next match, its flow now ahead of N's in the fair
#    order, waits (a flow cannot keep passing the queue), as does Q's
#    request with a new document (no match).
# 2. without the reserve, the same: Q's match waits like the others (the
#    queue's order holds for every request).

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

srand 103;

my $bport = free_port();

my $be = PrefixAware::Scenario->new(name => 'backend');
$be->start($be->backends(b1 => $bport));

my $ng = PrefixAware::Scenario->new(name => 'match');
sub conf {
    $ng->one_server_conf($bport,
                         "threshold=2 queue=16 flow=\$http_x_tenant $_[0]");
}

sub inflight { ($ng->inflight('up') || {})->{"127.0.0.1:$bport"} // -1 }

sub send_one {
    my ($path, $name, $tenant, $body) = @_;
    my $c = $ng->conn or die "no connection\n";
    $c->send(POST => "$path?t=$name", headers => [ 'X-Tenant' => $tenant ],
             body => $body);
    return $c;
}

# Q's document held, the server full with N's two, N's third waiting
sub full {
    my ($tag, $doc) = @_;
    my $r = $ng->request(POST => "/?t=$tag-q0", headers => [ 'X-Tenant' => 'q' ],
                         body => $doc);
    die "q0: $r->{status}\n" unless $r->{status} == 200;
    my @c;
    for my $i (1 .. 2) {
        push @c, send_one('/slow', "$tag-n$i", 'n', rnd(2000));
        wait_until { inflight() >= $i } 5;
    }
    push @c, send_one('/slow', "$tag-n3", 'n', rnd(2000));
    wait_until { $ng->waiting >= 1 } 5;
    return @c;
}

# 1. queue_reserve=1

$ng->start(conf('queue_reserve=1'));

my $doc = rnd(2000);
my @c = full('r', $doc);
is inflight(), 2, 'the server is at threshold';
is $ng->waiting, 1, 'N\'s third waits';

my $t0 = time;
my $r = $ng->request(POST => '/?t=r-q1', headers => [ 'X-Tenant' => 'q' ],
                     body => $doc);
my $took = time - $t0;
is $r->{status}, 200, 'Q\'s match answered';
ok $took < 0.6, 'Q\'s match went at once, over the cap to its holder'
    or diag "took $took s";

my $again = send_one('/', 'r-q1b', 'q', $doc);
ok wait_until(sub { $ng->waiting == 2 }, 5),
   'Q\'s next match, its flow now ahead of the others, waits';

my $cold = send_one('/', 'r-q2', 'q', rnd(2000));
ok wait_until(sub { $ng->waiting == 3 }, 5),
   'Q\'s request with a new document waits';

my @r = map { $_->read(20) } @c, $again, $cold;
is_deeply [ map { $_->{status} } @r ], [ (200) x 5 ], 'all answered';
$_->close for @c, $again, $cold;

is $ng->waited('r-q1'), 0, 'the match did not wait';
is $ng->status->{queue}{passed}, 1, 'the status page counts it passed';
ok $ng->waited('r-q1b') > 0, 'the next match waited';
ok $ng->waited('r-q2') > 0, 'the new document waited';
ok wait_until(sub { $ng->waiting == 0 && inflight() == 0 }, 5),
   'counts back to zero';

# 2. without the reserve

$ng->reload(conf(''));
wait_until { ($ng->status->{queue} || {})->{reserve} == 0 } 5;

$doc = rnd(2000);
@c = full('o', $doc);
is $ng->waiting, 1, 'N\'s third waits';

my $q1 = send_one('/', 'o-q1', 'q', $doc);
ok wait_until(sub { $ng->waiting == 2 }, 5),
   'without the reserve, Q\'s match waits too';

@r = map { $_->read(20) } @c, $q1;
is_deeply [ map { $_->{status} } @r ], [ (200) x 4 ], 'all answered';
$_->close for @c, $q1;
ok $ng->waited('o-q1') > 0, 'the match waited';

$ng->stop;
$be->stop;

done_testing;
