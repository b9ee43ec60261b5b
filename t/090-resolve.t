# Membership that follows DNS: "server pool.test:PORT resolve" in an
# upstream with a zone, on nginx 1.27.3 and later (make test-nginx-new).
# The test runs a DNS responder of its own on loopback (PrefixAware::DNS:
# A records of one name read from a file at each query, TTL 1;
# "resolver ... valid=1s")
# and backends on 127.0.0.2 .. 127.0.0.7, each answering its own name.
#
# With N = 4 addresses and 200 keys:
# 1. each key has one server; the status page lists the 4 addresses;
# 2. a 5th address: the keys that move all go to it, and they are about
#    1/5 of them (from 0.5/5 to 1.6/5: 160 points per server leave the
#    shares uneven by some 10 %, and 200 keys add their own noise);
# 3. one address less: exactly the keys of that server move;
# no request fails while the answers change (requests are sent all the
# while); requests held in flight on a server that leaves end well, and
# every count is back to 0 after; the zone frees the records of the
# servers that left; an empty answer gives 502 with an error log line,
# then the servers come back.  A worker killed with requests in flight
# has its counts given back; ten changes back and forth leave the zone's
# free pages as they were.  A server without "resolve" in the same
# upstream is on the ring by its name; an address both static and
# resolved is on it once.
#
# The fractions moved are printed (diag) for docs/benchmarks.md.
# "index=" (routing v2) with "resolve" is a configuration error; the
# default, "index=auto", is off there, with a notice.
# nginx 1.22.1 has no run-time resolving (no "resolve" parameter): the
# test skips there.

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
my $KEYS = 200;
my $BPORT = free_port();
my $dns = PrefixAware::DNS->new;
my $DNS = $dns->port;

my @addr = map { "127.0.0.$_" } 2 .. 7;
my %name = map { ("$_:$BPORT" => "b" . (split /\./)[3]) } @addr;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start(join '', map {
    my $b = $name{"$_:$BPORT"};
    "    server {\n"
    . "        listen $_:$BPORT;\n"
    . "        location / { return 200 \"$b\\n\"; }\n"
    . "        location /slow {\n"
    . "            limit_rate 1k;\n"
    . "            add_header X-Pad " . ('p' x 2100) . ";\n"
    . "            return 200 \"$b\\n\";\n"
    . "        }\n"
    . "    }\n"
} @addr);

# routing v2's index does not follow resolved servers: refused
{
    my $t = PrefixAware::Scenario->new(name => 'resolve-index');
    $t->write_conf(<<"_EOC_");
    resolver 127.0.0.1:$DNS valid=1s;
    upstream up {
        zone up 512k;
        prefix_aware index=1m;
        server pool.test:$BPORT resolve;
    }
_EOC_
    my $out = `$bin -t -p ${\ $t->root}/ -c conf/nginx.conf 2>&1`;
    like($out, qr/\[emerg\].*"index" does not follow servers resolved/,
         'index= with resolve: a configuration error');
}

# ... so the default, index=auto, is off there, with a notice
{
    my $t = PrefixAware::Scenario->new(name => 'resolve-auto');
    $t->write_conf(<<"_EOC_");
    resolver 127.0.0.1:$DNS valid=1s;
    upstream up {
        zone up 512k;
        prefix_aware;
        server pool.test:$BPORT resolve;
    }
_EOC_
    my $out = `$bin -t -p ${\ $t->root}/ -c conf/nginx.conf -e stderr 2>&1`;
    is($?, 0, 'prefix_aware; with resolve: accepted') or diag $out;
    like($out, qr/\[notice\].*upstream "up" routes with "index=off", "index=auto" is off with servers with "resolve"/,
         '... index=auto is off there, with a notice');
}

# neither do model sets
{
    my $t = PrefixAware::Scenario->new(name => 'resolve-models');
    $t->write_conf(<<"_EOC_");
    resolver 127.0.0.1:$DNS valid=1s;
    upstream up {
        zone up 512k;
        prefix_aware index=off models=discover;
        server pool.test:$BPORT resolve;
    }
_EOC_
    my $out = `$bin -t -p ${\ $t->root}/ -c conf/nginx.conf 2>&1`;
    like($out, qr/\[emerg\].*model sets do not follow servers resolved/,
         'models= with resolve: a configuration error');
}

my $ng = PrefixAware::Scenario->new(name => 'resolve', workers => 2);
my $listen = $ng->port;

$dns->answer(@addr[0 .. 3]);

$ng->start(<<"_EOC_");
    resolver 127.0.0.1:$DNS valid=1s ipv6=off;
    resolver_timeout 2s;

    upstream up {
        zone up 512k;
        prefix_aware index=off length=1024;
        server pool.test:$BPORT resolve;
    }

    server {
        listen 127.0.0.1:$listen reuseport;
        location = /status { prefix_aware_status; }
        location = /pid { return 200 "\$pid\n"; }
        location / { proxy_pass http://up; }
    }
_EOC_

sub status {
    my $r = $ng->request(GET => '/status?format=json');
    return $r->{status} == 200 ? JSON::PP::decode_json($r->{body}) : undef;
}

# the servers of the upstream on the status page, sorted
sub servers {
    my $st = status() or return '';
    return join ' ', sort map { $_->{server} }
                          @{ $st->{upstreams}{up}{servers} };
}

sub want { join ' ', sort map { "$_:$BPORT" } @_ }

my ($sent, $failed) = (0, 0);

# one keyed request: the backend that served it, '' if it failed
sub serve {
    my ($key, $path) = @_;
    my $r = $ng->request(GET => $path // '/t', headers => [ID_HEADER, $key]);
    $sent++;
    return $1 if $r->{status} == 200 && $r->{body} =~ /^(b\d+)$/;
    $failed++;
    return '';
}

sub map_keys {
    return { map { ($_ => serve("key-$_")) } 1 .. $KEYS };
}

# sends keyed requests until the status page lists "want"
sub change_to {
    my ($want, $what) = @_;
    my $i = 0;
    my $ok = wait_until {
        serve("during-" . $i++);
        servers() eq $want;
    } 20;
    ok($ok, "$what: the servers are $want") or diag("have: " . servers());
}

ok((wait_until { servers() eq want(@addr[0 .. 3]) } 20),
   'the 4 addresses are on the status page')
    or diag("have: " . servers());

my $m1 = map_keys();
is(scalar(grep { $_ eq '' } values %$m1), 0, 'N=4: every key served');
my %used = map { $_ => 1 } values %$m1;
is(scalar(keys %used), 4, 'N=4: the keys are on the 4 servers');

# 2. one address more

$dns->answer(@addr[0 .. 4]);
change_to(want(@addr[0 .. 4]), 'added 127.0.0.6');

my $m2 = map_keys();
my @moved = grep { $m1->{$_} ne $m2->{$_} } 1 .. $KEYS;
my $frac = @moved / $KEYS;

diag(sprintf "N=4 -> 5: %d of %d keys moved (%.3f, ideal 1/5 = 0.200)",
     scalar @moved, $KEYS, $frac);

ok($frac >= 0.5 / 5 && $frac <= 1.6 / 5,
   sprintf('add: %.3f of the keys moved, about 1/5', $frac));
is(scalar(grep { $m2->{$_} ne 'b6' } @moved), 0,
   'add: every key that moved went to the new server');

# 3. one address less: 127.0.0.3 (b3) leaves

my @was_b3 = grep { $m2->{$_} eq 'b3' } 1 .. $KEYS;

$dns->answer(@addr[0, 2, 3, 4]);
change_to(want(@addr[0, 2, 3, 4]), 'removed 127.0.0.3');

my $m3 = map_keys();
@moved = grep { $m2->{$_} ne $m3->{$_} } 1 .. $KEYS;
$frac = @moved / $KEYS;

diag(sprintf "N=5 -> 4: %d of %d keys moved (%.3f; b3 had %d)",
     scalar @moved, $KEYS, $frac, scalar @was_b3);

is_deeply([sort { $a <=> $b } @moved], [sort { $a <=> $b } @was_b3],
          'remove: exactly the keys of the server that left moved');

is($failed, 0, "no request failed while the servers changed ($sent sent)");

# 4. requests in flight on a server that leaves end well; counts go to 0

my @b5 = grep { $m3->{$_} eq 'b5' } 1 .. $KEYS;
my @held;

for my $k (@b5[0 .. 3]) {
    my $c = $ng->conn;
    $c->send(GET => '/slow', headers => [ID_HEADER, "key-$k"], close => 1);
    push @held, $c;
}

ok((wait_until {
       my $f = $ng->inflight('up') // {};
       ($f->{"127.0.0.5:$BPORT"} // 0) == 4;
   } 5), '4 requests in flight on 127.0.0.5');

$dns->answer(@addr[0, 2, 4]);
change_to(want(@addr[0, 2, 4]), 'removed 127.0.0.5 with requests in flight');

my $ended = 0;
for my $c (@held) {
    my $r = $c->read(10);
    $ended++ if $r->{status} == 200 && $r->{body} =~ /^b5$/;
    $c->close;
}
is($ended, 4, 'the requests held on the server that left ended well');

ok((wait_until {
       my $f = $ng->inflight('up') or return 0;
       !grep { $_ } values %$f;
   } 5), 'every in-flight count is 0');

# the records of the servers that left are freed (one sweep a second)
ok((wait_until {
       my $st = status() or return 0;
       $st->{zone}{servers} == 3;
   } 10), 'the zone holds the records of the 3 servers only')
    or diag(JSON::PP->new->canonical->encode(status()->{zone}));

# 5. a worker killed with requests in flight on resolved servers: its
#    counts are given back

my $victim = $ng->workers->[0];
@held = ();

for my $k (grep { $m3->{$_} eq 'b2' } 1 .. $KEYS) {
    last if @held == 2;
    my $c = $ng->conn_on($victim) or last;
    $c->send(GET => '/slow', headers => [ID_HEADER, "key-$k"]);
    push @held, $c;
}

is(scalar @held, 2, '2 requests held in one worker');
ok((wait_until {
       my $f = $ng->inflight('up') // {};
       ($f->{"127.0.0.2:$BPORT"} // 0) == 2;
   } 5), '2 requests in flight on 127.0.0.2');

kill KILL => $victim;
$_->close for @held;

ok((wait_until {
       my $f = $ng->inflight('up') or return 0;
       !grep { $_ } values %$f;
   } 10), 'the killed worker\'s counts are given back');

# 6. ten changes back and forth: the zone's pages stay as they were

my $zone = sub { my $st = status() or return -1; $st->{zone}{free_pages} };
my $before = $zone->();

for my $i (1 .. 5) {
    $dns->answer(@addr[0 .. 5]);
    change_to(want(@addr[0 .. 5]), "churn $i: 6 servers");
    $dns->answer(@addr[0, 2, 4]);
    change_to(want(@addr[0, 2, 4]), "churn $i: 3 servers");
}

ok((wait_until {
       my $st = status() or return 0;
       $st->{zone}{servers} == 3 && $zone->() == $before;
   } 10), "after 10 changes the zone has the free pages it had ($before)")
    or diag("free pages now: " . $zone->());

# 7. an empty answer: 502 and a log line, then the servers come back

my $log = $ng->log_size;

$dns->answer();
ok((wait_until { servers() eq '' } 20), 'an empty answer leaves no server');

my $r = $ng->request(GET => '/t', headers => [ID_HEADER, 'key-1']);
is($r->{status}, 502, 'no server: 502');
like($ng->log($log), qr/\[error\].*upstream "up" has no servers/,
     'no server: an error log line');

$dns->answer(@addr[0 .. 3]);
ok((wait_until { servers() eq want(@addr[0 .. 3]) } 20),
   'the servers come back');
is(serve('key-1'), $m1->{1}, 'a key goes where it went with these servers');

unlike(join("\n", grep { !/exited on signal 9/ } $ng->log(0)),
       qr/\[(alert|crit|emerg)\]/,
       'no alert in the error log but the kill\'s');

$ng->stop;

# 8. a server without "resolve" beside a resolved name: on the ring by its
#    name; the same address from DNS too is on the ring once

$dns->answer(@addr[0 .. 2]);

my $mx = PrefixAware::Scenario->new(name => 'resolve-mixed');
my $mlisten = $mx->port;

$mx->start(<<"_EOC_");
    resolver 127.0.0.1:$DNS valid=1s ipv6=off;

    upstream up {
        zone up 512k;
        prefix_aware index=off length=1024;
        server 127.0.0.7:$BPORT;
        server pool.test:$BPORT resolve;
    }

    server {
        listen 127.0.0.1:$mlisten;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

sub mixed {
    my $r = $mx->request(GET => '/status?format=json');
    return '' unless $r->{status} == 200;
    my $st = JSON::PP::decode_json($r->{body});
    return join ' ', sort map { $_->{server} }
                          @{ $st->{upstreams}{up}{servers} };
}

ok((wait_until { mixed() eq want(@addr[0 .. 2], $addr[5]) } 20),
   'mixed: the static server and the 3 resolved ones')
    or diag("have: " . mixed());

my %seen;
for my $k (1 .. 60) {
    my $r = $mx->request(GET => '/t', headers => [ID_HEADER, "key-$k"]);
    $seen{$r->{status} == 200 ? $r->{body} =~ s/\s+//r : 'failed'}++;
}
is(join(' ', sort keys %seen), 'b2 b3 b4 b7', 'mixed: keys on all 4 servers');

$log = $mx->log_size;
$dns->answer(@addr[0 .. 2], $addr[5]);
ok((wait_until { $mx->log($log) =~ /is twice in upstream "up"/ } 20),
   'mixed: an address both static and resolved is noticed');
is(mixed(), want(@addr[0 .. 2], $addr[5]), 'mixed: and on the ring once');

$mx->stop;
$be->stop;

done_testing();
