# worker_processes 2: the in-flight counts are shared by the workers.
# Requests held by worker A count when worker B decides: B spills a key
# whose first choice A already filled to the threshold, although B itself
# has nothing in flight there.  Once all is done, both workers see 0.
#
# The backends run in a nginx of their own; "/slow2" answers after about
# two seconds.  The status endpoint (prefix_aware_status) shows the counts
# too.  Connections are steered to a worker by connecting until
# "GET /pid" answers with that worker's pid (the listen socket has
# reuseport, so the kernel spreads connections over the workers).

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2 b3);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'workers', workers => 2);
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } sort keys %port;
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware index=off length=1024 threshold=2;
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

# where the key goes when nothing is in flight
my $r = $ng->request(GET => '/t', @key);
is $r->{status}, 200, 'the key is served';
my ($first) = $r->{body} =~ /^(b\d)$/m;
ok $first, "its first choice is $first";

my @a = map { $ng->conn_on($wa) } 1 .. 2;
my @b = map { $ng->conn_on($wb) } 1 .. 2;
is scalar(grep { defined } @a, @b), 4, 'two connections on each worker';

# worker A takes two slow requests: both at the first choice
my $from = $ng->log_size;
$_->send(GET => '/slow2', @key) for @a;

my $d = wait_until { my $d = $ng->decisions($from); @$d >= 2 && $d } 5;
is scalar(@$d), 2, 'worker A decided twice';
is_deeply [ map { [$_->{pid}, $name{$_->{server}}, $_->{route}, $_->{first_inflight}] } @$d ],
          [ [$wa, $first, 'affinity', 0], [$wa, $first, 'affinity', 1] ],
          'worker A put both at the first choice (0, then 1 in flight)';

# worker B, with nothing of its own in flight, sees A's two
$from = $ng->log_size;
$b[0]->send(GET => '/slow2', @key);

$d = wait_until { my $d = $ng->decisions($from); @$d >= 1 && $d } 5;
is $d->[0]{pid}, $wb, 'worker B decided';
is $d->[0]{first_inflight}, 2, "worker B saw worker A's 2 requests in flight at the first choice";
is $d->[0]{route}, 'spill', 'worker B spilled';
my $second = $name{ $d->[0]{server} } // '';
isnt $second, $first, "worker B sent it to $second";

$from = $ng->log_size;
$b[1]->send(GET => '/slow2', @key);
$d = wait_until { my $d = $ng->decisions($from); @$d >= 1 && $d } 5;
is_deeply [ map { [$_->{pid}, $name{$_->{server}}, $_->{route}, $_->{first_inflight}] } @$d ],
          [ [$wb, $second, 'spill', 2] ],
          'the next one from worker B spills to the same second choice (1 < threshold there)';

my $in = $ng->inflight('up') || {};
is_deeply { map { ($name{$_} => $in->{$_}) } keys %$in },
          { $first => 2, $second => 2, map { ($_ => 0) } grep { $_ ne $first && $_ ne $second } keys %port },
          'the status endpoint shows the 4 requests in flight: 2 and 2';

my @got = map { $_->read(10) } @a, @b;
is_deeply [ map { $_->{status} } @got ], [200, 200, 200, 200], 'the four requests succeeded';
is_deeply [ map { $_->{body} } @got ], [ "$first\n", "$first\n", "$second\n", "$second\n" ],
          'two at the first choice, two spilled: the threshold held across workers';

# everything is done: both workers see nothing in flight
$from = $ng->log_size;
for my $c ($a[0], $b[0]) {
    my $r = $c->request(GET => '/t', @key);
    is $r->{body}, "$first\n", 'affinity again';
}
$d = $ng->decisions($from);
is_deeply [ map { [$_->{pid}, $_->{route}, $_->{first_inflight}] } @$d ],
          [ [$wa, 'affinity', 0], [$wb, 'affinity', 0] ],
          'both workers see 0 in flight once the requests are done';

$in = $ng->inflight('up') || {};
is_deeply [ sort values %$in ], [0, 0, 0], 'the status endpoint shows 0 in flight everywhere';

unlike scalar $ng->log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

$_->close for @a, @b;
$ng->stop;
$be->stop;

done_testing();
