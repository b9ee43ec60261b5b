# strategy=least_outstanding with worker_processes 2: the fewest in flight
# is read from the shared counts, so worker B sees what worker A holds.
# Worker A holds three slow requests of one key on three of four servers
# (the prefix strategy would put them all on the key's home); worker B,
# with nothing of its own in flight, sends the next to the fourth, and
# five more from B leave exactly two in flight on every server.  With
# counts per worker (least_conn without a zone) B would see four idle
# servers, put its first at random and end with 3-2-2-1.
#
# The backends run in a nginx of their own; "/slow3" answers after about
# three seconds.  Connections are steered to a worker as in t/010-workers.t.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'least', workers => 2);
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } sort keys %port;
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware index=off length=1024 strategy=least_outstanding;
$servers    }

    server {
        listen 127.0.0.1:$listen reuseport;
        location = /pid { return 200 "\$pid\\n"; }
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

my @key = (headers => [ID_HEADER, 'tenant-w']);

my ($wa, $wb) = @{ $ng->workers };
ok $wa && $wb && $wa != $wb, "two workers: $wa and $wb";

my @a = map { $ng->conn_on($wa) } 1 .. 3;
my @b = map { $ng->conn_on($wb) } 1 .. 5;
is scalar(grep { defined } @a, @b), 8, 'three connections on worker A, five on B';

sub held {
    my $n = shift;
    return wait_until {
        my $in = $ng->inflight('up') || {};
        my $sum = 0;
        $sum += $_ for values %$in;
        $sum == $n && { map { ($name{$_} => $in->{$_}) } keys %$in };
    } 5;
}

# worker A: three requests of one key, three servers
$_->send(GET => '/slow3', @key) for @a;
my $in = held(3);
ok $in, 'worker A holds three requests';
my @busy = sort grep { $in->{$_} } keys %{ $in || {} };
is scalar(@busy), 3, "on three servers: @busy";
my ($idle) = grep { !$in->{$_} } sort keys %port;

# worker B: the idle one, as the shared counts say
$b[0]->send(GET => '/slow3', @key);
$in = held(4);
is_deeply $in, { map { ($_ => 1) } keys %port },
          "worker B sent its first to $idle, the server worker A left idle";

# five more from B: two on every server
$_->send(GET => '/slow3', @key) for @b[1 .. 4];
$in = held(8);
is_deeply $in, { map { ($_ => 2) } keys %port },
          'eight requests from two workers, two in flight on each server';

my @got = map { $_->read(10) } @a, @b;
is scalar(grep { $_->{status} == 200 } @got), 8, 'the eight requests succeeded';
is $got[3]{body}, "$idle\n", "worker B's first was served by $idle";

my %by;
$by{ $_->{body} }++ for @got;
is_deeply \%by, { map { ("$_\n" => 2) } keys %port }, 'two responses from each server';

# the decisions were logged as least_outstanding's, none with a busier pick
my @d = grep { /prefix_aware strategy least_outstanding: server \d+, (\d+) in flight/ } $ng->log;
is scalar(@d), 8, 'eight decisions of least_outstanding';

$in = held(0);
ok $in, 'nothing in flight once they are done';

unlike scalar $ng->log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

$_->close for @a, @b;
$ng->stop;
$be->stop;

done_testing();
