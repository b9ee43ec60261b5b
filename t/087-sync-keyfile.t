# prefix_aware_sync's key from a file, and the sending side (issue 42,
# items 4, 11 and 12).  Host A reads 16 random bytes as hex, host B the
# same 16 bytes as base64: they share, both ways, A to B over IPv6.  Host
# C has a key file of other bytes: refused.  A's first peer is the
# broadcast address, which a socket without SO_BROADCAST may not send
# to: each flush fails there, is counted, the peers after it still get
# their datagrams, and the failures are logged once in 10 seconds, with
# the count and the errno.  rcvbuf= is set on A's listening socket;
# datagrams sent to B while its worker is stopped overflow B's socket and
# show as kernel_drops.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use IO::Socket::IP;
use MIME::Base64 ();
use File::Temp ();
use Time::HiRes qw(time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

my %port = map { $_ => free_port() } qw(b1 b2 sa sb sc bc);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(b1 => $port{b1}, b2 => $port{b2}));

my $dir = File::Temp::tempdir('pa-keys-XXXXXX', TMPDIR => 1,
                              CLEANUP => !$ENV{PA_KEEP});

sub key_file {
    my ($name, $text) = @_;
    my $path = "$dir/$name";
    open my $fh, '>', $path or die "$path: $!\n";
    print $fh $text;
    close $fh;
    chmod 0600, $path or die "$path: $!\n";
    return $path;
}

srand(87);
my $bytes = join '', map { chr int rand 256 } 1 .. 16;
my $other = join '', map { chr int rand 256 } 1 .. 32;

my $ka = key_file('a.key', unpack('H*', $bytes) . "\n");
my $kb = key_file('b.key', MIME::Base64::encode_base64($bytes));
my $kc = key_file('c.key', unpack('H*', $other) . "\n");

my $rmem_max = do {
    open my $fh, '<', '/proc/sys/net/core/rmem_max';
    my $v = $fh ? <$fh> : undef;
    defined $v ? $v + 0 : undef;
};

sub host {
    my ($name, $sync) = @_;
    my $ng = PrefixAware::Scenario->new(name => $name);
    my $listen = $ng->port;

    $ng->start(<<"_EOC_");
    upstream llm {
        prefix_aware length=20000;
        $sync
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    server {
        listen 127.0.0.1:$listen;
        add_header X-Depth \$prefix_aware_depth always;
        add_header X-Up \$upstream_addr always;
        location / { proxy_pass http://llm; }
        location = /st { prefix_aware_status; }
    }
_EOC_
    return $ng;
}

my %host;
my $t0 = time;

# A: the broadcast address first (refused by the kernel), then B over
# IPv6, then C: three runs of one socket each
$host{a} = host('a', "prefix_aware_sync 127.0.0.1:$port{sa} key_file=$ka "
                     . "peer=255.255.255.255:$port{bc} "
                     . "peer=[::1]:$port{sb} peer=127.0.0.1:$port{sc} "
                     . "rcvbuf=256k;");
$host{b} = host('b', "prefix_aware_sync [::1]:$port{sb} key_file=$kb "
                     . "peer=127.0.0.1:$port{sa};");
$host{c} = host('c', "prefix_aware_sync 127.0.0.1:$port{sc} key_file=$kc "
                     . "peer=127.0.0.1:$port{sa};");

sub chat {
    '{"model":"m","messages":[{"role":"user","content":"' . $_[0] . '"}]}'
}

sub post {
    my ($h, $body) = @_;
    return $host{$h}->request(POST => '/v1/chat/completions', body => $body,
                              headers => [ 'Content-Type',
                                           'application/json' ]);
}

sub status {
    my ($h) = @_;
    my $r = $host{$h}->request(GET => '/st');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return;
    return $st->{upstreams}{llm};
}

# A to B: the key of A's hex file is the key of B's base64 file
my $t = chat(rnd(4000));
my $r = post('a', $t);
is $r->{status}, 200, 'host A routes a chat';
my $server = $r->{headers}{'x-up'};

ok((wait_until { my $st = status('b'); $st && $st->{sync}{records} >= 1 } 5),
   'host B (base64 key file, IPv6) takes host A\'s record (hex key file)')
    or diag explain status('b');
$r = post('b', $t);
is $r->{headers}{'x-depth'}, int(4004 / 128), '... and matches all of it';
is $r->{headers}{'x-up'}, $server, '... on the server A chose';
is status('b')->{sync}{refused}, 0, '... nothing refused on B';

# B to A
my $u = chat(rnd(3000));
$r = post('b', $u);
my $bserver = $r->{headers}{'x-up'};
ok((wait_until { status('a')->{sync}{records} >= 1 } 5),
   'host A takes host B\'s record');
$r = post('a', $u);
is $r->{headers}{'x-depth'}, int(3004 / 128), '... and matches all of it';
is $r->{headers}{'x-up'}, $bserver, '... on its server';

# C's key is another: refused by A
post('c', chat(rnd(3000)));
ok((wait_until { status('a')->{sync}{refused} >= 1 } 5),
   'host C\'s datagrams (another key file) are refused by A');
ok grep({ /refused: tag \(another key\)/ } $host{a}->log),
   '... as of another key';

# the broadcast peer: every flush fails there, B and C still get theirs
my $st = status('a');
ok $st->{sync}{send_errors} >= 2, 'sends to the broadcast address fail, '
    . 'counted' or diag explain $st->{sync};
ok $st->{sync}{sent} >= 2 * $st->{sync}{send_errors} - 2,
    '... and the peers after it are sent to' or diag explain $st->{sync};

my @warn = grep { /prefix_aware_sync of upstream "llm": \d+ datagrams? not sent since/ }
           $host{a}->log;
like $warn[0] // '', qr/\[warn\] .*: \d+ datagrams? not sent since the worker started, the last to "255\.255\.255\.255:$port{bc}" \(13: Permission denied\)/,
    'send errors are logged, with the count, the peer and the errno';
my $elapsed = time - $t0;
ok @warn >= 1 && @warn <= 1 + int($elapsed / 10),
    '... once in 10 seconds (' . scalar(@warn) . " in $elapsed s)";

ok !grep({ /can be read by every user/ } $host{a}->log),
   'a key file of mode 0600: no warning';

# rcvbuf=256k on A's listening socket: the kernel doubles it (up to
# twice net.core.rmem_max)
SKIP: {
    skip 'no SO_MEMINFO', 1 unless defined $st->{sync_socket}{rcvbuf};
    skip 'no /proc/sys/net/core/rmem_max', 1 unless defined $rmem_max;
    my $want = 2 * ($rmem_max < 262144 ? $rmem_max : 262144);
    is $st->{sync_socket}{rcvbuf}, $want,
       "rcvbuf=256k: the kernel has $want bytes on A's socket";
}

# B's worker stopped: datagrams to B's socket overflow it, the kernel
# drops them and says so
SKIP: {
    skip 'no SO_MEMINFO', 2 unless defined status('b')->{sync_socket}{rcvbuf};
    is status('b')->{sync_socket}{kernel_drops}, 0, 'B: no kernel drops yet';
    my ($w) = @{ $host{b}->workers };
    kill STOP => $w;
    my $s = IO::Socket::IP->new(PeerAddr => '::1', PeerPort => $port{sb},
                                Proto => 'udp');
    $s->send('x' x 1400) for 1 .. 2000;
    close $s;
    kill CONT => $w;
    my $drops;
    wait_until { $drops = status('b')->{sync_socket}{kernel_drops} } 5;
    ok $drops && $drops > 1000,
       'B: 2,000 datagrams while its worker stopped, '
       . ($drops // 0) . ' dropped by the kernel, counted';
}

$r = $host{b}->request(GET => '/st?format=prometheus');
like $r->{body}, qr/nginx_prefix_aware_sync_kernel_drops_total\{upstream="llm"\} [1-9]\d*\n/,
    'Prometheus: kernel drops';

# the next message about send errors: 10 seconds after the first, with
# the count since it
my $next = wait_until {
    my @w = grep { /datagrams? not sent since the last such message/ }
            $host{a}->log;
    $w[0];
} 15;
like $next // '', qr/\[warn\] .*"llm": \d+ datagrams? not sent since the last such message, the last to "255\.255\.255\.255:$port{bc}" \(13: Permission denied\)/,
    'the next message comes 10 s later, with the count since the last';
my @at = map { /^\d+\/\d+\/\d+ \d+:(\d+):(\d+)/ ? $1 * 60 + $2 : () }
         grep { /datagrams? not sent since/ } $host{a}->log;
ok @at >= 2 && ($at[1] - $at[0]) % 3600 >= 9,
    '... not sooner' or diag "@at";

for my $h (sort keys %host) {
    ok !grep({ /\[(?:alert|crit|emerg)\]/ } $host{$h}->log),
        "no alert in host ${h}'s error log";
    $host{$h}->stop;
}

$be->stop;

done_testing();
