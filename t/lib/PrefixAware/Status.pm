package PrefixAware::Status;

# Helpers of the scenario scripts (plain Test::More, t/03*.t) that need
# more than one Test::Nginx block can say: an nginx of their own with the
# module, several worker processes, requests over separate or concurrent
# connections, and the status page read as data.
#
#     my $ngx = PrefixAware::Status->start(http => $conf, workers => 2);
#     my $res = $ngx->request(POST => '/v1/chat/completions', body => $json);
#     my $st  = $ngx->status_json;            # JSON::PP-decoded
#     my $txt = $ngx->status_prometheus;      # the text
#     $ngx->stop;                             # also at destruction
#
# The nginx binary and the module come from TEST_NGINX_BINARY and
# TEST_NGINX_LOAD_MODULES, as for Test::Nginx.  The server listens on a
# free port of 127.0.0.1 (with reuseport, so that the kernel spreads
# connections over the workers); "http" is the rest of the http block:
# upstreams, backend servers and the locations of the front server go in
# "http" and "locations".  Its prefix is a temporary directory, kept when
# TEST_NGINX_NO_CLEAN is set.

use strict;
use warnings;

use File::Temp ();
use IO::Select;
use IO::Socket::INET;
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(sleep time);

# one source of ports for every helper, so none is given twice
sub free_port {
    require PrefixAware::Scenario;
    return PrefixAware::Scenario::free_port();
}

sub start {
    my ($class, %o) = @_;
    my $self = bless {}, $class;

    $self->{binary} = $ENV{TEST_NGINX_BINARY} || 'nginx';
    $self->{dir} = File::Temp::tempdir('pa-scenario-XXXXXX', TMPDIR => 1,
                                       CLEANUP => !$ENV{TEST_NGINX_NO_CLEAN});
    $self->{port} = free_port();

    my $dir = $self->{dir};
    mkdir "$dir/$_" for qw(conf logs html);

    my $workers = $o{workers} // 1;
    my $modules = join '', map { "load_module $_;\n" }
                           grep { length } split /\s+/, $ENV{TEST_NGINX_LOAD_MODULES} // '';
    my $user = $> == 0 ? "user root;\n" : '';

    my $conf = <<"_EOC_";
$modules$user
worker_processes $workers;
daemon on;
master_process on;
error_log logs/error.log ${\ ($o{log_level} // 'info')};
pid logs/nginx.pid;

events {
    worker_connections 1024;
    accept_mutex off;
}

http {
    access_log logs/access.log;
    client_body_temp_path $dir/client_body_temp;
    proxy_temp_path $dir/proxy_temp;
    fastcgi_temp_path $dir/fastcgi_temp;
    uwsgi_temp_path $dir/uwsgi_temp;
    scgi_temp_path $dir/scgi_temp;
    default_type text/plain;

$o{http}

    server {
        listen 127.0.0.1:$self->{port} reuseport;
        server_name localhost;

        location = /status {
            prefix_aware_status;
        }

$o{locations}
    }
}
_EOC_

    open my $out, '>', "$dir/conf/nginx.conf" or die "$dir/conf/nginx.conf: $!";
    print $out $conf;
    close $out;

    my @cmd = ($self->{binary}, '-p', "$dir/", '-c', "$dir/conf/nginx.conf");
    my $err = `@cmd 2>&1`;
    die "cannot start nginx: @cmd\n$err" if $?;

    # the workers are up when the port answers
    my $deadline = time + 10;
    while (time < $deadline) {
        if (open my $in, '<', "$dir/logs/nginx.pid") {
            ($self->{pid}) = (<$in> // '') =~ /(\d+)/;
        }
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                      PeerPort => $self->{port});
        last if $s && $self->{pid};
        sleep 0.05;
    }
    die "nginx does not answer on port $self->{port}" if !$self->{pid};

    return $self;
}

sub dir  { $_[0]{dir} }
sub port { $_[0]{port} }
sub pid  { $_[0]{pid} }

# the pids of the worker processes, from /proc
sub workers {
    my $self = shift;
    my @pids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        open my $in, '<', $stat or next;
        my $line = <$in> // next;
        my ($pid, $ppid) = $line =~ /^(\d+) \(.*\) \S+ (\d+)/ or next;
        push @pids, $pid if $ppid == $self->{pid};
    }
    return sort { $a <=> $b } @pids;
}

sub stop {
    my $self = shift;
    my $pid = delete $self->{pid} or return;
    kill 'QUIT', $pid;
    my $deadline = time + 10;
    while (kill(0, $pid) && time < $deadline) {
        sleep 0.05;
    }
    kill 'KILL', $pid if kill 0, $pid;
}

sub DESTROY {
    my $self = shift;
    local ($?, $@);
    $self->stop;
}

# the raw request bytes
sub raw_request {
    my ($self, $method, $uri, %o) = @_;
    my $body = $o{body};
    my $req = "$method $uri HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    my @h = @{ $o{headers} // [] };
    while (my ($k, $v) = splice @h, 0, 2) {
        $req .= "$k: $v\r\n";
    }
    $req .= 'Content-Length: ' . length($body) . "\r\n" if defined $body;
    return "$req\r\n" . ($body // '');
}

# sends a request on a connection of its own; returns the socket.
# pause => seconds: the body is sent that long after the header (so that
# nginx has not read it with the header)
sub send_request {
    my ($self, $method, $uri, %o) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $self->{port}, Proto => 'tcp')
        or die "connect to $self->{port}: $!";
    binmode $s;
    $s->autoflush(1);
    local $SIG{PIPE} = 'IGNORE';
    my $req = $self->raw_request($method, $uri, %o);
    if ($o{pause} && defined $o{body} && length $o{body}) {
        my $head = substr $req, 0, length($req) - length($o{body});
        print $s $head;
        sleep $o{pause};
        print $s $o{body};
    } else {
        print $s $req;
    }
    return $s;
}

# reads the response from a socket of send_request():
# { status, headers => { lower-case name => value }, body }
sub read_response {
    my ($self, $s, $timeout) = @_;
    my $sel = IO::Select->new($s);
    my $raw = '';
    my $deadline = time + ($timeout // 10);
    while (time < $deadline) {
        last if !$sel->can_read($deadline - time);
        my $n = sysread $s, my $buf, 65536;
        last if !$n;
        $raw .= $buf;
    }
    close $s;
    my ($head, $body) = split /\r\n\r\n/, $raw, 2;
    my ($status) = ($head // '') =~ m{^HTTP/1\.\d (\d+)};
    my %h;
    for (split /\r\n/, $head // '') {
        $h{lc $1} = $2 if /^([^:]+):\s*(.*)$/;
    }
    $body //= '';
    if (($h{'transfer-encoding'} // '') eq 'chunked') {
        my $out = '';
        while ($body =~ s/^([0-9a-fA-F]+)\r\n//) {
            my $n = hex $1;
            last if !$n;
            $out .= substr $body, 0, $n, '';
            $body =~ s/^\r\n//;
        }
        $body = $out;
    }
    return { status => $status // 0, headers => \%h, body => $body };
}

sub request {
    my ($self, @args) = @_;
    return $self->read_response($self->send_request(@args));
}

sub status_json {
    my $self = shift;
    my $res = $self->request(GET => '/status');
    die "status: $res->{status}" if $res->{status} != 200;
    return JSON::PP->new->decode($res->{body});
}

sub status_prometheus {
    my ($self, @headers) = @_;
    my $res = $self->request(GET => '/status?format=prometheus',
                             headers => \@headers);
    die "status: $res->{status}" if $res->{status} != 200;
    return $res->{body};
}

# Prometheus text -> { "name{labels}" => value }, and the families' types;
# the labels as written (escaped), a quoted value may hold "}" and "\""
sub parse_prometheus {
    my $text = shift;
    my (%v, %type);
    for (split /\n/, $text) {
        if (/^# TYPE (\S+) (\S+)$/) {
            $type{$1} = $2;
        } elsif (/^(\w+(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?) (\S+)$/) {
            $v{$1} = $2;
        }
    }
    return (\%v, \%type);
}

# a label value as the text format writes it: \\, \" and \n
sub prom_escape {
    my $v = shift;
    $v =~ s/([\\"])/\\$1/g;
    $v =~ s/\n/\\n/g;
    return $v;
}

# the samples a status JSON document (decoded) says the text must have:
# { "name{labels}" => value }, as parse_prometheus() gives them
sub prometheus_from_json {
    my $json = shift;
    my %v;
    my $p = 'nginx_prefix_aware_';
    for my $name (sort keys %{ $json->{upstreams} }) {
        my $u = $json->{upstreams}{$name};
        my $ul = 'upstream="' . prom_escape($name) . '"';
        $v{"${p}length{$ul}"} = $u->{length};
        $v{"${p}threshold{$ul}"} = $u->{threshold};
        $v{qq(${p}keys_total{$ul,source="$_"})} = $u->{keys}{$_}
            for qw(none body openai);
        $v{qq(${p}keys_api_total{$ul,api="$_"})} = $u->{apis}{$_}
            for qw(chat completions responses messages);
        $v{"${p}${_}_total{$ul}"} = $u->{$_}
            for qw(id openai_fallbacks unbuffered rejected invalid_cache_key keyed first_choice_usable);
        my $h = $u->{first_choice_inflight};
        my $cum = 0;
        for my $i (0 .. $#{ $h->{le} }) {
            $cum += $h->{buckets}[$i];
            $v{qq(${p}first_choice_inflight_bucket{$ul,le="$h->{le}[$i]"})} = $cum;
        }
        $v{"${p}first_choice_inflight_sum{$ul}"} = $h->{sum};
        $v{"${p}first_choice_inflight_count{$ul}"} = $cum;
        $v{"${p}strategy_unknown_total{$ul}"} = $u->{strategy_unknown}
            if exists $u->{strategy_unknown};
        $v{qq(${p}strategy_chosen_inflight_total{$ul,strategy="$_"})} =
            $u->{strategies}{$_}{chosen_inflight}
            for keys %{ $u->{strategies} };
        if (my $r = $u->{responses}) {
            $v{"${p}responses_capacity{$ul}"} = $r->{capacity};
            $v{"${p}responses_stored{$ul}"} = $r->{size};
            $v{"${p}responses_evicted_total{$ul}"} = $r->{evicted};
            $v{qq(${p}responses_learned_total{$ul,source="answer"})} =
                $r->{learned};
            $v{qq(${p}responses_learned_total{$ul,source="sync"})} =
                $r->{synced};
            $v{"${p}responses_rejected_total{$ul}"} = $r->{rejected};
            $v{"${p}state_total{$ul}"} = $r->{state};
            $v{qq(${p}state_lost_total{$ul,reason="unknown"})} = $r->{unknown};
            $v{qq(${p}state_lost_total{$ul,reason="server"})} =
                $r->{server_lost};
        }
        for my $s (@{ $u->{servers} }) {
            my $sl = "$ul,server=\"" . prom_escape($s->{server}) . '"';
            $v{"${p}server_weight{$sl}"} = $s->{weight};
            $v{qq(${p}server_state{$sl,state="$_"})} = $_ eq $s->{state} ? 1 : 0
                for qw(up down failed);
            $v{"${p}server_inflight{$sl}"} = $s->{inflight};
            $v{"${p}server_requests_total{$sl}"} = $s->{requests};
            $v{qq(${p}server_routed_total{$sl,route="$_"})} = $s->{$_}
                for qw(affinity spill failover no_key);
            $v{qq(${p}server_routed_total{$sl,route="state"})} =
                $s->{state_routed};
            for my $st (keys %{ $s->{strategies} }) {
                $v{qq(${p}strategy_requests_total{$sl,strategy="$st",route="$_"})} =
                    $s->{strategies}{$st}{$_}
                    for qw(affinity spill failover no_key state);
            }
        }
    }
    return \%v;
}

# what differs between parsed samples and those expected: a list of lines
sub compare_samples {
    my ($got, $want) = @_;
    my @problems;
    for my $k (sort keys %$want) {
        my $g = $got->{$k};
        push @problems, "$k: " . ($g // 'missing') . ", JSON $want->{$k}"
            if !defined $g || $g ne $want->{$k};
    }
    push @problems, map { "$_: not in the JSON" } grep { !exists $want->{$_} } sort keys %$got;
    return @problems;
}

# `promtool check metrics` of a text: its exit status and what it said;
# promtool is in Debian's prometheus package (make deps-test)
sub promtool {
    my ($self, $text) = @_;
    my $promtool = $ENV{PROMTOOL} || 'promtool';
    my $file = "$self->{dir}/metrics.txt";
    open my $out, '>', $file or die "$file: $!";
    print $out $text;
    close $out;
    my $lint = `$promtool check metrics < '$file' 2>&1`;
    return ($? >> 8, $lint);
}

sub error_log {
    my $self = shift;
    open my $in, '<', "$self->{dir}/logs/error.log" or return '';
    local $/;
    return <$in>;
}

1;
