package Test::Nginx::Lite::HTTP;

# HTTP/1.x client pieces of our small Test::Nginx::Socket: building the
# request bytes the way Test::Nginx does, sending them over a plain TCP
# socket and splitting/decoding the response stream.  No test output here.

use strict;
use warnings;

use Errno qw(EAGAIN EWOULDBLOCK EINTR);
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(sleep time);

# "--- more_headers" text -> ("Key: value\r\n"..., is_chunked)
sub parse_more_headers {
    my ($text) = @_;
    my ($out, $chunked) = ('', 0);
    for my $line (split /\n+/, $text // '') {
        next if $line =~ /^\s*(?:#|$)/;
        my ($key, $val) = split /:\s*/, $line, 2;
        $val //= '';
        $chunked = 1 if lc($key) eq 'transfer-encoding' && $val eq 'chunked';
        $out .= "$key: $val\r\n";
    }
    return ($out, $chunked);
}

# "METHOD [URI [VERSION]]\n[body]" -> request bytes.  Host and Connection
# are added unless given; a non-chunked body is trimmed of surrounding
# white space and gets a Content-Length; a chunked body is sent as is.
sub build_request {
    my ($text, $more_headers, $conn, $host) = @_;
    my ($headers, $chunked) = parse_more_headers($more_headers);
    my ($line, $body) = split /\n/, $text // '', 2;
    $line //= '';
    $line =~ /^\s*(\S+) *(\S+)? *(\S+)?\s*$/
        or die "bad request line, want 'METHOD [URI [VERSION]]': \"$line\"\n";
    my ($method, $uri, $version) = ($1, $2 // '/', $3 // 'HTTP/1.1');
    $body //= '';

    if (!$chunked && $body ne '' && $headers !~ /(?:^|\n)Content-Length:/) {
        $body =~ s/^\s+|\s+$//g;
        $headers .= 'Content-Length: ' . length($body) . "\r\n";
    }
    my $pre = '';
    $pre .= "Host: $host\r\n"        if $headers !~ /(?:^|\n)Host:/i;
    $pre .= "Connection: $conn\r\n"  if $headers !~ /(?:^|\n)Connection/i;
    return "$method $uri $version\r\n$pre$headers\r\n$body";
}

# Send $data and read until the peer closes.  $timeout is an inactivity
# timeout, as in Test::Nginx.  Returns ($response_bytes, $error) where
# $error is undef, "timeout" or a connect/IO error message.
sub send_and_receive {
    my ($addr, $port, $data, $timeout, $connect_for) = @_;
    local $SIG{PIPE} = 'IGNORE';    # nginx may close before reading it all
    my $sock;
    my $give_up = time + ($connect_for // 3);
    while (1) {
        $sock = IO::Socket::INET->new(PeerAddr => $addr, PeerPort => $port,
                                      Proto => 'tcp', Timeout => $timeout);
        last if $sock;
        return ('', "cannot connect to $addr:$port: $!") if time > $give_up;
        sleep 0.05;
    }
    $sock->blocking(0);
    binmode $sock;

    my ($resp, $off) = ('', 0);
    my $sel = IO::Select->new($sock);
    while (1) {
        my ($r, $w) = IO::Select->select($sel, $off < length $data ? $sel : undef,
                                         undef, $timeout);
        if (!$r && !$w) {
            next if $! == EINTR;
            close $sock;
            return ($resp, 'timeout');
        }
        if ($w && @$w) {
            my $n = syswrite $sock, $data, length($data) - $off, $off;
            if (defined $n) {
                $off += $n;
            } elsif ($! != EAGAIN && $! != EWOULDBLOCK) {
                # nginx may answer and close before reading the whole
                # request (e.g. 413); keep what it sent
                $off = length $data;
            }
        }
        if ($r && @$r) {
            my $n = sysread $sock, my $buf, 65536;
            if (!defined $n) {
                next if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
                last if length $resp;    # e.g. reset after the response
                close $sock;
                return ($resp, "read failed: $!");
            }
            last if $n == 0;
            $resp .= $buf;
        }
    }
    close $sock;
    return ($resp, undef);
}

# Take one response off the front of $raw.  Returns a hash
#   { code, status_line, headers => [[name, value]...], raw_headers, body }
# (code is '' when nothing parseable arrived), the bytes left after it,
# and an error message for malformed chunked data.
sub parse_response {
    my ($raw, $head_request) = @_;
    my %res = (code => '', headers => [], raw_headers => '', body => '');
    return (\%res, '', undef) if !defined $raw || $raw eq '';

    my ($head, $rest) = split /\r?\n\r?\n/, $raw, 2;
    $rest //= '';
    $res{raw_headers} = "$head\r\n";
    my ($status, @lines) = split /\r?\n/, $head;
    $res{status_line} = $status;
    $res{code} = $1 if $status =~ m{^HTTP/\d+(?:\.\d+)?\s+(\d{3})\b};
    for (@lines) {
        if (/^[ \t]+(.*)/ && @{ $res{headers} }) {       # folded line
            $res{headers}[-1][1] .= " $1";
        } elsif (/^([^:]+?)\s*:\s*(.*?)\s*$/) {
            push @{ $res{headers} }, [$1, $2];
        }
    }

    my $code = $res{code} || 0;
    if ($head_request || $code == 204 || $code == 304 || $code =~ /^1/) {
        $res{body} = '';
        return (\%res, $rest, undef);
    }

    my $te  = header(\%res, 'Transfer-Encoding');
    my $len = header(\%res, 'Content-Length');
    if (defined $te && $te =~ /\bchunked\b/i) {
        my ($body, $err) = ('', undef);
        while (1) {
            if ($rest !~ s/^([0-9A-Fa-f]+)[^\r\n]*\r\n//) {
                $err = 'invalid chunked body received: no chunk size line';
                last;
            }
            my $size = hex $1;
            if ($size == 0) {
                # trailer fields, then the empty line
                $rest =~ s/^(?:[^\r\n]+\r\n)*\r\n//
                    or $err = 'invalid chunked body received: no final CRLF';
                last;
            }
            if (length($rest) < $size + 2 || substr($rest, $size, 2) ne "\r\n") {
                $err = 'invalid chunked body received: short chunk';
                last;
            }
            $body .= substr $rest, 0, $size, '';
            substr $rest, 0, 2, '';
        }
        $res{body} = $body;
        return (\%res, $rest, $err);
    }
    if (defined $len && $len =~ /^\d+$/) {
        $res{body} = substr $rest, 0, $len, '';
        return (\%res, $rest, undef);
    }
    $res{body} = $rest;      # delimited by connection close
    return (\%res, '', undef);
}

# Value of a response header; repeated headers are joined with ", "
# (as HTTP::Headers does in scalar context).  undef when absent.
sub header {
    my ($res, $name) = @_;
    my @v = map { $_->[1] } grep { lc $_->[0] eq lc $name } @{ $res->{headers} };
    return @v ? join(', ', @v) : undef;
}

1;
