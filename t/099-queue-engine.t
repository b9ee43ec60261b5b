# queue= with load=engine: a server whose engine reports requests waiting
# is full, so while every engine reports a queue, requests wait in nginx;
# when one engine reports none, a request is released to its server.
# Two servers whose /metrics pages (vLLM's) the test writes, polled every
# 100 ms; threshold is never reached here.
#
# 1. both engines report 3 waiting: a request waits (status page).
# 2. b2's engine reports 0 waiting: the request is released to b2, within
#    a poll or two.
# 3. while b2's engine reports none, requests go at once.
# 4. a stale report (the page gone: the poll fails) is not "full": b1
#    alone reporting a queue with b2's page gone, requests go at once.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until rnd);

my %port = map { $_ => free_port() } qw(b1 b2);

my $be = PrefixAware::Scenario->new(name => 'qengines');
my $html = $be->root . '/html';

sub page {
    my ($b, $waiting) = @_;
    my $f = "$html/metrics-$b.txt";
    if (!defined $waiting) {
        unlink $f;
        return;
    }
    my $m = 'engine="0",model_name="m"';
    open my $fh, '>', "$f.tmp" or die "$f: $!\n";
    print $fh "vllm:num_requests_running{$m} 4\n"
            . "vllm:num_requests_waiting{$m} $waiting\n"
            . "vllm:kv_cache_usage_perc{$m} 0.5\n";
    close $fh;
    rename "$f.tmp", $f or die "$f: $!\n";
}

page(b1 => 3);
page(b2 => 3);

$be->start(join '', map { <<"_EOC_" } sort keys %port);
    server {
        listen 127.0.0.1:$port{$_};
        location = /metrics {
            default_type text/plain;
            alias $html/metrics-$_.txt;
        }
        location / { return 200 "$_\\n"; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'qengine', workers => 2);
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware load=engine metrics=/metrics metrics_interval=100ms
                     queue=8 queue_timeout=20s;
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    server {
        listen 127.0.0.1:$listen reuseport;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

sub reported {
    my ($n) = @_;
    my $s = $ng->status->{servers} or return 0;
    return 2 == grep { ($_->{engine}{waiting} // -1) == $n
                       && !$_->{engine}{stale} } @$s;
}

ok wait_until(sub { reported(3) }, 5), 'both engines report 3 waiting';

# 1.
my $c = $ng->conn;
$c->send(POST => '/x', body => rnd(500));
ok wait_until(sub { $ng->waiting == 1 }, 5), 'a request waits';
sleep 0.5;
is $ng->waiting, 1, 'and goes on waiting while both engines have a queue';

# 2.
my $t0 = time;
page(b2 => 0);
my $r = $c->read(10);
my $took = time - $t0;
is $r->{status}, 200, 'released';
is $r->{body}, "b2\n", 'to b2, whose engine has no queue';
ok $took < 1, sprintf('%.2f s after its engine reported none', $took);
$c->close;
is $ng->waiting, 0, 'nothing waits';

# 3.
$t0 = time;
$r = $ng->request(POST => '/x', body => rnd(500));
is $r->{body}, "b2\n", 'the next goes to b2 at once';
ok time - $t0 < 0.5, 'without waiting';

# 4.
page(b2 => 3);
ok wait_until(sub { reported(3) }, 5), 'both report a queue again';
page(b2 => undef);
ok wait_until(sub {
       my $s = $ng->status->{servers} or return 0;
       grep { $_->{engine}{failing} } @$s;
   }, 5), 'b2\'s poll fails';
$t0 = time;
$r = $ng->request(POST => '/x', body => rnd(500));
is $r->{status}, 200, 'a request goes';
ok time - $t0 < 0.5, 'at once: a failing report is no queue';

my $q = $ng->status->{queue};
is $q->{released}, 1, '1 released';

$ng->stop;
$be->stop;

done_testing;
