package PrefixAware::DNS;

# The DNS responder of the "server ... resolve" tests (t/090-resolve.t,
# t/091-resolve-retry.t, t/101-queue-resolve.t), and the check that skips
# them where nginx cannot re-resolve upstream names.  The responder runs
# in a process of its own on a free loopback UDP port and answers the A
# records of one name (pool.test) from a file read at each query, TTL 1;
# NXDOMAIN for other names, no records for other types.
#
#     PrefixAware::DNS::skip_unless_resolve();
#     my $dns = PrefixAware::DNS->new;      # answers no address yet
#     my $DNS = $dns->port;                 # resolver 127.0.0.1:$DNS ...
#     $dns->answer('127.0.0.2', '127.0.0.3');
#
# The process is killed when the test ends.

use strict;
use warnings;

use File::Temp ();
use IO::Socket::INET;
use POSIX ();
use Test::More ();
use PrefixAware::Scenario qw(free_port);

my @pids;

END { kill KILL => $_ for @pids; }

# plan skip_all where nginx (TEST_NGINX_BINARY) does not re-resolve
# upstream names at run time (before 1.27.3)
sub skip_unless_resolve {
    my $bin = $PrefixAware::Scenario::Binary;
    my ($ver) = `$bin -v 2>&1` =~ m{nginx/(\d+\.\d+\.\d+)};
    my @v = split /\./, $ver // '0.0.0';

    if ($v[0] * 1000000 + $v[1] * 1000 + $v[2] < 1027003) {
        Test::More::plan(skip_all => "nginx " . ($ver // '?')
                         . " does not re-resolve upstream names at run "
                         . "time (1.27.3 and later do)");
    }
}

sub new {
    my ($class, %o) = @_;

    my $self = bless {
        name => lc($o{name} // 'pool.test'),
        port => free_port(),
    }, $class;

    my $dir = File::Temp::tempdir('pa-dns-XXXXXX', TMPDIR => 1,
                                  CLEANUP => 1);
    $self->{answers} = "$dir/answers";
    $self->answer;

    my $pid = fork // die "fork: $!\n";
    if ($pid == 0) {
        # never returns; a failure ends the child without the parent's
        # END blocks (they would stop the parent's nginx)
        eval { $self->_serve };
        warn $@ if $@;
        POSIX::_exit(1);
    }
    push @pids, $pid;

    return $self;
}

sub port { $_[0]{port} }

# the addresses the name has from now on (none: an empty answer)
sub answer {
    my ($self, @addr) = @_;
    my $answers = $self->{answers};
    open my $fh, '>', "$answers.tmp" or die "$answers: $!\n";
    print $fh map { "$_\n" } @addr;
    close $fh;
    rename "$answers.tmp", $answers or die "$answers: $!\n";
}

sub _serve {
    my $self = shift;
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                  LocalPort => $self->{port},
                                  Proto => 'udp')
        or die "dns: $!\n";

    while (1) {
        my $from = $s->recv(my $q, 512) // next;
        next if length $q < 17;

        my ($id, $flags) = unpack 'n n', $q;
        my ($off, @labels) = (12);

        while ((my $len = ord substr $q, $off, 1) && $off < length $q) {
            push @labels, substr $q, $off + 1, $len;
            $off += $len + 1;
        }

        my $question = substr $q, 12, $off + 5 - 12;
        my ($qtype) = unpack 'n', substr $q, $off + 1, 2;
        my $name = lc join '.', @labels;

        my @addr;
        my $rcode = 0;

        if ($name ne $self->{name}) {
            $rcode = 3;

        } elsif ($qtype == 1 && open my $fh, '<', $self->{answers}) {
            @addr = grep { /^\d+\.\d+\.\d+\.\d+$/ } map { chomp; $_ } <$fh>;
            close $fh;
        }

        my $r = pack('n n n n n n', $id, 0x8180 | ($flags & 0x0100) | $rcode,
                     1, scalar @addr, 0, 0)
                . $question;

        for (@addr) {
            $r .= pack('n n n N n', 0xc00c, 1, 1, 1, 4)
                  . pack('C4', split /\./);
        }

        $s->send($r, 0, $from);
    }
}

1;
