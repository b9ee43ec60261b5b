# Switching the strategy with nginx -s reload keeps the in-flight counts and
# the counters of the servers that stay: the zone keeps its records by
# upstream and server name, whatever the strategy.  prefix routing holds
# two slow requests of one key on its home; a reload to least_outstanding
# (adding b4) shows them still in flight, and the new workers' requests go
# around the home, which the old workers still load; the prefix counters
# are as they were, b4 starts at zero.  A reload back to prefix keeps the
# least_outstanding counters.  worker_processes 2.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'switch', workers => 2);

sub config {
    my ($strategy, @b) = @_;
    my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } @b;
    my $listen = $ng->port;
    return <<"_EOC_";
    upstream up {
        prefix_aware index=off length=1024 strategy=$strategy;
$servers    }

    server {
        listen 127.0.0.1:$listen reuseport;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_
}

# { server => { requests, inflight, prefix => {route => n}, ... } }
sub servers {
    my $r = $ng->request(GET => '/status?format=json');
    my $st = eval { JSON::PP::decode_json($r->{body}) } || {};
    my %s;
    for my $s (@{ $st->{upstreams}{up}{servers} || [] }) {
        $s{ $name{ $s->{server} } } = { requests => $s->{requests},
                                        inflight => $s->{inflight},
                                        %{ $s->{strategies} } };
    }
    return \%s;
}

my @key = (headers => [ID_HEADER, 'tenant-s']);

$ng->start(config('prefix', qw(b1 b2 b3)));

my @to;
for (1 .. 10) {
    my $r = $ng->request(GET => '/t', @key);
    push @to, $r->{body} =~ s/\n//r;
}
my ($home) = @to;
is_deeply \@to, [ ($home) x 10 ], "prefix: ten requests of one key at its home $home";

# two slow requests held at the home across the reload
my @held = map { $ng->conn } 1 .. 2;
$_->send(GET => '/slow3', @key) for @held;
ok wait_until(sub { (servers()->{$home}{inflight} // 0) == 2 }, 5),
   "two requests in flight at $home";

my $before = servers();

$ng->reload(config('least_outstanding', qw(b1 b2 b3 b4)));

my $after = servers();
is $after->{$home}{inflight}, 2, 'after the reload the two requests still count at the home';
for my $b (qw(b1 b2 b3)) {
    is_deeply [ @{ $after->{$b} }{qw(requests prefix)} ], [ @{ $before->{$b} }{qw(requests prefix)} ],
              "$b keeps its request counter and its prefix counters";
}
is $after->{b4}{requests}, 0, 'b4, new, starts at zero';
is $after->{$home}{prefix}{affinity}, 12, 'the home counted 12 prefix affinities';

# the new workers see the old workers' two: three requests, none at the home
my @lo;
for (1 .. 3) {
    my $r = $ng->request(GET => '/t', @key);
    push @lo, $r->{body} =~ s/\n//r;
}
ok !grep({ $_ eq $home } @lo), "least_outstanding went around the busy home: @lo";

my @got = map { $_->read(10) } @held;
is scalar(grep { $_->{status} == 200 && $_->{body} eq "$home\n" } @got), 2,
   'the held requests finished at the home';
$_->close for @held;

ok wait_until(sub { !@{ $ng->old_workers } }, 10), 'the old workers exited';
ok wait_until(sub { my $s = servers(); !grep { $s->{$_}{inflight} } keys %$s }, 5),
   'nothing in flight';

my $lo_before = servers();
my $n = 0;
for my $s (values %$lo_before) {
    $n += $s->{least_outstanding}{$_} for qw(affinity spill failover no_key);
}
is $n, 3, 'three least_outstanding requests counted';

$ng->reload(config('prefix', qw(b1 b2 b3 b4)));

my $back = servers();
is_deeply { map { ($_ => $back->{$_}{least_outstanding}) } keys %$back },
          { map { ($_ => $lo_before->{$_}{least_outstanding}) } keys %$lo_before },
          'back to prefix: the least_outstanding counters are kept';

unlike scalar $ng->log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing();
