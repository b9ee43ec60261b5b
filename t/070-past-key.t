# The text past the key counts (issue 23, agentic traffic): a prompt
# longer than "length" costs its server the prefill of all of it, not of
# its key alone, unless the server holds the key to its end (then the
# rest of the same text too, issue 43), and takes that much of its cache; and with the index a
# key may be longer than SageMaker's 65,536 units, so that a long history
# is matched to its end.
#
# Two servers and the index.  Work is read on the status page while the
# backend's /slow holds the request (about a second).  Units are
# characters of OpenAI text (the roles too, no separators) or bytes; a
# request's decode share is 512 + a quarter of its prompt's units.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start("    client_max_body_size 4m;\n"
           . "    client_body_buffer_size 4m;\n"
           . $be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'past-key');
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream short {
        prefix_aware length=1024;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    upstream long {
        prefix_aware length=524288 capacity=1000000;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    upstream sage {
        prefix_aware index=off length=65536;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    server {
        listen 127.0.0.1:$listen;
        client_max_body_size 4m;
        client_body_buffer_size 4m;
        add_header X-Depth \$prefix_aware_depth always;
        add_header X-Up \$upstream_addr always;
        location /short/ { proxy_pass http://short/slow; }
        location /long/ { proxy_pass http://long/; }
        location /sage/ { proxy_pass http://sage/; }
        location = /st { prefix_aware_status; }
    }
_EOC_

srand(70);

sub chat {
    '{"model":"m","messages":[{"role":"user","content":"' . $_[0] . '"}]}'
}

# the work of the one request held on upstream $up, and its depth
sub held_work {
    my ($up, $path, $body) = @_;
    my $c = $ng->conn;
    $c->send(POST => $path, body => $body,
             headers => [ 'Content-Type', 'application/json' ]);
    my $w = wait_until {
        my $st = eval {
            JSON::PP::decode_json($ng->request(GET => '/st')->{body})
        } or return;
        my ($in, $w) = (0, 0);
        for (@{ $st->{upstreams}{$up}{servers} }) {
            $in += $_->{inflight};
            $w += $_->{work};
        }
        $in == 1 ? $w : undef;
    } 10;
    my $r = $c->read(10);
    $c->close;
    return ($w, $r->{status}, $r->{headers}{'x-depth'});
}

# 5,000 characters of content and "user": 1,024 units of key, 3,980 past
my $t = rnd(5000);
my ($w, $status, $depth) = held_work('short', '/short/v1/chat/completions',
                                     chat($t));
is $status, 200, 'a chat longer than its key is answered';
is $depth, '0', '... placed cold';
is $w, 5004 + 512 + int(5004 / 4),
    '... and counts all its 5,004 units of prefill, not its key\'s 1,024'
    or diag "work $w";

# again: its key's 8 blocks are cached, to the key's end, and the 3,980
# units past them with them on that server (the rest of the same text,
# issue 43): no prefill counted, the decode share alone
($w, $status, $depth) = held_work('short', '/short/v1/chat/completions',
                                  chat($t));
is $depth, '8', 'the same chat again matches its key\'s 8 blocks';
is $w, 512 + int(5004 / 4),
    '... and counts none of the 3,980 units past them' or diag "work $w";

# a chat that shares 900 characters of it (7 blocks, short of the key's
# end): its text past those blocks is prefill, all 4,108 units of it
($w, $status, $depth) = held_work('short', '/short/v1/chat/completions',
                                  chat(substr($t, 0, 900) . rnd(4100)));
is $depth, '7', 'a chat sharing 7 of the key\'s 8 blocks matches them';
is $w, 5004 - 7 * 128 + 512 + int(5004 / 4),
    '... and counts the 4,108 units past them' or diag "work $w";

# raw bytes: 8,000 of them, 1,024 in the key
($w, $status) = held_work('short', '/short/x', 'y' x 8000);
is $w, 8000 + 512 + 2000, 'a raw body counts all its bytes'
    or diag "work $w";

# separators are no units past the key either: 200,000 empty strings
# after 2,000 characters count 2,000 units
my $seps = '{"model":"m","prompt":["' . rnd(2000) . '",'
           . join(',', ('""') x 200000) . ']}';
($w, $status) = held_work('short', '/short/v1/completions', $seps);
is $w, 2000 + 512 + 500, 'empty strings past the key count nothing'
    or diag "work $w";

# a key longer than 65,536 units with the index: a 300,000-character
# history matches to its end (2,343 blocks of 128: 2,336 of them, the
# last whole stride of 8 blocks past the first 64), where 65,536 units
# would stop at 512 blocks
my $history = rnd(300000);
my (@up, @depth);
for (1 .. 2) {
    my $r = $ng->request(POST => '/long/v1/chat/completions',
                         body => chat($history),
                         headers => [ ID_HEADER, 'agent',
                                      'Content-Type', 'application/json' ],
                         timeout => 30);
    is $r->{status}, 200, 'a 300,000-character chat is answered';
    push @up, $r->{headers}{'x-up'};
    push @depth, $r->{headers}{'x-depth'};
}
is $up[1], $up[0], 'the second went to the first one\'s server';
is_deeply \@depth, [ 0, 64 + int((int(300004 / 128) - 64) / 8) * 8 ],
    '... and matched 2,336 of its 2,343 blocks';

# and a tool result appended: the history's blocks match, the rest is new
my $r = $ng->request(POST => '/long/v1/chat/completions',
                     body => chat($history . rnd(20000)),
                     headers => [ ID_HEADER, 'agent',
                                  'Content-Type', 'application/json' ],
                     timeout => 30);
is $r->{headers}{'x-up'}, $up[0], 'the next turn goes there too';
is $r->{headers}{'x-depth'}, 2336, '... matching the history it shares';

# index=off keeps SageMaker's key: 65,536 is the most it takes
$r = $ng->request(POST => '/sage/v1/chat/completions',
                  body => chat($history),
                  headers => [ 'Content-Type', 'application/json' ]);
is $r->{status}, 200, 'index=off length=65536 routes';

my $st = JSON::PP::decode_json($ng->request(GET => '/st')->{body});
is_deeply [ map { $_->{inflight} } @{ $st->{upstreams}{short}{servers} } ],
          [ 0, 0 ], 'nothing left in flight';

ok !grep({ /\[(?:alert|crit|emerg)\]/ } $ng->log), 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing();
