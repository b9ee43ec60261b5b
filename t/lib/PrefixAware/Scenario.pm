package PrefixAware::Scenario;

# A small harness for the scenario tests (t/01*.t) that Test::Nginx's data
# format cannot express: several worker processes, reloads under load,
# kill -9 of a worker.  It runs nginx with a master process, in a
# temporary directory, on free ports, with the module of
# TEST_NGINX_LOAD_MODULES and the binary of TEST_NGINX_BINARY (as the
# Test::Nginx suites do), and has a plain HTTP/1.1 client with keep-alive
# connections, so that a test can hold requests in flight and knows which
# worker serves a connection.
#
#     my $be = PrefixAware::Scenario->new(name => 'backends');
#     $be->start($be->backends(b1 => free_port(), ...));
#     my $ng = PrefixAware::Scenario->new(name => 'front', workers => 2);
#     $ng->start($http_block);
#     my $c = $ng->conn;                 # a keep-alive connection
#     my $r = $c->request(GET => '/t', headers => [...]);
#     $ng->stop;
#
# Set PA_KEEP=1 to keep the directories (their paths are printed).

use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use IO::Socket::INET;
use IO::Select;
use JSON::PP ();
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);
use Test::More ();

our @EXPORT_OK = qw(free_port wait_until rnd ID_HEADER);

use constant ID_HEADER => 'X-Amzn-SageMaker-Prefix-Aware-Id';

# N random lowercase letters, from Perl's rand (seed it with srand)
sub rnd { join '', map { chr(97 + int rand 26) } 1 .. $_[0] }

our $Binary  = $ENV{TEST_NGINX_BINARY} || 'nginx';
our $Modules = $ENV{TEST_NGINX_LOAD_MODULES} // '';

my @running;

END {
    local $?;
    $_->stop for grep { $_ && $_->{master} } @running;
}

# an interrupted test stops its nginx too (END runs on exit); a write to a
# closed connection fails instead of killing the test
for my $sig (qw(INT TERM HUP)) {
    $SIG{$sig} //= sub { exit 1 };
}
$SIG{PIPE} //= 'IGNORE';

# a loopback port nobody listens on now, and not given before in this
# process: the kernel may hand a closed port out again at once, and two
# servers of one upstream on one port are a configuration error
my %given_port;

sub free_port () {
    for (1 .. 100) {
        my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                      LocalPort => 0, Proto => 'tcp',
                                      Listen => 1, ReuseAddr => 1)
            or die "cannot find a free port: $!\n";
        my $port = $s->sockport;
        CORE::close($s);
        next if $given_port{$port}++;
        return $port;
    }
    die "cannot find a free port not given before\n";
}

# polls "cond" every 20 ms until it returns true or "timeout" seconds pass;
# returns the last value of "cond"
sub wait_until (&;$) {
    my ($cond, $timeout) = @_;
    my $end = time + ($timeout // 5);
    my $v;
    while (1) {
        $v = $cond->();
        return $v if $v || time > $end;
        sleep 0.02;
    }
}

sub new {
    my ($class, %o) = @_;

    my $self = bless {
        name    => $o{name} || 'nginx',
        workers => $o{workers} || 1,
        port    => $o{port} || free_port(),
    }, $class;

    $self->{root} = File::Temp::tempdir("pa-$self->{name}-XXXXXX",
                                        TMPDIR => 1,
                                        CLEANUP => !$ENV{PA_KEEP});
    Test::More::diag("$self->{name}: $self->{root}") if $ENV{PA_KEEP};

    mkdir "$self->{root}/$_" for qw(conf logs html);

    push @running, $self;
    return $self;
}

sub port    { $_[0]{port} }
sub root    { $_[0]{root} }
sub master  { $_[0]{master} }
sub errlog  { "$_[0]{root}/logs/error.log" }

# the server blocks of backends that answer with their name: "/" at once,
# "/slow", "/slow2" and "/slow3" after about 1, 2 and 3 seconds (limit_rate
# holds back what exceeds 1 KB of headers and body for a second per KB)
sub backends {
    my ($self, %port) = @_;
    my $conf = '';

    for my $name (sort keys %port) {
        $conf .= "    server {\n"
               . "        listen 127.0.0.1:$port{$name};\n"
               . "        location / { return 200 \"$name\\n\"; }\n";

        for my $s (1, 2, 3) {
            my $loc = $s == 1 ? '/slow' : "/slow$s";
            my $pad = 'p' x (1024 * $s + 80);
            $conf .= "        location $loc {\n"
                   . "            limit_rate 1k;\n"
                   . "            add_header X-Pad $pad;\n"
                   . "            return 200 \"$name\\n\";\n"
                   . "        }\n";
        }

        $conf .= "    }\n";
    }

    return $conf;
}

# starts backends() that log when they start each request (logs/start.log,
# for started())
sub start_logged_backends {
    my ($self, %port) = @_;
    my $conf = $self->backends(%port);
    $conf =~ s{(listen 127\.0\.0\.1:\d+;\n)}
              {$1        access_log logs/start.log start;\n}g;
    return $self->start("    log_format start '\$msec \$request_time "
                        . "\$request_uri';\n" . $conf);
}

# the order the backends of start_logged_backends() started the requests
# tagged "tag" in: the names of their "t=tag-name" arguments
sub started {
    my ($self, $tag) = @_;
    open my $fh, '<', "$self->{root}/logs/start.log" or return [];
    my @ev;
    while (<$fh>) {
        my ($end, $took, $uri) = split;
        push @ev, [ $end - $took, $1 ] if $uri =~ /[?&]t=$tag-(\w+)/;
    }
    CORE::close($fh);
    return [ map { $_->[1] } sort { $a->[0] <=> $b->[0] } @ev ];
}

# whether the request "t=TAG-A" started before "t=TAG-B" at the backends
# of start_logged_backends(), once N requests tagged TAG have started
sub started_before {
    my ($self, $tag, $n, $a, $b) = @_;
    wait_until { @{ $self->started($tag) } == $n } 5;
    my %at;
    my $i = 0;
    $at{$_} = $i++ for @{ $self->started($tag) };
    return defined $at{$a} && defined $at{$b} && $at{$a} < $at{$b};
}

sub write_conf {
    my ($self, $http) = @_;
    my $root = $self->{root};

    my $modules = join '', map { "load_module $_;\n" } split ' ', $Modules;
    my $user = $> == 0 ? "user root;\n" : '';

    my $conf = <<"_EOC_";
$modules${user}worker_processes $self->{workers};
daemon on;
master_process on;
pid logs/nginx.pid;
error_log logs/error.log debug;

events {
    worker_connections 1024;
    accept_mutex off;
}

http {
    access_log off;
    default_type text/plain;
    keepalive_timeout 60s;
    client_body_temp_path $root/client_body_temp;
    proxy_temp_path $root/proxy_temp;
    fastcgi_temp_path $root/fastcgi_temp;
    uwsgi_temp_path $root/uwsgi_temp;
    scgi_temp_path $root/scgi_temp;

$http
}
_EOC_

    open my $fh, '>', "$root/conf/nginx.conf" or die "$root: $!\n";
    print $fh $conf;
    CORE::close($fh);
}

sub start {
    my ($self, $http) = @_;

    $self->write_conf($http);

    my $out = `$Binary -p $self->{root}/ -c conf/nginx.conf 2>&1`;
    die "$self->{name}: nginx did not start: $out\n" if $?;

    my $pid = wait_until { $self->_read_pid } 5
        or die "$self->{name}: no pid file\n";

    $self->{master} = $pid;
    wait_until { @{ $self->workers } == $self->{workers} } 5
        or die "$self->{name}: workers did not start\n";

    return $pid;
}

sub _read_pid {
    my $self = shift;
    open my $fh, '<', "$self->{root}/logs/nginx.pid" or return;
    my $pid = <$fh>;
    return unless defined $pid && $pid =~ /^(\d+)/;
    return $1;
}

# processes whose parent is the master: [ [pid, "worker process"], ... ]
sub _children {
    my $self = shift;
    my @kids;

    opendir my $dh, '/proc' or return [];

    for my $pid (grep { /^\d+$/ } readdir $dh) {
        open my $fh, '<', "/proc/$pid/stat" or next;
        my $stat = <$fh>;
        CORE::close($fh);
        next unless $stat && $stat =~ /^\d+ \(.*\) (\S) (\d+)/;
        next unless $2 == ($self->{master} // -1) && $1 ne 'Z';

        open $fh, '<', "/proc/$pid/cmdline" or next;
        my $cmd = do { local $/; <$fh> } // '';
        CORE::close($fh);
        $cmd =~ s/\0+$//;
        $cmd =~ s/\0/ /g;
        push @kids, [$pid, $cmd];
    }

    return \@kids;
}

# pids of the workers that take new requests
sub workers {
    my $self = shift;
    return [ sort { $a <=> $b }
             map { $_->[0] }
             grep { $_->[1] =~ /worker process$/ } @{ $self->_children } ];
}

# pids of the workers still finishing their requests after a reload
sub old_workers {
    my $self = shift;
    return [ map { $_->[0] }
             grep { $_->[1] =~ /worker process is shutting down/ }
             @{ $self->_children } ];
}

# rewrites nginx.conf (when given an http block) and sends HUP; returns
# once the master runs a new set of workers
sub reload {
    my ($self, $http) = @_;
    my %old = map { $_ => 1 } @{ $self->workers };

    $self->write_conf($http) if defined $http;

    kill HUP => $self->{master} or die "$self->{name}: cannot HUP: $!\n";

    wait_until {
        my $w = $self->workers;
        @$w == $self->{workers} && !grep { $old{$_} } @$w;
    } 10 or die "$self->{name}: no new workers after the reload\n";
}

sub _alive {
    my $pid = shift;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my $stat = <$fh>;
    CORE::close($fh);
    return $stat && $stat !~ /^\d+ \(.*\) Z /;
}

sub stop {
    my $self = shift;
    my $pid = delete $self->{master} or return;

    kill QUIT => $pid;
    return if wait_until { !_alive($pid) } 5;

    kill TERM => $pid;
    return if wait_until { !_alive($pid) } 3;

    kill KILL => $pid;
}

# the error log from byte "from"; in list context its lines
sub log {
    my ($self, $from) = @_;
    open my $fh, '<', $self->errlog or return wantarray ? () : '';
    seek $fh, $from // 0, 0;
    my $text = do { local $/; <$fh> } // '';
    return wantarray ? split(/\n/, $text) : $text;
}

sub log_size { -s $_[0]->errlog || 0 }

# the "prefix_aware peer:" debug lines from byte "from", parsed
sub decisions {
    my ($self, $from) = @_;
    my @d;

    for ($self->log($from)) {
        next unless /\[debug\] (\d+)#\d+: .*prefix_aware peer: "([^"]+)" route:(\w+) hash:(\w+) first in flight:(\d+)/;
        push @d, { pid => $1, server => $2, route => $3, hash => $4,
                   first_inflight => $5, line => $_ };
    }

    return \@d;
}

sub conn {
    my $self = shift;
    return PrefixAware::Scenario::Conn->new($self->{port});
}

# a connection served by worker "pid": connects until one lands there
# (the listen socket should have "reuseport"); needs a location /pid
# that returns $pid
sub conn_on {
    my ($self, $pid, $tries) = @_;

    for (1 .. ($tries || 200)) {
        my $c = $self->conn;
        my $r = $c->request(GET => '/pid');
        return $c if $r->{status} == 200 && $r->{body} =~ /^(\d+)/ && $1 == $pid;
        $c->close;
    }

    return;
}

# the in-flight counts of an upstream from the status endpoint (needs a
# location /status with prefix_aware_status): { "host:port" => count }
sub inflight {
    my ($self, $upstream) = @_;
    my $r = $self->request(GET => '/status?format=json');
    return unless $r->{status} == 200;
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return;
    my $up = $st->{upstreams}{ $upstream // 'up' } or return;
    return { map { ($_->{server} => $_->{inflight}) } @{ $up->{servers} || [] } };
}

# an upstream of the status page's JSON (needs a location /status with
# prefix_aware_status): {} when it cannot be read
sub status {
    my ($self, $upstream) = @_;
    my $r = $self->request(GET => '/status?format=json');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return {};
    return $st->{upstreams}{ $upstream // 'up' } || {};
}

# how many requests wait in the queue of an upstream (status), -1 if unknown
sub waiting {
    my ($self, $upstream) = @_;
    return ($self->status($upstream)->{queue} || {})->{waiting} // -1;
}

# an nginx conf of one upstream "up" of one server with "prefix_aware
# ARGS", its status at /status and each request's wait in the queue in
# logs/wait.log (for waited())
sub one_server_conf {
    my ($self, $bport, $args) = @_;
    return <<"_EOC_";
    log_format wait '\$status \$prefix_aware_wait \$request_uri';

    upstream up {
        prefix_aware $args;
        server 127.0.0.1:$bport;
    }

    server {
        listen 127.0.0.1:$self->{port};
        access_log logs/wait.log wait;
        location = /status { access_log off; prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_
}

# POST /slow?t=TAG-NAME with HEADERS on a connection of its own (for the
# backends' "/slow"); returns the connection
sub send_slow {
    my ($self, $tag, $name, @headers) = @_;
    my $c = $self->conn or die "no connection\n";
    $c->send(POST => "/slow?t=$tag-$name", headers => [ @headers ],
             body => rnd(100));
    return $c;
}

# six requests "n1" to "n6" with HEADERS to one_server_conf()'s server of
# "threshold=3" at ADDR ("host:port"): three go, three wait; returns the
# connections
sub slow_backlog {
    my ($self, $tag, $addr, @headers) = @_;
    my @c;
    for my $i (1 .. 3) {
        push @c, $self->send_slow($tag, "n$i", @headers);
        wait_until {
            (($self->inflight('up') || {})->{$addr} // -1) >= $i
        } 5;
    }
    for my $i (4 .. 6) {
        push @c, $self->send_slow($tag, "n$i", @headers);
        wait_until { $self->waiting >= $i - 3 } 5;
    }
    return @c;
}

# the ms the request tagged "t=NAME" waited in the queue, from the log of
# one_server_conf() (written as the request ends); -1 if not found in 5 s
sub waited {
    my ($self, $name) = @_;
    my $ms = -1;
    wait_until {
        open my $fh, '<', "$self->{root}/logs/wait.log" or return 0;
        while (<$fh>) {
            $ms = $1 if m{^\d+ (\d+) \S*[?&]t=$name\b};
        }
        CORE::close($fh);
        $ms >= 0;
    } 5;
    return $ms;
}

# a one-shot request on its own connection
sub request {
    my ($self, $method, $path, %o) = @_;
    my $c = $self->conn;
    my $r = $c->request($method, $path, %o, close => 1);
    $c->close;
    return $r;
}


package PrefixAware::Scenario::Conn;

use strict;
use warnings;

use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time);

sub new {
    my ($class, $port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Proto => 'tcp', Timeout => 5)
        or die "connect to $port: $!\n";
    $s->autoflush(1);
    return bless { sock => $s, buf => '' }, $class;
}

sub close {
    my $self = shift;
    CORE::close($self->{sock}) if $self->{sock};
    delete $self->{sock};
}

# writes a request: method, path, headers => [name => value, ...],
# body => bytes (Content-Length), close => 1 for "Connection: close"
sub send {
    my ($self, $method, $path, %o) = @_;
    my @h = @{ $o{headers} || [] };

    my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\n";
    while (my ($k, $v) = splice @h, 0, 2) {
        $req .= "$k: $v\r\n";
    }
    $req .= "Content-Length: " . length($o{body}) . "\r\n" if defined $o{body};
    $req .= "Connection: close\r\n" if $o{close};
    $req .= "\r\n";
    $req .= $o{body} if defined $o{body};

    my $s = $self->{sock} or die "connection closed\n";
    my $off = 0;
    while ($off < length $req) {
        my $n = CORE::syswrite $s, $req, length($req) - $off, $off;
        die "write: $!\n" unless defined $n;
        $off += $n;
    }
}

sub _fill {
    my ($self, $deadline) = @_;
    my $s = $self->{sock} or return 0;
    my $left = $deadline - time;
    return 0 if $left <= 0;
    return 0 unless IO::Select->new($s)->can_read($left);
    my $n = CORE::sysread $s, $self->{buf}, 65536, length $self->{buf};
    return $n ? $n : 0;
}

# reads one response; returns { status, headers => { lc name => value },
# body }; status 0 if the connection closed or timed out first
sub read {
    my ($self, $timeout) = @_;
    my $deadline = time + ($timeout // 10);
    my %r = (status => 0, headers => {}, body => '');

    while ($self->{buf} !~ /\r\n\r\n/) {
        return \%r unless $self->_fill($deadline);
    }

    $self->{buf} =~ s/\A(.*?)\r\n\r\n//s;
    my ($line, @lines) = split /\r\n/, $1;
    ($r{status}) = $line =~ m{^HTTP/\d\.\d (\d+)};
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        $r{headers}{lc $k} = $v;
    }

    my $h = $r{headers};

    if (defined $h->{'content-length'}) {
        my $len = $h->{'content-length'};
        while (length $self->{buf} < $len) {
            last unless $self->_fill($deadline);
        }
        $r{body} = substr $self->{buf}, 0, $len, '';

    } elsif (($h->{'transfer-encoding'} // '') =~ /chunked/i) {
        while (1) {
            while ($self->{buf} !~ /\A([0-9a-fA-F]+)[^\r]*\r\n/) {
                last unless $self->_fill($deadline);
            }
            last unless $self->{buf} =~ /\A([0-9a-fA-F]+)[^\r]*\r\n/;
            my ($size, $hl) = (hex $1, length $&);
            while (length $self->{buf} < $hl + $size + 2) {
                last unless $self->_fill($deadline);
            }
            my $chunk = substr $self->{buf}, 0, $hl + $size + 2, '';
            last if $size == 0;
            $r{body} .= substr $chunk, $hl, $size;
        }

    } else {
        1 while $self->_fill($deadline);
        $r{body} = $self->{buf};
        $self->{buf} = '';
    }

    return \%r;
}

sub request {
    my ($self, $method, $path, %o) = @_;
    $self->send($method, $path, %o);
    return $self->read($o{timeout});
}

1;
