# strategy=$variable in an A/B: split_clients sends 10 % of users through
# least_outstanding and the rest through prefix routing on one upstream;
# a map names a strategy per header, and a value it does not know takes
# strategy_default= and is counted.  The status page counts requests by
# strategy and route, in JSON and in Prometheus text (which passes
# promtool and says what the JSON says); $prefix_aware_strategy tells the
# client which arm served it.  An upstream without strategy= has none of
# these figures.  worker_processes 2.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Status;

my @port = map { PrefixAware::Status::free_port() } 1 .. 3;

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

my $servers = join '', map { "        server 127.0.0.1:$_;\n" } @port;

my $ngx = PrefixAware::Status->start(workers => 2, http => <<"_EOC_", locations => <<'_EOC_');
    split_clients "\${http_x_user}" \$arm {
        10%  least_outstanding;
        *    prefix;
    }
    map \$http_x_arm \$by_header {
        default  "";
        r        random;
        lo       least_outstanding;
        bad      fastest;
    }
    upstream ab {
        prefix_aware index=off length=1024 strategy=\$arm;
$servers    }
    upstream hdr {
        prefix_aware index=off length=1024 strategy=\$by_header strategy_default=random;
$servers    }
    upstream plain {
        prefix_aware index=off length=1024;
$servers    }
$backends
_EOC_
        location /ab/ {
            proxy_pass http://ab/;
            add_header X-Strategy $prefix_aware_strategy;
            add_header X-Route $prefix_aware_route;
        }
        location /hdr/ {
            proxy_pass http://hdr/;
            add_header X-Strategy $prefix_aware_strategy;
        }
        location /plain/ {
            proxy_pass http://plain/;
        }
_EOC_

# the A/B: 1000 users, each with a prompt of its own
my (%arm, %route);
for my $i (1 .. 1000) {
    my $r = $ngx->request(POST => '/ab/invocations', body => "prompt of user $i",
                          headers => ['X-User' => "user$i"]);
    my $s = $r->{headers}{'x-strategy'} // "status $r->{status}";
    $arm{$s}++;
    $route{$s}{ $r->{headers}{'x-route'} // '' }++;
}

is_deeply [ sort keys %arm ], [qw(least_outstanding prefix)], 'two arms served';
my $lo = $arm{least_outstanding} // 0;
ok $lo >= 50 && $lo <= 150, "split_clients sent $lo of 1000 (10 % asked) through least_outstanding";
is $route{prefix}{affinity}, $arm{prefix}, 'every prefix request went to its home (nothing in flight)';

# the map: each value its strategy; unknown and empty values the default
my %hdr;
for my $v (qw(r lo bad bad bad), '') {
    my $r = $ngx->request(POST => '/hdr/invocations', body => 'x',
                          headers => [$v eq '' ? () : ('X-Arm' => $v)]);
    push @{ $hdr{$v} }, $r->{headers}{'x-strategy'} // "status $r->{status}";
}
is_deeply \%hdr, { r => ['random'], lo => ['least_outstanding'],
                   bad => [('random') x 3], '' => ['random'] },
          'map values pick the strategy; "fastest" and no value take strategy_default=random';

$ngx->request(POST => '/plain/invocations', body => 'x') for 1 .. 3;

my $json = $ngx->status_json;
my $ab = $json->{upstreams}{ab};
my $hd = $json->{upstreams}{hdr};
my $pl = $json->{upstreams}{plain};

is $ab->{strategy}, '$arm', 'JSON: the strategy is the variable';
is $ab->{strategy_default}, 'prefix', '... its default prefix';
is $ab->{strategies}{least_outstanding}{requests}, $lo, "JSON: $lo requests of least_outstanding";
is $ab->{strategies}{prefix}{requests}, 1000 - $lo, 'JSON: the rest of prefix';
is $ab->{strategies}{random}{requests}, 0, 'JSON: none of random';
is $ab->{strategy_unknown}, 0, 'JSON: no unknown value in the A/B';

my %sum;
for my $s (@{ $ab->{servers} }) {
    for my $st (keys %{ $s->{strategies} }) {
        $sum{$st}{$_} += $s->{strategies}{$st}{$_} for keys %{ $s->{strategies}{$st} };
    }
}
is $sum{prefix}{affinity}, $route{prefix}{affinity}, 'per server: the prefix arm by route';
is $sum{least_outstanding}{affinity} // 0, $route{least_outstanding}{affinity} // 0,
   'per server: the least_outstanding arm, affinity as the clients saw it';
is $sum{least_outstanding}{spill} // 0, $route{least_outstanding}{spill} // 0,
   '... and spill';

is $hd->{strategy_unknown}, 3, 'JSON: three unknown values counted';
is $hd->{strategy_default}, 'random', 'JSON: strategy_default';
is $hd->{strategies}{random}{requests}, 5, 'JSON: five requests by random (one asked, three unknown, one empty)';

ok !exists $pl->{strategy} && !exists $pl->{strategies}
   && !exists $pl->{servers}[0]{strategies},
   'an upstream without strategy= has no strategy figures';

# Prometheus: promtool, and the samples are the JSON figures
my $text = $ngx->status_prometheus;
my ($rc, $lint) = $ngx->promtool($text);
is $rc, 0, 'promtool check metrics accepts the text (Debian package prometheus: make deps-test)';
is $lint, '', 'promtool has nothing to say' or diag $text;

my ($v, $type) = PrefixAware::Status::parse_prometheus($text);
my @problems = PrefixAware::Status::compare_samples(
    $v, PrefixAware::Status::prometheus_from_json($json));
is_deeply \@problems, [], 'every sample is the JSON figure, and there is no other';

is $type->{nginx_prefix_aware_strategy_requests_total}, 'counter', 'strategy_requests_total is a counter';
my $n = 0;
$n += $v->{$_} for grep { /^nginx_prefix_aware_strategy_requests_total\{upstream="ab",.*strategy="least_outstanding"/ } keys %$v;
is $n, $lo, 'sum by (strategy) of strategy_requests_total is the arm';
is $v->{'nginx_prefix_aware_strategy_unknown_total{upstream="hdr"}'}, 3, 'strategy_unknown_total';
ok !grep({ /strategy.*upstream="plain"/ } keys %$v), 'no strategy samples for the plain upstream';
ok exists $v->{qq(nginx_prefix_aware_server_routed_total{upstream="ab",server="127.0.0.1:$port[0]",route="affinity"})},
   'the routed counters keep their name and labels';

$ngx->stop;
my $log = $ngx->error_log;
is scalar(() = $log =~ /unknown strategy "fastest" from "\$by_header", routed by "random"/g), 3,
   'each unknown value logged once, at info';
unlike $log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

done_testing;
