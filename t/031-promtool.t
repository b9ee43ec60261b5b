# The Prometheus text passes `promtool check metrics` (Debian's prometheus
# package), after traffic that makes every counter and every server state
# non-trivial; and it says what the JSON says.  A plain Test::More
# scenario (see t/lib/PrefixAware/Status.pm).  Without promtool the suite
# fails: `make deps-test` installs it.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Status;

my $promtool = $ENV{PROMTOOL} || 'promtool';
if (!ok system("command -v $promtool >/dev/null 2>&1") == 0,
        "$promtool is installed (Debian package prometheus: make deps-test)")
{
    done_testing;
    exit;
}

# a1 and a2 answer; nothing listens on 1999, which fails once and is then
# "failed" for a minute; 1996 is down
my $http = '';
for my $port (1997, 1998) {
    $http .= <<"_EOC_";
    server {
        listen 127.0.0.1:$port;
        access_log off;
        location / {
            return 200 "$port\\n";
        }
    }
_EOC_
}

my $ngx = PrefixAware::Status->start(http => <<"_EOC_", locations => <<'_EOC_');
    upstream llm {
        prefix_aware index=off length=2048 threshold=3 format=auto;
        server 127.0.0.1:1997;
        server localhost:1998 weight=2;
        server 127.0.0.1:1999 max_fails=1 fail_timeout=60s;
        server 127.0.0.1:1996 down;
    }
    upstream tenant-b {
        prefix_aware index=off format=openai;
        server 127.0.0.1:1997 weight=3;
    }
$http
_EOC_
        location / {
            proxy_pass http://llm;
        }
        location /unbuffered/ {
            proxy_pass http://llm/;
            proxy_request_buffering off;
        }
        location /b/ {
            proxy_pass http://tenant-b/;
        }
_EOC_

my $ID = 'X-Amzn-SageMaker-Prefix-Aware-Id';
my @traffic = (
    (map { [POST => '/v1/chat/completions', body => qq({"model":"m","messages":[{"role":"user","content":"question $_"}]})] } 1 .. 20),
    (map { [POST => '/v1/completions', body => qq({"model":"m","prompt":"complete $_"})] } 1 .. 5),
    (map { [POST => '/invocations', body => "raw $_"] } 1 .. 10),
    (map { [GET => '/v1/models'] } 1 .. 4),
    (map { [GET => '/ping', headers => [$ID => "tenant-$_"]] } 1 .. 4),
    [POST => '/v1/chat/completions', body => 'not json'],
    [POST => '/v1/chat/completions', body => '{"messages":"x"}'],
    [POST => '/v1/chat/completions', body => '{"messages":[],"prompt_cache_key":""}'],
    [POST => '/invocations', body => 'x', headers => [$ID => '']],
    [POST => '/unbuffered/invocations', body => 'streamed body', pause => 0.2],
    (map { [POST => '/b/v1/chat/completions', body => qq({"messages":[{"role":"user","content":"b $_"}],"prompt_cache_key":"t$_"})] } 1 .. 3),
);

my %status;
for my $r (@traffic) {
    my $res = $ngx->request(@$r);
    $status{$res->{status}}++;
}
is_deeply \%status, { 200 => @traffic - 1, 400 => 1 },
          'the traffic was served (one 400, for the empty id header)';

my $json = $ngx->status_json;
my $text = $ngx->status_prometheus;
my $text2 = $ngx->status_prometheus(Accept => 'text/plain;version=0.0.4;q=0.5,*/*;q=0.1');

my $st = $json->{upstreams}{llm};
is_deeply [ map { $_->{state} } @{ $st->{servers} } ], [qw(up up failed down)],
          'servers up, up, failed and down';
ok $st->{unbuffered} >= 1 && $st->{openai_fallbacks} >= 2 && $st->{rejected} == 1
   && $st->{invalid_cache_key} == 1
   && $st->{id} >= 4 && $st->{keys}{none} >= 5,
   'every counter has counted';
ok grep({ $_->{failover} > 0 } @{ $st->{servers} }), 'some requests failed over';
is $json->{upstreams}{'tenant-b'}{id}, 3, 'the second upstream counted its own';

# promtool
for my $case ([ '?format=prometheus', $text ], [ 'Accept: text/plain', $text2 ]) {
    my ($how, $body) = @$case;
    my ($rc, $lint) = $ngx->promtool($body);
    is $rc, 0, "promtool check metrics accepts the text ($how)";
    is $lint, '', "promtool has nothing to say ($how)" or diag $body;
}

# the text says what the JSON says
my ($v, $type) = PrefixAware::Status::parse_prometheus($text);
my @problems = PrefixAware::Status::compare_samples(
    $v, PrefixAware::Status::prometheus_from_json($json));
is_deeply \@problems, [], 'every sample is the JSON figure, and there is no other';

is $type->{nginx_prefix_aware_first_choice_inflight}, 'histogram', 'the histogram is typed so';
is_deeply [ sort grep { !/_total$/ } grep { $type->{$_} eq 'counter' } keys %$type ], [],
          'every counter ends in _total';
is $json->{upstreams}{llm}{servers}[1]{server}, 'localhost:1998', 'a server is named as configured';
is $json->{upstreams}{llm}{servers}[1]{address}, '127.0.0.1:1998', '... and its address is the one connected to';
is $text, $text2, 'the Accept header gets the same text';

$ngx->stop;
unlike $ngx->error_log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

done_testing;
