# threshold is a hard bound across workers: a server is reserved by a
# compare-and-swap of its in-flight count below threshold, so two workers
# that choose the same server at the same moment cannot both take its
# last place; the one that loses walks the ring again.
#
# worker_processes 4, threshold=2, three servers: room for 6 requests.
#
# 1. The race, made to happen: worker A is stopped by gdb right after its
#    walk chose the key's first choice F (1 in flight, below threshold),
#    before it took its place there; worker B then takes F's last place;
#    A goes on.  A must not put a third request on F: it goes to the next
#    server on the ring.  (Before the compare-and-swap, A counted itself on
#    F regardless: 3 in flight there.)  Skipped when gdb is missing.
# 2. Bursts of 6 requests of one key at once (as much as the servers
#    hold), from connections spread over the 4 workers: every burst puts
#    exactly 2 on each server, as the status page and the backends' own
#    logs (the overlap of the requests they served) show.
# 3. 9 at once, more than the 6 places: the fallback (least loaded) puts
#    3 on each server, as documented.
#
# The backends run in a nginx of their own; "/slow" answers after about a
# second, "/slow3" after about three.

use strict;
use warnings;

use Test::More;
use File::Temp ();
use POSIX ();
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2 b3);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

# the backends log when each request started and ended
my $be = PrefixAware::Scenario->new(name => 'backends');
my $backends = $be->backends(%port);
$backends =~ s{(listen 127\.0\.0\.1:(\d+);\n)}
              {$1        access_log logs/$2.log hold;\n}g;
$be->start("    log_format hold '\$msec \$request_time \$uri';\n$backends");

my $ng = PrefixAware::Scenario->new(name => 'threshold', workers => 4);
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

my @key = (headers => [ID_HEADER, 'tenant-t']);

sub inflight {
    my $in = $ng->inflight('up') || {};
    return { map { ($name{$_} => $in->{$_}) } keys %$in };
}

sub total {
    my $in = inflight();
    my $sum = 0;
    $sum += $_ // 0 for values %$in;
    return $sum;
}

sub decision {
    my ($from, $pid) = @_;
    my $d = wait_until {
        my @d = grep { $_->{pid} == $pid } @{ $ng->decisions($from) };
        @d && $d[0];
    } 10;
    return $d || {};
}

# 1. the race

SKIP: {
    my $gdb = `command -v gdb 2>/dev/null`;
    chomp $gdb;
    skip 'gdb is not installed', 7 unless $gdb;

    my ($wa, $wb) = @{ $ng->workers };
    my $a = $ng->conn_on($wa);
    my @b = map { $ng->conn_on($wb) } 1 .. 2;

    # gdb stops worker A once its walk has chosen, before it counts
    my $dir = File::Temp::tempdir('pa-gdb-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $gpid = fork;
    die "fork: $!\n" unless defined $gpid;
    if ($gpid == 0) {
        open STDOUT, '>', "$dir/gdb.log";
        open STDERR, '>&', \*STDOUT;
        exec $gdb, '-p', $wa, '-batch', '-nx', '-q',
             '-ex', 'set pagination off',
             '-ex', 'break pa_ring_pick',
             '-ex', "shell touch $dir/ready",
             '-ex', 'continue',
             '-ex', 'finish',
             '-ex', "shell touch $dir/stopped",
             '-ex', "shell while [ ! -e $dir/go ]; do sleep 0.05; done",
             '-ex', 'detach'
            or POSIX::_exit(1);
    }

    ok wait_until(sub { -e "$dir/ready" }, 30), 'gdb is attached to worker A';

    # F: the key's first choice, with one request of worker B
    my $from = $ng->log_size;
    $b[0]->send(GET => '/slow3', @key);
    my $d = decision($from, $wb);
    my $f = $name{ $d->{server} // '' } // '?';
    is_deeply [ $d->{route}, $d->{first_inflight} ], [ 'affinity', 0 ],
              "worker B put a request on the first choice $f";

    $from = $ng->log_size;
    $a->send(GET => '/slow3', @key);
    ok wait_until(sub { -e "$dir/stopped" }, 10),
       'worker A stopped between its choice and its count'
        or diag `cat $dir/gdb.log`;

    # worker B takes F's last place meanwhile
    $b[1]->send(GET => '/slow3', @key);
    $d = decision($from, $wb);
    is_deeply [ $name{ $d->{server} // '' }, $d->{route}, $d->{first_inflight} ],
              [ $f, 'affinity', 1 ], "worker B put a second request on $f";

    # worker A goes on
    open my $go, '>', "$dir/go";
    CORE::close($go);
    waitpid $gpid, 0;
    $d = decision($from, $wa);
    my $s = $name{ $d->{server} // '' } // '?';
    isnt $s, $f, "worker A did not put a third request on $f: it went to $s";

    my $in = inflight();
    is_deeply $in, { $f => 2, $s => 1, map { ($_ => 0) } grep { $_ ne $f && $_ ne $s } keys %port },
              "in flight: 2 on $f, 1 on $s";

    my @r = map { $_->read(10) } $a, @b;
    is_deeply [ map { $_->{status} } @r ], [ 200, 200, 200 ], 'the three requests succeeded';
    $_->close for $a, @b;
}

wait_until { total() == 0 } 5;

# 2. bursts of 6, and 3. a burst of 9

# one burst: n requests of the key sent at once on fresh connections;
# the in-flight counts once all are decided
sub burst {
    my ($n) = @_;
    my @c = map { $ng->conn } 1 .. $n;
    $_->send(GET => '/slow', @key) for @c;
    my $in = wait_until { total() >= $n && inflight() } 5;
    my @r = map { $_->read(10) } @c;
    $_->close for @c;
    my $ok = grep { $_->{status} == 200 } @r;
    wait_until { total() == 0 } 5;
    sleep 0.05;
    return ($in || {}, $ok);
}

my $start = time;
my ($exact, $served, $max) = (0, 0, 0);
my $BURSTS = 10;
for (1 .. $BURSTS) {
    my ($in, $ok) = burst(6);
    $served += $ok;
    $exact++ if join(' ', map { $in->{$_} // 0 } sort keys %port) eq '2 2 2';
    for (values %$in) { $max = $_ if $_ > $max }
}
is $served, 6 * $BURSTS, "$BURSTS bursts of 6 at once: all served";
is $exact, $BURSTS, 'each burst put exactly 2 on each server (status page)';
is $max, 2, 'in flight never above threshold';

# the backends' view: the most requests each one had at once
sub overlap {
    my ($since) = @_;
    my %max;
    for my $bn (sort keys %port) {
        open my $fh, '<', $be->root . "/logs/$port{$bn}.log" or next;
        my @ev;
        while (<$fh>) {
            my ($end, $took, $uri) = split;
            next unless $uri eq '/slow' && $end - $took >= $since;
            push @ev, [ $end - $took, 1 ], [ $end, -1 ];
        }
        CORE::close($fh);
        my ($n, $m) = (0, 0);
        for (sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] } @ev) {
            $n += $_->[1];
            $m = $n if $n > $m;
        }
        $max{$bn} = $m;
    }
    return \%max;
}

is_deeply overlap($start), { map { ($_ => 2) } keys %port },
          'each backend served at most 2 of them at once (its access log)';

my ($in, $ok) = burst(9);
is $ok, 9, '9 at once, more than the 6 places: all served';
is_deeply $in, { map { ($_ => 3) } keys %port },
          'the fallback spread them: 3 on each server';

my @alerts = grep { /\[(?:alert|crit|emerg)\]/ } $ng->log;
ok !@alerts, 'no alert in the error log' or diag join "\n", @alerts[0 .. 2];

$ng->stop;
$be->stop;

done_testing();
