# Routing v2 (index=): the work a request counts on its server.  A body of
# 6,000 bytes placed cold on the only server costs 6000 units of prefill
# plus its decode share, 512 + 6000 / 4 = 2012 units.  The backend streams
# (PrefixAware::Raw "stream"): the response header at once, the first
# chunk after 1 s, the end 1.5 s later.
#
# 1. prefill=first (the default): 8012 units in flight on the server until
#    the first chunk, 2012 from then on while the request is in flight, 0
#    after it.
# 2. prefill=end: 8012 until the request ends, then 0.
# 3. A response that is not streamed (nginx's own backend, one buffer at
#    the end) leaves nothing behind either.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use Time::HiRes qw(sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);
use PrefixAware::Raw;

my $sp = free_port();
my $raw = PrefixAware::Raw->start($sp => 'stream');

my $bp = free_port();
my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(b1 => $bp));

my $ng = PrefixAware::Scenario->new(name => 'index-prefill');
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream first {
        prefix_aware index=1m threshold=1024;
        server 127.0.0.1:$sp;
    }

    upstream end {
        prefix_aware index=1m threshold=1024 prefill=end;
        server 127.0.0.1:$sp;
    }

    upstream plain {
        prefix_aware index=1m threshold=1024;
        server 127.0.0.1:$bp;
    }

    server {
        listen 127.0.0.1:$listen;
        proxy_buffering off;
        proxy_http_version 1.1;
        location /f/ { proxy_pass http://first/; }
        location /e/ { proxy_pass http://end/; }
        location /p/ { proxy_pass http://plain/; }
        location = /status { prefix_aware_status; }
    }
_EOC_

sub server {
    my ($up) = @_;
    my $r = $ng->request(GET => '/status');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return;
    return $st->{upstreams}{$up}{servers}[0];
}

sub work_is {
    my ($up, $want, $within) = @_;
    my $s = wait_until { my $s = server($up); $s && $s->{work} == $want && $s }
                       $within;
    return $s;
}

my $body = 'x' x 6000;

for my $case ([ first => 'f' ], [ end => 'e' ]) {
    my ($up, $loc) = @$case;

    my $c = $ng->conn;
    $c->send(POST => "/$loc/v1/completions", body => $body);

    my $s = work_is($up, 8012, 0.8);
    ok $s && $s->{inflight} == 1,
       "$up: 8012 units in flight before the first chunk"
        or diag explain server($up);

    if ($up eq 'first') {
        $s = work_is($up, 2012, 1.5);
        ok $s && $s->{inflight} == 1,
           "$up: 2012 after it, the request still in flight"
            or diag explain server($up);

    } else {
        sleep 1.4;
        $s = server($up);
        ok $s && $s->{work} == 8012 && $s->{inflight} == 1,
           "$up: 8012 after it too, the request still in flight"
            or diag explain $s;
    }

    my $r = $c->read(10);
    $c->close;
    like $r->{body}, qr/data: first\n\ndata: \[DONE\]/,
         "$up: the stream went through whole";

    $s = work_is($up, 0, 3);
    ok $s && $s->{inflight} == 0, "$up: nothing left after it";
}

# a response in one buffer, at its end
my $r = $ng->request(POST => '/p/', body => $body);
is $r->{body}, "b1\n", 'plain: served';
my $s = work_is('plain', 0, 3);
ok $s && $s->{inflight} == 0, 'plain: nothing left after it';

my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
is $st->{upstreams}{first}{index}{prefill}, 'first', 'prefill=first by default';
is $st->{upstreams}{end}{index}{prefill}, 'end', 'prefill=end as given';

unlike scalar $ng->log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;
$be->stop;
$raw->stop;

done_testing();
