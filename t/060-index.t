# Routing v2 (index=): a request goes where the longest part of its prefix
# already went.  Families of raw bodies that share their first 1,900 bytes
# and differ after (all within length=4096, so with index=off each body has
# a key of its own and the family scatters):
#
# 1. index=off: the members of a family land on several servers.
# 2. index=1m: every member after the first lands where the first went,
#    with $prefix_aware_depth 14 (1,900 bytes hold 14 blocks of 128, 65 %
#    of the body, over match=60); a body that shares only the first 300
#    bytes (2 blocks, 13 %) is placed by its key on the ring (its first
#    4096 bytes), where an index that never saw its family (upstream v4)
#    sends it too, and with match=0 (upstream v3) it follows the deepest
#    holder.
# 3. The index is shared by the workers (worker_processes 2, a connection
#    per request) and kept across a reload: after it, a new member of an
#    old family still lands on its server.
# 4. The status page shows the index: placed counts, the depth histogram
#    and the entries used, in JSON and Prometheus text; no request is left
#    in flight, and no work.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port rnd);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'index', workers => 2);
my $listen = $ng->port;
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                           sort keys %port;

my $http = <<"_EOC_";
    upstream v1 {
        prefix_aware index=off length=4096;
$servers    }

    upstream v2 {
        prefix_aware length=4096 index=1m block=128;
$servers    }

    upstream v3 {
        prefix_aware length=4096 index=1m block=128 match=0;
$servers    }

    upstream v4 {
        prefix_aware index=256k;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        add_header X-Depth \$prefix_aware_depth;
        add_header X-Route \$prefix_aware_route;
        location /v1/ { proxy_pass http://v1; }
        location /v2/ { proxy_pass http://v2; }
        location /v3/ { proxy_pass http://v3; }
        location /v4/ { proxy_pass http://v4; }
        location /st { prefix_aware_status; }
    }
_EOC_

$ng->start($http);

srand(60);


# 12 families: a shared 1,900-byte beginning, then 1,000 bytes of their own
my @family = map { rnd(1900) } 1 .. 12;

sub send_body {
    my ($path, $body) = @_;
    my $c = $ng->conn;
    my $r = $c->request(POST => $path, body => $body);
    $c->close;
    my ($b) = $r->{body} =~ /^(b\d)$/m;
    return ($b // "status $r->{status}", $r->{headers}{'x-depth'} // '',
            $r->{headers}{'x-route'} // '');
}

# 1. index=off scatters the families
my $scattered = 0;
for my $f (@family) {
    my %to;
    $to{ (send_body('/v1/x', $f . rnd(1000)))[0] }++ for 1 .. 6;
    $scattered++ if keys %to > 1;
}
ok $scattered >= 8, "index=off: $scattered of 12 families land on several servers";

# 2. index=1m keeps each family on the server its first member went to
my (%home, @bad, @depth);
for my $f (@family) {
    my ($first, $d0) = send_body('/v2/x', $f . rnd(1000));
    $home{$f} = $first;
    push @bad, "first depth $d0" if $d0 ne '0';
    for (1 .. 5) {
        my ($to, $d) = send_body('/v2/x', $f . rnd(1000));
        push @bad, "$to != $first" if $to ne $first;
        push @depth, $d;
    }
}
ok !@bad, 'index=1m: every member of a family lands on its first server'
    or diag "@bad";
is_deeply [ sort { $a <=> $b } keys %{{ map { $_ => 1 } @depth }} ], [14],
    'each follower matched 14 blocks of 128 bytes';

my %homes = map { $_ => 1 } values %home;
ok keys %homes >= 3, 'the families spread over ' . keys(%homes) . ' servers';

my $short = substr($family[0], 0, 300) . rnd(2000);
my ($to, $d, $rt) = send_body('/v2/x', $short);
is $rt, 'affinity', 'a body that shares only 300 bytes is placed by its key';
my ($ring_home) = send_body('/v4/x', $short);
ok $to eq $ring_home || $to eq $home{$family[0]},
   '... on its ring home, where an index that never saw its family sends '
   . 'it, or the next server if that one holds the 2 shared blocks '
   . '(cold=two: its prefill there is less)'
   or diag "$to: home $ring_home, holder $home{$family[0]}";
my $short_depth = $d;

my ($first3) = send_body('/v3/x', $family[0] . rnd(1000));
($to, $d) = send_body('/v3/x', substr($family[0], 0, 300) . rnd(2000));
is $d, '2', 'match=0: a body that shares only 300 bytes matches 2 blocks';
is $to, $first3, '... and follows the deepest holder';

# 3. kept across a reload
$ng->reload($http);

@bad = ();
for my $f (@family) {
    my ($to, $d) = send_body('/v2/x', $f . rnd(1000));
    push @bad, "$to/$d" if $to ne $home{$f} || $d ne '14';
}
ok !@bad, 'after a reload every family still lands on its server, depth 14'
    or diag "@bad";

# 4. status
my $c = $ng->conn;
my $json = JSON::PP::decode_json($c->request(GET => '/st')->{body});
my $prom = $c->request(GET => '/st?format=prometheus')->{body};
$c->close;

my $ix = $json->{upstreams}{v2}{index};
ok $ix, 'the JSON has the index of v2' or diag explain $json->{upstreams}{v2};
ok !exists $json->{upstreams}{v1}{index}, 'and none for v1 (index=off)';
is $ix->{block}, 128, 'block 128';
is $ix->{placed}{match}, 12 * 5 + 12,
   'placed by match: the followers and the 12 after reload';
is $ix->{placed}{cold} + $ix->{placed}{spill} + $ix->{placed}{least}, 13,
   'the 12 first members and the 300-byte body were placed cold';
is $ix->{depth}{buckets}[0], $short_depth ? 12 : 13,
   'the first members matched nothing (and the 300-byte body, off its '
   . 'holder)';
is $ix->{match}, 60, 'match 60 by default';
is $json->{upstreams}{v4}{length}, 524288, 'length 524288 by default with index';
is $json->{upstreams}{v1}{length}, 4096, '... 4096 as given without';
ok $ix->{used} > 0 && $ix->{used} <= $ix->{entries},
   "the index holds $ix->{used} of $ix->{entries} entries";
is_deeply [ $ix->{busy}, $ix->{recovered} ], [0, 0],
   'no update skipped on a busy bucket, none taken over from a dead writer'
   or diag explain $ix;
is_deeply [ map { $_->{inflight} } @{ $json->{upstreams}{v2}{servers} } ],
          [0, 0, 0, 0], 'nothing left in flight';

like $prom, qr/^nginx_prefix_aware_placed_total\{upstream="v2",how="match"\} 72$/m,
     'Prometheus: placed_total';
like $prom, qr/^nginx_prefix_aware_matched_depth_count\{upstream="v2"\} 85$/m,
     'Prometheus: matched_depth histogram';
unlike $prom, qr/placed_total\{upstream="v1"/, 'no index figures for v1';

{
    open my $p, '|-', "promtool check metrics >/dev/null 2>&1"
        or die "promtool: $!";
    print $p $prom;
    close $p;
    is $?, 0, 'promtool accepts the text (make deps-test installs it)';
}

ok !grep({ /\[(?:alert|crit|emerg)\]/ } $ng->log), 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing();
