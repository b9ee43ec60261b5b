# nginx -s reload (HUP) under steady load: 8 connections send 320
# requests, some of them slow (about a second), while the master is sent
# HUP twice; the second reload also adds a server.  No request is lost:
# each is answered 200 by a backend.  The zone is kept, so the servers'
# "requests" counters add up to every request proxied, and once the old
# workers are gone the status shows 0 in flight everywhere.
#
# worker_processes 2; the backends run in a nginx of their own ("/slow"
# answers after about a second).

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);
use PrefixAware::Load;
use JSON::PP ();

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'reload-load', workers => 2);

sub config {
    my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } @_;
    my $listen = $ng->port;
    return <<"_EOC_";
    upstream up {
        prefix_aware index=off length=1024 threshold=4;
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

$ng->start(config(qw(b1 b2 b3)));

my $load = PrefixAware::Load->start(port => $ng->port, conns => 8,
                                    requests => 40);
my $t0 = time;

# the in-flight sum, sampled while the load runs: never above the 8
# connections, never "negative" (a huge unsigned number)
my ($samples, $max, @bad) = (0, 0);
sub sample_for {
    my $until = time + shift;
    while (time < $until) {
        my $st = status() or next;
        my $sum = 0;
        $sum += $_->{inflight} for @{ $st->{upstreams}{up}{servers} };
        $samples++;
        $max = $sum if $sum > $max;
        push @bad, $sum if $sum > 8;
        sleep 0.05;
    }
}

my @gen = @{ $ng->workers };
sample_for(1.5);
$ng->reload;
push @gen, @{ $ng->workers };
ok $load->running, sprintf 'first reload at %.1f s, under load', time - $t0;

sample_for(1.5);
$ng->reload(config(qw(b1 b2 b3 b4)));
push @gen, @{ $ng->workers };
ok $load->running, sprintf 'second reload (adds b4) at %.1f s, under load', time - $t0;

my %pids = map { $_ => 1 } @gen;
is scalar(keys %pids), 6, 'three generations of two workers: ' . join ' ', @gen;

sample_for(1) while $load->running;
ok $samples > 20 && !@bad, "$samples samples of the in-flight sum during the load, 0 to $max, never above 8"
    or diag "bad samples: @bad";

my $res = $load->wait;
my $secs = time - $t0;
my %by = PrefixAware::Load::by_status($res);

is scalar(@$res), 320, sprintf '320 requests sent in %.1f s', $secs;
is_deeply \%by, { 200 => 320 }, 'every request answered 200'
    or diag explain [ grep { $_->{status} != 200 } @$res ];
is scalar(grep { $_->{body} =~ /^b[1-4]$/ } @$res), 320, 'each by a backend';
is scalar(grep { $_->{path} eq '/slow' } @$res), 40, '40 of them slow (about a second each)';

ok wait_until(sub { !@{ $ng->old_workers } }, 15), 'the old workers exited';

my $st = status();
my $servers = $st ? $st->{upstreams}{up}{servers} : [];
is scalar(@$servers), 4, 'the status shows the four servers';
is_deeply [ map { $_->{inflight} } @$servers ], [0, 0, 0, 0], 'the status shows 0 in flight everywhere';

my $sum = 0;
$sum += $_->{requests} for @$servers;
is $sum, 320, "the zone was kept over both reloads: the servers' request counters add up to the 320 requests";

my @alerts = grep { /\[(?:alert|crit|emerg)\]|exited on signal/ } $ng->log;
ok !@alerts, 'no alert, no crash in the error log' or diag join "\n", @alerts;

$ng->stop;
$be->stop;

done_testing();
