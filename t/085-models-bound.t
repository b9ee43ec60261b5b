# Issue 42, item 6: one engine listing 128 ids took every model slot of
# the upstream's models zone; another engine's adapter loaded later then
# got no slot, discovery only counted it (`full`) and logged nothing, and
# the adapter's requests went to every server (10 and 10 of 20).
#
# Now a server holds a share of the zone's slots (128 / servers, the
# declared models' apart) whatever the others list: past it, it takes only
# slots nobody needs, and gives them back to a server within its share.
# Here: server A lists "base" and 127 ids of its own (64 slots are its
# share, the other 64 are lent), server B lists "base"; then B loads
# "lora-new": it takes one of the slots A had past its share, A's id that
# lost it is refused, counted on the status page (JSON, Prometheus, the
# HTML page's column) and logged once (a warn naming the upstream, the
# server and how many ids were refused, at most once a minute).  The 20
# requests of "lora-new" all go to B.  Then: A's own share keeps routing
# to A, a churn of A's list leaves B's models alone, a list of 300 ids is
# counted, a second warn comes a minute after the first while refusals
# last, and they end (a notice) once B unloads its adapter.
#
# With the code before, the requests of "lora-new" went to both servers
# and nothing was logged.  nginx runs with two workers and a master.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

my %port = map { $_ => free_port() } qw(a b);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'bound-backends');
my $html = $be->root . '/html';

sub list {
    my ($b, @ids) = @_;
    my $f = "$html/models-$b.json";
    open my $fh, '>', "$f.tmp" or die "$f: $!\n";
    print $fh JSON::PP::encode_json({ object => 'list',
        data => [ map { { id => $_, object => 'model', owned_by => 'vllm' } }
                  @ids ] });
    close $fh;
    rename "$f.tmp", $f or die "$f: $!\n";
}

my @mine = map { sprintf 'a-%03d', $_ } 1 .. 127;

list(a => 'base', @mine);
list(b => 'base');

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

my $ng = PrefixAware::Scenario->new(name => 'bound', workers => 2);
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware threshold=100 models=discover models_interval=300ms
                     model_header=X-Model;
        server 127.0.0.1:$port{a};
        server 127.0.0.1:$port{b};
    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

sub models {
    my $r = $ng->request(GET => '/status');
    my $st = eval { JSON::PP::decode_json($r->{body}) } || {};
    return $st->{upstreams}{up}{models} || {};
}

sub servers_of {
    my ($m) = @_;
    my ($e) = grep { $_->{name} eq $m } @{ models()->{list} || [] };
    return '' unless $e && $e->{set} ne 'none';
    return join ' ', sort map { $name{$_} } @{ $e->{servers} };
}

sub record {
    my ($b) = @_;
    my ($s) = grep { $_->{server} eq "127.0.0.1:$port{$b}" }
              @{ models()->{servers} || [] };
    return $s || {};
}

# where n requests of a model go: "a=N b=N", and the failures
sub spread {
    my ($m, $n) = @_;
    my (%n, @bad);
    for my $i (1 .. $n) {
        my $r = $ng->request(POST => '/t', body => "prompt $i of $m",
                             headers => [ 'X-Model' => $m ]);
        my ($b) = $r->{body} =~ /^(a|b)$/m;
        if ($r->{status} == 200 && $b) { $n{$b}++ } else { push @bad, "$r->{status}" }
    }
    return (join(' ', map { "$_=$n{$_}" } sort keys %n), "@bad");
}

my $A = qr/server "127\.0\.0\.1:$port{a}" of upstream "up"/;

# the zone full of A's ids

ok wait_until(sub { my $m = models();
                    @{ $m->{list} || [] } == 128
                    && (record('a')->{models} // 0) == 128
                    && servers_of('base') eq 'a b' }, 5),
   "A's 128 ids take the zone's 128 slots while nobody else needs them";
is record('a')->{refused}, 0, 'none refused yet';
is models()->{share}, 64, "a server's share: 64 of 128 slots (2 servers)";

# B loads an adapter

my $from = $ng->log_size;
list(b => qw(base lora-new));

my $in = wait_until(sub { servers_of('lora-new') eq 'b' }, 3);
ok $in, 'lora-new loaded on B has a slot, its set is B';
diag 'lora-new: ' . (servers_of('lora-new') || 'no slot') unless $in;

{
    my ($n, $bad) = spread('lora-new', 20);
    is $bad, '', '20 requests of lora-new served';
    is $n, 'b=20', "all 20 went to B: $n";
}

ok wait_until(sub { (record('a')->{refused} // 0) == 1 }, 3),
   "the status counts A's id that lost its slot: refused 1";
is record('b')->{refused}, 0, 'B: refused 0';
is record('a')->{models}, 128, 'A still lists 128';

{
    my $prom = $ng->request(GET => '/status?format=prometheus')->{body};
    like $prom, qr/^nginx_prefix_aware_models_refused\{upstream="up",server="127\.0\.0\.1:$port{a}"\} 1$/m,
         'prometheus: A refused 1';
    like $prom, qr/^nginx_prefix_aware_models_refused\{upstream="up",server="127\.0\.0\.1:$port{b}"\} 0$/m,
         'prometheus: B refused 0';
    like $prom, qr/^# TYPE nginx_prefix_aware_models_refused gauge$/m, 'a gauge';
    my $page = $ng->request(GET => '/status?format=html')->{body};
    like $page, qr/refused a slot/, 'the HTML page has the column';
    like $page, qr/s\.refused/, 'filled from models.servers[].refused';
}

# the warning: once, naming the upstream, the server and how many

{
    sleep 1.5;                              # 5 more polls, each refusing
    my @warn = grep { /\[warn\].*$A lists 128 models, 1 refused a slot/ }
               $ng->log($from);
    is scalar @warn, 1, 'one warn line in 1.5 s of refusing polls (at most once a minute)';
    like $warn[0] // '', qr/a server's share: 64 of 128 slots/, 'it gives the share';
    unlike join("\n", $ng->log($from)), qr/server "127\.0\.0\.1:$port{b}" of upstream "up" lists \d+ models, \d+ refused/,
           'nothing refused of B';
    like join("\n", $ng->log($from)), qr/\[debug\].*prefix_aware models: server 0: "a-\d{3}" refused a slot/,
         'the debug log names the id refused';
}

# A keeps its share: its first ids (and base, shared) route as listed

{
    my ($n) = spread('a-001', 10);
    is $n, 'a=10', "a-001, in A's share, goes to A: $n";
    ($n) = spread('base', 20);
    is $n =~ /a=\d+ b=\d+/ ? 'both' : $n, 'both', "base goes to A and B: $n";
}

# A's list churns (128 other ids each poll would be a hostile engine): B's
# models keep their slots

{
    list(a => 'base', map { sprintf 'z-%03d', $_ } 1 .. 127);
    ok wait_until(sub { servers_of('z-001') eq 'a' }, 3), "A's new list is in";
    is servers_of('lora-new'), 'b', 'lora-new keeps its slot on B';
    my ($n) = spread('lora-new', 10);
    is $n, 'b=10', "lora-new still goes to B only: $n";
    ok wait_until(sub { (record('a')->{refused} // 0) == 1 }, 3),
       'A: one of its new ids refused';
}

# a list longer than the zone: all but the slots it can have are refused

{
    list(a => 'base', map { sprintf 'y-%03d', $_ } 1 .. 299);
    ok wait_until(sub { (record('a')->{models} // 0) == 300 }, 3), 'A lists 300';
    is record('a')->{refused}, 300 - 127, '173 refused: 127 kept (base, 126 slots), lora-new untouched';
    is servers_of('lora-new'), 'b', 'lora-new still on B';
}

# while they last, the refusals are logged again a minute after the first
# warn (by whichever worker polls then), not once a worker's life

{
    my $when = sub {
        map { /^(\d+)\/(\d+)\/(\d+) (\d+):(\d+):(\d+) \[warn\].*$A lists \d+ models, \d+ refused/
              ? $4 * 3600 + $5 * 60 + $6 : () } $ng->log($from);
    };
    ok wait_until(sub { $when->() >= 2 }, 65), 'a second warn line within 65 s of the first';
    my @t = $when->();
    my $gap = ($t[1] // 0) - ($t[0] // 0);
    cmp_ok $gap, '>=', 59, "a minute after the first ($gap s)";
    like join("\n", $ng->log($from)), qr/$A lists 300 models, 173 refused a slot/,
         'it says the count of now: 300 listed, 173 refused';
}

# B unloads its adapter: A gets the slot back, the refusals end

{
    list(a => 'base', @mine);
    my $from2 = $ng->log_size;
    list(b => 'base');
    ok wait_until(sub { (record('a')->{refused} // -1) == 0
                        && @{ models()->{list} } == 128 }, 5),
       'B unloads lora-new: A refused 0, its 128 ids in the zone again';
    ok wait_until(sub { scalar grep { /\[notice\].*$A lists 128 models, none refused/ } $ng->log($from2) }, 2),
       'a notice says so';
}

ok models()->{full} > 0, 'the upstream counter "full" counts the refused ids too';
unlike $ng->log, qr/\[(alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing;
