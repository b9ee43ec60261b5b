# A server marked "down" by a reload while it holds requests: the new
# workers never choose it; the keys whose first choice it was fail over to
# the next server on the ring (route failover), the other keys stay where
# they were; the requests it held finish with 200, and its count goes
# back to 0 when they do.  A reload without "down" brings its keys back.
#
# worker_processes 2; the backends run in a nginx of their own ("/slow3"
# answers after about three seconds).

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

my $ng = PrefixAware::Scenario->new(name => 'down-reload', workers => 2);

sub config {
    my %down = map { $_ => 1 } @_;
    my $servers = join '', map {
        "        server 127.0.0.1:$port{$_}" . ($down{$_} ? ' down' : '') . ";\n"
    } sort keys %port;
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

$ng->start(config());

# one request with an id; its decision
sub route {
    my ($id) = @_;
    my $from = $ng->log_size;
    my $r = $ng->request(GET => '/t', headers => [ID_HEADER, $id]);
    my ($d) = @{ $ng->decisions($from) };
    return { status => $r->{status}, body => $r->{body} =~ s/\s+$//r,
             server => $d ? $name{ $d->{server} } : '',
             route => $d ? $d->{route} : '', first => $d ? $d->{first_inflight} : -1 };
}

sub status_of {
    my $in = $ng->inflight('up') || {};
    return { map { ($name{$_} => $in->{$_}) } keys %$in };
}

my @ids = map { "tenant-$_" } 1 .. 36;
my %home = map { my $r = route($_); ($_ => $r->{server}) } @ids;
my %per;
$per{ $home{$_} }++ for @ids;
is scalar(keys %per), 3, '36 ids over the three backends: ' . join ' ', map { "$_=$per{$_}" } sort keys %per;

# the backend to take down: the home of tenant-1
my $down = $home{'tenant-1'};
my @moved = grep { $home{$_} eq $down } @ids;
my @stay = grep { $home{$_} ne $down } @ids;

# two slow requests of tenant-1 held at that backend
my $from = $ng->log_size;
my @held = map {
    my $c = $ng->conn;
    $c->send(GET => '/slow3', headers => [ID_HEADER, 'tenant-1']);
    $c;
} 1 .. 2;
ok wait_until(sub { @{ $ng->decisions($from) } == 2 }, 5), 'two slow requests of tenant-1 in flight';
is_deeply status_of()->{$down}, 2, "$down holds them";

$ng->reload(config($down));
ok scalar(@{ $ng->old_workers }), "reloaded with $down down; the old workers still run their requests";

my $st = $ng->request(GET => '/status');
like $st->{body}, qr/"server":\s*"127\.0\.0\.1:$port{$down}",\s*"address":\s*"[^"]+",\s*"weight":\s*1,\s*"state":\s*"down",\s*"inflight":\s*2\b/,
     "the status: $down is down, with the old workers' 2 requests in flight";

for my $id (@moved) {
    my $r = route($id);
    ok $r->{status} == 200 && $r->{route} eq 'failover' && $r->{server} ne $down
       && $r->{body} eq $r->{server},
       "$id (home $down) fails over to $r->{server}: $r->{route}, $r->{status}";
}
for my $id (@stay) {
    my $r = route($id);
    ok $r->{status} == 200 && $r->{route} eq 'affinity' && $r->{server} eq $home{$id},
       "$id stays at $home{$id}: $r->{route}";
}

my @got = map { $_->read(10) } @held;
is_deeply [ map { "$_->{status} $_->{body}" } @got ], [ ("200 $down\n") x 2 ],
          "the two requests held at $down finished there with 200";
$_->close for @held;

ok wait_until(sub { !@{ $ng->old_workers } }, 10), 'the old workers exited';
is_deeply status_of(), { b1 => 0, b2 => 0, b3 => 0 }, 'the status shows 0 in flight everywhere';

$ng->reload(config());
for my $id (@moved) {
    my $r = route($id);
    ok $r->{status} == 200 && $r->{route} eq 'affinity' && $r->{server} eq $down && $r->{first} == 0,
       "without down: $id is back at $down, affinity, 0 in flight";
}

ok wait_until(sub { !@{ $ng->old_workers } }, 10), 'the old workers exited';
is_deeply status_of(), { b1 => 0, b2 => 0, b3 => 0 }, 'the status shows 0 in flight everywhere';

my @alerts = grep { /\[(?:alert|crit|emerg)\]|exited on signal/ } $ng->log;
ok !@alerts, 'no alert, no crash in the error log' or diag join "\n", @alerts;

$ng->stop;
$be->stop;

done_testing();
