# prefix_aware_sync (issue 24, item 3): nginx hosts in front of the same
# engines share what each routed.  Two upstreams of one nginx stand for
# two hosts (each its own index and counts), each sending to the other
# (and to itself: the same peer list on every host); a third has another
# key.  A prefix routed by host A is matched by host B, which never saw
# it; a request held on A counts on B's status page; a datagram of
# another key is refused and logged (at most once in 10 s a reason).

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2 sa sb sc so);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(b1 => $port{b1}, b2 => $port{b2}));

my $key = 'a secret the two hosts share';
my $peers = "peer=127.0.0.1:$port{sa} peer=127.0.0.1:$port{sb}";

# stub_status where the binary has it (Debian's does, the ASan build not):
# each datagram is a connection to nginx's counts, given back when read
my $stub = `$ENV{TEST_NGINX_BINARY} -V 2>&1` =~ /http_stub_status_module/
           ? "        location = /basic { stub_status; }\n" : '';

# host A and host B: the same upstream "llm" (servers in another order on
# B), each its own index; both send to both
sub host {
    my ($name, $sync, $extra) = @_;
    my $ng = PrefixAware::Scenario->new(name => $name);
    my $listen = $ng->port;
    my @servers = ("127.0.0.1:$port{b1}", "127.0.0.1:$port{b2}");
    @servers = reverse @servers if $name eq 'b';
    my $servers = join '', map { "        server $_;\n" } @servers;

    $ng->start(<<"_EOC_");
    upstream llm {
        prefix_aware length=20000;
        $sync
$servers    }

    upstream alone {
        prefix_aware length=4096;
$servers    }
$extra
    server {
        listen 127.0.0.1:$listen;
        add_header X-Depth \$prefix_aware_depth always;
        add_header X-Up \$upstream_addr always;
        location /a/ { proxy_pass http://llm/; }
        location /b/ { proxy_pass http://llm/; }
        location /c/ { proxy_pass http://llm/; }
        location /other/ { proxy_pass http://other/; }
        location /alone/ { proxy_pass http://alone/; }
        location /slow3/ { proxy_pass http://llm/slow3; }
        location = /st { prefix_aware_status; }
$stub    }
_EOC_
    return $ng;
}

my %host;
$host{a} = host('a', "prefix_aware_sync 127.0.0.1:$port{sa} \"key=$key\" "
                     . "$peers;", "    upstream other { server 127.0.0.1:1; }\n");

# B also has an upstream "other" that sends to A's port: refused there
$host{b} = host('b', "prefix_aware_sync 127.0.0.1:$port{sb} \"key=$key\" "
                     . "$peers;", <<"_EOC_");
    upstream other {
        prefix_aware length=4096;
        prefix_aware_sync 127.0.0.1:$port{so} "key=$key"
                          peer=127.0.0.1:$port{sa};
        server 127.0.0.1:$port{b1};
    }
_EOC_

# C has another key
$host{c} = host('c', "prefix_aware_sync 127.0.0.1:$port{sc} "
                     . "\"key=another secret, 30 chars\" "
                     . "peer=127.0.0.1:$port{sa};",
                "    upstream other { server 127.0.0.1:1; }\n");

my $ng = $host{a};

srand(71);

sub chat {
    '{"model":"m","messages":[{"role":"user","content":"' . $_[0] . '"}]}'
}

# /a/... goes to host A, /b/... to host B, /c/... to host C
sub post {
    my ($path, $body) = @_;
    my ($h) = $path =~ m{^/(a|b|c)/};
    $h //= 'a';
    return $host{$h}->request(POST => $path, body => $body,
                              headers => [ 'Content-Type',
                                           'application/json' ]);
}

# the upstream "llm" on host $h's status page
sub status {
    my ($h) = @_;
    my $r = $host{$h}->request(GET => '/st');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return;
    return $st->{upstreams}{llm};
}

# a chat routed by host A; host B has not seen it
my $t = chat(rnd(4000));
my $r = post('/a/v1/chat/completions', $t);
is $r->{status}, 200, 'host A routes a chat';
is $r->{headers}{'x-depth'}, '0', '... placed cold';
my $server = $r->{headers}{'x-up'};

my $st = wait_until {
    my $st = status("b") or return;
    $st->{sync}{records} >= 1 ? $st : undef;
} 5;
ok $st, 'host B received host A\'s record' or diag explain status("b");

$r = post('/b/v1/chat/completions', $t);
is $r->{headers}{'x-depth'}, int(4004 / 128),
    'host B matches all of the chat\'s 31 blocks';
is $r->{headers}{'x-up'}, $server, '... on the server host A chose';

# without sync, a host that has not seen it matches nothing
$r = post('/alone/v1/chat/completions', $t);
is $r->{headers}{'x-depth'}, '0', 'an upstream without sync matches nothing';

# and the other way: B's record reaches A
my $u = chat(rnd(3000));
$r = post('/b/v1/chat/completions', $u);
my $bserver = $r->{headers}{'x-up'};
wait_until { status("a")->{sync}{records} >= 1 } 5;
$r = post('/a/v1/chat/completions', $u);
is $r->{headers}{'x-depth'}, int(3004 / 128), 'host A matches host B\'s';
is $r->{headers}{'x-up'}, $bserver, '... on its server';

# a long chat (20,004 units: 64 blocks, then 11 of 8 blocks, stride=8):
# host B matches host A's record as deep as host A itself does
my $l = chat(rnd(20000));
my $before = status("b")->{sync}{records};
post('/a/v1/chat/completions', $l);
$r = post('/a/v1/chat/completions', $l);
is $r->{headers}{'x-depth'}, 152, 'host A matches its long chat: 152 blocks';
ok((wait_until { status("b")->{sync}{records} >= $before + 2 } 5),
   '... host B received both records');
$r = post('/b/v1/chat/completions', $l);
is $r->{headers}{'x-depth'}, 152, '... and host B matches 152 blocks too';

# a request held on A counts on B's page, as A's load, and no longer
# once it ends; its prefill counts until the first bytes of its answer,
# about 3 seconds (/slow3): time for B to see it on a busy machine
my $c = $ng->conn;
$c->send(POST => '/slow3/v1/chat/completions', body => chat(rnd(2000)),
         headers => [ 'Content-Type', 'application/json' ]);

my $seen = wait_until {
    my $st = status("b") or return;
    my ($in, $w) = (0, 0);
    for (@{ $st->{servers} }) {
        $in += $_->{other_hosts}{inflight};
        $w += $_->{other_hosts}{work};
    }
    $in == 1 ? [ $in, $w ] : undef;
} 5;
ok $seen, 'a request in flight on host A counts on host B';
ok $seen && $seen->[1] > 2000, '... with its work' or diag explain $seen;
is status("b")->{sync}{hosts}, 1,
    '... one other host: B does not count itself';

$r = $c->read(10);
$c->close;
is $r->{status}, 200, 'the held request is answered';

my $gone = wait_until {
    my $st = status("b") or return;
    my $in = 0;
    $in += $_->{other_hosts}{inflight} for @{ $st->{servers} };
    $in == 0;
} 5;
ok $gone, '... and counts no more once it ended';

# another key, another upstream: refused before anything in it is read
my $v = chat(rnd(3000));
post('/c/v1/chat/completions', $v);
$host{b}->request(POST => '/other/x', body => rnd(2000));
my $refused = wait_until { status("a")->{sync}{refused} >= 2 } 5;
ok $refused, 'datagrams of another key and another upstream are refused';
$r = post('/a/v1/chat/completions', $v);
is $r->{headers}{'x-depth'}, '0', '... and their records not taken';
my @log = $ng->log;
ok grep({ /a datagram from 127\.0\.0\.1 refused: tag \(another key\)/ }
        @log), 'a refusal is logged with its reason';
ok grep({ /refused: another upstream/ } @log), '... each reason';
ok scalar(grep { /refused: tag/ } @log) == 1,
    '... once in 10 s a reason, whichever worker took it'
    or diag scalar(grep { /refused: tag/ } @log);

# the Prometheus page
$r = $host{b}->request(GET => '/st?format=prometheus');
like $r->{body}, qr/nginx_prefix_aware_sync_datagrams_total\{upstream="llm",kind="record"\} [1-9]/,
    'Prometheus: records taken';
like $r->{body}, qr/nginx_prefix_aware_sync_hosts\{upstream="llm"\} 1\n/,
    'Prometheus: hosts heard';
like $r->{body}, qr/nginx_prefix_aware_other_hosts_work\{upstream="llm",server="127\.0\.0\.1:\d+"\} \d+/,
    'Prometheus: other hosts\' work';

# a reload keeps the socket and goes on sharing, both ways
$ng->reload;
for my $dir ([ 'a', 'b' ], [ 'b', 'a' ]) {
    my ($from, $to) = @$dir;
    my $w = chat(rnd(3000));
    my $before = status($to)->{sync}{records};
    post("/$from/v1/chat/completions", $w);
    wait_until { status($to)->{sync}{records} > $before } 5;
    $r = post("/$to/v1/chat/completions", $w);
    is $r->{headers}{'x-depth'}, int(3004 / 128),
        "after host A's reload, $from to $to still shared";
}

SKIP: {
    skip 'no stub_status in this nginx', 1 unless $stub;
    my ($active) = $host{a}->request(GET => '/basic')->{body}
                   =~ /Active connections: (\d+)/;
    ok defined $active && $active < 10,
       'the datagrams leave no connection counted as active'
        or diag "active connections: " . ($active // 'none') . " after "
                . status("a")->{sync}{received} . " datagrams";
}

# a peer that vanishes: it stops counting after 5 intervals (100 ms at
# least), sends to it fail without harm, and routing goes on
ok !grep({ /\[(?:alert|crit|emerg)\]/ } $host{b}->log),
    "no alert in host b's error log";
$host{b}->stop;
my $quiet = wait_until { status("a")->{sync}{hosts} == 0 } 5;
ok $quiet, 'a host that stopped no longer counts';
my @st;
for (1 .. 20) {
    push @st, post('/a/v1/chat/completions', chat(rnd(2000)))->{status};
}
is_deeply \@st, [ (200) x 20 ], '... and every request is answered';
my $in = 0;
$in += $_->{other_hosts}{inflight} for @{ status("a")->{servers} };
is $in, 0, '... with nothing of it in flight';
delete $host{b};

for my $h (sort keys %host) {
    ok !grep({ /\[(?:alert|crit|emerg)\]/ } $host{$h}->log),
        "no alert in host ${h}'s error log";
    $host{$h}->stop;
}

$be->stop;

done_testing();
