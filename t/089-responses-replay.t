# Stored responses' ids in prefix_aware_sync's datagrams (type 3) keep
# the replay protection of the records (issue 44, item 4): a listener
# between two hosts (host A's only peer is the test's own UDP socket,
# "the spy") captures host A's datagram of an id and sends it to host B:
# once, it is taken and B routes the id's GET to its server; again and
# again, each copy is refused as replayed and nothing more is stored; a
# copy with one byte of the id changed is refused (tag).

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use IO::Socket::INET;
use IO::Select;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

my %port = map { $_ => free_port() } qw(b1 b2 sa sb spy dead);

# two engines with a Responses store each: ids of their own, 404 for others
my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start(join '', map { <<"_EOC_" } qw(b1 b2));
    server {
        listen 127.0.0.1:$port{$_};
        default_type application/json;
        location = /v1/responses {
            return 200 '{"id":"resp_${_}_\$request_id","object":"response"}';
        }
        location ~ ^/v1/responses/resp_${_}_ {
            return 200 '{"server":"$_"}';
        }
        location /v1/responses/ {
            return 404 '{"error":"not found on $_"}';
        }
    }
_EOC_

my $key = 'a secret the hosts share, 36 chars.';

my $spy = IO::Socket::INET->new(Proto => 'udp', LocalAddr => '127.0.0.1',
                                LocalPort => $port{spy})
    or die "spy: $!";
my $out = IO::Socket::INET->new(Proto => 'udp', PeerAddr => '127.0.0.1',
                                PeerPort => $port{sb})
    or die "out: $!";

sub host {
    my ($name, $listen, $peer, $extra) = @_;
    my $ng = PrefixAware::Scenario->new(name => $name);
    my $http = $ng->port;
    $ng->start(<<"_EOC_");
    upstream llm {
        prefix_aware;
        prefix_aware_sync 127.0.0.1:$port{$listen} "key=$key"
                          peer=127.0.0.1:$port{$peer} $extra;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    server {
        listen 127.0.0.1:$http;
        add_header X-Route \$prefix_aware_route always;
        location / { proxy_pass http://llm; }
        location = /st { prefix_aware_status; }
    }
_EOC_
    return $ng;
}

my %host;
$host{a} = host('a', 'sa', 'spy', '');
$host{b} = host('b', 'sb', 'dead', 'skew=60s');

sub status {
    my ($h) = @_;
    my $r = $host{$h}->request(GET => '/st');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return;
    return $st->{upstreams}{llm};
}

# what the spy heard: [ type, bytes ]
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

srand(89);
drain();

my $r = $host{a}->request(POST => '/v1/responses',
    body => '{"model":"m","input":"' . rnd(500) . '","store":true}',
    headers => [ 'Content-Type', 'application/json' ]);
my ($id) = $r->{body} =~ /"id":"(resp_[^"]+)"/;
my ($maker) = ($id // '') =~ /^resp_(b\d)_/;
ok $maker, "host A: a response made by $maker";

my @st = grep { $_->[0] == 3 } drain(0.5);
is scalar(@st), 1, 'the spy captured one datagram of type 3 (its id)';
my $d = @st ? $st[0][1] : '';
is length($d), 40 + 16 + 8, '... of one entry: the server\'s and the '
                            . 'id\'s hashes';

# B does not know the id: routed by its key
$r = $host{b}->request(GET => "/v1/responses/$id");
isnt $r->{headers}{'x-route'}, 'state', 'host B, before: the id unknown';

# delivered once
$out->send($d);
ok((wait_until { (status('b')->{responses}{synced} // 0) >= 1 } 5),
   'delivered once, host B takes the id');
$r = $host{b}->request(GET => "/v1/responses/$id");
is $r->{headers}{'x-route'}, 'state', '... and routes its GET by it';
like $r->{body}, qr/"server":"$maker"/, '... to the server that made it';

# replayed: refused, nothing more stored
sub heard { my $s = status('b')->{sync}; $s->{received} + $s->{refused} }

my $before = status('b');
my $base = heard();
$out->send($d) for 1 .. 20;
ok((wait_until { heard() >= $base + 20 } 5), 'host B read 20 replays');
my $after = status('b');
is $after->{sync}{replayed} - $before->{sync}{replayed}, 20,
    '... and refused each as replayed';
is $after->{responses}{synced}, $before->{responses}{synced},
    '... none of them taken';

# the id's hash changed (a byte of the entry): the tag does not check
my $bad = $d;
substr($bad, 40 + 8, 1) = chr(ord(substr($bad, 40 + 8, 1)) ^ 1);
$base = heard();
$before = status('b');
$out->send($bad);
ok((wait_until { heard() >= $base + 1 } 5), 'host B read a changed copy');
$after = status('b');
is $after->{sync}{refused} - $before->{sync}{refused}, 1,
    '... and refused it';
is $after->{responses}{synced}, $before->{responses}{synced},
    '... nothing taken';
ok grep({ /refused: tag \(another key\)/ } $host{b}->log),
    '... logged with its reason';

for my $h (sort keys %host) {
    ok !grep({ /\[(?:alert|crit|emerg)\]/ } $host{$h}->log),
        "no alert in host ${h}'s error log";
    $host{$h}->stop;
}

$be->stop;

done_testing();
