# "server ... resolve": a view of the servers that cannot be made for a
# passing reason (the shared zone full while the records of servers that
# left drain, no memory) is made again at the reaper's tick, once a
# second, while DNS answers the same; before, it was never tried again
# until the answer changed, and the worker kept routing to the servers it
# had.  The zone is made "full" by a fault that only test builds have
# (NGX_HTTP_PREFIX_AWARE_TEST at configure time, as t/newer/newer.mk
# builds the module): a file "zone-full" in nginx's prefix.  The test
# skips where nginx does not re-resolve names (before 1.27.3) or the
# fault is not built in.  The DNS responder is t/090-resolve.t's
# (PrefixAware::DNS).

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::DNS;
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);
use JSON::PP ();

PrefixAware::DNS::skip_unless_resolve();

my $bin = $PrefixAware::Scenario::Binary;

# the fault is in the module, or in nginx built with it
my $with_fault = 0;

for my $f ($bin, split ' ', $PrefixAware::Scenario::Modules // '') {
    open my $fh, '<:raw', $f or next;
    local $/;
    my $image = <$fh>;
    $with_fault = 1 if index($image, 'zone-full') >= 0;
}

plan skip_all => 'a build without the test faults '
                 . '(NGX_HTTP_PREFIX_AWARE_TEST, t/newer/newer.mk)'
    unless $with_fault;

my $BPORT = free_port();
my $dns = PrefixAware::DNS->new;
my $DNS = $dns->port;

my @addr = map { "127.0.0.$_" } 2 .. 5;
my %name = map { ("$_:$BPORT" => "b" . (split /\./)[3]) } @addr;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start(join '', map {
    my $b = $name{"$_:$BPORT"};
    "    server {\n"
    . "        listen $_:$BPORT;\n"
    . "        location / { return 200 \"$b\\n\"; }\n"
    . "    }\n"
} @addr);

my $ng = PrefixAware::Scenario->new(name => 'resolve-retry', workers => 1);
my $listen = $ng->port;
my $full = $ng->root . '/zone-full';

$dns->answer(@addr[0 .. 1]);

$ng->start(<<"_EOC_");
    resolver 127.0.0.1:$DNS valid=1s ipv6=off;
    resolver_timeout 2s;

    upstream up {
        zone up 512k;
        prefix_aware index=off length=1024;
        server pool.test:$BPORT resolve;
    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

sub servers {
    my $r = $ng->request(GET => '/status?format=json');
    return '' unless $r->{status} == 200;
    my $st = JSON::PP::decode_json($r->{body});
    return join ' ', sort map { $_->{server} }
                          @{ $st->{upstreams}{up}{servers} };
}

sub want { join ' ', sort map { "$_:$BPORT" } @_ }

# the backends that keyed requests reach
sub reached {
    my %b;
    for my $i (1 .. 60) {
        my $r = $ng->request(GET => '/t', headers => [ID_HEADER, "key-$i"]);
        $b{$1} = 1 if $r->{status} == 200 && $r->{body} =~ /^(b\d+)$/;
    }
    return join ' ', sort keys %b;
}

sub logged {
    my $re = shift;
    open my $fh, '<', $ng->errlog or return 0;
    local $/;
    my $log = <$fh>;
    return scalar(() = $log =~ /$re/g);
}

ok((wait_until { servers() eq want(@addr[0 .. 1]) } 20),
   'the 2 addresses are on the status page')
    or diag('have: ' . servers());
is(reached(), 'b2 b3', 'requests reach the 2 servers');

# the zone "full": the view of 4 addresses cannot be made

open my $fh, '>', $full or die "$full: $!\n";
close $fh;

$dns->answer(@addr);

ok((wait_until { logged(qr/cannot follow the servers of upstream "up", it keeps the 2 it had, and tries again/) } 20),
   'zone full: the view of 4 servers is not made, the 2 are kept')
    or diag('have: ' . servers());
is(servers(), want(@addr[0 .. 1]), '... the status page lists the 2');
is(reached(), 'b2 b3', '... requests still reach the 2');

# room again, the answer the same: the view is made at the reaper's tick

unlink $full or die "$full: $!\n";

ok((wait_until { servers() eq want(@addr) } 5),
   'room again, DNS the same: the 4 servers follow within seconds')
    or diag('have: ' . servers());
is(reached(), 'b2 b3 b4 b5', '... and requests reach the 4');

$ng->stop;
$be->stop;

unlike(do { local $/; open my $l, '<', $ng->errlog; <$l> // '' },
       qr/\[(alert|crit|emerg)\]/, 'no alert in the error log');

done_testing();
