# Routing v2 (index=): cold=auto places a request nobody holds enough of
# by the least work when its ring key (its first 4096 units) is a prefix
# that a server holds, and on the ring otherwise.  A shared prefix S of
# 8,192 bytes is sent first (placed cold at the ring home H of its key);
# then four bodies S + 16,000 bytes of their own, as slow requests that
# stay in flight: S is 64 of their 189 blocks, under match=60, so each is
# placed cold.  balance=off, so that only the placement differs:
#
# 1. cold=ring: the walk starts at H for every one of them: four on H.
# 2. cold=auto: S's 64 blocks are the ring key's 32 and more, so the key
#    is shared: the least work after the request, the holders' cost being
#    16,000 + 6,560 units and the others' 24,192 + 6,560: the first on H,
#    each next one on a server with no work, one on each server.
# 3. cold=auto, bodies whose key nobody holds: their ring home, as the
#    idle probe upstream places them.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'index-cold-auto');
my $listen = $ng->port;
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                           sort keys %port;
my $common = 'length=65536 index=1m threshold=1024 balance=off';

$ng->start(<<"_EOC_");
    upstream probe {
        prefix_aware $common;
$servers    }

    upstream ring {
        prefix_aware $common cold=ring;
$servers    }

    upstream auto {
        prefix_aware $common cold=auto;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location /p/ { proxy_pass http://probe/; }
        location /r/ { proxy_pass http://ring/; }
        location /a/ { proxy_pass http://auto/; }
        location = /status { prefix_aware_status; }
    }
_EOC_

srand(64);

sub rnd { join '', map { chr(97 + int rand 26) } 1 .. $_[0] }

sub served {
    my ($prefix, $body, $path) = @_;
    my $r = $ng->request(POST => "/$prefix/" . ($path // ''), body => $body);
    return $r->{status} == 200 && ($r->{body} =~ /^(b\d)$/m)[0];
}

sub held {
    my ($up, $n) = @_;
    return wait_until {
        my $in = $ng->inflight($up) || {};
        my $sum = 0;
        $sum += $_ for values %$in;
        $sum == $n && { map { ($name{$_} => $in->{$_}) } keys %$in };
    } 5;
}

sub send_held {
    my ($up, $prefix, @bodies) = @_;
    my (@c, $in);
    for my $i (0 .. $#bodies) {
        my $c = $ng->conn;
        $c->send(POST => "/$prefix/slow3", body => $bodies[$i]);
        push @c, $c;
        $in = held($up, $i + 1) or last;
    }
    my @got = map { $_->read(15) } @c;
    $_->close for @c;
    return ($in, @got);
}

my $shared = rnd(8192);
my @bodies = map { $shared . rnd(16000) } 1 .. 4;

my $home = served('p', $shared);
ok $home, "the shared prefix's home is $home";
is served('r', $shared), $home, 'cold=ring: the shared prefix at its home';
is served('a', $shared), $home, 'cold=auto: the shared prefix at its home';

# 1. cold=ring: every walk starts at the home
my ($in, @got) = send_held('ring', 'r', @bodies);
is_deeply $in, { map { ($_ => $_ eq $home ? 4 : 0) } keys %port },
          "cold=ring: four in flight on $home";
is scalar(grep { $_->{status} == 200 } @got), 4, '... all served';

# 2. cold=auto: the least work, one on each server
($in, @got) = send_held('auto', 'a', @bodies);
is_deeply $in, { map { ($_ => 1) } keys %port },
          'cold=auto: one in flight on each server'
    or diag explain $in;
my @order = map { ($_->{body} =~ /^(b\d)$/)[0] // 'none' } @got;
is $order[0], $home, "... the first on the holder, $home";
is scalar(grep { $_->{status} == 200 } @got), 4, '... all served';

ok held('ring', 0) && held('auto', 0), 'nothing left in flight';

# 3. keys nobody holds: the ring home
my $same = 0;
for (1 .. 12) {
    my $body = rnd(6000);
    my $p = served('p', $body);
    $same++ if $p && served('a', $body) eq $p;
}
is $same, 12, 'cold=auto: twelve new prefixes at their ring home';

my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
is $st->{upstreams}{auto}{index}{cold}, 'auto', 'the status names cold=auto';
is $st->{upstreams}{ring}{index}{cold}, 'ring', '... and cold=ring';
is $st->{upstreams}{auto}{index}{placed}{cold}, 17,
   'the status counts seventeen placed cold';

unlike scalar $ng->log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing();
