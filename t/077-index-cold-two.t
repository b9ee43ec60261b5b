# cold=two (the default): a prefix placed cold goes to the first two
# servers within the bounds on its ring walk, whichever has less work
# after the request (its prefill past what each holds counted there); the
# home on a tie.  Upstream "two" has the default, "ring" cold=ring.
#
# 1. Nothing in flight: every body goes to its ring home, as with
#    cold=ring (the ties go to the home).
# 2. A request held on a body's home: the next body with that home goes
#    to the second server of its walk with cold=two, and to the home with
#    cold=ring (balance=off in both: no bound moves it).
# 3. The status page says cold=two.

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

my $ng = PrefixAware::Scenario->new(name => 'index-cold-two');
my $listen = $ng->port;
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                           sort keys %port;

$ng->start(<<"_EOC_");
    upstream ring {
        prefix_aware length=8192 index=1m balance=off cold=ring;
$servers    }

    upstream two {
        prefix_aware length=8192 index=1m balance=off;
$servers    }

    upstream probe {
        prefix_aware length=8192 index=1m;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        add_header X-Depth \$prefix_aware_depth;
        location /r/ { proxy_pass http://ring/; }
        location /t/ { proxy_pass http://two/; }
        location /p/ { proxy_pass http://probe/; }
        location = /status { prefix_aware_status; }
    }
_EOC_

srand(77);


sub send_body {
    my ($path, $body) = @_;
    my $r = $ng->request(POST => $path, body => $body);
    my ($b) = $r->{body} =~ /^(b\d)$/m;
    return ($b // "status $r->{status}", $r->{headers}{'x-depth'} // '');
}

# 1. idle: the ring home
my @bad;
for (1 .. 12) {
    my $body = rnd(5000);
    my ($t, $d) = send_body('/t/', $body);
    my ($r) = send_body('/r/', $body);
    push @bad, "$t != $r" if $t ne $r || $d ne '0';
}
ok !@bad, 'idle: 12 bodies go to their ring homes, as with cold=ring'
    or diag "@bad";

# 2. a request held on a home (upstream "probe", which nothing else
# loads, gives the homes)
my $held = rnd(5000);
my ($home) = send_body('/p/', $held);
my $next;
for (1 .. 200) {
    my $body = rnd(5000);
    my ($h) = send_body('/p/', $body);
    if ($h eq $home) {
        $next = $body;
        last;
    }
}
ok $next, "a second body with the same home, $home";

my $c = $ng->conn;
$c->send(POST => '/t/slow3', body => $held);
my $c2 = $ng->conn;
$c2->send(POST => '/r/slow3', body => $held);

my $busy = PrefixAware::Scenario::wait_until {
    my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
    my $n = 0;
    for my $u (qw(two ring)) {
        $n += $_->{inflight} for @{ $st->{upstreams}{$u}{servers} };
    }
    $n == 2;
} 5;
ok $busy, 'a request held on the home in both upstreams';

my ($t, $d) = send_body('/t/', $next);
isnt $t, $home, "cold=two: the next body goes to the second server, $t";
is $d, '0', '... placed cold';
my ($r) = send_body('/r/', $next);
is $r, $home, "cold=ring: to the home, $home";

my $a = $c->read(10);
is $a->{status}, 200, 'the held requests are answered';
like $a->{body}, qr/^\Q$home\E$/m, '... by the home';
$c->close;
$a = $c2->read(10);
$c2->close;

# 3. status
my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
is $st->{upstreams}{two}{index}{cold}, 'two', 'the status page says cold=two';
is $st->{upstreams}{two}{index}{placed}{cold}, 14,
   '... 14 requests placed cold';

$ng->stop;
$be->stop;

done_testing;
