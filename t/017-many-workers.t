# More worker processes than the 64 rows the zone once had for them:
# worker_processes 70, each holding one request; kill -9 of all 70 at
# once.  Every worker has a record of its own in the zone, so the counts
# of every one of them are given back (by the workers the master starts in
# their place, or by the timer of any worker), and in flight returns to 0.
# Then a reload while 70 requests are held: 140 workers with records, the
# 70 draining ones killed, and again every count heals.
#
# The backends run in a nginx of their own.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my $N = 70;

my %port = map { $_ => free_port() } qw(b1 b2 b3);

# "/slow9", about nine seconds: long enough for 70 connections, a reload
# of 70 workers and the checks, even under the sanitizers
my $pad = 'p' x 1100;
my $backends;
my $be = PrefixAware::Scenario->new(name => 'backends');
$backends = $be->backends(%port);
$backends =~ s{(listen 127\.0\.0\.1:\d+;\n)}
              {$1        location /slow9 { limit_rate 120; add_header X-Pad $pad; return 200 "slow\\n"; }\n}g;
$be->start($backends);

my $ng = PrefixAware::Scenario->new(name => 'many-workers', workers => $N);
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } sort keys %port;
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware index=off length=1024 threshold=1024;
$servers    }

    server {
        listen 127.0.0.1:$listen reuseport;
        location = /pid { return 200 "\$pid\\n"; }
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

sub total {
    my $in = $ng->inflight('up') or return -1;
    my $sum = 0;
    $sum += $_ for values %$in;
    return $sum;
}

# one keep-alive connection on each worker: connect until every worker
# has answered "GET /pid" on one
sub conn_each {
    my %want = map { $_ => 1 } @{ $ng->workers };
    my %conn;

    for (1 .. 5000) {
        last if keys %conn == keys %want;
        my $c = $ng->conn;
        my $r = $c->request(GET => '/pid');
        my ($pid) = $r->{body} =~ /^(\d+)/;
        if ($pid && $want{$pid} && !$conn{$pid}) {
            $conn{$pid} = $c;
        } else {
            $c->close;
        }
    }

    return \%conn;
}

# each worker holds one request
sub hold {
    my ($what) = @_;
    my $conn = conn_each();
    is scalar(keys %$conn), $N, "$what: a connection on each of the $N workers";
    my $i = 0;
    $_->send(GET => '/slow9', headers => [ID_HEADER, 'tenant-' . $i++])
        for values %$conn;
    ok wait_until(sub { total() == $N }, 10), "$what: $N requests in flight";
    return $conn;
}

is scalar(@{ $ng->workers }), $N, "$N workers";

# 1. kill -9 every worker while each holds a request

my $conn = hold('all workers');
my @old = @{ $ng->workers };
my $from = $ng->log_size;
is kill(KILL => @old), $N, "kill -9 the $N workers";

ok wait_until(sub {
        my %old = map { $_ => 1 } @old;
        my $w = $ng->workers;
        @$w == $N && !grep { $old{$_} } @$w;
    }, 20), "the master started $N new workers";

ok wait_until(sub { total() == 0 }, 5), "the counts of all $N are given back"
    or diag 'in flight: ' . total();

my %gave = map { $_ => 1 }
           $ng->log($from) =~ /giving back the in-flight counts of exited process (\d+)/g;
is scalar(grep { $gave{$_} } @old), $N, "\"giving back\" for each of the $N";

$_->close for values %$conn;

# 2. a reload while each worker holds a request, then kill -9 the 70
#    draining workers: 140 workers had records at once

$conn = hold('before the reload');
@old = @{ $ng->workers };
$ng->reload;
is scalar(@{ $ng->old_workers }), $N, "$N old workers draining, $N new ones";
is total(), $N, "the new workers see the $N requests of the old ones";

is kill(KILL => @old), $N, "kill -9 the $N draining workers";
ok wait_until(sub { !@{ $ng->old_workers } }, 10), 'they are gone';
ok wait_until(sub { total() == 0 }, 5), "their $N counts are given back"
    or diag 'in flight: ' . total();

$_->close for values %$conn;

my @warn = grep { /more than \d+ worker processes|cannot heal/ } $ng->log;
ok !@warn, 'no worker went without a record' or diag join "\n", @warn[0 .. 2];

my @alerts = grep { /\[(?:alert|crit|emerg)\]/ && !/exited on signal 9\b/ } $ng->log;
ok !@alerts, 'no alert in the error log but those about the killed workers'
    or diag join "\n", @alerts[0 .. 2];

$ng->stop;
$be->stop;

done_testing();
