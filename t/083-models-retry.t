# A retry (proxy_next_upstream) of a request whose model has a discovered
# set, when the set changes while the first try runs: the retry must stay
# in the set the request was routed with.  The per-process sets are
# rebuilt in place when the zone's version moves, so a request that kept a
# pointer into them retried in whatever the slot held then: nothing (the
# model no longer listed: every server absent, 502) or another model's set
# (the slot given to a new model: its server answered).
#
# Backends: A lists m but answers "/" with a 504 after 2 seconds (it
# proxies to a server that never answers), B lists m and answers "B", C
# lists other models and answers "C".  nginx runs one worker, so that the
# status page it serves rebuilds the sets of the worker that holds the
# request.  A request for m whose first choice is A is sent; while A holds
# it the lists change; the retry must go to B.
#
# 1. A and B stop listing m: m has no known set any more.
# 2. C lists 127 other models, then a new one, n, that takes m's slot.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);
use PrefixAware::Raw;

my %port = map { $_ => free_port() } qw(A B C silent);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } qw(A B C);

my $raw = PrefixAware::Raw->start($port{silent} => 'silent');

my $be = PrefixAware::Scenario->new(name => 'backends');
my $html = $be->root . '/html';

sub list {
    my ($b, @ids) = @_;
    my $f = "$html/models-$b.json";
    open my $fh, '>', "$f.tmp" or die "$f: $!\n";
    print $fh JSON::PP::encode_json({ object => 'list',
                                      data => [ map { { id => $_ } } @ids ] });
    close $fh;
    rename "$f.tmp", $f or die "$f: $!\n";
}

my @others = map { "x$_" } 1 .. 127;

list(A => 'm');
list(B => 'm');
list(C => 'x1');

$be->start(<<"_EOC_" . join '', map { <<"_EOC_" } qw(B C));
    server {
        listen 127.0.0.1:$port{A};
        location = /v1/models {
            default_type application/json;
            alias $html/models-A.json;
        }
        location / {
            proxy_pass http://127.0.0.1:$port{silent};
            proxy_read_timeout 2s;
        }
    }
_EOC_
    server {
        listen 127.0.0.1:$port{$_};
        location = /v1/models {
            default_type application/json;
            alias $html/models-$_.json;
        }
        location / { return 200 "$_\\n"; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'retry', workers => 1);
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware index=off threshold=100 models=discover
                     models_interval=100ms model_header=X-Model;
        server 127.0.0.1:$port{A} max_fails=0;
        server 127.0.0.1:$port{B} max_fails=0;
        server 127.0.0.1:$port{C} max_fails=0;
    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / {
            proxy_pass http://up;
            proxy_next_upstream error timeout http_504;
            add_header X-Up \$upstream_addr always;
        }
    }
_EOC_

# the servers of a model's set in the status ('' if it has none)
sub servers_of {
    my ($m) = @_;
    my $r = $ng->request(GET => '/status?format=json');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return '';
    my ($e) = grep { $_->{name} eq $m } @{ $st->{upstreams}{up}{models}{list} };
    return '' unless $e && $e->{set} ne 'none';
    return join ' ', sort map { $name{$_} } @{ $e->{servers} };
}

# the tries of a request: "A B", "B", ...
sub tries {
    my ($r) = @_;
    return join ' ', map { $name{$_} // $_ } split /, /, $r->{headers}{'x-up'} // '';
}

ok wait_until(sub { servers_of('m') eq 'A B' }, 5), 'm is listed by A and B';

# an id whose first choice for m is A (its retry went to B)
my $id;
for my $i (1 .. 20) {
    my $r = $ng->request(GET => '/t', headers => [ 'X-Model' => 'm', ID_HEADER, "id-$i" ]);
    if (tries($r) eq 'A B') {
        is $r->{body}, "B\n", "id-$i goes to A first, its retry to B";
        $id = "id-$i";
        last;
    }
}
ok $id, 'an id that goes to A first' or BAIL_OUT('no id goes to A first');

# sends the request for m, changes the lists while A holds it, waits until
# the status (in the same worker) shows the change; the response
sub retry_while {
    my ($change, $done, $what) = @_;
    my $c = $ng->conn;
    my $t0 = time;
    $c->send(GET => '/t', headers => [ 'X-Model' => 'm', ID_HEADER, $id ]);
    sleep 0.2;
    $change->();
    ok &wait_until($done, 1.5), "$what, while the first try waits on A";
    cmp_ok time - $t0, '<', 2, 'before A answered';
    my $r = $c->read(10);
    $c->close;
    return $r;
}

# 1. m no longer listed

{
    my $r = retry_while(sub { list(A => ()); list(B => ()) },
                        sub { servers_of('m') eq '' }, 'A and B stopped listing m');
    is $r->{status}, 200, 'the retry was answered 200 (not 502)';
    is tries($r), 'A B', 'it went to A, then to B, in the set m was routed with';
    is $r->{body}, "B\n", 'B answered';
}

# 2. m's slot given to another model

list(A => 'm');
list(B => 'm');
list(C => @others);

ok wait_until(sub { servers_of('m') eq 'A B' && servers_of('x127') eq 'C' }, 5),
   'm is listed by A and B again, 127 other models by C: the 128 slots are taken';

{
    my $r = retry_while(sub { list(A => ()); list(B => ()); list(C => @others, 'n') },
                        sub { servers_of('n') eq 'C' },
                        'n, listed by C, took the slot of m');
    is $r->{status}, 200, 'the retry was answered 200';
    is tries($r), 'A B', 'it went to A, then to B, not to the server of n';
    is $r->{body}, "B\n", 'B answered';
}

my @alerts = $ng->log(0) =~ /^(.*\[(?:alert|emerg|crit)\].*)$/mg;
is "@alerts", '', 'no alert in the error log';

$ng->stop;
$be->stop;
$raw->stop;

done_testing;
