# Stored responses follow their server (issue 44, item 4): each backend
# answers POST /v1/responses with an id of its own ("resp_bN_..."), JSON
# or streamed, and GET/DELETE/cancel of an id it did not make with 404,
# as vLLM's and SGLang's stores do.  The module reads each id from the
# answer as it passes and sends the follow-ups (previous_response_id,
# GET, DELETE, .../cancel) to the server that made it, past threshold;
# ids split across buffers; an unknown id, a server gone or down
# (state_lost); the table's bound (the oldest forgotten first); hostile
# answers (ids over the bound, huge, not strings); a reload keeps the
# table while responses= is the same and drops it when it changes; two
# hosts in sync route each other's follow-ups.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

my %port = map { $_ => free_port() } qw(b1 b2 b3 split sa sb);

# the backends: a Responses store each, in nginx
sub backend {
    my ($name, $port) = @_;
    my $pad = 'p' x 1200;
    my $long = 'x' x 65;
    my $huge = 'y' x 4000;
    my $sse = "event: response.created\\n"
            . "data: {\\\"response\\\":{\\\"id\\\":\\\"resp_${name}_\$request_id\\\","
            . "\\\"object\\\":\\\"response\\\",\\\"output\\\":[]},"
            . "\\\"sequence_number\\\":0,\\\"type\\\":\\\"response.created\\\"}\\n\\n"
            . "event: response.completed\\n"
            . "data: {\\\"response\\\":{\\\"id\\\":\\\"resp_${name}_\$request_id\\\"},"
            . "\\\"type\\\":\\\"response.completed\\\"}\\n\\n";
    return <<"_EOC_";
    server {
        listen 127.0.0.1:$port;
        default_type application/json;
        location = /v1/responses {
            set \$y '$huge';
            if (\$arg_kind = sse) {
                return 200 "$sse";
            }
            if (\$arg_kind = long) {
                return 200 '{"id":"resp_$long","object":"response"}';
            }
            if (\$arg_kind = huge) {
                return 200 '{"id":"resp_\$y\$y\$y\$y\$y","object":"response"}';
            }
            if (\$arg_kind = number) {
                return 200 '{"id":12345,"object":"response"}';
            }
            if (\$arg_kind = garbage) {
                return 200 '}}]]"id":"resp_${name}_garbage" {{';
            }
            if (\$arg_kind = error) {
                return 500 '{"id":"resp_${name}_error"}';
            }
            return 200 '{"id":"resp_${name}_\$request_id","object":"response","output":[{"id":"msg_1","type":"message","content":[{"type":"output_text","text":"\\\\"id\\\\": \\\\"resp_fake\\\\""}]}],"status":"completed"}';
        }
        location = /slow/v1/responses {
            limit_rate 1k;
            add_header X-Pad $pad;
            return 200 '{"id":"resp_${name}_\$request_id","object":"response"}';
        }
        location ~ ^/slow/v1/responses/resp_${name}_ {
            limit_rate 1k;
            add_header X-Pad $pad;
            return 200 '{"server":"$name"}';
        }
        location ~ ^/v1/responses/resp_${name}_ {
            return 200 '{"server":"$name","method":"\$request_method","uri":"\$uri"}';
        }
        location /v1/responses/ {
            return 404 '{"error":"not found on $name"}';
        }
        location / {
            return 200 '{"server":"$name"}';
        }
    }
_EOC_
}

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start(join '', map { backend($_, $port{$_}) } qw(b1 b2 b3));

# a backend whose answer comes in pieces, the id cut in each: a JSON
# answer, or (POST ...?sse) a stream; each piece 150 ms after the other
my $split_pid = fork;
die "fork: $!\n" unless defined $split_pid;

if ($split_pid == 0) {
    # killed, it leaves without the END blocks (which stop every nginx)
    $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
    my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                  LocalPort => $port{split}, Listen => 64,
                                  ReuseAddr => 1, Proto => 'tcp')
        or POSIX::_exit(1);
    my $n = 0;
    while (my $c = $l->accept) {
        my $req = '';
        while ($req !~ /\r\n\r\n/) {
            last unless sysread $c, $req, 4096, length $req;
        }
        my ($len) = $req =~ /Content-Length: *(\d+)/i;
        my ($head, $body) = split /\r\n\r\n/, $req, 2;
        $body //= '';
        while (defined $len && length $body < $len) {
            last unless sysread $c, $body, 4096, length $body;
        }
        $n++;
        my $id = "resp_split_$$" . "_$n";
        my @pieces;
        if ($head =~ m{^GET /v1/responses/(\S+)}) {
            my $ok = $1 =~ /^resp_split_/;
            my $b = $ok ? '{"server":"split"}' : '{"error":"not found"}';
            syswrite $c, "HTTP/1.1 " . ($ok ? "200 OK" : "404 Not Found")
                         . "\r\nContent-Length: " . length($b)
                         . "\r\nConnection: close\r\n\r\n$b";
            close $c;
            next;
        }
        if ($head =~ /sse/) {
            @pieces = ("event: response.created\ndata: {\"resp",
                       "onse\":{\"object\":\"response\",\"id\":\"resp_sp",
                       "lit_$$" . "_$n\"},\"type\":\"response.created\"}",
                       "\n\ndata: [DONE]\n\n");
            syswrite $c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"
                         . "\r\nConnection: close\r\n\r\n";
        } else {
            my $b = "{\"object\":\"response\",\"output\":[],\"id\":\"$id\"}";
            my $cut = index($b, 'resp_split') + 7;
            @pieces = (substr($b, 0, $cut - 4), substr($b, $cut - 4, 4),
                       substr($b, $cut));
            syswrite $c, "HTTP/1.1 200 OK\r\nContent-Type: application/json"
                         . "\r\nContent-Length: " . length($b)
                         . "\r\nConnection: close\r\n\r\n";
        }
        for my $p (@pieces) {
            sleep 0.15;
            syswrite $c, $p;
        }
        close $c;
    }
    POSIX::_exit(0);
}

END {
    local $?;
    if ($split_pid) { kill TERM => $split_pid; waitpid $split_pid, 0; }
}

sub servers {
    my (%o) = @_;
    return join '', map {
        "        server 127.0.0.1:$port{$_}"
        . ($o{down} && $o{down} eq $_ ? ' down' : '') . ";\n"
    } grep { !$o{without} || $o{without} ne $_ } qw(b1 b2 b3);
}

sub host_conf {
    my (%o) = @_;
    my $listen = $o{listen};
    my $sync = $o{sync} // '';
    my $responses = $o{responses} // '';
    my $servers = servers(%o);
    return <<"_EOC_";
    upstream llm {
        prefix_aware threshold=1 $responses;
        $sync
$servers    }

    upstream small {
        prefix_aware responses=16;
$servers    }

    upstream none {
        prefix_aware responses=off;
$servers    }

    upstream split {
        prefix_aware;
        server 127.0.0.1:$port{split};
    }

    upstream dead {
        zone dead 64k;      # its server's failure seen by both workers
        prefix_aware;
        server 127.0.0.1:$port{split};
        server 127.0.0.1:$port{b1};
    }

    server {
        listen 127.0.0.1:$listen;
        add_header X-Up \$upstream_addr always;
        add_header X-Route \$prefix_aware_route always;
        location /slow/ { proxy_pass http://llm; }
        location /small/ { proxy_pass http://small/; }
        location /none/ { proxy_pass http://none/; }
        location /split/ {
            proxy_buffering off;
            proxy_pass http://split/;
        }
        location /splitbuf/ { proxy_pass http://split/; }
        location /dead/ { proxy_pass http://dead/; }
        location = /st { prefix_aware_status; }
        location / { proxy_pass http://llm; }
    }
_EOC_
}

my $key = 'the hosts share this secret';
my $peers = "peer=127.0.0.1:$port{sa} peer=127.0.0.1:$port{sb}";

my %host;
my %conf = (
    a => { listen => undef,
           sync => "prefix_aware_sync 127.0.0.1:$port{sa} \"key=$key\" "
                   . "$peers;" },
    b => { listen => undef,
           sync => "prefix_aware_sync 127.0.0.1:$port{sb} \"key=$key\" "
                   . "$peers;" },
);

for my $h (qw(a b)) {
    $host{$h} = PrefixAware::Scenario->new(name => "host-$h", workers => 2);
    $conf{$h}{listen} = $host{$h}->port;
    $host{$h}->start(host_conf(%{ $conf{$h} }));
}

my $ng = $host{a};

sub req {
    my ($method, $path, $body, $h) = @_;
    $h //= 'a';
    return $host{$h}->request($method => $path,
        defined $body ? (body => $body,
                         headers => [ 'Content-Type', 'application/json' ])
                      : ());
}

sub resp {
    my ($input, $prev) = @_;
    my %b = (model => 'm', input => $input, store => JSON::PP::true);
    $b{previous_response_id} = $prev if defined $prev;
    return JSON::PP->new->canonical->encode(\%b);
}

sub id_of { my $r = shift; ($r->{body} // '') =~ /"id":"(resp_[^"]+)"/ ? $1 : '' }
sub maker { my $id = shift; $id =~ /^resp_(b\d|split)_/ ? $1 : '' }

sub status {
    my ($h, $up) = @_;
    my $r = $host{$h // 'a'}->request(GET => '/st');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return;
    return $st->{upstreams}{$up // 'llm'};
}

srand(89);

# 1. a conversation of 10 turns, each with the previous turn's id; each
#    turn's input is new text, whose key alone would go anywhere
my @ids;
my $r = req(POST => '/v1/responses', resp(rnd(300)));
is $r->{status}, 200, 'a first turn is answered';
my $id = id_of($r);
like $id, qr/^resp_b\d_/, '... with an id of the backend that made it';
isnt $r->{headers}{'x-route'}, 'state', '... routed by its key';
my $home = maker($id);

my $followed = 0;
for my $turn (2 .. 10) {
    $r = req(POST => '/v1/responses', resp(rnd(300), $id));
    my $new = id_of($r);
    $followed++ if maker($new) eq $home && $r->{headers}{'x-route'} eq 'state';
    $id = $new;
}
is $followed, 9, 'the 9 follow-ups went to the server of the first turn, '
                 . 'route "state"';

# 2. GET, DELETE, cancel of the last id: on its server, not elsewhere
for my $m ([ GET => "/v1/responses/$id" ],
           [ DELETE => "/v1/responses/$id" ],
           [ POST => "/v1/responses/$id/cancel" ],
           [ GET => "/v1/responses/$id/input_items" ])
{
    $r = req($m->[0], $m->[1], $m->[0] eq 'POST' ? '{}' : undef);
    is $r->{status}, 200, "$m->[0] $m->[1]: answered";
    like $r->{body}, qr/"server":"$home"/, '... by the server that made it';
    is $r->{headers}{'x-route'}, 'state', '... route "state"';
}

# 3. many conversations at once, streamed and not: every follow-up and
#    every GET reaches its server
my ($turns, $ok, $gets, $gok) = (0, 0, 0, 0);
for my $conv (1 .. 12) {
    my $kind = $conv % 2 ? '' : '?kind=sse';
    $r = req(POST => "/v1/responses$kind", resp(rnd(200)));
    my $cid = id_of($r);
    for (1 .. 3) {
        $r = req(POST => "/v1/responses$kind", resp(rnd(200), $cid));
        $turns++;
        my $new = id_of($r);
        $ok++ if $new && maker($new) eq maker($cid);
        $cid = $new;
    }
    $r = req(GET => "/v1/responses/$cid");
    $gets++;
    $gok++ if $r->{status} == 200 && $r->{body} =~ /"server":"@{[maker($cid)]}"/;
}
is $ok, $turns, "$turns follow-ups of 12 conversations (6 streamed): all "
                . "on their servers";
is $gok, $gets, "... and the $gets GETs";

# 4. past threshold (1): a GET held on the server (about 1 s), and a
#    follow-up meanwhile still goes to it
my $c = $ng->conn;
$c->send(GET => "/slow/v1/responses/$id");
ok((wait_until { status()->{servers}[0]{inflight}
                 + status()->{servers}[1]{inflight}
                 + status()->{servers}[2]{inflight} >= 1 } 3),
   'a slow GET is in flight on the server');
$r = req(POST => '/v1/responses', resp(rnd(300), $id));
is maker(id_of($r)), $home, '... a follow-up goes there past threshold=1';
is $r->{headers}{'x-route'}, 'state', '... route "state"';
my $held = $c->read(10);
$c->close;
is $held->{status}, 200, '... and the slow GET is answered';

# a follow-up held on its server (a slow answer): its work counts there,
# as an uncached request's of its own text, until it ends
$id = id_of($r);
$c = $ng->conn;
$c->send(POST => '/slow/v1/responses', body => resp(rnd(1000), $id),
         headers => [ 'Content-Type', 'application/json' ]);
my $hs = wait_until {
    my ($s) = grep { $_->{server} eq "127.0.0.1:$port{$home}" }
                   @{ status()->{servers} };
    $s && $s->{inflight} >= 1 ? $s : undef;
} 3;
ok $hs && $hs->{work} >= 1000,
   'a slow follow-up in flight on its server: its work counts there'
    or diag explain $hs;
$held = $c->read(10);
$c->close;
is maker(id_of($held)), $home, '... it was answered by its server';
my ($after_hs) = grep { $_->{server} eq "127.0.0.1:$port{$home}" }
                      @{ status()->{servers} };
is $after_hs->{work}, 0, '... and its work no longer counts once it ended';

# 5. ids split across buffers, JSON and streamed, unbuffered and buffered
for my $loc (qw(split splitbuf)) {
    for my $kind ('', '?sse') {
        $r = req(POST => "/$loc/v1/responses$kind", resp(rnd(100)));
        my $sid = $kind ? ($r->{body} =~ /"id":"(resp_split_[^"]+)"/)[0]
                        : id_of($r);
        like $sid // '', qr/^resp_split_/, "/$loc$kind: an answer in pieces";
        my $g = req(GET => "/$loc/v1/responses/$sid");
        is $g->{status}, 200, '... its GET reaches the server that made it';
        is $g->{headers}{'x-route'}, 'state', '... route "state"';
    }
}

# 6. an unknown id: routed by its key (here none: the least loaded), and
#    counted; the answer is the engines' 404
my $before = status();
$r = req(GET => '/v1/responses/resp_nobody_knows_it');
is $r->{status}, 404, 'an unknown id: the engine\'s 404';
isnt $r->{headers}{'x-route'}, 'state', '... not routed by state';
my $after = status();
is $after->{responses}{unknown}, $before->{responses}{unknown} + 1,
    '... counted as unknown';
is $after->{responses}{state_lost}, $before->{responses}{state_lost} + 1,
    '... and as state_lost';

# 7. hostile answers: nothing stored, counted; the answers pass unchanged
$before = status();
for my $kind (qw(long huge number garbage error)) {
    $r = req(POST => "/v1/responses?kind=$kind", resp(rnd(100)));
    ok $r->{status} == 200 || $kind eq 'error', "kind=$kind answered";
}
$r = req(POST => '/v1/responses?kind=huge', resp(rnd(100)));
is length($r->{body}), length('{"id":"resp_","object":"response"}') + 20000,
    'a 20,000-byte id passes whole';
$after = status();
is $after->{responses}{rejected}, $before->{responses}{rejected} + 3,
    'the ids over 64 bytes are rejected (twice huge, once long)';
is $after->{responses}{learned}, $before->{responses}{learned},
    '... and nothing of the five kinds is stored';
is $after->{responses}{size}, $before->{responses}{size}, '... the same size';

# 8. the bound: responses=16 keeps the last 16, the oldest forgotten first
my @small;
for (1 .. 20) {
    push @small, id_of(req(POST => '/small/v1/responses', resp(rnd(50))));
}
my $sm = status('a', 'small');
is $sm->{responses}{capacity}, 16, 'responses=16: capacity 16';
is $sm->{responses}{size}, 16, '... 16 kept';
is $sm->{responses}{evicted}, 4, '... 4 forgotten';
$r = req(GET => "/small/v1/responses/$small[0]");
isnt $r->{headers}{'x-route'}, 'state', '... the first is not known';
$r = req(GET => "/small/v1/responses/$small[19]");
is $r->{headers}{'x-route'}, 'state', '... the last is';
is $r->{status}, 200, '... and answered by its server';

# responses=off: no table, no route by state
$r = req(POST => '/none/v1/responses', resp(rnd(50)));
my $nid = id_of($r);
$r = req(GET => "/none/v1/responses/$nid");
isnt $r->{headers}{'x-route'}, 'state', 'responses=off: no state route';
ok !exists status('a', 'none')->{responses}, '... and no "responses" status';

# 9. two hosts: an id learned by host A routes a follow-up on host B
$r = req(POST => '/v1/responses', resp(rnd(300)));
my $aid = id_of($r);
ok((wait_until { (status('b') // {})->{responses}{synced} } 5),
   'host B received host A\'s ids');
$r = req(GET => "/v1/responses/$aid", undef, 'b');
is $r->{status}, 200, 'host B: GET of an id host A learned is answered';
is $r->{headers}{'x-route'}, 'state', '... route "state"';
like $r->{body}, qr/"server":"@{[maker($aid)]}"/, '... by its server';
$r = req(POST => '/v1/responses', resp(rnd(300), $aid), 'b');
is maker(id_of($r)), maker($aid), '... and a follow-up on host B';
my $bid = id_of($r);
ok((wait_until { status('a')->{responses}{synced} } 5),
   '... whose id reaches host A');
$r = req(GET => "/v1/responses/$bid", undef, 'a');
is $r->{headers}{'x-route'}, 'state', 'host A routes host B\'s id by state';

# 10. the Prometheus page
$r = req(GET => '/st?format=prometheus');
like $r->{body}, qr/nginx_prefix_aware_responses_capacity\{upstream="llm"\} 65536\n/,
    'Prometheus: capacity';
like $r->{body}, qr/nginx_prefix_aware_responses_stored\{upstream="small"\} 16\n/,
    'Prometheus: stored';
like $r->{body}, qr/nginx_prefix_aware_responses_evicted_total\{upstream="small"\} 4\n/,
    'Prometheus: evicted';
like $r->{body}, qr/nginx_prefix_aware_state_total\{upstream="llm"\} [1-9]/,
    'Prometheus: state routes';
like $r->{body}, qr/nginx_prefix_aware_state_lost_total\{upstream="llm",reason="unknown"\} [1-9]/,
    'Prometheus: state lost';
like $r->{body}, qr/nginx_prefix_aware_server_routed_total\{upstream="llm",server="[^"]+",route="state"\} [1-9]/,
    'Prometheus: the route "state" by server';

# 11. a reload with the same responses=: the table is kept
$ng->reload(host_conf(%{ $conf{a} }));
$r = req(GET => "/v1/responses/$id");
is $r->{headers}{'x-route'}, 'state', 'after a reload, the ids are known';
like $r->{body}, qr/"server":"$home"/, '... and routed to their server';

# its server down: routed by key, counted as state_lost (server)
$before = status();
$ng->reload(host_conf(%{ $conf{a} }, down => $home));
$r = req(GET => "/v1/responses/$id");
isnt $r->{headers}{'x-route'}, 'state', 'its server down: not by state';
is $r->{status}, 404, '... another server answers 404';
$after = status();
is $after->{responses}{server_lost}, $before->{responses}{server_lost} + 1,
    '... counted as server_lost';

# its server removed from the upstream: the same
$ng->reload(host_conf(%{ $conf{a} }, without => $home));
$r = req(GET => "/v1/responses/$id");
isnt $r->{headers}{'x-route'}, 'state', 'its server gone: not by state';
is status()->{responses}{server_lost}, $after->{responses}{server_lost} + 1,
    '... counted as server_lost';

# responses= changed: a new, empty table
$ng->reload(host_conf(%{ $conf{a} }, responses => 'responses=1000'));
is status()->{responses}{capacity}, 1000, 'responses=1000 after a reload';
is status()->{responses}{size}, 0, '... a new table, empty';

# 12. its server dies: the first GET goes there (route "state"), fails
#     and is retried by its key (another engine's 404); the server is then
#     "failed" (max_fails=1): the next GET goes by its key, state_lost
my $did;
for (1 .. 30) {
    $r = req(POST => '/dead/v1/responses', resp(rnd(100)));
    ($did) = ($r->{body} // '') =~ /"id":"(resp_split_[^"]+)"/;
    last if $did;
}
ok $did, 'a response made by the Perl backend';
$r = req(GET => "/dead/v1/responses/$did");
is $r->{status}, 200, '... its GET answered there while it lives';
kill TERM => $split_pid;
waitpid $split_pid, 0;
$split_pid = 0;
my $dst = status('a', 'dead');
$r = req(GET => "/dead/v1/responses/$did");
is $r->{status}, 404, 'its server dead: the GET is retried by its key, '
                      . 'another engine\'s 404'
    or diag "$r->{status} $r->{body}";
is status('a', 'dead')->{responses}{state}, $dst->{responses}{state} + 1,
    '... it was routed by state first';
$r = req(GET => "/dead/v1/responses/$did");
isnt $r->{headers}{'x-route'}, 'state', 'the next GET: its server failed, '
                                        . 'not by state';
is status('a', 'dead')->{responses}{server_lost},
    $dst->{responses}{server_lost} + 1, '... counted as server_lost';

for my $h (sort keys %host) {
    ok !grep({ /\[(?:alert|crit|emerg)\]/ } $host{$h}->log),
        "no alert in host ${h}'s error log";
    $host{$h}->stop;
}

$be->stop;

done_testing();
