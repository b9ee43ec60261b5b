# The shared zone ("ngx_http_prefix_aware_module:zone") is sized by the
# module (there is no directive for it), for a few generations of the
# configuration's records and of its workers' counts, rounded up to whole
# megabytes; a reload that keeps the size keeps the zone.  Records are
# freed once nothing uses them: a configuration's record once the master
# runs a newer one and no worker that runs it is alive, a server's once no
# configuration has it and nothing is in flight on it.  So server names
# that come and go at every reload (pod addresses) do not fill the zone.
#
# 1. Twelve reloads, each adding a server, keep the zone: the request
#    counters add up over all of them.
# 2. Reloads with 100 servers, each time with other names, for about a
#    minute (PA_ZONE_SECONDS, at most PA_ZONE_RELOADS = 1000): every one
#    takes effect and serves; every 10th, once the old workers are gone,
#    the zone holds the records of one configuration (1 upstream, 100
#    servers, 2 workers), and its used pages stay flat.
# 3. A configuration that needs a bigger zone gets a new one at reload
#    (its counters start at 0).
#
# worker_processes 2; the backends run in a nginx of their own.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);
use JSON::PP ();

my $SECONDS = $ENV{PA_ZONE_SECONDS} // 60;
my $RELOADS = $ENV{PA_ZONE_RELOADS} // 1000;

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'zone', workers => 2);

# b1 and the given real backends, then "down" servers (never chosen, but
# each has a record in the zone)
sub config {
    my ($real, $down) = @_;
    my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } @$real;
    $servers .= join '', map { "        server $_ down;\n" } @$down;
    my $listen = $ng->port;
    return <<"_EOC_";
    upstream up {
        prefix_aware index=off length=1024;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_
}

sub status {
    my $r = $ng->request(GET => '/status');
    return $r->{status} == 200 ? JSON::PP::decode_json($r->{body}) : undef;
}

sub requests_sum {
    my $st = status() or return -1;
    my $sum = 0;
    $sum += $_->{requests} for @{ $st->{upstreams}{up}{servers} };
    return $sum;
}

# sends n keyed requests; how many were answered 200 by a backend
sub serve {
    my ($n, $tag) = @_;
    my $ok = 0;
    for my $i (1 .. $n) {
        my $r = $ng->request(GET => '/t', headers => [ID_HEADER, "$tag-$i"]);
        $ok++ if $r->{status} == 200 && $r->{body} =~ /^b[1-4]$/;
    }
    return $ok;
}

# HUP with a new nginx.conf: 1 if new workers took over, 0 if the master
# logged an emerg and kept the old ones
sub try_reload {
    my ($http) = @_;
    my %old = map { $_ => 1 } @{ $ng->workers };
    my $from = $ng->log_size;
    $ng->write_conf($http);
    kill HUP => $ng->master;
    my $rc = wait_until {
        my $w = $ng->workers;
        return 1 if @$w == 2 && !grep { $old{$_} } @$w;
        return 2 if $ng->log($from) =~ /\[emerg\]/;
        return 0;
    } 20;
    return $rc == 1 ? 1 : 0;
}

# 1. twelve reloads, each adding a server

my @real = ('b1');
my @down;
$ng->start(config(\@real, \@down));

my ($sent, $ok, $reloads) = (0, 0, 0);
for my $step (1 .. 12) {
    if ($step <= 3) {
        push @real, "b" . ($step + 1);
    } else {
        push @down, "127.0.0.1:" . (30000 + $step);
    }
    $reloads += try_reload(config(\@real, \@down));
    $ok += serve(10, "step$step");
    $sent += 10;
}
is $reloads, 12, 'twelve reloads, each adding a server, took effect';
is $ok, $sent, "each time the $sent keyed requests were served";
is requests_sum(), $sent, "the zone was kept: the request counters add up to $sent";
my $st = status();
is scalar(@{ $st->{upstreams}{up}{servers} }), 13, 'the status shows the 13 servers';
my $size = $st->{zone}{size};
ok $size >= 1024 * 1024, "the zone's size: $size";

# 2. reloads with 100 servers, other names each time

sub names {
    my ($round) = @_;
    my $net = sprintf '127.%d.%d', 1 + int($round / 250), $round % 250;
    return [ map { "$net.$_:80" } 1 .. 99 ];
}

my $start = time;
my ($done, $took, $served, $bad) = (0, 0, 0, 0);
my ($last, @used);
my $log_at = $ng->log_size;

for my $round (1 .. $RELOADS) {
    last if time - $start > $SECONDS;

    $took += try_reload(config(['b1'], names($round)));
    $done++;
    $served += serve(1, "round$round");

    # every 10th: the zone once the old workers are gone (they exit at
    # once, nothing is in flight)
    next if $round % 10;
    wait_until { !@{ $ng->old_workers } } 5;
    $st = status() or next;
    my $z = $st->{zone};
    push @used, $z->{pages} - $z->{free_pages};
    my $rec = "$z->{upstreams} $z->{servers} $z->{configurations} $z->{workers}";
    if ($rec ne '1 100 1 2' || $z->{size} != $size) {
        diag "round $round: zone $rec, size $z->{size}" if $bad++ < 3;
    }
    $last = $z;
}

sub max_of { my $m = shift // -1; for (@_) { $m = $_ if $_ > $m } $m }

# the slab keeps a page while any of its slots is used: the first few
# reloads set the pattern, after which the used pages repeat
my $early = max_of(@used[0 .. 2]);
my $later = max_of(@used[3 .. $#used]);

diag sprintf '%d reloads with 100 new server names each in %.0f s; '
           . 'used pages, every 10th reload: %s (of %d)',
     $done, time - $start, join(' ', @used), $last ? $last->{pages} : -1;

ok $done >= 50, "$done reloads ran (at least 50)";
is $took, $done, 'every one took effect';
is $served, $done, 'and served';
is $bad, 0, 'every 10th reload, once the old workers were gone, the zone held 1 upstream, '
          . '100 servers, 1 configuration and 2 workers, in the same zone';
ok @used >= 5 && $early > 0 && $later <= $early,
   "its used pages stayed flat: at most $later after the 30th reload, "
   . "at most $early before";

my @full = grep { /is full|\[emerg\]/ } $ng->log($log_at);
ok !@full, 'no reload failed' or diag $full[0];

# 3. a configuration that needs more room gets a bigger, new zone

my $before = requests_sum();
ok $before >= 1, "the zone counts $before requests";
my @big = map { sprintf '127.9.%d.%d:80', int($_ / 250), $_ % 250 } 1 .. 1999;
ok try_reload(config(['b1'], \@big)), 'a reload to 2000 servers works';
is serve(10, 'big'), 10, 'and serves';
is requests_sum(), 10, 'in a new, bigger zone: its counters started at 0';
$st = status();
ok $st->{zone}{size} > $size, "of $st->{zone}{size} bytes";

my @alerts = grep { /\[(?:alert|crit)\]|exited on signal/ } $ng->log;
ok !@alerts, 'no alert, no crash in the error log' or diag join "\n", @alerts;

$ng->stop;
$be->stop;

done_testing();
