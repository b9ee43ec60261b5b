# queue= over HTTP/2: requests on streams wait and are released (nginx's
# upstream initialization goes straight to the request for a stream), and
# a client that closes while its stream waits frees its place at once
# (the stream is closed with an error: ngx_http_test_reading sees it).
# Two servers of threshold=1; "/slow" answers after about a second,
# "/slow2" after about two.  curl on HTTP/2 with prior knowledge, one
# connection each (curl 7.88's --parallel sent only the first of several
# multiplexed requests here: the multiplexed case is not covered).

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

if (system('command -v curl >/dev/null 2>&1') != 0) {
    plan skip_all => 'curl is not installed';
}

my %port = map { $_ => free_port() } qw(b1 b2);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                       sort keys %port;

my $ng = PrefixAware::Scenario->new(name => 'queue-h2', workers => 1);
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware index=off threshold=1 queue=8 queue_timeout=20s;
$servers    }

    server {
        listen 127.0.0.1:$listen http2;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

# the status page over HTTP/1.1 (the listener speaks HTTP/2 only)
sub waiting {
    my $out = `curl -s --http2-prior-knowledge http://127.0.0.1:$listen/status`;
    my $st = eval { JSON::PP::decode_json($out) } or return -1;
    return $st->{upstreams}{up}{queue}{waiting} // -1;
}

sub status {
    my $out = `curl -s --http2-prior-knowledge http://127.0.0.1:$listen/status`;
    my $st = eval { JSON::PP::decode_json($out) } or return {};
    return $st->{upstreams}{up}{queue} || {};
}

# curl on HTTP/2 (prior knowledge) in the background: its pid; it writes
# the status to "file"
sub curl_bg {
    my ($path, $file) = @_;
    my $pid = fork;
    die "fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        open STDOUT, '>', $file or POSIX::_exit(1);
        { exec 'curl', '-s', '--http2-prior-knowledge', '-o', '/dev/null',
               '-w', '%{http_code} %{http_version}',
               "http://127.0.0.1:$listen$path" };
        POSIX::_exit(1);
    }
    return $pid;
}

my $dir = $ng->root;

# 1. four HTTP/2 requests: two go, two wait, all answered

my $t0 = time;
my @pid;
for my $i (1 .. 4) {
    push @pid, curl_bg("/slow?s=$i", "$dir/c$i");
    sleep 0.1;
}
ok wait_until(sub { waiting() == 2 }, 5), 'two HTTP/2 requests wait';
waitpid $_, 0 for @pid;
my $took = time - $t0;
my @codes = map { open my $fh, '<', "$dir/c$_"; scalar <$fh> // '' } 1 .. 4;
is_deeply \@codes, [ ('200 2') x 4 ], 'the 4 answered 200 over HTTP/2';
ok $took >= 1.8, sprintf('two of them after the first two (%.1f s)', $took);
my $q = status();
is $q->{released}, 2, '2 released';
is $q->{waiting}, 0, 'nothing waits';

# 2. clients that close while their streams wait

@pid = ();
for my $i (1 .. 4) {
    push @pid, curl_bg("/slow2?c=$i", "$dir/d$i");
    sleep 0.1;
}
ok wait_until(sub { waiting() == 2 }, 5), 'two wait';
kill TERM => @pid[2, 3];
ok wait_until(sub { waiting() == 0 }, 2), 'their clients closed: their places freed';
is status()->{shed}{gone}, 2, 'counted as gone';
waitpid $_, 0 for @pid;
@codes = map { open my $fh, '<', "$dir/d$_"; scalar <$fh> // '' } 1 .. 2;
is_deeply \@codes, [ ('200 2') x 2 ], 'the others answered';

my @bad = grep { /\[(alert|crit|emerg)\]|exited on signal/ } $ng->log;
is_deeply \@bad, [], 'no alert, crash';

$ng->stop;
$be->stop;

done_testing;
