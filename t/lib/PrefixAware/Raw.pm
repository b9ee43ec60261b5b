package PrefixAware::Raw;

# Misbehaving HTTP backends that nginx cannot play itself, for the fault
# suites: a child process listens on the given loopback ports and treats
# every connection according to the port's mode.
#
#     reset    reads the request (headers and Content-Length body), then
#              closes with SO_LINGER 0: a TCP RST before any response byte
#     cut      reads the request, sends a response header with
#              Content-Length: 100 and 8 body bytes ("partial-"), waits
#              300 ms and resets the connection
#     silent   reads the request and never answers; closes when the peer
#              does
#     stream   reads the request, sends a chunked text/event-stream
#              response header at once, its first chunk ("data: first")
#              1 s later and the last ("data: [DONE]", then the end of
#              the body) 1.5 s after that: a streamed completion whose
#              first token comes after a prefill of 1 s
#
#     use PrefixAware::Raw;
#     my $raw = PrefixAware::Raw->start(2006 => 'reset', 2007 => 'cut');
#     ...
#     $raw->stop;                      # also at exit
#
# Works from a Test::Nginx::Socket-format suite (start it before
# run_tests) and from a plain Test::More scenario.  The child leaves with
# POSIX::_exit, so that no END block of the test (stopping nginx, the
# test plan) runs twice.

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Socket qw(SOL_SOCKET SO_LINGER);
use Time::HiRes qw(time sleep);

my @children;

END {
    local $?;
    $_->stop for grep { $_ && $_->{pid} && $_->{parent} == $$ } @children;
}

sub start {
    my ($class, %mode) = @_;

    my %listen;
    for my $port (sort keys %mode) {
        die "unknown mode $mode{$port}\n"
            unless $mode{$port} =~ /^(?:reset|cut|silent|stream)$/;
        $listen{$port} = IO::Socket::INET->new(
            LocalAddr => '127.0.0.1', LocalPort => $port, Proto => 'tcp',
            Listen => 128, ReuseAddr => 1)
            or die "PrefixAware::Raw: cannot listen on 127.0.0.1:$port: $!\n";
    }

    my $pid = fork;
    die "fork: $!\n" unless defined $pid;

    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
        $SIG{PIPE} = 'IGNORE';
        eval { _serve(\%listen, \%mode) };
        POSIX::_exit(0);
    }

    close $_ for values %listen;

    my $self = bless { pid => $pid, parent => $$ }, $class;
    push @children, $self;
    return $self;
}

sub stop {
    my $self = shift;
    my $pid = delete $self->{pid} or return;
    kill TERM => $pid;
    waitpid $pid, 0;
}

sub _reset {
    my $s = shift;
    setsockopt $s, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0);
    close $s;
}

sub _serve {
    my ($listen, $mode) = @_;
    my $sel = IO::Select->new(values %$listen);
    my %port_of = map { (fileno($listen->{$_}) => $_) } keys %$listen;
    my %conn;     # fileno => { sock, mode, buf, state, at }

    while (1) {
        my $now = time;
        my $wait = 1;

        for my $c (values %conn) {
            next unless $c->{at};
            my $left = $c->{at} - $now;
            $wait = $left if $left < $wait;
        }
        $wait = 0 if $wait < 0;

        for my $s ($sel->can_read($wait)) {
            my $fd = fileno $s;

            if (exists $port_of{$fd}) {
                my $new = $s->accept or next;
                $new->autoflush(1);
                $conn{ fileno $new } = { sock => $new, buf => '',
                                         mode => $mode->{ $port_of{$fd} },
                                         state => 'request' };
                $sel->add($new);
                next;
            }

            my $c = $conn{$fd} or next;
            my $n = sysread $s, $c->{buf}, 65536, length $c->{buf};

            if (!$n) {
                $sel->remove($s);
                close $s;
                delete $conn{$fd};
                next;
            }

            next unless $c->{state} eq 'request' && _complete($c->{buf});

            $c->{state} = 'answered';

            if ($c->{mode} eq 'reset') {
                $sel->remove($s);
                _reset($s);
                delete $conn{$fd};

            } elsif ($c->{mode} eq 'cut') {
                syswrite $s, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                           . "Content-Length: 100\r\n\r\npartial-";
                $c->{at} = time + 0.3;

            } elsif ($c->{mode} eq 'stream') {
                syswrite $s, "HTTP/1.1 200 OK\r\n"
                           . "Content-Type: text/event-stream\r\n"
                           . "Transfer-Encoding: chunked\r\n\r\n";
                $c->{steps} = [ [ time + 1, _chunk("data: first\n\n") ],
                                [ time + 2.5, _chunk("data: [DONE]\n\n")
                                              . "0\r\n\r\n" ] ];
                $c->{at} = $c->{steps}[0][0];
            }
            # silent: keep reading until the peer closes
        }

        for my $fd (keys %conn) {
            my $c = $conn{$fd};
            next unless $c->{at} && $c->{at} <= time;

            if ($c->{steps}) {
                my $step = shift @{ $c->{steps} };
                syswrite $c->{sock}, $step->[1];
                $c->{at} = @{ $c->{steps} } ? $c->{steps}[0][0] : undef;
                next;
            }

            $sel->remove($c->{sock});
            _reset($c->{sock});
            delete $conn{$fd};
        }
    }
}

sub _chunk { sprintf("%x\r\n", length $_[0]) . $_[0] . "\r\n" }

# a whole request: the header and the Content-Length body (chunked bodies
# are not needed here)
sub _complete {
    my $buf = shift;
    my $end = index $buf, "\r\n\r\n";
    return 0 if $end < 0;
    my ($len) = substr($buf, 0, $end) =~ /^Content-Length:\s*(\d+)/mi;
    return length($buf) >= $end + 4 + ($len // 0);
}

1;
