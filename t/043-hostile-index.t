# Routing v2 (index=) against a hostile body: one request must not empty
# the index entries another tenant has on a server, nor count as much
# work as the server's whole cache.
#
# Two servers, the defaults (index=auto, block=128, capacity=262144 tokens:
# 8,192 blocks a server, length=524288).  A tenant's chat of 8,192
# characters twice: the second matches its 64 blocks on the first's server
# ($prefix_aware_depth 64).  Then {"model":"m","prompt":["","",...]} of
# 9 MB: 3 million empty strings, each a separator in the key's text and
# no character.  It is sent under other ids until one lands on the
# tenant's server ($upstream_addr).  Before the fix its separators were
# units: 3 million units, a record that aged the server by 23,438 blocks
# (past its 8,192) and a cost of 750,000 units; the chat sent again then
# matched nothing (depth 0).  Now the chat keeps its depth 64, and the
# hostile request, which has no text, has no block and counts no work
# (checked on the status page while the backend holds it).  And a long
# body counts at most "capacity" units of work.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use Time::HiRes qw(sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start("    client_max_body_size 16m;\n"
           . "    client_body_buffer_size 16m;\n"
           . $be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'hostile-index');
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    upstream small {
        prefix_aware capacity=1024;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    server {
        listen 127.0.0.1:$listen;
        client_max_body_size 16m;
        add_header X-Depth \$prefix_aware_depth always;
        add_header X-Up \$upstream_addr always;
        location /v1/ { proxy_pass http://up; }
        location /slow/ { proxy_pass http://up/slow; }
        location /small/ { proxy_pass http://small/slow; }
        location = /st { prefix_aware_status; }
    }
_EOC_

srand(43);

my $text = join '', map { chr(97 + int rand 26) } 1 .. 8192;
my $chat = '{"model":"m","messages":[{"role":"user","content":"'
           . $text . '"}]}';

sub send_body {
    my ($path, $id, $body) = @_;
    my $r = $ng->request(POST => $path, body => $body,
                         headers => [ ID_HEADER, $id,
                                      'Content-Type', 'application/json' ],
                         timeout => 30);
    return ($r->{headers}{'x-up'} // "status $r->{status}",
            $r->{headers}{'x-depth'} // '', $r->{status});
}

my ($home, $d1) = send_body('/v1/chat/completions', 'tenant', $chat);
my ($to, $d2) = send_body('/v1/chat/completions', 'tenant', $chat);
is $d1, '0', 'the first chat matched nothing';
is $to, $home, 'the second chat went to the first one\'s server';
is $d2, '64', '... and matched its 64 blocks of 128 characters';

# 9 MB of empty strings: "" and a comma, 3 bytes each
my $n = 3 * 1024 * 1024;
my $hostile = '{"model":"m","prompt":[' . ('"",' x ($n - 1)) . '""]}';

my ($landed, $tries) = (0, 0);
for my $i (1 .. 20) {
    $tries++;
    my ($up, undef, $status) = send_body('/v1/completions', "evil-$i",
                                         $hostile);
    if ($up eq $home) {
        $landed = 1;
        last;
    }
}
ok $landed, "the hostile body landed on the tenant's server ($tries tries)";

my ($again, $d3) = send_body('/v1/chat/completions', 'tenant', $chat);
is $again, $home, 'the chat sent again goes to its server';
is $d3, '64', '... and still matches its 64 blocks';

# the work the hostile body counts while its server holds it (the
# backend's /slow answers after about a second): none, as for any body
# without a block of text, which is routed as with index=off
my $c = $ng->conn;
$c->send(POST => '/slow/v1/completions', body => $hostile,
         headers => [ ID_HEADER, 'slow', 'Content-Type', 'application/json' ]);
my $held = wait_until {
    my $st = eval { JSON::PP::decode_json($ng->request(GET => '/st')->{body}) }
        or return;
    my @s = @{ $st->{upstreams}{up}{servers} };
    my $in = 0;
    $in += $_->{inflight} for @s;
    $in == 1 ? [ map { $_->{work} } @s ] : undef;
} 10;
ok $held, 'the held request was seen in flight';
is_deeply $held, [0, 0], 'and it counts no work on its server'
    or diag "work @{ $held || [] }";
is $c->read(10)->{status}, 200, 'it is answered';
$c->close;

# a request counts at most "capacity" units (a quarter of the cache in
# tokens of 4 units): 8,000 bytes with capacity=1024 count 1,024 units of
# prefill and a decode share of 512 + 1024 / 4 (before: 8,000 + 2,512)
$c = $ng->conn;
$c->send(POST => '/small/x', body => 'y' x 8000);
$held = wait_until {
    my $st = eval { JSON::PP::decode_json($ng->request(GET => '/st')->{body}) }
        or return;
    my @s = @{ $st->{upstreams}{small}{servers} };
    my ($in, $w) = (0, 0);
    $in += $_->{inflight}, $w += $_->{work} for @s;
    $in == 1 ? [ $w ] : undef;
} 10;
is_deeply $held, [ 1024 + 512 + 256 ],
    'a long body counts capacity=1024 units of prefill, and its decode share'
    or diag "work @{ $held || [] }";
is $c->read(10)->{status}, 200, 'it is answered';
$c->close;

my $st = JSON::PP::decode_json($ng->request(GET => '/st')->{body});
is_deeply [ map { $_->{inflight} . '/' . $_->{work} }
            @{ $st->{upstreams}{up}{servers} } ],
          [ '0/0', '0/0' ], 'nothing left in flight, no work';

ok !grep({ /\[(?:alert|crit|emerg)\]/ } $ng->log), 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing();
