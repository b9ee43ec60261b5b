# strategy=random: over 1800 requests with one key, each server's share is
# its weight over the usable servers' weights, within 5 percentage points
# (the standard deviation of a share is at most 1.2 points at this count,
# so a good generator fails with p < 1e-4); a down server gets none.  The
# prefix strategy would send all 1800 to the key's home.  The status page
# counts them under "random", the route told against the key's home: one
# server has them as affinity, the others as spill.  worker_processes 2.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Status;

my @port = map { PrefixAware::Status::free_port() } 1 .. 4;
my %weight = ($port[0] => 1, $port[1] => 2, $port[2] => 3);

my $backends = '';
for my $p (@port) {
    $backends .= <<"_EOC_";
    server {
        listen 127.0.0.1:$p;
        access_log off;
        location / { return 200 "$p\\n"; }
    }
_EOC_
}

my $ngx = PrefixAware::Status->start(workers => 2, http => <<"_EOC_", locations => <<'_EOC_');
    upstream rnd {
        prefix_aware index=off length=1024 threshold=1024 strategy=random;
        server 127.0.0.1:$port[0] weight=1;
        server 127.0.0.1:$port[1] weight=2;
        server 127.0.0.1:$port[2] weight=3;
        server 127.0.0.1:$port[3] weight=5 down;
    }
$backends
_EOC_
        location / {
            proxy_pass http://rnd;
        }
_EOC_

my $N = 1800;
my %got;
for (1 .. $N) {
    my $r = $ngx->request(POST => '/v1/completions', body => '{"prompt":"one shared prompt"}');
    $got{ $r->{status} == 200 ? $r->{body} =~ s/\n//r : "status $r->{status}" }++;
}

is $got{$port[3]} // 0, 0, 'the down server got nothing';
is eval { my $n = 0; $n += $got{$_} // 0 for @port[0 .. 2]; $n }, $N, "the $N requests were served";

for my $p (@port[0 .. 2]) {
    my $share = ($got{$p} // 0) / $N;
    my $want = $weight{$p} / 6;
    ok abs($share - $want) <= 0.05,
       sprintf 'weight %d: share %.3f, expected %.3f within 0.05', $weight{$p}, $share, $want;
}

my $st = $ngx->status_json->{upstreams}{rnd};
is $st->{strategy}, 'random', 'the status names the strategy';
is $st->{strategies}{random}{requests}, $N, "the status counts $N requests of random";
is $st->{strategies}{prefix}{requests} + $st->{strategies}{least_outstanding}{requests}, 0,
   'and none of the other strategies';

# the key's home is one of the four servers (the ports, so the ring, vary)
my %sum;
for my $srv (@{ $st->{servers} }) {
    $sum{$_} += $srv->{strategies}{random}{$_} for qw(affinity spill failover no_key);
}
my @home = grep { $_->{strategies}{random}{affinity} } @{ $st->{servers} };

if ($sum{failover}) {
    is_deeply \%sum, { affinity => 0, spill => 0, failover => $N, no_key => 0 },
              'the home is the down server: every request failed over';
} else {
    is scalar(@home), 1, 'one server is the home of the key';
    my ($hp) = ($home[0]{server} // '') =~ /:(\d+)$/;
    is $sum{affinity}, $got{$hp // ''} // -1, 'its requests are all affinity';
    is $sum{spill}, $N - $sum{affinity}, 'the others spill';
}

$ngx->stop;
unlike $ngx->error_log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

done_testing;
