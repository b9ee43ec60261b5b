# cold=auto: a prefix that servers hold a part of, too small for a match
# (a shared 1,024-byte system prompt before 4,000 bytes of a conversation
# of its own: 8 of 39 blocks, under match=60), goes by the least work
# after the request, in which the holder's cost is less by what it holds;
# a prefix nobody holds a block of goes to its home on the ring, as with
# cold=ring.
#
# 1. cold=ring: the conversations of one system prompt scatter over the
#    ring homes of their first 4096 bytes; matched depth 8 only where a
#    home happens to hold the prompt.
# 2. cold=auto: every conversation after the first goes where the prompt
#    is, depth 8, placed "cold" (sent one after the other: nothing in
#    flight, within the bounds).
# 3. cold=auto, a body that shares nothing: the same server as cold=ring
#    (and as an idle index that never saw it) sends it to.
# 4. place=cost weighs every request so, matched or not: idle servers,
#    the conversations follow the prompt too.

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

my $ng = PrefixAware::Scenario->new(name => 'index-cold-auto');
my $listen = $ng->port;
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                           sort keys %port;

$ng->start(<<"_EOC_");
    upstream ring {
        prefix_aware length=8192 index=1m;
$servers    }

    upstream auto {
        prefix_aware length=8192 index=1m cold=auto;
$servers    }

    upstream fresh {
        prefix_aware length=8192 index=1m;
$servers    }

    upstream cost {
        prefix_aware length=8192 index=1m place=cost;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        add_header X-Depth \$prefix_aware_depth;
        location /r/ { proxy_pass http://ring/; }
        location /a/ { proxy_pass http://auto/; }
        location /f/ { proxy_pass http://fresh/; }
        location /c/ { proxy_pass http://cost/; }
        location = /status { prefix_aware_status; }
    }
_EOC_

srand(64);


sub send_body {
    my ($path, $body) = @_;
    my $r = $ng->request(POST => $path, body => $body);
    my ($b) = $r->{body} =~ /^(b\d)$/m;
    return ($b // "status $r->{status}", $r->{headers}{'x-depth'} // '');
}

my $system = rnd(1024);
my @conv = map { $system . rnd(4000) } 1 .. 12;

# 1. cold=ring
my (%to, @d);
for my $c (@conv) {
    my ($b, $d) = send_body('/r/', $c);
    $to{$b}++;
    push @d, $d;
}
ok keys %to >= 2, 'cold=ring: the conversations scatter over '
    . keys(%to) . ' servers';

# 2. cold=auto
my ($first, $d0) = send_body('/a/', $conv[0]);
is $d0, '0', 'cold=auto: the first conversation holds nothing';
my @bad;
for my $c (@conv[1 .. $#conv]) {
    my ($b, $d) = send_body('/a/', $c);
    push @bad, "$b/$d" if $b ne $first || $d ne '8';
}
ok !@bad, "cold=auto: the other 11 follow the prompt to $first, depth 8"
    or diag "@bad";

my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
is $st->{upstreams}{auto}{index}{cold}, 'auto', 'the status page says cold=auto';
is_deeply $st->{upstreams}{auto}{index}{placed},
    { match => 0, cold => 12, spill => 0, least => 0 },
    '... all 12 placed cold';

# 3. a body nobody holds a block of: its ring home
@bad = ();
for (1 .. 12) {
    my $body = rnd(5000);
    my ($a) = send_body('/a/', $body);
    my ($f) = send_body('/f/', $body);
    push @bad, "$a != $f" if $a ne $f;
}
ok !@bad, 'cold=auto: 12 bodies that share nothing go to their ring homes'
    or diag "@bad";

# 4. place=cost
($first) = send_body('/c/', $conv[0]);
@bad = ();
for my $c (@conv[1 .. $#conv]) {
    my ($b, $d) = send_body('/c/', $c);
    push @bad, "$b/$d" if $b ne $first || $d ne '8';
}
ok !@bad, "place=cost: the other 11 follow the prompt to $first, depth 8"
    or diag "@bad";

$st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
is $st->{upstreams}{cost}{index}{place}, 'cost', 'the status page says place=cost';
is $st->{upstreams}{auto}{index}{place}, 'deepest', '... and place=deepest elsewhere';

$ng->stop;
$be->stop;

done_testing;
