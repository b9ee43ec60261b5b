# What the engines report (metrics=, capacity=auto): each server's
# /metrics page is asked every metrics_interval, from one worker at a
# time, and read as vLLM and SGLang print it.
#
# 1. capacity=auto: a vLLM server's KV cache (block_size x num_gpu_blocks)
#    and an SGLang server's (max_total_num_tokens) become their capacities
#    in the index; their queues and KV usage are on the status page (JSON
#    and Prometheus); a server without /metrics keeps the configured
#    capacity (capacity=auto:N), is shown failing and counted.
# 2. An engine restarted with another cache is picked up within an
#    interval.
# 3. Lies (negative queues, a usage of 3, a cache of 0 blocks), an answer
#    over the limit and one that never ends are refused and counted; the
#    last capacity stands for 3 intervals, then the configured one.
# 4. The capacity changes routing: with an engine that reports a cache
#    of 1024 tokens the index forgets a prefix after 32 blocks of other
#    prompts (depth 0), where capacity=262144 still matches it (depth 23).
# 5. load=engine: the requests an engine reports beyond those the hosts
#    know of (other clients') count in its server's work, so that a
#    server busy with them is passed over; without it they do not.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4 b5 b6);

my $be = PrefixAware::Scenario->new(name => 'engines');
my $html = $be->root . '/html';

sub page {
    my ($b, $text) = @_;
    my $f = "$html/metrics-$b.txt";
    if (!defined $text) {
        unlink $f;
        return;
    }
    open my $fh, '>', "$f.tmp" or die "$f: $!\n";
    print $fh $text;
    close $fh;
    rename "$f.tmp", $f or die "$f: $!\n";
}

sub vllm {
    my (%o) = @_;
    my $m = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"';
    return join '', map { "$_\n" }
        '# HELP vllm:num_requests_running Number of requests in model '
        . 'execution batches.',
        '# TYPE vllm:num_requests_running gauge',
        "vllm:num_requests_running{$m} $o{running}",
        "vllm:num_requests_waiting{$m} $o{waiting}",
        "vllm:kv_cache_usage_perc{$m} $o{usage}",
        (map { "vllm:time_to_first_token_seconds_bucket{$m,le=\"$_\"} 3.0" }
             qw(0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 +Inf)),
        '# TYPE vllm:cache_config_info gauge',
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",'
        . 'enable_prefix_caching="True",gpu_memory_utilization="0.9",'
        . "num_cpu_blocks=\"None\",num_gpu_blocks=\"$o{blocks}\","
        . 'num_gpu_blocks_override="None"} 1.0';
}

my $sglang = <<'_EOP_';
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="0"} 5.0
sglang:num_queue_reqs{engine_type="unified",model_name="m",tp_rank="0"} 1.0
sglang:token_usage{engine_type="unified",model_name="m",tp_rank="0"} 0.5
sglang:max_total_num_tokens{engine_type="unified",model_name="m",tp_rank="0"} 100000.0
_EOP_

page(b1 => vllm(running => '2.0', waiting => '7.0', usage => '0.25',
                blocks => 2000));
page(b2 => $sglang);
page(b3 => undef);
page(b4 => vllm(running => 0, waiting => 0, usage => 0, blocks => 64));
page(b5 => vllm(running => 8, waiting => 40, usage => '0.9', blocks => 2000));
page(b6 => vllm(running => 0, waiting => 0, usage => '0.1', blocks => 2000));

# a page over 8 MB, and one sent at 1 KB a second
{
    open my $fh, '>', "$html/huge.txt" or die;
    my $line = "vllm:num_requests_waiting{x=\"" . ('y' x 1000) . "\"} 1\n";
    print $fh $line x 9000;
    close $fh;
}

$be->start(join '', map { <<"_EOC_" } sort keys %port);
    server {
        listen 127.0.0.1:$port{$_};
        location = /metrics {
            default_type text/plain;
            alias $html/metrics-$_.txt;
        }
        location = /huge {
            default_type text/plain;
            alias $html/huge.txt;
        }
        location = /slow {
            default_type text/plain;
            limit_rate 1;
            alias $html/huge.txt;
        }
        location / { return 200 "$_\\n"; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'engine', workers => 2);
my $listen = $ng->port;

my $http = <<"_EOC_";
    upstream up {
        prefix_aware capacity=auto:51200 metrics_interval=200ms;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
        server 127.0.0.1:$port{b3};
    }

    upstream huge {
        prefix_aware capacity=auto metrics=/huge metrics_interval=200ms;
        server 127.0.0.1:$port{b1};
    }

    upstream slow {
        prefix_aware capacity=auto metrics=/slow metrics_interval=200ms;
        server 127.0.0.1:$port{b1};
    }

    upstream small {
        prefix_aware length=8192 capacity=auto metrics_interval=100ms;
        server 127.0.0.1:$port{b4};
    }

    upstream large {
        prefix_aware length=8192 capacity=262144 metrics=/metrics;
        server 127.0.0.1:$port{b4};
    }

    upstream busy {
        prefix_aware load=engine metrics=/metrics metrics_interval=1s;
        server 127.0.0.1:$port{b5};
        server 127.0.0.1:$port{b6};
    }

    upstream own {
        prefix_aware metrics=/metrics metrics_interval=1s;
        server 127.0.0.1:$port{b5};
        server 127.0.0.1:$port{b6};
    }

    server {
        listen 127.0.0.1:$listen;
        add_header X-Depth \$prefix_aware_depth;
        location = /status { prefix_aware_status; }
        location /small/ { proxy_pass http://small/; }
        location /large/ { proxy_pass http://large/; }
        location /busy/ { proxy_pass http://busy/; }
        location /own/ { proxy_pass http://own/; }
        location / { proxy_pass http://up; }
    }
_EOC_

$ng->start($http);

sub waits {
    my ($code, $timeout) = @_;
    return wait_until { $code->() } $timeout;
}

sub status {
    my $r = $ng->request(GET => '/status?format=json');
    return eval { JSON::PP::decode_json($r->{body}) } || {};
}

# the engine part of each server of an upstream, by backend name
sub engines {
    my ($up) = @_;
    my $u = status()->{upstreams}{ $up // 'up' } or return {};
    my %by;
    for my $s (@{ $u->{servers} }) {
        my ($b) = grep { $s->{server} eq "127.0.0.1:$port{$_}" } keys %port;
        $by{$b} = $s->{engine};
    }
    return \%by;
}

# 1. what the engines say

my $e = waits(sub { my $e = engines(); ($e->{b1}{capacity}
                     && $e->{b2}{capacity} && $e->{b3}{errors}) ? $e : undef }, 5);

ok $e, 'every server was polled' or diag explain engines();

is $e->{b1}{capacity}, 32000, 'vLLM: 2000 blocks of 16 tokens';
is $e->{b1}{index_capacity}, 32000, '... are its capacity in the index';
is $e->{b1}{waiting}, 7, '... 7 waiting';
is $e->{b1}{running}, 2, '... 2 running';
is $e->{b1}{kv_usage}, 0.25, '... a quarter of its cache used';
ok !$e->{b1}{failing}, '... not failing';
ok $e->{b1}{age_ms} < 1000, "... reported $e->{b1}{age_ms} ms ago";

is $e->{b2}{capacity}, 100000, 'SGLang: max_total_num_tokens';
is $e->{b2}{index_capacity}, 100000, '... its capacity in the index';
is_deeply [ @{ $e->{b2} }{qw(waiting running kv_usage)} ], [ 1, 5, 0.5 ],
    '... its queue, running requests and usage';

ok $e->{b3}{failing}, 'no /metrics: failing';
ok $e->{b3}{errors} >= 1, "... $e->{b3}{errors} errors counted";
ok !exists $e->{b3}{capacity}, '... no capacity reported';
is $e->{b3}{index_capacity}, 51200, '... the configured capacity stands';

my $m = status()->{upstreams}{up}{metrics};
is $m->{uri}, '/metrics', 'status: the page asked';
is $m->{interval_ms}, 200, 'status: the interval';
ok $m->{polls} >= 3, "status: $m->{polls} polls";

my $prom = $ng->request(GET => '/status?format=prometheus')->{body};
my $b1 = "upstream=\"up\",server=\"127.0.0.1:$port{b1}\"";
like $prom, qr/^nginx_prefix_aware_engine_capacity_tokens\{$b1\} 32000$/m,
    'Prometheus: the capacity';
like $prom, qr/^nginx_prefix_aware_engine_waiting_requests\{$b1\} 7$/m,
    'Prometheus: the queue';
like $prom, qr/^nginx_prefix_aware_engine_kv_usage_ratio\{$b1\} 0\.250000$/m,
    'Prometheus: the usage';
like $prom, qr/^nginx_prefix_aware_engine_report_age_seconds\{$b1\} \d+\.\d{3}$/m,
    'Prometheus: the age';
like $prom, qr/^nginx_prefix_aware_engine_poll_errors_total\{upstream="up",server="127.0.0.1:$port{b3}"\} [1-9]\d*$/m,
    'Prometheus: the errors of the server without metrics';

like $ng->log, qr/server "127.0.0.1:$port{b3}" of upstream "up" gave no metrics at "\/metrics": status is not 200/,
    'the failing server is logged';

# 2. an engine restarted with twice the blocks

page(b1 => vllm(running => 0, waiting => 0, usage => '0.0', blocks => 4000));
my $t0 = time;
ok waits(sub { (engines()->{b1}{capacity} // 0) == 64000 }, 2),
    'a new cache size is picked up';
my $took = time - $t0;
ok $took < 0.6, sprintf('... within %.2f s (interval 0.2 s)', $took);
is engines()->{b1}{index_capacity}, 64000, '... and is the index capacity';

# 3. lies, and answers that are too big or too slow

my $rej0 = engines()->{b1}{rejected};
page(b1 => join "\n", 'vllm:num_requests_waiting -3',
     'vllm:num_requests_running NaN', 'vllm:kv_cache_usage_perc 3',
     'vllm:cache_config_info{block_size="16",num_gpu_blocks="0"} 1.0', '');
ok waits(sub { (engines()->{b1}{rejected} // 0) >= $rej0 + 4 }, 2),
    'lying values are refused and counted';
$e = engines()->{b1};
ok $e->{failing}, '... a page with nothing readable is a failing poll';
is $e->{capacity}, 64000, '... the last capacity stands for now';
ok waits(sub { !defined engines()->{b1}{capacity} }, 2),
    '... for 3 intervals, then';
is engines()->{b1}{index_capacity}, 51200, '... the configured one is back';

my $huge = waits(sub { my $h = engines('huge')->{b1}; $h->{errors} ? $h : undef }, 3);
ok $huge && !$huge->{reported}, 'a page over 8 MB is refused';
like $ng->log, qr/upstream "huge" gave no metrics at "\/huge": answer over 8 MB/,
    '... and logged';

my $slow = waits(sub { my $h = engines('slow')->{b1}; $h->{errors} ? $h : undef }, 3);
ok $slow && !$slow->{reported}, 'a page that never ends times out';
like $ng->log, qr/upstream "slow" gave no metrics at "\/slow": timed out/,
    '... and is logged';

my $logged = () = $ng->log =~ /upstream "slow" gave no metrics/g;
is $logged, 1, 'a failing server is logged once';

# the readable page again: the server recovers
page(b1 => vllm(running => 1, waiting => 0, usage => '0.1', blocks => 2000));
ok waits(sub { (engines()->{b1}{capacity} // 0) == 32000
                && !engines()->{b1}{failing} }, 2), 'the server recovers';

# 4. the capacity in routing: 1024 tokens (64 blocks of 16) against 262144

ok waits(sub { (engines('small')->{b4}{index_capacity} // 0) == 1024 }, 2),
    'small: the engine reports 1024 tokens';

srand(66);

sub depth {
    my ($path, $body) = @_;
    my $r = $ng->request(POST => $path, body => $body);
    return $r->{status} == 200 ? $r->{headers}{'x-depth'} : "status $r->{status}";
}

for my $up (qw(small large)) {
    my $a = rnd(3000);
    depth("/$up/x", $a);
    my $again = depth("/$up/x", $a);
    depth("/$up/x", rnd(3000)) for 1 .. 20;
    my $later = depth("/$up/x", $a);

    is $again, 23, "$up: a prompt sent again matches its 23 blocks";

    if ($up eq 'small') {
        is $later, 0, "$up: after 20 other prompts it is forgotten";
    } else {
        is $later, 23, "$up: after 20 other prompts it is still held";
    }
}

# 5. load=engine: a server whose engine reports 48 requests that no host
#    sent (other clients') carries their work in the balance bound: it is
#    passed over; with load=own (the default) it is not.  Polled every
#    second: a report counts for two intervals, and at 100 ms a poll late
#    by 200 ms (a slow build, a busy machine) let one of the 40 requests
#    see the server idle (CI, under ASan)

ok waits(sub { (engines('busy')->{b5}{waiting} // 0) == 40
               && (engines('own')->{b5}{waiting} // 0) == 40 }, 5),
   'both upstreams read the engines';

for my $up (qw(busy own)) {
    my %to;
    for (1 .. 40) {
        my $r = $ng->request(POST => "/$up/x", body => rnd(2000));
        my ($b) = $r->{body} =~ /^(b\d)$/m;
        $to{ $b // "status $r->{status}" }++;
    }
    if ($up eq 'busy') {
        is_deeply \%to, { b6 => 40 },
            'load=engine: every request to the server whose engine is idle';
    } else {
        ok $to{b5} && $to{b6},
           "load=own: the engine's queue is not counted ("
           . join(', ', map { "$_ $to{$_}" } sort keys %to) . ')';
    }
}

unlike $ng->log, qr/\[(alert|crit|emerg)\]/, 'no alert in the log';

$ng->stop;
$be->stop;

done_testing;
