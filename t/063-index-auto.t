# Routing v2 by default: "prefix_aware;" is "index=auto".  The zone is
# sized for the servers' caches (32 bytes for each block of 128 units of
# "capacity" tokens, 4 units a token, rounded up to a power of two, 1m to
# 64m); the index matches 524288 units deep; a request routed twice goes
# where its prefix went and matches it.  "index=auto" is off, with a
# notice, in an upstream of over 1024 servers (and with "resolve",
# t/090-resolve.t): it routes as "index=off" does, at index=off's default
# length unless one is given.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port rnd);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'index-auto');
my $listen = $ng->port;
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                           sort keys %port;

# 1,025 servers, all but the last down: one over index's limit
my $many = join '', map {
    sprintf "        server 127.%d.%d.1:1985 down;\n", $_ / 250 + 1, $_ % 250
} 0 .. 1023;
$many .= "        server 127.0.0.1:$port{b1};\n";

my $http = <<"_EOC_";
    upstream dflt {
        prefix_aware;
$servers    }

    upstream auto {
        prefix_aware index=auto length=8192 capacity=1000000;
$servers    }

    upstream off {
        prefix_aware index=off;
$servers    }

    upstream many {
        prefix_aware;
$many    }

    upstream many_length {
        prefix_aware index=auto length=2048;
$many    }

    server {
        listen 127.0.0.1:$listen;
        add_header X-Depth \$prefix_aware_depth;
        location /d/ { proxy_pass http://dflt/; }
        location /m/ { proxy_pass http://many/; }
        location = /status { prefix_aware_status; }
    }
_EOC_

$ng->write_conf($http);

my $bin = $PrefixAware::Scenario::Binary;
my $root = $ng->root;
# "-e stderr": a notice goes to the build's error log (Debian's is stderr,
# a source build's a file), and only warnings and above also to stderr
my $out = `$bin -p $root/ -c conf/nginx.conf -e stderr -t 2>&1`;
is $?, 0, 'nginx -t accepts the configuration' or diag $out;
for my $up (qw(many many_length)) {
    like $out, qr/\[notice\].*prefix_aware: upstream "$up" routes with "index=off", "index=auto" is off with over 1024 servers/,
         "nginx -t: a notice names $up";
}
unlike $out, qr/upstream "(?:dflt|auto|off)" routes with/,
       '... and no other upstream';

$ng->start($http);

my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
my $up = $st->{upstreams};

ok $up->{dflt}{index}, 'prefix_aware; has an index';
is $up->{dflt}{index}{size}, 2097152,
   '... of 2m (4 x 262144 tokens: 32768 blocks of 64 bytes, 2 MB)';
is $up->{dflt}{length}, 524288, '... matched 524288 units deep';
is $up->{auto}{index}{size}, 8388608,
   'capacity=1000000: 8m (4 x 1000000 tokens: 125000 blocks, 8 MB)';
is $up->{auto}{length}, 8192, '... at the length given';
ok !exists $up->{off}{index}, 'index=off has none';
is $up->{off}{length}, 4096, '... and length 4096';
ok !exists $up->{many}{index}, 'over 1024 servers: none';
is $up->{many}{length}, 4096, '... and index=off\'s length, 4096';
ok !exists $up->{many_length}{index}, 'over 1024 servers, length=2048: none';
is $up->{many_length}{length}, 2048, '... at the length given';

# the default routes by the index: the second request matches the first


srand(63);

my ($agree, $deep) = (0, 0);
for (1 .. 8) {
    my $body = rnd(6000);
    my $a = $ng->request(POST => '/d/', body => $body);
    my $b = $ng->request(POST => '/d/', body => $body);
    $agree++ if $a->{status} == 200 && $a->{body} eq $b->{body};
    $deep++ if ($a->{headers}{'x-depth'} // '') eq '0'
               && ($b->{headers}{'x-depth'} // 0) >= 46;
}
is $agree, 8, 'the same body, twice: the same server, 8 times';
is $deep, 8, '... unmatched first, 46 blocks deep (6000 / 128) the second';

my $r = $ng->request(POST => '/m/', body => rnd(6000));
is "$r->{status} $r->{body}", "200 b1\n",
   'over 1024 servers: routed as with index=off';

$st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
is $st->{upstreams}{dflt}{index}{placed}{match}, 8,
   'the status counts eight placed by match';

unlike scalar $ng->log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing();
