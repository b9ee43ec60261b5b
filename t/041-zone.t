# The shared zone "ngx_http_prefix_aware_module:zone" is sized by the
# module (there is no directive for it): four times what the configuration
# needs, rounded up to whole megabytes.  So a configuration always fits a fresh zone, and
# "too small" can only come from a reload that keeps the zone (same size)
# while it still holds the counters of servers that were removed: the
# zone keeps every server it has seen, because workers of older
# configurations may still use their counters.
#
# 1. Many reloads that add servers one at a time keep working, and keep
#    the zone: the request counters add up over all of them.
# 2. Reloads with 300 servers, each time with other names, fill the 1 MB
#    zone: the reload that cannot fit fails with "shared zone
#    "ngx_http_prefix_aware_module:zone" is full, restart nginx to rebuild
#    it" (emerg), the old workers go on serving, nothing crashes; "nginx -t" accepts the same
#    configuration (it would get a fresh zone), and so does a restart.
# 3. A configuration that needs a bigger zone gets a new one at reload
#    (its counters start at 0) rather than failing.
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

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'zone', workers => 2);

# b1 and the given real backends, then "down" servers on ports where
# nothing listens (never chosen, but each has counters in the zone)
sub config {
    my ($real, $down) = @_;
    my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } @$real;
    $servers .= join '', map { "        server 127.0.0.1:$_ down;\n" } @$down;
    my $listen = $ng->port;
    return <<"_EOC_";
    upstream up {
        prefix_aware length=1024;
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
        push @down, 30000 + $step;
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

# 2. 300 servers with other names each time: the zone fills up

my $base = 31000;
my ($fitted, $failed, $log_at) = (0, 0, 0);
my @last_ok;
for my $round (1 .. 8) {
    my @names = map { $base + 300 * $round + $_ } 1 .. 299;
    $log_at = $ng->log_size;
    if (try_reload(config(['b1'], \@names))) {
        $fitted++;
        @last_ok = @names;
        next;
    }
    $failed = $round;
    last;
}

ok $fitted >= 1 && $failed, "reloads with 300 new server names: $fitted fitted, round $failed did not";

my @emerg = grep { /\[emerg\]/ } $ng->log($log_at);
like $emerg[0] // '', qr/\[emerg\] \d+#\d+: prefix_aware: shared zone "ngx_http_prefix_aware_module:zone" is full, restart nginx to rebuild it/,
     'the failed reload says so (emerg): ' . ($emerg[0] // 'nothing') =~ s/^.*?\[emerg\] \d+#\d+: //r;

my $workers = $ng->workers;
is scalar(@$workers), 2, 'the old workers go on';
is serve(10, 'after-full'), 10, 'and serve';

my $conf = $ng->root . '/conf/nginx.conf';
my $t = `$PrefixAware::Scenario::Binary -t -p ${\ $ng->root }/ -c $conf 2>&1`;
is $?, 0, 'nginx -t accepts the configuration that did not fit (a fresh zone holds it)';

# a reload back to names the zone has: fits
ok try_reload(config(['b1'], \@last_ok)), 'a reload to server names the zone already has works';
is serve(10, 'back'), 10, 'and serves';

# a restart rebuilds the zone with the configuration that did not fit
$ng->stop;
$ng->start(config(['b1'], [ map { $base + 300 * $failed + $_ } 1 .. 299 ]));
is serve(10, 'restarted'), 10, 'after a restart the configuration that did not fit runs';

# 3. a configuration that needs more room gets a bigger, new zone

my $before = requests_sum();
ok $before >= 10, "the zone counts $before requests";
ok try_reload(config(['b1'], [ map { 40000 + $_ } 1 .. 799 ])), 'a reload to 800 servers works';
is serve(10, 'big'), 10, 'and serves';
is requests_sum(), 10, 'in a new, bigger zone: its counters started at 0';

my @alerts = grep { /\[(?:alert|crit)\]|exited on signal/ } $ng->log;
ok !@alerts, 'no alert, no crash in the error log' or diag join "\n", @alerts;

$ng->stop;
$be->stop;

done_testing();
