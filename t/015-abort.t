# Requests that end early give their in-flight count back: a client that
# goes away (499), an upstream read timeout (504), a client abort that
# proxy_ignore_client_abort lets run to the end.  threshold=1, so a key is
# at its first choice (affinity, 0 in flight) only if nothing is left there;
# max_fails=0, so that the timeout does not take the server out.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2 b3);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'abort');
my $servers = join "", map { "        server 127.0.0.1:$port{$_} max_fails=0;\n" } sort keys %port;
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware index=off length=1024 threshold=1;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
        location /timeout/ {
            proxy_read_timeout 300ms;
            proxy_next_upstream off;
            proxy_pass http://up/;
        }
        location /ignore/ {
            proxy_ignore_client_abort on;
            proxy_pass http://up/;
        }
    }
_EOC_

my @key = (headers => [ID_HEADER, 'tenant-abort']);

sub decide {
    my ($path) = @_;
    my $from = $ng->log_size;
    my $c = $ng->conn;
    $c->send(GET => $path, @key);
    my $d = wait_until { my $d = $ng->decisions($from); @$d && $d } 5;
    return ($c, $d ? $d->[0] : {});
}

sub idle_ok {
    my ($what) = @_;
    my ($c, $x) = decide('/t');
    my $r = $c->read(5);
    $c->close;
    ok $r->{status} == 200 && $x->{route} eq 'affinity' && $x->{first_inflight} == 0,
       "$what: the key is at its first choice with 0 in flight"
        or diag $x->{line} // 'no decision';
    my $in = $ng->inflight('up') || {};
    is_deeply [ values %$in ], [0, 0, 0], "$what: the status shows 0 in flight everywhere";
    return $name{ $x->{server} // '' };
}

my $first = idle_ok('at the start');

# a client that goes away while its request is in flight
my ($c, $x) = decide('/slow3');
is_deeply [ $name{ $x->{server} }, $x->{route} ], [ $first, 'affinity' ], 'a slow request at the first choice';
my ($c2, $x2) = decide('/t');
is $x2->{first_inflight}, 1, 'it counts: the next request sees 1 in flight there';
$c2->read(5);
$c2->close;

my $from = $ng->log_size;
$c->close;
ok wait_until(sub { scalar $ng->log($from) =~ /client prematurely closed connection|499/ }, 5),
   'nginx saw the client go away';
idle_ok('after the client went away');

# an upstream read timeout
($c, $x) = decide('/timeout/slow3');
my $r = $c->read(5);
is $r->{status}, 504, 'the slow backend timed out: 504';
$c->close;
idle_ok('after the timeout');

# proxy_ignore_client_abort: the request goes on without its client
($c, $x) = decide('/ignore/slow');
$c->close;
($c2, $x2) = decide('/t');
is $x2->{first_inflight}, 1, 'the abandoned request still counts while it runs';
$c2->read(5);
$c2->close;
ok wait_until(sub { my $in = $ng->inflight('up'); $in && !grep { $_ } values %$in }, 5),
   'the abandoned request finished';
idle_ok('once the abandoned request finished');

my @alerts = grep { /\[(?:alert|crit|emerg)\]/ } $ng->log;
ok !@alerts, 'no alert in the error log' or diag join "\n", @alerts;

$ng->stop;
$be->stop;

done_testing();
