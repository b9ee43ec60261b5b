# Binary upgrade under steady load: 8 connections send 320 requests, some
# slow (about a second), while the master gets USR2 (it starts a new
# master from the same binary, which inherits the listening sockets) and,
# once the new workers run, the old master gets QUIT.  No request is lost:
# each is answered 200 by a backend.  The new master has a zone of its
# own: once the old master and its workers are gone, its status shows 0
# in flight everywhere, and the requests it counted are the ones its
# workers routed.
#
# worker_processes 2; the backends run in a nginx of their own ("/slow"
# answers after about a second).

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);
use File::Spec;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);
use PrefixAware::Load;
use JSON::PP ();

# the new master is exec'd from the path the old one was started with
my $bin = $ENV{TEST_NGINX_BINARY} || 'nginx';
if ($bin !~ m{/}) {
    ($bin) = grep { -x } map { "$_/$bin" } split /:/, $ENV{PATH};
}
plan skip_all => 'no nginx binary' unless $bin && -x $bin;
$PrefixAware::Scenario::Binary = File::Spec->rel2abs($bin);

my %port = map { $_ => free_port() } qw(b1 b2 b3);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'upgrade-load', workers => 2);
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } sort keys %port;
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware index=off length=1024 threshold=4;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

sub status {
    my $r = $ng->request(GET => '/status');
    return $r->{status} == 200 ? JSON::PP::decode_json($r->{body}) : undef;
}

sub pid_in {
    my $file = shift;
    open my $fh, '<', $file or return;
    my ($pid) = (<$fh> // '') =~ /(\d+)/;
    return $pid;
}

sub alive { my $pid = shift; return kill(0, $pid) && `ps -o stat= -p $pid` !~ /Z/ }

my $old = $ng->master;
my $old_workers = $ng->workers;
my $pidfile = $ng->root . '/logs/nginx.pid';

my $load = PrefixAware::Load->start(port => $ng->port, conns => 8,
                                    requests => 40);
my $t0 = time;

sleep 1.5;
ok kill(USR2 => $old), sprintf 'USR2 to the old master %d at %.1f s, under load', $old, time - $t0;

my $new = wait_until {
    my $p = pid_in($pidfile);
    -e "$pidfile.oldbin" && $p && $p != $old && $p;
} 10;
ok $new, "a new master $new runs, nginx.pid.oldbin holds the old one";
is pid_in("$pidfile.oldbin"), $old, 'nginx.pid.oldbin has the old master';

$ng->{master} = $new;
ok wait_until(sub { @{ $ng->workers } == 2 }, 10), 'the new master runs two workers: ' . join ' ', @{ $ng->workers };
ok $load->running, 'the load is still running';

sleep 1;
ok kill(QUIT => $old), sprintf 'QUIT to the old master at %.1f s', time - $t0;
ok wait_until(sub { !alive($old) && !grep { alive($_) } @$old_workers }, 15),
   'the old master and its workers exited';
ok $load->running, 'the load is still running';

my $res = $load->wait;
my $secs = time - $t0;
my %by = PrefixAware::Load::by_status($res);

is scalar(@$res), 320, sprintf '320 requests sent in %.1f s', $secs;
is_deeply \%by, { 200 => 320 }, 'every request answered 200'
    or diag explain [ grep { $_->{status} != 200 } @$res ];
is scalar(grep { $_->{body} =~ /^b[1-3]$/ } @$res), 320, 'each by a backend';

my $st = status();
my $up = $st ? $st->{upstreams}{up}{servers} : [];
is_deeply [ map { $_->{inflight} } @$up ], [0, 0, 0], 'the new master\'s status shows 0 in flight everywhere';

my $sum = 0;
$sum += $_->{requests} for @$up;
ok $sum > 0 && $sum < 320, "the new zone counted only what the new workers routed ($sum of 320)";

# a new request is served and is at its first choice with 0 in flight
my $from = $ng->log_size;
my $r = $ng->request(POST => '/t', body => 'conn 1 prompt 1');
my ($d) = @{ $ng->decisions($from) };
is $r->{status}, 200, 'a request after the upgrade is served';
ok $d && $d->{first_inflight} == 0, 'and sees 0 in flight at its first choice';

my @alerts = grep { /\[(?:alert|crit|emerg)\]|exited on signal/ } $ng->log;
ok !@alerts, 'no alert, no crash in the error log' or diag join "\n", @alerts;

$ng->stop;
$be->stop;

done_testing();
