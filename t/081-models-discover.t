# Models and LoRA adapters, discovered sets: with models=discover each
# server's GET /v1/models is asked every models_interval (from one worker
# at a time) and a request whose model a server lists goes, by prefix, to
# the servers that list it only.  Three backends list different adapters
# from files the test rewrites: an adapter added at run time is picked up
# within an interval; a server that stops answering keeps its last list
# for 3 intervals, then counts as serving every model; a declared set wins
# over discovery; a model no server lists uses all servers; a set whose
# servers are all down is a 503 naming the model.  nginx runs with two
# workers and a master.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

my %port = map { $_ => free_port() } qw(b1 b2 b3);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
my $html = $be->root . '/html';

sub list {
    my ($b, @ids) = @_;
    my $f = "$html/models-$b.json";
    if (!@ids) {
        unlink $f;
        return;
    }
    open my $fh, '>', "$f.tmp" or die "$f: $!\n";
    print $fh JSON::PP::encode_json({ object => 'list',
        data => [ map { { id => $_, object => 'model', owned_by => 'vllm',
                          permission => [ { allow_sampling => JSON::PP::true } ] } }
                  @ids ] });
    close $fh;
    rename "$f.tmp", $f or die "$f: $!\n";
}

list(b1 => qw(base lora-a lora-b lora-x));
list(b2 => qw(base lora-b lora-c));
list(b3 => qw(base lora-c lora-a));

$be->start(join '', map { <<"_EOC_" } sort keys %port);
    server {
        listen 127.0.0.1:$port{$_};
        location = /v1/models {
            default_type application/json;
            alias $html/models-$_.json;
        }
        location / { return 200 "$_\\n"; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'models', workers => 2);
my $listen = $ng->port;
my $started = time;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware threshold=100 models=discover models_interval=1s
                     model_header=X-Model;
        prefix_aware_model lora-x 127.0.0.1:$port{b3};
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
        server 127.0.0.1:$port{b3};
    }

    upstream down {
        prefix_aware index=off models=discover models_interval=1s model_header=X-Model;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2} down;
        server 127.0.0.1:$port{b3} down;
    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location /down/ { proxy_pass http://down/; }
        location / { proxy_pass http://up; }
    }
_EOC_

sub status {
    my $r = $ng->request(GET => '/status');
    return eval { JSON::PP::decode_json($r->{body}) } || {};
}

# the model's entry in the status: { set, servers => [b1, ...], ... }
sub model {
    my ($m, $up) = @_;
    my $ms = status()->{upstreams}{ $up // 'up' }{models} or return;
    my ($e) = grep { $_->{name} eq $m } @{ $ms->{list} };
    return unless $e;
    return { %$e, servers => [ sort map { $name{$_} } @{ $e->{servers} } ] };
}

sub servers_of {
    my $e = model(@_);
    return $e ? join(' ', @{ $e->{servers} }) : '';
}

# where 30 prompts of a model go: { b1 => n, ... }, and the failures
sub spread {
    my ($m, $path) = @_;
    my (%n, @bad);
    for my $i (1 .. 30) {
        my $r = $ng->request(POST => $path // '/t', body => "prompt $i of $m",
                             headers => [ 'X-Model' => $m ]);
        my ($b) = $r->{body} =~ /^(b\d)$/m;
        if ($r->{status} == 200 && $b) { $n{$b}++ } else { push @bad, "$r->{status} $r->{body}" }
    }
    return (\%n, \@bad);
}

sub names { join ' ', sort keys %{ $_[0] } }

ok wait_until(sub { servers_of('lora-c') eq 'b2 b3' }, 5),
   'the lists of the three servers are in (lora-c on b2 b3)';

# affinity inside each set

for my $t ([ 'lora-a', 'b1 b3' ], [ 'lora-b', 'b1 b2' ], [ 'lora-c', 'b2 b3' ],
           [ 'base', 'b1 b2 b3' ])
{
    my ($m, $set) = @$t;
    my ($n, $bad) = spread($m);
    is "@$bad", '', "$m: 30 prompts served";
    is names($n), $set, "$m: they went to its set, $set, and to every server of it";
    my ($again) = spread($m);
    is_deeply $again, $n, "$m: the same prompts go to the same servers again";
}

is model('lora-a')->{set}, 'discovered', 'the status calls the set of lora-a discovered';

# a declared set wins over discovery

{
    my ($n) = spread('lora-x');
    is names($n), 'b3', 'lora-x, declared on b3 and listed by b1, goes to b3';
    is model('lora-x')->{set}, 'declared', 'the status calls it declared';
}

# a model no server lists uses all servers

{
    my ($n) = spread('lora-d');
    is names($n), 'b1 b2 b3', 'lora-d, listed by no server, goes to all';
    ok !model('lora-d'), 'it is not in the status list';
}

# an adapter loaded at run time

{
    my $t0 = time;
    list(b2 => qw(base lora-b lora-c lora-d));
    ok wait_until(sub { servers_of('lora-d') eq 'b2' }, 3),
       'lora-d loaded on b2 is listed';
    my $dt = time - $t0;
    cmp_ok $dt, '<=', 1.3, sprintf 'within an interval (1s) and a poll: %.2fs', $dt;
    my ($n, $bad) = spread('lora-d');
    is names($n), 'b2', 'lora-d now goes to b2 only';
}

# consistent placement in a set: an adapter unloaded from one server moves
# only the prompts that server had

{
    my $route = sub {
        map { my $r = $ng->request(POST => '/t', body => "placement $_",
                                   headers => [ 'X-Model' => 'base' ]);
              $r->{body} =~ /^(b\d)/ ? $1 : '?' } 1 .. 30;
    };
    my @before = $route->();
    list(b3 => qw(lora-c lora-a));                     # base unloaded on b3
    ok wait_until(sub { servers_of('base') eq 'b1 b2' }, 3), 'base unloaded from b3';
    my @after = $route->();
    my @moved = grep { $before[$_] ne $after[$_] } 0 .. 29;
    ok @moved && !grep({ $before[$_] ne 'b3' } @moved),
       sprintf 'only the %d prompts b3 had moved (%d of 30 moved)',
               scalar(grep { $_ eq 'b3' } @before), scalar @moved;
    ok !grep({ $_ eq 'b3' } @after), 'none goes to b3 now';
    list(b3 => qw(base lora-c lora-a));
    ok wait_until(sub { servers_of('base') eq 'b1 b2 b3' }, 3), 'base back on b3';
    is_deeply [ $route->() ], \@before, 'and the prompts back where they were';
}

# every server of a set down: 503 naming the model

{
    ok wait_until(sub { servers_of('lora-c', 'down') eq 'b2 b3' }, 3),
       'upstream "down" knows lora-c on b2 b3, both down';
    my $r = $ng->request(POST => '/down/t', body => 'x', headers => [ 'X-Model' => 'lora-c' ]);
    is $r->{status}, 503, 'lora-c: 503';
    is $r->{body}, qq{no server of model "lora-c" is usable\n}, 'naming the model';
    $r = $ng->request(POST => '/down/t', body => 'x', headers => [ 'X-Model' => 'lora-a' ]);
    is $r->{body}, "b1\n", 'lora-a (b1 b3) is served by b1';
    ok $ng->log =~ /no server of model "lora-c" is usable, answered 503/, 'the 503 is logged';
}

# a server that stops answering: its last list for 3 intervals, then all

{
    my $t0 = time;
    list('b3');                                        # 404 from now on
    sleep 1.6;
    my ($n) = spread('lora-b');
    is names($n), 'b1 b2', 'b3 silent for 1.6s: lora-b still on b1 b2';
    is servers_of('lora-a'), 'b1 b3', 'and lora-a keeps b3 (its last list)';
    ok $ng->log =~ /server "127\.0\.0\.1:$port{b3}" of upstream "up" does not list its models/,
       'the silence is logged';

    ok wait_until(sub { servers_of('lora-b') eq 'b1 b2 b3' }, 5),
       'then b3 counts as serving every model: lora-b on b1 b2 b3';
    my $dt = time - $t0;
    cmp_ok $dt, '>=', 2, sprintf '3 intervals after its last answer: %.2fs after the silence', $dt;
    ($n) = spread('lora-b');
    ok $n->{b3}, 'some lora-b prompts go to b3 now: ' . join ' ', map { "$_=$n->{$_}" } sort keys %$n;
    my ($st) = grep { $_->{server} eq "127.0.0.1:$port{b3}" }
               @{ status()->{upstreams}{up}{models}{servers} };
    ok $st && $st->{serves_all} && $st->{failing}, 'the status shows b3 failing, serving all';

    list(b3 => qw(base lora-c lora-a));
    ok wait_until(sub { servers_of('lora-b') eq 'b1 b2' }, 3),
       'b3 lists again: lora-b back on b1 b2';
}

# a reload keeps the lists (the zone, found by server name): the new
# workers route by them at once, before their first round

{
    my $old = $ng->workers;
    $ng->reload;
    my $new = $ng->workers;
    ok !grep({ my $o = $_; grep { $_ == $o } @$new } @$old), 'reloaded: new workers';
    my ($n) = spread('lora-c');
    is names($n), 'b2 b3', 'lora-c still on b2 b3 right after the reload';
}

# counters

{
    my $e = model('lora-b');
    is $e->{requests}, 120, 'the 120 requests of lora-b are counted';
    ok $e->{last_seen} > time - 5, 'last seen recently';
    my $prom = $ng->request(GET => '/status?format=prometheus')->{body};
    like $prom, qr/^nginx_prefix_aware_model_requests_total\{upstream="up",model="lora-b",set="discovered"\} \d+$/m,
         'prometheus: requests of lora-b';
    like $prom, qr/^nginx_prefix_aware_model_no_server_total\{upstream="down",model="lora-c"\} 1$/m,
         'prometheus: the 503 of lora-c';
}

# one worker at a time: a round of each upstream an interval, whichever
# worker's timer fires first (two workers polling on their own would make
# twice as many)

{
    my $elapsed = time - $started;
    my (%rounds, $log);
    $log = $ng->log;
    $rounds{$1}++ while $log =~ /(\d+)#\d+: prefix_aware models: polling the 3 servers/g;
    my $n = 0;
    $n += $_ for values %rounds;
    cmp_ok $n, '<=', 2 * ($elapsed + 1),
           sprintf '%d rounds of the two upstreams in %.1fs, by %d workers',
                   $n, $elapsed, scalar keys %rounds;
    cmp_ok $n, '>=', 2 * int($elapsed - 1), 'about one a second each';
}

unlike $ng->log, qr/\[(alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing;
