# cap=saved: a match whose server is at the cap on requests (threshold)
# still goes there when it saves more prefill than a cold request has
# (32,768 units), one request over the cap for each such prefill; other
# requests keep the hard cap.  cap=cost (the default since 3 December
# 2026): one request over the cap for each time the match saves the
# prefill the request still computes.
#
# threshold=1; a 40,000-byte body B is held on its server X (one request
# in flight, the cap), then:
# 1. B again: with the default (no cap=, cap=cost) and with cap=saved to X
#    (matched 312 blocks); with cap=hard, to another server.
# 2. A 5,000-byte body held on its server, sent again: another server
#    with cap=saved too (it saves less than a cold request's prefill).
# 3. cap=cost: a match goes over the cap once for each time it saves the
#    prefill it still computes (below twice the cap).
# 4. The status page says cap=saved, and cap=hard where it is written.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port rnd wait_until);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'index-cap-saved');
my $listen = $ng->port;
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                           sort keys %port;

$ng->start(<<"_EOC_");
    upstream hard {
        prefix_aware index=1m threshold=1 cap=hard;
$servers    }

    upstream saved {
        prefix_aware index=1m threshold=1 cap=saved;
$servers    }

    upstream dflt {
        prefix_aware index=1m threshold=1;
$servers    }

    upstream cost {
        prefix_aware index=1m threshold=1 cap=cost;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        client_body_buffer_size 64k;
        add_header X-Depth \$prefix_aware_depth;
        location /h/ { proxy_pass http://hard/; }
        location /s/ { proxy_pass http://saved/; }
        location /d/ { proxy_pass http://dflt/; }
        location /c/ { proxy_pass http://cost/; }
        location = /status { prefix_aware_status; }
    }
_EOC_

srand(78);


sub send_body {
    my ($path, $body) = @_;
    my $r = $ng->request(POST => $path, body => $body);
    my ($b) = $r->{body} =~ /^(b\d)$/m;
    return ($b // "status $r->{status}", $r->{headers}{'x-depth'} // '');
}

sub inflight {
    my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
    my $n = 0;
    for my $u (qw(hard saved dflt cost)) {
        $n += $_->{inflight} for @{ $st->{upstreams}{$u}{servers} };
    }
    return $n;
}

# the homes: each upstream sees B once, idle
my $long = rnd(40000);
my ($xs) = send_body('/s/', $long);
my ($xh) = send_body('/h/', $long);
my ($xd) = send_body('/d/', $long);

my @held;
for my $p ('/s/slow3', '/h/slow3', '/d/slow3') {
    my $c = $ng->conn;
    $c->send(POST => $p, body => $long);
    push @held, $c;
}
ok((wait_until { inflight() == 3 } 5),
   'B held on its server in the three upstreams');

# 1.
my ($s, $d) = send_body('/s/', $long);
is $s, $xs, "cap=saved: B again goes to its server $xs, at the cap";
is $d, '312', '... matched 312 blocks';
my ($h) = send_body('/h/', $long);
isnt $h, $xh, "cap=hard: B again goes to another server, $h";
my ($dd, $ddepth) = send_body('/d/', $long);
is $dd, $xd, "the default: B again goes to its server $xd, at the cap";
is $ddepth, '312', '... matched 312 blocks';

for my $c (@held) {
    my $a = $c->read(10);
    is $a->{status}, 200, 'a held request is answered';
    $c->close;
}
@held = ();

# 2.
my $short = rnd(5000);
my ($ys) = send_body('/s/', $short);
my $c = $ng->conn;
$c->send(POST => '/s/slow3', body => $short);
ok((wait_until { inflight() == 1 } 5), 'a short body held on its server');
($s) = send_body('/s/', $short);
isnt $s, $ys, "cap=saved: a short body again goes to another server, $s";
my $a = $c->read(10);
is $a->{status}, 200, '... and the held one is answered';
$c->close;

# 3. cap=cost: with the short body held on its server (at the cap), the
# same body again goes there (it saves 39 blocks and computes less than
# one), a body that shares only its first half does not; at twice the
# cap, the short body too goes to another server
my ($yc) = send_body('/c/', $short);
my @hc;
my $hcn = $ng->conn;
$hcn->send(POST => '/c/slow3', body => $short);
push @hc, $hcn;
ok((wait_until { inflight() == 1 } 5), 'cap=cost: the short body held');
my $half = substr($short, 0, 2500) . rnd(2500);
($s) = send_body('/c/', $half);
isnt $s, $yc, "cap=cost: a body sharing half goes to another server, $s";
($s, $d) = send_body('/c/', $short);
is $s, $yc, "cap=cost: the short body again goes to its server $yc";
is $d, '39', '... matched 39 blocks';
$hcn = $ng->conn;
$hcn->send(POST => '/c/slow3', body => $short);
push @hc, $hcn;
ok((wait_until { inflight() == 2 } 5), 'cap=cost: held twice');
($s) = send_body('/c/', $short);
isnt $s, $yc, "cap=cost: at twice the cap to another server, $s";
for my $hh (@hc) {
    is $hh->read(10)->{status}, 200, 'a held request is answered';
    $hh->close;
}

# 4.
my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
is $st->{upstreams}{saved}{index}{cap}, 'saved', 'the status page says cap=saved';
is $st->{upstreams}{hard}{index}{cap}, 'hard', '... and cap=hard elsewhere';
is $st->{upstreams}{dflt}{index}{cap}, 'cost', '... and cap=cost by default';
is $st->{upstreams}{cost}{index}{cap}, 'cost', '... and cap=cost where written';

$ng->stop;
$be->stop;

done_testing;
