package Test::Nginx::Socket;

# A small, independent implementation of the part of openresty's
# Test::Nginx::Socket API and data format that this project's suites use,
# built on Debian's Test::Base.  The same .t files also run under the real
# Test::Nginx::Socket when its lib/ comes first in @INC.  See t/lib/README.md.

use Test::Base -base;

use File::Path qw(make_path remove_tree);
use File::Spec;
use List::Util qw(shuffle);
use POSIX qw(:sys_wait_h SIGQUIT SIGKILL);
use Time::HiRes qw(sleep time);
use Test::Nginx::Lite::HTTP;

our @EXPORT = qw(
    run_tests repeat_each no_shuffle no_long_string log_level workers
    worker_connections master_on master_off master_process_enabled
    no_root_location env_to_nginx add_block_preprocessor server_port
    server_addr server_name server_root html_dir timeout config_preamble
    is_str bail_out check_accum_error_log
);

our $NginxBinary   = $ENV{TEST_NGINX_BINARY} || 'nginx';
our $LoadModules   = $ENV{TEST_NGINX_LOAD_MODULES} // '';
our $ServerPort    = $ENV{TEST_NGINX_SERVER_PORT} || $ENV{TEST_NGINX_PORT} || 1984;
our $ServerAddr    = '127.0.0.1';
our $ServerName    = 'localhost';
our $ServRoot      = File::Spec->rel2abs($ENV{TEST_NGINX_SERVROOT} || 't/servroot');
our $Timeout       = $ENV{TEST_NGINX_TIMEOUT} || 3;
our $LogLevel      = $ENV{TEST_NGINX_LOG_LEVEL} || 'debug';
our $MasterProcess = $ENV{TEST_NGINX_MASTER_PROCESS} || 'off';
our $NoShuffle     = $ENV{TEST_NGINX_NO_SHUFFLE} || 0;
our $UseValgrind   = $ENV{TEST_NGINX_USE_VALGRIND};
our $NoClean       = $ENV{TEST_NGINX_NO_CLEAN};
our $AccumErrLog   = $ENV{TEST_NGINX_CHECK_ACCUM_ERR_LOG};
our ($Workers, $WorkerConnections, $RepeatEach) = (1, 64, 1);
our ($NoLongString, $NoRootLocation, $Preamble) = (0, 0, '');
our (@EnvToNginx, @Preprocessors);

our $LogDir     = "$ServRoot/logs";
our $HtmlDir    = "$ServRoot/html";
our $ConfFile   = "$ServRoot/conf/nginx.conf";
our $ErrLogFile = "$LogDir/error.log";
our $PidFile    = "$LogDir/nginx.pid";
$ENV{TEST_NGINX_SERVER_ROOT} = $ServRoot;

# state of the nginx instance started for the current block
our ($ChildPid, $RunningBlock, $ErrLogPos, $PrevConfig, $RandPorts);

# ---- the exported API ---------------------------------------------------

sub _getset { my $ref = shift; $$ref = shift if @_; $$ref }

sub repeat_each (@)        { _getset(\$RepeatEach, @_) }
sub workers (@)            { _getset(\$Workers, @_) }
sub worker_connections (@) { _getset(\$WorkerConnections, @_) }
sub log_level (@)          { _getset(\$LogLevel, @_) }
sub server_port (@)        { _getset(\$ServerPort, @_) }
sub server_addr (@)        { _getset(\$ServerAddr, @_) }
sub server_name (@)        { _getset(\$ServerName, @_) }
sub timeout (@)            { _getset(\$Timeout, @_) }
sub config_preamble ($)    { $Preamble = shift }
sub no_shuffle ()          { $NoShuffle = 1 }
sub no_long_string ()      { $NoLongString = 1 }
sub no_root_location ()    { $NoRootLocation = 1 }
sub check_accum_error_log () { $AccumErrLog = 1 }
sub master_on ()           { $MasterProcess = 'on' }
sub master_off ()          { $MasterProcess = 'off' }
sub server_root ()         { $ServRoot }
sub html_dir ()            { $HtmlDir }
sub add_block_preprocessor (&) { unshift @Preprocessors, shift }

sub master_process_enabled (@) {
    $MasterProcess = $_[0] ? 'on' : 'off' if @_;
    return $MasterProcess;
}

sub env_to_nginx (@) {
    for (@_) {
        croak "env_to_nginx: bad argument value: $_" if !/^[A-Za-z_]/ || /\n/;
        push @EnvToNginx, $_;
    }
}

sub is_str (@) {
    my ($got, $expected, $desc) = @_;
    return Test::More::like($got, $expected, $desc) if ref $expected eq 'Regexp';
    return Test::Base::is($got, $expected, $desc);
}

sub bail_out (@) {
    stop_nginx();
    Test::More::BAIL_OUT(join '', @_);
}

sub run_tests () {
    $ENV{TEST_NGINX_SERVER_PORT} //= $ServerPort;
    local $SIG{INT}  = sub { stop_nginx(); exit 130 };
    local $SIG{TERM} = sub { stop_nginx(); exit 143 };
    my @blocks = Test::Base::blocks();
    @blocks = shuffle @blocks unless $NoShuffle;
    for my $block (@blocks) {
        $_->($block) for @Preprocessors;
        $block->set_value(name => "$0 " . $block->name);
        run_block($block);
        stop_nginx() if $UseValgrind;     # so valgrind reports per block
    }
}

END {
    local $?;    # keep the test script's exit status
    stop_nginx() unless $NoClean;
}

# ---- one block ----------------------------------------------------------

# sections of the real Test::Nginx::Socket that this one does not implement:
# say so instead of silently not checking them
our @Unsupported = qw(
    curl http2 http3 stap stap_out stap_out_like stap_out_unlike tcp_listen
    tcp_reply tcp_query udp_listen udp_reply udp_query access_log
    no_access_log response_body_filters response_body_eval request_eval
    skip_nginx skip_nginx2 skip_eval skip_openssl todo todo_nginx init
    post_setup_server_root response_body_json_sort charset
    raw_response_headers_like raw_response_headers_unlike ignore_response
    shutdown error_log_file server_name raw_request_middle_delay
    server_addr_for_client
);

sub run_block {
    my $block = shift;
    my $name = $block->name;
    $RandPorts = {};
    for (grep { defined $block->$_ } @Unsupported) {
        warn "WARNING: $name - --- $_ is not supported by t/lib's"
           . " Test::Nginx::Socket and is ignored\n";
    }

    my $config = $block->config // $PrevConfig // '';
    $PrevConfig = $config;
    local $LogLevel = $block->log_level || $LogLevel;

    stop_nginx();
    setup_server_root();
    write_user_files($block);
    write_config($block, expand_env($config, $name));

    if (defined $block->must_die) {
        $ErrLogPos = 0;
        for my $rep (0 .. $RepeatEach - 1) {
            my ($status, $err) = start_nginx($block);
            my $want = $block->must_die;
            if ($want =~ /^\d+$/) {
                Test::More::is($status >> 8, $want, "$name - die with the expected exit code");
            } else {
                Test::More::isnt($status, 0, "$name - die as expected");
            }
            if ($status == 0) {
                warn "WARNING: $name - nginx must die but it does not; killing it\n";
                for (1 .. 50) { last if -s $PidFile; sleep 0.02 }
                stop_nginx();
            }
            check_error_log($block, $rep, $err);
        }
        return;
    }

    my ($status, $err) = start_nginx($block);
    if ($status != 0) {
        Test::More::fail("$name - cannot start nginx (status $status)");
        Test::More::diag($err) if length $err;
        return;
    }
    $RunningBlock = $block;
    $ErrLogPos = 0;
    for my $rep (0 .. $RepeatEach - 1) {
        write_user_files($block) if $rep > 0;
        run_requests($block, $rep);
    }
}

# list of { data, count, head } to send, one per connection
sub requests_of {
    my $block = shift;
    my $name = $block->name;
    my $more = $block->more_headers // '';
    my $hdr = sub {
        my $i = shift;
        return $more if !ref $more;
        return $more->[$i] // bail_out("$name - --- more_headers lacks data for request $i");
    };
    my $build = sub {
        my ($req, $i, $conn) = @_;
        $req = join '', map { ref $_ ? $_->{value} : $_ } @$req if ref $req eq 'ARRAY';
        my $data = eval {
            Test::Nginx::Lite::HTTP::build_request($req, $hdr->($i), $conn, $ServerName)
        };
        bail_out("$name - $@") if $@;
        return $data;
    };
    my @list;

    if (defined(my $raw = $block->raw_request)) {
        $raw = join '', @$raw if ref $raw eq 'ARRAY';
        push @list, { data => $raw, count => 1 };
    } elsif (defined(my $reqs = $block->pipelined_requests)) {
        bail_out("$name - --- pipelined_requests must be an array (use eval)")
            if ref $reqs ne 'ARRAY';
        my $data = '';
        for my $i (0 .. $#$reqs) {
            my $req = expand_env($reqs->[$i], $name);
            $data .= $build->($req, $i, $i == $#$reqs ? 'close' : 'keep-alive');
        }
        push @list, { data => $data, count => scalar @$reqs };
    } else {
        my $req = $block->request;
        bail_out("$name - no --- request section") if !defined $req;
        if (ref $req eq 'ARRAY') {
            push @list, { data => $build->($req->[$_], $_, 'close'), count => 1 }
                for 0 .. $#$req;
        } else {
            1 while $req =~ s/^\s*#[^\n]+\s+|^\s+//;
            push @list, { data => $build->($req, 0, 'close'), count => 1 };
        }
    }
    $_->{head} = $_->{data} =~ /^\s*HEAD\s/ for @list;
    return @list;
}

sub run_requests {
    my ($block, $rep) = @_;
    my $name = $block->name;
    my @reqs = requests_of($block);
    my $total = 0;
    $total += $_->{count} for @reqs;
    my $need_array = $total > 1 || defined $block->pipelined_requests;
    my $timeout = parse_time($block->timeout) // $Timeout;
    my $idx = 0;

    for my $req (@reqs) {
        my ($raw, $err) = Test::Nginx::Lite::HTTP::send_and_receive(
            $ServerAddr, $ServerPort, $req->{data}, $timeout,
            $UseValgrind ? 15 : 3);
        if (defined $err && ($err ne 'timeout' || !defined $block->abort)) {
            Test::More::fail($err eq 'timeout'
                ? "ERROR: client socket timed out - $name" : "$name - $err");
        }
        for my $n (1 .. $req->{count}) {
            my ($res, $left, $perr) =
                Test::Nginx::Lite::HTTP::parse_response($raw, $req->{head});
            Test::More::fail("$name - $perr") if $perr;
            $raw = $left;
            check_response($block, $res, $idx, $rep, $need_array);
            if ($idx < $total - 1) {
                sleep $block->wait if $block->wait;
                check_error_log($block, $rep);
            }
            $idx++;
        }
        if (length($raw // '') && !$block->abort) {
            warn "WARNING: $name - unexpected extra bytes after the response: "
                . fmt_str(substr $raw, 0, 200) . "\n";
        }
    }
    sleep $block->wait if $block->wait;
    check_error_log($block, $rep);
}

# ---- checks -------------------------------------------------------------

# the expected value of a section for the $idx-th response: with several
# requests per block the section must be an array (eval) of per-request values
sub expected {
    my ($block, $section, $idx, $need_array) = @_;
    my $value = $block->$section;
    return $value if !defined $value;
    if (ref $value eq 'ARRAY') {
        return $value->[$need_array ? $idx : 0];
    }
    bail_out($block->name . " - several requests are sent, so --- $section"
             . " must be an array of expected values as well") if $need_array;
    return $value;
}

sub check_response {
    my ($block, $res, $idx, $rep, $need_array) = @_;
    my $name = $block->name;
    my $val = sub { expected($block, shift, $idx, $need_array) };

    if (defined $block->error_code_like) {
        my $pat = $val->('error_code_like');
        Test::More::like($res->{code}, qr/$pat/sm, "$name - status code ok");
    } else {
        my $want = defined $block->error_code ? $val->('error_code') : 200;
        Test::More::is($res->{code}, $want, "$name - status code ok");
    }

    if (defined $block->response_headers) {
        for my $line (split /\n/, $val->('response_headers') // '') {
            $line =~ s/^\s+|\s+$//g;
            next if $line eq '';
            if ($line =~ s/^!\s*//) {
                Test::More::unlike($res->{raw_headers}, qr/^\s*\Q$line\E\s*:/mi,
                                   "$name - header $line not present in the raw headers");
                next;
            }
            my ($key, $want) = split /\s*:\s*/, $line, 2;
            $want //= '';
            $want =~ s/\$ServerPort\b/$ServerPort/g;
            my $got = Test::Nginx::Lite::HTTP::header($res, $key) // '';
            Test::More::is($got, $want, "$name - header $key ok");
        }
    } elsif (defined $block->response_headers_like) {
        for my $line (split /\n/, $val->('response_headers_like') // '') {
            $line =~ s/^\s+|\s+$//g;
            next if $line eq '';
            my ($key, $pat) = split /\s*:\s*/, $line, 2;
            my $got = Test::Nginx::Lite::HTTP::header($res, $key) // '';
            Test::More::like($got, qr/^$pat$/, "$name - header $key like ok");
        }
    }

    my $body = $res->{body};
    if (defined $block->response_body) {
        my $want = $val->('response_body');
        my $what = "(repeated req $rep, req $idx)";
        if (ref $want) {
            Test::More::like($body, $want, "$name - response_body - like $what");
        } else {
            $want =~ s/\$ServerPort\b/$ServerPort/g if defined $want;
            $want = expand_env($want, $name);
            my $is = $NoLongString ? \&Test::More::is : \&Test::Base::is;
            $is->($body, $want, "$name - response_body - response is expected $what");
        }
    } elsif (defined $block->response_body_like || defined $block->response_body_unlike) {
        my $type = defined $block->response_body_like ? 'like' : 'unlike';
        my $pat = $val->("response_body_$type");
        $pat =~ s/\$ServerPort\b/$ServerPort/g unless ref $pat;
        my $summary = $body // '';
        $summary =~ s/^\s+|\s+$//g;
        $summary =~ s/\s+/ /g;
        no strict 'refs';
        &{"Test::More::$type"}($body, qr/$pat/s,
            "$name - response_body_$type - response is expected ($summary)");
    }
}

sub fmt_str {
    my $s = shift;
    chomp $s;
    $s =~ s/"/\\"/g;
    $s =~ s/\r/\\r/g;
    $s =~ s/\n/\\n/g;
    return $s;
}

# error.log lines written since the previous call for this nginx start
# (since the start itself after check_accum_error_log())
sub new_error_log_lines {
    sleep 0.045;    # log-phase lines come after the connection is closed
    open my $in, '<', $ErrLogFile or return [];
    seek $in, $ErrLogPos, 0 if $ErrLogPos && !$AccumErrLog;
    my @lines = <$in>;
    $ErrLogPos = tell $in;
    close $in;
    return \@lines;
}

sub patterns_of {
    my $pats = shift;
    return [$pats] if ref $pats eq 'Regexp';
    return [@$pats] if ref $pats eq 'ARRAY';
    chomp $pats;
    return [split /\n+/, $pats];
}

sub line_matches {
    my ($line, $pat) = @_;
    return ref $pat ? $line =~ $pat : index($line, $pat) >= 0;
}

# --- error_log, --- no_error_log, --- grep_error_log(_out).  $extra is
# text (nginx's stderr) checked together with the log lines.
sub check_error_log {
    my ($block, $rep, $extra) = @_;
    my $name = $block->name;
    my $lines = new_error_log_lines();
    # nginx's stderr counts only when nothing reached the log (nginx < 1.19.5
    # has no -e and logs its earliest errors to the compiled-in path)
    $lines = [map { "$_\n" } split /\n/, $extra] if !@$lines && defined $extra;
    my %quiet;

    if (defined(my $pat = $block->grep_error_log)) {
        $pat = $pat->[$rep] if ref $pat eq 'ARRAY';
        my $want = $block->grep_error_log_out;
        bail_out("$name - --- grep_error_log needs --- grep_error_log_out") if !defined $want;
        $want = $want->[$rep] if ref $want eq 'ARRAY';
        $want = expand_env($want, $name) unless ref $want;
        my $got = '';
        for (@$lines) {
            $got .= "$&\n" if (ref $pat ? /$pat/ : /\Q$pat\E/) && $& !~ /\n/;
        }
        if (ref $want eq 'Regexp') {
            Test::More::like($got, $want, "$name - grep_error_log_out (req $rep)");
        } else {
            Test::Base::is($got, $want, "$name - grep_error_log_out (req $rep)");
        }
    }

    for my $section (qw(error_log no_error_log)) {
        my $pats = $block->$section;
        next if !defined $pats;
        $pats = patterns_of($pats);
        for my $pat (@$pats) {
            $quiet{$_} = 1 for "$pat" =~ /\[(alert|crit|emerg)/g;
            my ($hit) = grep { line_matches($_, $pat) } @$lines;
            my $p = fmt_str("$pat");
            if ($section eq 'error_log') {
                Test::More::ok($hit, $hit
                    ? "$name - pattern \"$pat\" matches a line in error.log (req $rep)"
                    : "$name - pattern \"$pat\" should match a line in error.log (req $rep)");
            } else {
                Test::More::ok(!$hit, $hit
                    ? "$name - pattern \"$p\" should not match any line in error.log but matches line \"" . fmt_str($hit) . "\" (req $rep)"
                    : "$name - pattern \"$p\" does not match a line in error.log (req $rep)");
            }
        }
    }

    for my $line (@$lines) {
        if ($line =~ /\[(alert|crit|emerg)\]/ && !$quiet{$1}) {
            warn "WARNING: $name - " . fmt_str($line) . "\n";
        }
        if ($line =~ /\bAssertion .*?failed\b/) {
            Test::More::fail("$name - " . fmt_str($line));
        }
    }
}

# --- shutdown_error_log / --- no_shutdown_error_log, after nginx exited
sub check_shutdown_error_log {
    my $block = shift;
    return if !defined $block->shutdown_error_log && !defined $block->no_shutdown_error_log;
    my $name = $block->name;
    my $lines = new_error_log_lines();
    for my $section (qw(shutdown_error_log no_shutdown_error_log)) {
        my $pats = $block->$section;
        next if !defined $pats;
        for my $pat (@{ patterns_of($pats) }) {
            my ($hit) = grep { line_matches($_, $pat) } @$lines;
            my $p = fmt_str("$pat");
            Test::More::ok($section eq 'shutdown_error_log' ? $hit : !$hit,
                $section eq 'shutdown_error_log'
                ? "$name - pattern \"$p\" " . ($hit ? 'matches' : 'should match') . " a line in error.log"
                : "$name - pattern \"$p\" " . ($hit ? 'should not match any line in error.log but matches line "' . fmt_str($hit) . '"'
                                                    : 'does not match a line in error.log'));
        }
    }
}

# ---- server root and nginx.conf -----------------------------------------

sub parse_time {
    my $t = shift;
    return undef if !defined $t;
    return $1 / 1000 if $t =~ /^\s*([\d.]+)\s*ms\s*$/;
    $t =~ s/^\s*([\d.]+)\s*s?\s*$/$1/;
    return $t;
}

# $TEST_NGINX_FOO -> $ENV{TEST_NGINX_FOO}; $TEST_NGINX_RAND_PORT_N -> a
# free port, the same one for the whole block
sub expand_env {
    my ($text, $name) = @_;
    return $text if !defined $text || ref $text;
    $text =~ s{\$(TEST_NGINX_[_A-Z0-9]+)}{
        my $var = $1;
        $var =~ /^TEST_NGINX_RAND_PORT_\d+$/ ? ($RandPorts->{$var} //= free_port())
        : defined $ENV{$var} ? $ENV{$var}
        : bail_out("$name - No environment $var defined.")
    }ge;
    return $text;
}

sub free_port {
    my %used = map { $_ => 1 } $ServerPort, grep { defined } values %$RandPorts;
    for (1 .. 1000) {
        my $port = 10000 + int rand 50000;
        next if $used{$port};
        my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
                                      Proto => 'tcp', Listen => 1, ReuseAddr => 1);
        next if !$s;
        close $s;
        return $port;
    }
    bail_out("cannot find a free port");
}

sub setup_server_root {
    # remove only what we create, so a mistaken TEST_NGINX_SERVROOT
    # cannot wipe real data
    remove_tree("$ServRoot/conf", $LogDir, $HtmlDir, "$ServRoot/cache",
                glob("$ServRoot/*_temp"), glob("$ServRoot/*_cache"));
    make_path("$ServRoot/conf", $LogDir, $HtmlDir);
    write_file("$HtmlDir/index.html",
        '<html><head><title>It works!</title></head><body>It works!</body></html>');
}

sub write_file {
    my ($path, $data) = @_;
    open my $out, '>', $path or bail_out("cannot write $path: $!");
    binmode $out;
    print $out $data;
    close $out;
}

sub write_user_files {
    my $block = shift;
    my $files = $block->user_files;
    return if !defined $files;
    my @files;
    if (ref $files eq 'ARRAY') {
        @files = @$files;
    } else {
        for (split /^/, $files) {
            if (/^>>> (\S+)(?:\s+(.+))?/) { push @files, [$1, '', $2] }
            elsif (@files)                { $files[-1][1] .= $_ }
        }
    }
    for (@files) {
        my ($fname, $body, $date) = @$_;
        my $path = $fname =~ m{^/} ? $fname : "$HtmlDir/$fname";
        make_path($1) if $path =~ m{(.*)/} && !-d $1;
        write_file($path, expand_env($body // '', $block->name));
        if ($date) {    # ">>> name 201901011200": mtime, in GMT
            local $ENV{TZ} = 'GMT';
            system('touch', '-t', $date, $path) == 0 or bail_out("touch $path failed");
        }
    }
}

our $NginxV;
sub nginx_v { $NginxV //= `$NginxBinary -V 2>&1` // '' }

sub write_config {
    my ($block, $config) = @_;
    my $name = $block->name;
    my $http_config = expand_env($block->http_config // '', $name);
    my $main_config = expand_env($block->main_config // '', $name);
    my $post_main   = expand_env($block->post_main_config // '', $name);
    my $daemon = $UseValgrind ? 'off' : 'on';
    my $master = $UseValgrind ? 'off' : $MasterProcess;
    my $conf = '';
    $conf .= "load_module $_;\n" for grep { length } split /\s+/, $LoadModules;
    $conf .= <<"_EOC_";
worker_processes  $Workers;
daemon $daemon;
master_process $master;
error_log $ErrLogFile $LogLevel;
pid       $PidFile;
_EOC_
    $conf .= "env " . (/\s/ ? "'$_'" : $_) . ";\n" for @EnvToNginx;

    my $temp = "    client_body_temp_path $ServRoot/client_body_temp;\n"
             . "    proxy_temp_path $ServRoot/proxy_temp;\n";
    $temp =~ s/^.*client_body_temp_path.*\n//m if $http_config =~ /\bclient_body_temp_path\b/;
    $temp =~ s/^.*proxy_temp_path.*\n//m       if $http_config =~ /\bproxy_temp_path\b/;
    for my $m (qw(fastcgi scgi uwsgi)) {
        $temp .= "    ${m}_temp_path $ServRoot/${m}_temp;\n"
            unless nginx_v() =~ /--without-http_${m}_module/;
    }
    my $root = $NoRootLocation ? '' : <<"_EOC_";
        location / {
            root $HtmlDir;
            index index.html index.htm;
        }
_EOC_
    $conf .= <<"_EOC_";

$main_config

http {
    access_log $LogDir/access.log;
$temp
    default_type text/plain;
    keepalive_timeout  68000ms;

$http_config

    server {
        listen          $ServerPort;
        server_name     '$ServerName';
        client_max_body_size 30M;

        # Begin preamble config...
$Preamble
        # End preamble config...

        # Begin test case config...
$config
        # End test case config.

$root    }
}

$post_main

events {
    accept_mutex off;
    worker_connections  $WorkerConnections;
}
_EOC_
    $conf .= "user root;\n" if $> == 0;
    write_file($ConfFile, $conf);
}

# ---- nginx processes ----------------------------------------------------

sub nginx_cmd {
    my @cmd = ($NginxBinary, '-p', "$ServRoot/", '-c', $ConfFile);
    # -e (nginx >= 1.19.5) sends even the earliest messages to our log
    my ($a, $b, $c) = nginx_v() =~ m{nginx/(\d+)\.(\d+)\.(\d+)};
    splice @cmd, 1, 0, '-e', $ErrLogFile
        if defined $a && sprintf('%03d%03d%03d', $a, $b, $c) ge '001019005';
    return @cmd if !$UseValgrind;
    my @vg = $UseValgrind =~ /^\d+$/
        ? qw(--tool=memcheck --leak-check=full --show-possibly-lost=no --num-callers=50)
        : split ' ', $UseValgrind;
    (my $supp = $INC{'Test/Nginx/Lite/HTTP.pm'}) =~ s{HTTP\.pm$}{nginx.supp};
    push @vg, "--suppressions=$supp" if -f $supp;
    push @vg, '--suppressions=valgrind.suppress' if -f 'valgrind.suppress';
    return ('valgrind', '-q', "--log-file=$LogDir/valgrind.log", @vg, @cmd);
}

# Start nginx for $block.  Returns (wait status, stderr text): status 0
# means it runs (daemonized, or our valgrind child listening on the port).
sub start_nginx {
    my $block = shift;
    my $must_die = defined $block->must_die;
    local $UseValgrind = $must_die ? undef : $UseValgrind;
    my @cmd = nginx_cmd();
    my $errfile = "$LogDir/nginx-stderr.log";

    for my $try (1 .. 5) {
        my $pid = fork // bail_out("fork failed: $!");
        if ($pid == 0) {
            open STDIN,  '<', '/dev/null';
            open STDOUT, '>', '/dev/null';
            open STDERR, '>', $errfile;
            setpgrp if $UseValgrind;
            exec @cmd or POSIX::_exit(127);
        }
        my $status;
        if ($UseValgrind) {
            $ChildPid = $pid;
            $status = wait_for_listen($pid);
        } else {
            my $deadline = time + 10;
            while (waitpid($pid, WNOHANG) == 0) {
                if (time > $deadline) {
                    kill SIGKILL, $pid;
                    waitpid $pid, 0;
                    return (-1, "nginx start timed out: @cmd");
                }
                sleep 0.01;
            }
            $status = $?;
        }
        my $err = do { local $/; open my $f, '<', $errfile; <$f> } // '';
        # the previous instance may still hold the port for a moment
        if ($status == 0 || $must_die || $try == 5 || $err !~ /Address already in use/) {
            return ($status, $status && !$must_die ? "@cmd\n$err" : $err);
        }
        sleep 0.2 * $try;
    }
}

sub wait_for_listen {
    my $pid = shift;
    my $deadline = time + 30;
    while (time < $deadline) {
        return $? || -1 if waitpid($pid, WNOHANG) == $pid;
        my $s = IO::Socket::INET->new(PeerAddr => $ServerAddr,
                                      PeerPort => $ServerPort, Proto => 'tcp');
        if ($s) { close $s; return 0 }
        sleep 0.1;
    }
    return -1;
}

sub running {
    my $pid = shift;
    return 0 if !$pid || !kill 0, $pid;
    open my $st, '<', "/proc/$pid/stat" or return 1;
    return (split ' ', scalar <$st>)[2] ne 'Z';
}

# Stop the nginx of the previous/current block (QUIT, then KILL after the
# timeout), then run that block's shutdown and valgrind checks.
sub stop_nginx {
    my $pid = $ChildPid;
    if (!$pid && open my $in, '<', $PidFile) {
        ($pid) = (<$in> // '') =~ /(\d+)/;
        # never signal a stale pid that is not nginx any more
        my $cmdline = '';
        if ($pid && open my $cl, '<', "/proc/$pid/cmdline") {
            local $/;
            $cmdline = <$cl> // '';
        }
        undef $pid if $cmdline !~ /nginx|valgrind/;
    }
    if ($pid && running($pid)) {
        kill SIGQUIT, $pid;
        my $deadline = time + ($UseValgrind ? 20 : $Timeout);
        while (running($pid) && time < $deadline) {
            waitpid $pid, WNOHANG if $ChildPid;
            sleep 0.02;
        }
        if (running($pid)) {
            warn "WARNING: nginx $pid did not quit in time; killing it\n";
            kill SIGKILL, -$pid;
            kill SIGKILL, $pid;
        }
        waitpid $pid, 0 if $ChildPid;
    }
    undef $ChildPid;
    unlink $PidFile;
    my $block = $RunningBlock or return;
    undef $RunningBlock;
    check_shutdown_error_log($block);
    if ($UseValgrind && -s "$LogDir/valgrind.log") {
        my $report = do { local $/; open my $f, '<', "$LogDir/valgrind.log"; <$f> };
        Test::More::fail($block->name . " - valgrind reported errors");
        Test::More::diag($report);
    }
}

1;
