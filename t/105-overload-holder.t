# overload=holder: when every server is over its bounds, a request whose
# prefix a server holds goes to that server while it has fewer than
# "threshold" more requests in flight than the least busy server, rather
# than to the least work (overload=least, the default before 5 December
# 2026), which counts the prefix computed again elsewhere against the
# holder's work in flight.
# Two servers, threshold=2 cap=hard balance=off; the backends' "/slow"
# answers after about a second.
#
# Each part: document D (20,000 bytes) is placed on a server H; two slow
# requests of D and a long text of their own (a match, on H: H at 2 in
# flight, much work); two slow short requests go to the other server O
# (H is at threshold): every server at 2.  Then D and a short question:
# 1. overload=least: to O, the least work after it;
# 2. overload=holder (the default, no parameter): to H (2 in flight,
#    fewer than O's 2 + 2); the status page shows "overload".

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

srand 105;

my %port = (b1 => free_port(), b2 => free_port());

my $be = PrefixAware::Scenario->new(name => 'backend');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'overload');

sub conf {
    my ($args) = @_;
    return <<"_EOC_";
    upstream up {
        prefix_aware threshold=2 cap=hard balance=off $args;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    server {
        listen 127.0.0.1:@{[ $ng->port ]};
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_
}

sub total { my $f = $ng->inflight('up') || {}; my $n = 0; $n += $_ for values %$f; $n }

sub send_one {
    my ($path, $body) = @_;
    my $c = $ng->conn or die "no connection\n";
    $c->send(POST => $path, body => $body);
    return $c;
}

# D on H, H and O at 2 in flight; returns (H's name, connections)
sub load {
    my $doc = shift;
    my $r = $ng->request(POST => '/', body => $doc . rnd(100));
    die "D: $r->{status}\n" unless $r->{status} == 200;
    (my $h = $r->{body}) =~ s/\s+//g;
    my @c;
    for my $i (1 .. 2) {
        push @c, send_one('/slow', $doc . rnd(10000));
        wait_until { total() >= $i } 5;
    }
    for my $i (3 .. 4) {
        push @c, send_one('/slow', rnd(200));
        wait_until { total() >= $i } 5;
    }
    return ($h, @c);
}

sub at {
    my $f = $ng->inflight('up') || {};
    return join ' ', map { $f->{"127.0.0.1:$port{$_}"} // -1 } qw(b1 b2);
}

for my $case ([ 'overload=least', 'least', 'other' ], [ '', 'holder', 'holder' ]) {
    my ($args, $name, $want) = @$case;

    if ($name eq 'least') {
        $ng->start(conf($args));
    } else {
        $ng->reload(conf($args));
        wait_until { ($ng->status->{index} || {})->{overload} eq $name } 5;
    }

    is $ng->status->{index}{overload}, $name, "the status page: overload $name";

    my $doc = rnd(20000);
    my ($h, @c) = load($doc);
    is at(), '2 2', "$name: every server at threshold (2)";
    my $q = $ng->request(POST => '/', body => $doc . rnd(100));
    (my $got = $q->{body}) =~ s/\s+//g;
    is $q->{status}, 200, "$name: D's question answered";

    if ($want eq 'holder') {
        is $got, $h, "$name: D's question went to its holder ($h)";
    } else {
        isnt $got, $h, "$name: D's question went to the other server";
    }

    my @r = map { $_->read(20) } @c;
    is_deeply [ map { $_->{status} } @r ], [ (200) x 4 ], "$name: all answered";
    $_->close for @c;
    wait_until { total() == 0 } 5;
}

$ng->stop;
$be->stop;

done_testing;
