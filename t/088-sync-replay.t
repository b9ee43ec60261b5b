# prefix_aware_sync against replays (issue 42, items 1-3): a listener on
# the network between two hosts captures host A's datagrams (A's only
# peer here is the test's own UDP socket, "the spy") and sends them to
# host B, once as the network would and then again and again.
#
#   1. records: one delivery is taken; 400 replays of a records datagram
#      are refused and counted, and do not age the server they name (B's
#      capacity is small, so that 400 takings would wipe it);
#   2. load: A's load of 8 requests goes from B's page when A falls
#      quiet; its datagram replayed every 20 ms does not bring it back;
#      (in 1 and 2, B's skew is a minute: the window refuses them)
#   3. sender ids: load datagrams of 16 earlier starts of A replayed
#      (more than "skew" old, 1 s) take no place in B's table of hosts,
#      and a live host C is seen at once, also after C restarts.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(sleep time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

my %port = map { $_ => free_port() } qw(b1 b2 sa sb sc spy dead);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(b1 => $port{b1}, b2 => $port{b2}));

my $key = 'a secret the hosts share, 36 chars.';

my $spy = IO::Socket::INET->new(Proto => 'udp', LocalAddr => '127.0.0.1',
                                LocalPort => $port{spy})
    or die "spy: $!";
my $out = IO::Socket::INET->new(Proto => 'udp', PeerAddr => '127.0.0.1',
                                PeerPort => $port{sb})
    or die "out: $!";

sub conf {
    my ($ng, $listen, $peer, $extra) = @_;
    my $http = $ng->port;
    $extra //= '';

    return <<"_EOC_";
    upstream llm {
        prefix_aware length=20000 capacity=16384;
        prefix_aware_sync 127.0.0.1:$port{$listen} "key=$key"
                          peer=127.0.0.1:$port{$peer} $extra;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    server {
        listen 127.0.0.1:$http;
        add_header X-Depth \$prefix_aware_depth always;
        location / { proxy_pass http://llm; }
        location = /st { prefix_aware_status; }
    }
_EOC_
}

sub host {
    my ($name, $listen, $peer, $extra) = @_;
    my $ng = PrefixAware::Scenario->new(name => $name);
    $ng->start(conf($ng, $listen, $peer, $extra));
    return $ng;
}

my %host;
$host{a} = host('a', 'sa', 'spy');
# B first with a skew of a minute: what refuses the replays of parts 1
# and 2 is the window, not the clock
$host{b} = host('b', 'sb', 'dead', 'skew=60s');

sub chat {
    '{"model":"m","messages":[{"role":"user","content":"' . $_[0] . '"}]}'
}

sub post {
    my ($h, $path, $body) = @_;
    return $host{$h}->request(POST => $path, body => $body,
                              headers => [ 'Content-Type',
                                           'application/json' ]);
}

sub status {
    my ($h) = @_;
    my $r = $host{$h}->request(GET => '/st');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return;
    return $st->{upstreams}{llm};
}

sub other_inflight {
    my $st = status($_[0]) or return -1;
    my $in = 0;
    $in += $_->{other_hosts}{inflight} for @{ $st->{servers} };
    return $in;
}

# what the spy heard, datagrams as they came: [ type, bytes ]
sub drain {
    my ($wait) = @_;
    my @got;
    my $sel = IO::Select->new($spy);
    while ($sel->can_read($wait // 0.05)) {
        my $d;
        $spy->recv($d, 2000);
        push @got, [ ord(substr($d, 5, 1)), $d ];
        $wait = 0.01;
    }
    return @got;
}

# the requests in flight a load datagram carries, over its servers
sub load_inflight {
    my ($d) = @_;
    my $n = unpack 'v', substr($d, 6, 2);
    my $head = ord(substr($d, 4, 1)) == 1 ? 32 : 40;    # version 1: 32
    my $in = 0;
    $in += unpack 'V', substr($d, $head + 24 * $_ + 8, 4) for 0 .. $n - 1;
    return $in;
}

srand(88);

# 1. records

drain();
my @prompts = map { chat(rnd(4000)) } 1 .. 10;
post('a', '/v1/chat/completions', $_) for @prompts;
my @rec = grep { $_->[0] == 1 } drain(0.5);
ok @rec >= 1, 'the spy captured host A\'s records datagrams'
    or diag scalar(@rec);

$out->send($_->[1]) for @rec;
ok((wait_until { (status('b')->{sync}{records} // 0) >= 10 } 5),
   '... delivered once, host B takes their 10 records')
    or diag explain status('b')->{sync};

# read: the datagrams B took or refused
sub heard { my $s = status('b')->{sync}; $s->{received} + $s->{refused} }

# 40 times 10, each ten once B has read the ten before: none lost in a
# socket buffer however slow B is (an ASan build)
my $before = status('b')->{sync};
my $base = heard();
for my $k (1 .. 40) {
    $out->send($rec[0][1]) for 1 .. 10;
    wait_until { heard() >= $base + 10 * $k } 5;
}
my $after = wait_until {
    heard() >= $base + 400 ? status('b')->{sync} : undef;
} 5;
ok $after, 'host B read the 400 replays' or diag explain status('b')->{sync};
$after //= status('b')->{sync};
is $after->{replayed} - $before->{replayed}, 400,
    '... and refused each as replayed';
is $after->{records}, $before->{records}, '... taking no record of them';

my @depth = map { post('b', '/v1/chat/completions', $_)->{headers}{'x-depth'} }
            @prompts;
is_deeply \@depth, [ (int(4004 / 128)) x 10 ],
    '... and host B still matches all 10 prompts at depth 31';

# 2. load: A holds 8 requests; B hears them once; A falls quiet

my @held;
for (1 .. 8) {
    my $c = $host{a}->conn;
    $c->send(POST => '/slow3', body => chat(rnd(200) . $_),
             headers => [ 'Content-Type', 'application/json' ]);
    push @held, $c;
}

my $load = wait_until {
    my ($d) = grep { $_->[0] == 2 && load_inflight($_->[1]) == 8 } drain();
    $d;
} 5;
ok $load, 'the spy captured a load datagram of A\'s 8 requests';
$load = $load ? $load->[1] : '';

$out->send($load);
ok((wait_until { other_inflight('b') == 8 } 2),
   '... delivered once, host B counts A\'s 8 requests');
ok((wait_until { other_inflight('b') == 0
                 && status('b')->{sync}{hosts} == 0 } 3),
   '... and drops them when A falls quiet (B hears it no more)');

my ($seen, $samples) = (0, 0);
my $t0 = time;
while (time - $t0 < 1) {
    $out->send($load);
    $samples++;
    $seen++ if other_inflight('b') != 0;
    sleep 0.02;
}
is $seen, 0, "the load datagram replayed $samples times in 1 s: "
             . "A's load never comes back";
my $refused = status('b')->{sync}{refused} - $after->{refused};
ok $refused >= $samples - 1,
    "... each replay refused as replayed: $refused"
    or diag explain status('b')->{sync};

$_->read(10) for @held;
$_->close for @held;

# 3. 16 earlier starts of A, each a new sender id: one load datagram of
# each captured, then replayed together, every 20 ms

my @starts;
for my $i (1 .. 16) {
    $host{a}->stop;
    drain();
    $host{a} = host('a', 'sa', 'spy');
    my $d = wait_until { (grep { $_->[0] == 2 } drain())[0] } 3;
    push @starts, $d->[1] if $d;
}
is scalar(@starts), 16, 'load datagrams of 16 starts of A captured';

# B with the default skew, 1 s: reloaded, its table of hosts kept
$host{b}->reload(conf($host{b}, 'sb', 'dead'));
is status('b')->{sync}{skew_ms}, 1000, 'host B reloaded with skew 1s';
sleep 1.1;
my $full_before = status('b')->{sync};

sub replay_starts { $out->send($_) for @starts }

replay_starts();
sleep 0.05;
replay_starts();

# C: a live host that sends to B
$host{c} = host('c', 'sc', 'sb');

my @c_held;
for (1 .. 8) {
    my $c = $host{c}->conn;
    $c->send(POST => '/slow3', body => chat(rnd(200) . $_),
             headers => [ 'Content-Type', 'application/json' ]);
    push @c_held, $c;
}

($seen, $samples) = (0, 0);
$t0 = time;
my $first;
while (time - $t0 < 1.5) {
    replay_starts();
    $samples++;
    if (other_inflight('b') == 8) {
        $seen++;
        $first //= time - $t0;
    }
    sleep 0.02;
}
ok defined $first && $first < 0.5,
    'host C is seen on B at once while 16 old sender ids are replayed'
    or diag explain status('b')->{sync};
ok $seen >= 0.9 * $samples, "... in $seen of $samples samples";

my $s = status('b')->{sync};
is $s->{hosts}, 1, '... B counts one other host, C'
    or diag explain $s;
ok $s->{stale} > $full_before->{stale},
    '... the old ids refused as stale' or diag explain $s;

$_->read(10) for @c_held;
$_->close for @c_held;

# a restarted host is accepted at once: a new id, a fresh time
$host{c}->stop;
$host{c} = host('c', 'sc', 'sb');
my $c = $host{c}->conn;
$c->send(POST => '/slow3', body => chat(rnd(300)),
         headers => [ 'Content-Type', 'application/json' ]);
my $t1 = time;
ok((wait_until { other_inflight('b') == 1 } 1),
   'host C restarted: its load counts on B within a second')
    or diag explain status('b')->{sync};
$c->read(10);
$c->close;

like join('', $host{b}->log), qr/refused: replayed; \d+ more/,
    'replays are logged, with a count';

for my $h (sort keys %host) {
    ok !grep({ /\[(?:alert|crit|emerg)\]/ } $host{$h}->log),
        "no alert in host ${h}'s error log";
    $host{$h}->stop;
}

$be->stop;

done_testing();
