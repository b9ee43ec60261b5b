# queue= with model sets: the queue counts a request's own servers.  A
# request waits exactly while every server of its model is at its bounds,
# is released when one of ITS servers has room, and a request that cannot
# use a free place does not hold back one after it that can.  Two models
# of two servers each (threshold=1): "busy" on a1, a2 and "idle" on b1,
# b2; the backends answer with their name, "/slow" after about 1 s,
# "/slow2" after 2, "/slow3" after 3.
#
# 1. "busy" saturated, two of its requests waiting: requests for "idle"
#    never wait (answered at once, by b1 or b2, $prefix_aware_wait 0).
# 2. the waiting "busy" requests are released as a1, a2 free, and go to
#    a1 or a2 (never to the idle model's servers).
# 3. both saturated (a1, a2 for 3 s; b1 for 1 s, b2 for 3 s), a "busy"
#    request waiting first and an "idle" one after: when b1 frees (1 s)
#    the "idle" one goes, though the "busy" one is ahead of it in the
#    order and that one free place is the only one; the "busy" one when
#    a1 frees (3 s).
# 4. the same across two workers (the "busy" one in worker A, the "idle"
#    one in worker B).

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

my %port = map { $_ => free_port() } qw(a1 a2 b1 b2);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                       sort keys %port;

my $ng = PrefixAware::Scenario->new(name => 'qmodels', workers => 2);
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    log_format wait '\$status \$prefix_aware_wait \$request_uri \$upstream_addr \$prefix_aware_model';

    upstream up {
        prefix_aware index=off threshold=1 queue=16 queue_timeout=20s
                     model_header=X-Model;
        prefix_aware_model busy 127.0.0.1:$port{a1} 127.0.0.1:$port{a2};
        prefix_aware_model idle 127.0.0.1:$port{b1} 127.0.0.1:$port{b2};
$servers    }

    server {
        listen 127.0.0.1:$listen reuseport;
        access_log logs/wait.log wait;
        location = /pid { access_log off; return 200 "\$pid\\n"; }
        location = /status { access_log off; prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

my %name_of = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

sub status {
    my $r = $ng->request(GET => '/status?format=json');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return {};
    return $st->{upstreams}{up}{queue} || {};
}

sub waiting { status()->{waiting} // -1 }

# n requests for a model, each on its own connection (of a worker if given)
sub send_n {
    my ($n, $model, $path, $worker) = @_;
    my @c = map { $worker ? $ng->conn_on($worker) : $ng->conn } 1 .. $n;
    for my $i (0 .. $#c) {
        $c[$i]->send(GET => "$path?m=$model&n=$i",
                     headers => [ 'X-Model', $model ]);
        sleep 0.1;
    }
    return @c;
}

sub body_name { my ($r) = @_; ($r->{body} // '') =~ /^(\w+)/ ? $1 : '' }

# 1. the idle model never waits while the busy one is saturated

my $t0 = time;
my @run = send_n(2, 'busy', '/slow2');
my @wait = send_n(2, 'busy', '/slow2');
ok wait_until(sub { waiting() == 2 }, 5), '2 requests of "busy" wait';

my $st = status();
my $released = $st->{released};

my @idle;
for my $i (1 .. 6) {
    my $t1 = time;
    my $r = $ng->request(GET => "/?idle=$i", headers => [ 'X-Model', 'idle' ]);
    push @idle, [ $r->{status}, body_name($r), time - $t1 ];
}
is_deeply [ map { $_->[0] } @idle ], [ (200) x 6 ],
          '6 requests of "idle" answered 200';
is_deeply [ grep { $_->[1] !~ /^b[12]$/ } @idle ], [],
          'all by the idle model\'s servers';
my @slow = grep { $_->[2] > 0.5 } @idle;
is scalar(@slow), 0, sprintf('none waited (the longest %.2f s)',
                              (sort { $b <=> $a } map { $_->[2] } @idle)[0]);
$st = status();
is $st->{waiting}, 2, 'the 2 of "busy" still wait';
is $st->{released}, $released + 6,
   'the 6 of "idle" took a place behind them and went at once (released)';

# 2. the busy ones are released as their servers free, to their servers

my @r = map { $_->read(15) } @run, @wait;
$_->close for @run, @wait;
is_deeply [ map { $_->{status} } @r ], [ (200) x 4 ],
          'the 4 requests of "busy" answered 200';
is_deeply [ grep { !/^a[12]$/ } map { body_name($_) } @r ], [],
          'all by the busy model\'s servers';
my $took = time - $t0;
ok $took >= 3.5, sprintf('the waiting ones after the first (%.1f s)', $took);
$st = status();
is $st->{released}, $released + 8, 'the 2 of "busy" released';
is $st->{waiting}, 0, 'nothing waits';

my @log;
wait_until {
    @log = do { open my $fh, '<', $ng->root . '/logs/wait.log'; <$fh> };
    (grep { /m=busy/ } @log) == 4;
} 5;
my @waits = map { /^200 (\d+) \S*m=busy/ ? $1 : () } @log;
is scalar(grep { $_ >= 1000 } @waits), 2, "2 waited (\$prefix_aware_wait @waits)";
my @idle_waits = map { /^200 (\d+) \S*idle=/ ? $1 : () } @log;
is_deeply [ grep { $_ != 0 } @idle_waits ], [], '"idle" waited 0 ms';

# 3. both saturated: a waiting "busy" one does not hold back "idle"

sub order_case {
    my ($label, $wa, $wb) = @_;

    my @a = send_n(2, 'busy', '/slow3', $wa);
    my @b = (send_n(1, 'idle', '/slow', $wb), send_n(1, 'idle', '/slow3', $wb));
    my ($wbusy) = send_n(1, 'busy', '/', $wa);
    ok wait_until(sub { waiting() == 1 }, 5), "$label: \"busy\" waits first";
    my $t1 = time;
    my ($widle) = send_n(1, 'idle', '/', $wb);
    ok wait_until(sub { waiting() == 2 }, 5), "$label: then \"idle\"";

    my $ri = $widle->read(10);
    my $ti = time - $t1;
    is $ri->{status}, 200, "$label: \"idle\" answered 200";
    like body_name($ri), qr/^b[12]$/, "$label: by b1 or b2";
    ok $ti < 2, sprintf('%s: when b1 freed (%.2f s), not a1, a2 or b2',
                        $label, $ti);

    my $rb = $wbusy->read(10);
    my $tb = time - $t1;
    is $rb->{status}, 200, "$label: \"busy\" answered 200";
    like body_name($rb), qr/^a[12]$/, "$label: by a1 or a2";
    ok $tb > 1.8, sprintf('%s: when a1 or a2 freed (%.2f s)', $label, $tb);

    $_->read(10) for @a, @b;
    $_->close for @a, @b, $wbusy, $widle;
    ok wait_until(sub { waiting() == 0 }, 5), "$label: nothing waits";
}

order_case('one worker', undef, undef);

# 4. across workers

my ($w1, $w2) = @{ $ng->workers };
ok $w1 && $w2, 'two workers';
order_case('two workers', $w1, $w2);

my @bad = grep { /\[(alert|crit|emerg)\]|exited on signal/ } $ng->log;
is_deeply \@bad, [], "no alert, crash";

$ng->stop;
$be->stop;

done_testing;
