# queue= with "server ... resolve": the queue counts the servers of each
# worker's current view of the re-resolved peers (nginx 1.27.3 and later;
# skips on 1.22.1, make test-nginx-new runs it).  A DNS responder of the
# test's own on loopback (PrefixAware::DNS, as t/090-resolve.t), TTL 1,
# "valid=1s"; backends on 127.0.0.2 .. 127.0.0.4 answering their own
# name, "/slow" after about 8 s on b2 and 4 s on b3 and b4 (limit_rate),
# "/" at once; threshold=1, queue_timeout=10s.
#
# 1. the configuration is accepted (it was an error before);
# 2. one address (b2) held by a slow request: requests wait; a second
#    address (b3) appears in DNS: the waiting requests are released to
#    it, in the new view, long before b2 frees;
# 3. both held, one request waits; b3 leaves DNS: the waiter is not
#    released when b3's request ends (no longer a server of the view) but
#    when b2's does, and is answered by b2;
# 4. the view empties while a request waits: it waits (no server to wait
#    for) and is answered at queue_timeout; then the servers come back.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::DNS;
use PrefixAware::Scenario qw(free_port wait_until);
use JSON::PP ();

PrefixAware::DNS::skip_unless_resolve();

my $BPORT = free_port();
my $dns = PrefixAware::DNS->new;
my $DNS = $dns->port;

my @addr = map { "127.0.0.$_" } 2 .. 4;
my %name = map { ("$_:$BPORT" => "b" . (split /\./)[3]) } @addr;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start(join '', map {
    my $b = $name{"$_:$BPORT"};
    my $pad = join '', map { "            add_header X-Pad$_ "
                             . ('p' x 2000) . ";\n" }
                       1 .. ($b eq 'b2' ? 4 : 2);
    "    server {\n"
    . "        listen $_:$BPORT;\n"
    . "        location / { return 200 \"$b\\n\"; }\n"
    . "        location /slow {\n"
    . "            limit_rate 1k;\n"
    . $pad
    . "            return 200 \"$b\\n\";\n"
    . "        }\n"
    . "    }\n"
} @addr);

my $ng = PrefixAware::Scenario->new(name => 'qresolve', workers => 2);
my $listen = $ng->port;

$dns->answer($addr[0]);

$ng->start(<<"_EOC_");
    resolver 127.0.0.1:$DNS valid=1s ipv6=off;
    resolver_timeout 2s;

    upstream up {
        zone up 512k;
        prefix_aware index=off threshold=1 queue=8 queue_timeout=10s;
        server pool.test:$BPORT resolve;
    }

    server {
        listen 127.0.0.1:$listen reuseport;
        location = /status { prefix_aware_status; }
        location = /pid { return 200 "\$pid\\n"; }
        location / {
            proxy_buffer_size 16k;
            proxy_buffers 4 16k;
            proxy_pass http://up;
        }
    }
_EOC_

ok 1, 'queue= with "server ... resolve": accepted';

sub status {
    my $r = $ng->request(GET => '/status?format=json');
    return $r->{status} == 200 ? JSON::PP::decode_json($r->{body}) : {};
}

sub servers {
    my $st = status();
    return join ' ', sort map { $_->{server} }
                          @{ $st->{upstreams}{up}{servers} || [] };
}

sub waiting { status()->{upstreams}{up}{queue}{waiting} // -1 }

sub want { join ' ', sort map { "$_:$BPORT" } @_ }

sub name_of { my ($r) = @_; ($r->{body} // '') =~ /^(b\d)$/ ? $1 : '' }

# n requests sent one by one on their own connections
sub send_n {
    my ($n, $path) = @_;
    my @c = map { $ng->conn } 1 .. $n;
    for my $i (0 .. $#c) {
        $c[$i]->send(GET => "$path?n=$i");
        sleep 0.1;
    }
    return @c;
}

ok((wait_until { servers() eq want($addr[0]) } 20), 'b2 is the view')
    or diag('have: ' . servers());

# 2. a server appears while requests wait: released to it

my ($hold) = send_n(1, '/slow');
my @w = send_n(2, '/');
ok wait_until(sub { waiting() == 2 }, 5), '2 requests wait for b2';
my $t0 = time;
$dns->answer(@addr[0, 1]);
my @r = map { $_->read(10) } @w;
my $took = time - $t0;
is_deeply [ map { $_->{status} } @r ], [ 200, 200 ], 'both answered 200';
is_deeply [ map { name_of($_) } @r ], [ 'b3', 'b3' ],
          'by b3, the server the new view added';
ok $took < 4, sprintf('within %.2f s of the DNS change, b2 still busy', $took);
is waiting(), 0, 'nothing waits';
my $rh = $hold->read(15);
is name_of($rh), 'b2', 'the slow request ended on b2';
$_->close for @w, $hold;
ok((wait_until { servers() eq want(@addr[0, 1]) } 10), 'b2 and b3 are the view');

# 3. a server leaves while a request waits: it waits for the others

my @h = send_n(2, '/slow');
ok wait_until(sub {
    my $st = status();
    my $n = 0;
    $n += $_->{inflight} // 0 for @{ $st->{upstreams}{up}{servers} || [] };
    $n == 2;
}, 5), 'both held';
my ($w3) = send_n(1, '/');
ok wait_until(sub { waiting() == 1 }, 5), 'a request waits';
$t0 = time;
$dns->answer($addr[0]);
ok((wait_until { servers() eq want($addr[0]) } 10), 'b3 left the view');
my $r3 = $w3->read(15);
$took = time - $t0;
is $r3->{status}, 200, 'the waiting one answered 200';
is name_of($r3), 'b2', 'by b2, the server of the view';
my @rh = map { $_->read(15) } @h;
is_deeply [ sort map { name_of($_) } @rh ], [ 'b2', 'b3' ],
          'the held ones ended on b2 and b3 (b3 after it left the view)';
diag(sprintf 'released %.2f s after b3 left', $took);
$_->close for @h, $w3;

# 4. no server at all while a request waits: answered at queue_timeout

($hold) = send_n(1, '/slow');
($w3) = send_n(1, '/');
ok wait_until(sub { waiting() == 1 }, 5), 'a request waits for b2';
$dns->answer();
$r3 = $w3->read(15);
is $r3->{status}, 429, 'no server in the view: answered 429 at the time out';
like $r3->{body}, qr/time out/, 'the reason';
$hold->read(15);
$_->close for $hold, $w3;
$dns->answer(@addr[0, 2]);
ok((wait_until { servers() eq want(@addr[0, 2]) } 10), 'b2 and b4 are back');
my $r4 = $ng->request(GET => '/');
is $r4->{status}, 200, 'and serve';

my @bad = grep { /\[(alert|crit|emerg)\]|exited on signal|AddressSanitizer/ }
          $ng->log;
is_deeply \@bad, [], 'no alert, crash';

$ng->stop;
$be->stop;

done_testing;
