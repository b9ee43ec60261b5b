# Counters and in-flight counts over worker_processes 2: requests on
# separate connections, spread over both workers (listen ... reuseport),
# add up in the status page whichever worker answers it; slow requests
# held by either worker show in flight, and go back to 0.  A plain
# Test::More scenario (see t/lib/PrefixAware/Status.pm).

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Status;

my $pad = 'p' x 1100;
my $http = '';
for my $port (1997, 1998) {
    $http .= <<"_EOC_";
    server {
        listen 127.0.0.1:$port;
        access_log off;
        location / {
            return 200 "$port\\n";
        }
        location /slow {
            limit_rate 1k;
            add_header X-Pad $pad;
            return 200 "$port\\n";
        }
    }
_EOC_
}

my $ngx = PrefixAware::Status->start(workers => 2, http => <<"_EOC_", locations => <<'_EOC_');
    upstream llm {
        prefix_aware index=off length=1024 threshold=100;
        server 127.0.0.1:1997;
        server 127.0.0.1:1998;
    }
    log_format workers '\$pid \$prefix_aware_source \$upstream_addr';
$http
_EOC_
        location / {
            proxy_pass http://llm;
            access_log logs/workers.log workers;
        }
_EOC_

# workers may still be starting (slowly under sanitizers)
my @workers;
for (1 .. 100) {
    @workers = $ngx->workers;
    last if @workers == 2;
    select undef, undef, undef, 0.1;
}
is scalar @workers, 2, 'two worker processes';

# 10 chat prompts x 10, 6 raw bodies x 10, 40 without a body: 200
# requests, each on its own connection
my @reqs;
for my $i (1 .. 10) {
    my $chat = qq({"model":"m","messages":[{"role":"user","content":"prompt number $i"}]});
    push @reqs, ([POST => '/v1/chat/completions', body => $chat, key => "chat$i"]) x 10;
}
for my $i (1 .. 6) {
    push @reqs, ([POST => '/invocations', body => "raw body $i", key => "raw$i"]) x 10;
}
push @reqs, ([GET => '/v1/models', key => '']) x 40;
@reqs = @reqs[map { ($_ * 37) % 200 } 0 .. 199];     # interleaved

my (%backend, $ok);
for my $r (@reqs) {
    my ($method, $uri, %o) = @$r;
    my $res = $ngx->request($method, $uri, body => $o{body});
    $ok++ if $res->{status} == 200;
    push @{ $backend{$o{key}} }, $res->{body} if $o{key};
}
is $ok, 200, '200 requests answered 200';

my $same = grep { my @b = @$_; !grep { $_ ne $b[0] } @b } values %backend;
is $same, 16, 'every prompt went to one backend, whichever worker routed it';

# both workers served some of them
open my $log, '<', $ngx->dir . '/logs/workers.log' or die $!;
my %by;
while (<$log>) {
    $by{$1}++ if /^(\d+) /;
}
is_deeply [sort { $a <=> $b } keys %by], \@workers, 'both workers proxied requests';
note 'requests per worker: ' . join ', ', map { "$_: $by{$_}" } sort keys %by;

# the status page adds up all workers, whichever answers it
for my $try (1 .. 6) {
    my $st = $ngx->status_json->{upstreams}{llm};
    my @s = @{ $st->{servers} };
    my $sum = sub { my $f = shift; my $n = 0; $n += $_->{$f} for @s; $n };

    is_deeply [ $st->{keys}{none}, $st->{keys}{body}, $st->{keys}{openai} ],
              [ 40, 60, 100 ], "keys by source add up (status $try)";
    is $sum->('requests'), 200, "server requests add up to 200 (status $try)";
    is $st->{keyed}, 160, "keyed (status $try)";
    is $sum->('affinity'), 160, "affinity (status $try)";
    is $sum->('no_key'), 40, "no_key (status $try)";
    is $sum->('inflight'), 0, "nothing in flight (status $try)";
    my $b = 0;
    $b += $_ for @{ $st->{first_choice_inflight}{buckets} };
    is $b, 160, "histogram count (status $try)";
}

# 8 slow requests on connections of their own, spread over the workers:
# all of them in flight in the status page, then none
my @slow = map { $ngx->send_request(GET => "/slow/$_") } 1 .. 8;
my $inflight = sub {
    my $n = 0;
    $n += $_->{inflight} for @{ $ngx->status_json->{upstreams}{llm}{servers} };
    return $n;
};
my $until = time + 3;
sleep 0.02 while $inflight->() < 8 && time < $until;
for my $try (1 .. 4) {
    my $st = $ngx->status_json->{upstreams}{llm};
    my $n = 0;
    $n += $_->{inflight} for @{ $st->{servers} };
    is $n, 8, "8 slow requests in flight (status $try)";
}

my $done = grep { $ngx->read_response($_, 10)->{status} == 200 } @slow;
is $done, 8, 'the slow requests finished';

my $st = $ngx->status_json->{upstreams}{llm};
is_deeply [ map { $_->{inflight} } @{ $st->{servers} } ], [0, 0], 'back to 0 in flight';
my $n = 0;
$n += $_->{requests} for @{ $st->{servers} };
is $n, 208, '208 requests in all';

# a worker killed while it holds requests: its replacement gives back
# the counts of the dead one
@slow = map { $ngx->send_request(GET => "/slow/k$_") } 1 .. 8;
$until = time + 3;
sleep 0.02 while $inflight->() < 8 && time < $until;
is $inflight->(), 8, '8 more slow requests in flight';
kill 'KILL', $workers[0];
my $deadline = time + 5;
my @now;
while (time < $deadline) {
    @now = $ngx->workers;
    last if @now == 2 && !grep { $_ == $workers[0] } @now;
    sleep 0.05;
}
is scalar(grep { $_ != $workers[0] } @now), 2, 'the master started a new worker';
$ngx->read_response($_, 10) for @slow;
sleep 0.2;
$st = $ngx->status_json->{upstreams}{llm};
is_deeply [ map { $_->{inflight} } @{ $st->{servers} } ], [0, 0],
          'in flight is 0 again after the killed worker was replaced';
like $ngx->error_log, qr/prefix_aware: giving back the in-flight counts of exited process $workers[0]/,
     'the new worker gave back the counts of the dead one';

$ngx->stop;
unlike $ngx->error_log, qr/\[(?:alert|crit|emerg)\](?!.*exited on signal 9)/, 'no alert but the killed worker';

done_testing;
