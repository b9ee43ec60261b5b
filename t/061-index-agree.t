# Routing v2 (index=) on two nginx instances with the same configuration
# (server lines in another order) and the same request stream, one request
# at a time: independent balancers route at least 99 % of the requests
# alike, as the issue asks of two nginx in front of one cluster.  Cold
# prefixes go to their key's home on the ring, matches follow what each
# instance recorded of the same stream, ties go by a hash of the key and
# the server's name: nothing depends on the instance.
#
# The stream: 16 conversations that share a 1,000-byte system prompt (under
# match=60 of their prefix, so it does not pull them together) and grow by
# 300 bytes a turn, 6 turns each; and 8 documents of 2,500 bytes asked 6
# questions each; interleaved in a fixed random order.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port rnd);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

sub http {
    my ($listen, @order) = @_;
    my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                               @order;
    return <<"_EOC_";
    upstream up {
        prefix_aware length=4096 index=1m;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location / { proxy_pass http://up; }
    }
_EOC_
}

my $na = PrefixAware::Scenario->new(name => 'agree-a', workers => 2);
my $nb = PrefixAware::Scenario->new(name => 'agree-b', workers => 2);
$na->start(http($na->port, qw(b1 b2 b3 b4)));
$nb->start(http($nb->port, qw(b4 b2 b1 b3)));

srand(61);


my $system = rnd(1000);
my @stream;

for my $c (1 .. 16) {
    my $text = $system . rnd(1500);
    for my $turn (1 .. 6) {
        push @stream, [ "c$c", $turn, $text ];
        $text .= rnd(300);
    }
}

for my $d (1 .. 8) {
    my $doc = rnd(2500);
    push @stream, [ "d$d", $_, $doc . rnd(200) ] for 1 .. 6;
}

# shuffle, keeping each conversation's turns in order
my %next;
my @order = map { $_->[0] } @stream;
for (my $i = @order - 1; $i > 0; $i--) {
    my $j = int rand($i + 1);
    @order[$i, $j] = @order[$j, $i];
}
my %by;
push @{ $by{ $_->[0] } }, $_ for @stream;

sub send_body {
    my ($ng, $body) = @_;
    my $c = $ng->conn;
    my $r = $c->request(POST => '/v1/x', body => $body);
    $c->close;
    my ($b) = $r->{body} =~ /^(b\d)$/m;
    return $b // "status $r->{status}";
}

my ($same, $n, %used) = (0, 0);
my @diff;

for my $g (@order) {
    my $req = shift @{ $by{$g} };
    my $a = send_body($na, $req->[2]);
    my $b = send_body($nb, $req->[2]);
    $n++;
    $used{$a}++;
    if ($a eq $b) {
        $same++;
    } else {
        push @diff, "$req->[0]/$req->[1]: $a != $b";
    }
}

is $n, 16 * 6 + 8 * 6, "$n requests sent to both";
ok $same >= 0.99 * $n, "$same of $n routed alike (at least 99 %)"
    or diag join "\n", @diff;
ok keys %used >= 3, 'the stream used ' . keys(%used) . ' servers';
ok !grep({ /^status/ } keys %used), 'every request answered';

ok !grep({ /\[(?:alert|crit|emerg)\]/ } $na->log, $nb->log),
   'no alert in the error logs';

$na->stop;
$nb->stop;
$be->stop;

done_testing();
