# weight=: a server gets ring points in proportion to its weight, so with
# weights 2, 1, 1 it gets about half of the keys.  Over 1000 keys the share
# of the weight-2 server must be within 0.50 +- 0.12 and each weight-1
# server's within 0.25 +- 0.09 (the ring's own unevenness with 160 points
# per weight unit, over 2000 random sets of ports, stayed within 0.41..0.59
# and 0.19..0.33).  And exactly: raising a server's weight only adds its
# points, so keys move only to that server, never away from it or between
# the others.
#
# The same 1000 bodies go through two upstreams of one nginx, with the
# weights 1, 1, 1 and 2, 1, 1.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port);

my %port = map { $_ => free_port() } qw(b1 b2 b3);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'weights');
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream even {
        prefix_aware index=off length=1024;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
        server 127.0.0.1:$port{b3};
    }

    upstream weighted {
        prefix_aware index=off length=1024;
        server 127.0.0.1:$port{b1} weight=2;
        server 127.0.0.1:$port{b2};
        server 127.0.0.1:$port{b3};
    }

    upstream heavy {
        prefix_aware index=off length=1024;
        server 127.0.0.1:$port{b1} weight=100;
        server 127.0.0.1:$port{b2};
        server 127.0.0.1:$port{b3};
    }

    server {
        listen 127.0.0.1:$listen;
        location /even { proxy_pass http://even; }
        location /weighted { proxy_pass http://weighted; }
        location /heavy { proxy_pass http://heavy; }
    }
_EOC_

my $n = 1000;
my @bodies = map { sprintf "prompt %04d: summarize the following document", $_ } 1 .. $n;

sub route {
    my $path = shift;
    my $c = $ng->conn;
    my @to;
    for my $body (@bodies) {
        my $r = $c->request(POST => $path, body => $body);
        my ($b) = $r->{body} =~ /^(b\d)$/m;
        push @to, $b // "status $r->{status}";
    }
    $c->close;
    return \@to;
}

my $even = route('/even');
my $weighted = route('/weighted');

my (%ce, %cw);
$ce{$_}++ for @$even;
$cw{$_}++ for @$weighted;

is $ce{b1} + $ce{b2} + $ce{b3}, $n, 'weights 1 1 1: every key served';
is $cw{b1} + $cw{b2} + $cw{b3}, $n, 'weights 2 1 1: every key served';

note sprintf "weights 1 1 1: b1 %d, b2 %d, b3 %d; weights 2 1 1: b1 %d, b2 %d, b3 %d",
             @ce{qw(b1 b2 b3)}, @cw{qw(b1 b2 b3)};

my $w2 = $cw{b1} / $n;
ok $w2 >= 0.38 && $w2 <= 0.62, sprintf 'the weight-2 server has %.3f of the keys (0.50 +- 0.12)', $w2;

for my $b (qw(b2 b3)) {
    my $w1 = $cw{$b} / $n;
    ok $w1 >= 0.16 && $w1 <= 0.34, sprintf "weight-1 server $b has %.3f of the keys (0.25 +- 0.09)", $w1;
}

for my $b (qw(b1 b2 b3)) {
    my $e = $ce{$b} / $n;
    ok $e >= 0.22 && $e <= 0.45, sprintf "with equal weights $b has %.3f of the keys", $e;
}

my @bad = grep { $even->[$_] ne $weighted->[$_] && $weighted->[$_] ne 'b1' } 0 .. $n - 1;
ok !@bad, 'raising the weight of b1 moved keys only to b1'
    or diag "moved elsewhere: @bad[0 .. ($#bad < 9 ? $#bad : 9)]";

my $moved = grep { $even->[$_] ne $weighted->[$_] } 0 .. $n - 1;
ok $moved > 0.08 * $n && $moved < 0.30 * $n,
   "$moved keys moved to b1 (about a sixth: b1 goes from a third to a half of the ring)";

# requests with no key go to the least loaded server; idle servers tie, and
# ties are shared by weight as least_conn shares them (smooth weighted
# round robin, per worker: this nginx has one)
my $c = $ng->conn;
my %nk;
for (1 .. 30) {
    my $r = $c->request(GET => '/heavy');
    my ($b) = $r->{body} =~ /^(b\d)$/m;
    $nk{$b // "status $r->{status}"}++;
}
$c->close;

note sprintf "no key, weights 100 1 1, 30 requests: b1 %d, b2 %d, b3 %d",
             map { $nk{$_} // 0 } qw(b1 b2 b3);
ok(($nk{b1} // 0) >= 28, 'idle ties go by weight: the weight-100 server takes at least 28 of 30')
    or diag explain \%nk;

$ng->stop;
$be->stop;

done_testing();
