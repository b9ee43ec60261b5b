# Routing v2 (index=): a request placed cold is held to the bounds
# without the slack a match has.  Eight distinct bodies of 6,000 bytes
# (nobody holds any of them: each is placed cold, each the same work,
# 6000 + 512 + 1500 units) whose cold home on the ring is the same
# server, sent one after the other as slow requests that stay in flight
# (about 3 s each):
#
# 1. balance=off: all eight go to their home (threshold=1024, no bound).
# 2. balance=1.25 (the default) with length=65536 (a match's slack of
#    65536 units would leave the home room for all eight bodies): a cold
#    request passes over a server whose work is above 1.25 x the
#    mean work (this request included), h > 1.25 x (n + 1) / 4 for h of
#    the n bodies in flight on it, and over one with 1.25 x (n + 1) / 4
#    + 1 requests or more: the home takes the 1st, 4th and 7th; the
#    others walk on along the ring from their own points, and no server
#    has more than three.
#
# The homes are found on a third upstream with the same servers (the same
# ring), idle, where each body is placed cold at its home.  Both tested
# upstreams walk the ring alone (cold=ring): with the default, cold=two,
# of the first two servers within the bounds the one with less work takes
# a request (t/077).

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'index-cold');
my $listen = $ng->port;
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                           sort keys %port;

$ng->start(<<"_EOC_");
    upstream probe {
        prefix_aware length=65536 index=1m threshold=1024;
$servers    }

    upstream cold {
        prefix_aware length=65536 index=1m threshold=1024 cold=ring;
$servers    }

    upstream off {
        prefix_aware length=65536 index=1m threshold=1024 balance=off
                     cold=ring;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location /p/ { proxy_pass http://probe/; }
        location /c/ { proxy_pass http://cold/; }
        location /o/ { proxy_pass http://off/; }
        location = /status { prefix_aware_status; }
    }
_EOC_

srand(62);


# the cold home of 64 bodies of 6,000 bytes
my %by_home;
for (1 .. 64) {
    my $body = rnd(6000);
    my $r = $ng->request(POST => '/p/', body => $body);
    my ($b) = $r->{body} =~ /^(b\d)$/m or next;
    push @{ $by_home{$b} }, $body;
}

my ($home) = sort { @{ $by_home{$b} } <=> @{ $by_home{$a} } || $a cmp $b }
             keys %by_home;
my @bodies = @{ $by_home{$home} }[0 .. 7];
is scalar(grep { defined } @bodies), 8, "eight bodies whose home is $home";

sub held {
    my ($up, $n) = @_;
    return wait_until {
        my $in = $ng->inflight($up) || {};
        my $sum = 0;
        $sum += $_ for values %$in;
        $sum == $n && { map { ($name{$_} => $in->{$_}) } keys %$in };
    } 5;
}

sub send_held {
    my ($up, $prefix) = @_;
    my (@c, $in);
    for my $i (0 .. 7) {
        my $c = $ng->conn;
        $c->send(POST => "/$prefix/slow3", body => $bodies[$i]);
        push @c, $c;
        $in = held($up, $i + 1) or last;
    }
    my @got = map { $_->read(15) } @c;
    $_->close for @c;
    return ($in, @got);
}

# 1. no bound: all eight at home
my ($in, @got) = send_held('off', 'o');
is_deeply $in, { map { ($_ => $_ eq $home ? 8 : 0) } keys %port },
          "balance=off: eight in flight on $home";
is scalar(grep { $_->{status} == 200 && $_->{body} eq "$home\n" } @got), 8,
   '... and all eight served there';

# 2. the ceiling: four at home, four on the next server
($in, @got) = send_held('cold', 'c');
my @used = sort grep { $in->{$_} } keys %{ $in || {} };
my $spread = join ' ', map { "$_=$in->{$_}" } @used;
is $in->{$home}, 3, "balance=1.25: three in flight on the home, $home ($spread)";
my $others = 0;
$others += $in->{$_} for grep { $_ ne $home } @used;
is $others, 5, '... the other five on other servers';
ok !grep({ $in->{$_} > 3 } @used), '... none with more than three';
my @order = map { ($_->{body} =~ /^(b\d)$/)[0] // 'none' } @got;
my @at_home = grep { $order[$_] eq $home } 0 .. 7;
is "@at_home", '0 3 6', 'the home took the 1st, 4th and 7th'
    or diag "@order";

ok held('cold', 0) && held('off', 0), 'nothing left in flight';

my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
is $st->{upstreams}{cold}{index}{placed}{cold}, 8,
   'the status counts eight placed cold';
is $st->{upstreams}{cold}{index}{balance}, 1.25, 'balance 1.25 by default';

unlike scalar $ng->log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing();
