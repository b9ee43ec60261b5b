package PrefixAware::Load;

# A steady load for the scenario tests: "conns" child processes, each
# sending "requests" requests one after the other, each on a connection of
# its own (so that a request is never sent on a keep-alive connection the
# server is closing), with a pause between them; every "slow_every"-th
# request goes to "/slow" (about a second at the backends of
# PrefixAware::Scenario), so that some are in flight at any moment.
#
#     my $load = PrefixAware::Load->start(port => $ng->port, conns => 8,
#                                         requests => 40);
#     ... reload, upgrade ...
#     my $res = $load->wait;      # [ { conn, n, path, status, body, error,
#                                 #     secs }, ... ]
#     my %by = PrefixAware::Load::by_status($res);
#
# Bodies are "conn C prompt P" with P = n % 10: ten keys per connection.

use strict;
use warnings;

use File::Temp ();
use POSIX ();
use Time::HiRes qw(time sleep);

use PrefixAware::Scenario ();

sub start {
    my ($class, %o) = @_;
    my $self = bless {
        port       => $o{port},
        conns      => $o{conns} // 8,
        requests   => $o{requests} // 40,
        pause      => $o{pause} // 0.02,
        slow_every => $o{slow_every} // 8,
        dir        => File::Temp::tempdir('pa-load-XXXXXX', TMPDIR => 1,
                                          CLEANUP => 1),
        pids       => [],
        parent     => $$,
    }, $class;

    for my $c (1 .. $self->{conns}) {
        my $pid = fork;
        die "fork: $!\n" unless defined $pid;

        if ($pid == 0) {
            $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
            $SIG{PIPE} = 'IGNORE';
            eval { $self->_run($c) };
            POSIX::_exit(0);
        }

        push @{ $self->{pids} }, $pid;
    }

    return $self;
}

sub _run {
    my ($self, $c) = @_;

    open my $out, '>', "$self->{dir}/$c" or die "$self->{dir}/$c: $!\n";
    $out->autoflush(1);

    for my $n (1 .. $self->{requests}) {
        my $path = $n % $self->{slow_every} == 0 ? '/slow' : '/t';
        my $body = "conn $c prompt " . ($n % 10);
        my $t0 = time;
        my ($r, $err);

        eval {
            my $conn = PrefixAware::Scenario::Conn->new($self->{port});
            $r = $conn->request(POST => $path, body => $body, close => 1,
                                timeout => 15);
            $conn->close;
            1;
        } or $err = $@ || 'unknown error';

        $err //= 'no response' if !$r || !$r->{status};
        $err =~ s/\s+/ /g if defined $err;
        my $got = $r ? $r->{body} : '';
        $got =~ s/\s+$//;

        printf $out "%d\t%d\t%s\t%d\t%s\t%.3f\t%s\n", $c, $n, $path,
               $r ? $r->{status} : 0, $got, time - $t0, $err // '';

        sleep $self->{pause};
    }

    close $out;
}

# waits for the children; every request's result
sub wait {
    my $self = shift;
    waitpid $_, 0 for @{ $self->{pids} };
    $self->{pids} = [];

    my @res;
    for my $c (1 .. $self->{conns}) {
        open my $in, '<', "$self->{dir}/$c" or next;
        while (<$in>) {
            chomp;
            my %r;
            @r{qw(conn n path status body secs error)} = split /\t/, $_, 7;
            push @res, \%r;
        }
        close $in;
    }

    return \@res;
}

sub running {
    my $self = shift;
    return scalar grep { !waitpid($_, POSIX::WNOHANG()) } @{ $self->{pids} };
}

# { status => count }
sub by_status {
    my $res = shift;
    my %by;
    $by{ $_->{status} }++ for @$res;
    return %by;
}

sub DESTROY {
    my $self = shift;
    return unless $self->{parent} == $$;
    kill KILL => @{ $self->{pids} } if @{ $self->{pids} };
}

1;
