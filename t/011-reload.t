# nginx -s reload (HUP) while requests are in flight: the requests finish,
# the new workers see the in-flight counts of the old ones (the shared zone
# is kept), the same keys route to the same servers afterwards, and every
# count is back to 0 once the old workers are gone.  A reload that adds a
# server keeps the counts of the servers that stay, and moves keys only to
# the new server.
#
# threshold=1, so a request whose first choice has anything in flight
# spills: "route:affinity, first in flight:0" in the debug log shows a count
# of 0, and so does the status endpoint (prefix_aware_status).  The backends
# run in a nginx of their own; "/slow3" answers after about three seconds.

use strict;
use JSON::PP ();
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until ID_HEADER);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);
my %name = map { ("127.0.0.1:$port{$_}" => $_) } keys %port;

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'reload', workers => 2);

sub config {
    my @b = @_;
    my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } @b;
    my $listen = $ng->port;
    return <<"_EOC_";
    upstream up {
        prefix_aware index=off length=1024 threshold=1;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_
}

my @bodies;

# where each body goes, one request at a time; and the decisions
sub route_all {
    my $from = $ng->log_size;
    my @to = map { $ng->request(POST => '/t', body => $_)->{body} } @bodies;
    chomp @to;
    return (\@to, $ng->decisions($from));
}

sub idle_ok {
    my ($d, $what) = @_;
    my @bad = grep { $_->{route} ne 'affinity' || $_->{first_inflight} != 0 } @$d;
    ok @$d && !@bad, "$what: every decision is affinity with 0 in flight"
        or diag join "\n", map { $_->{line} } @bad;
}

$ng->start(config(qw(b1 b2 b3)));

# 12 bodies, 4 whose first choice is each backend (the ports, and with them
# the ring, differ from run to run)
my %per;
for my $i (1 .. 200) {
    my $body = "Prompt $i: the shared instructions of tenant $i.";
    my ($b) = $ng->request(POST => '/t', body => $body)->{body} =~ /^(b\d)/;
    next unless $b && ($per{$b} // 0) < 4;
    $per{$b}++;
    push @bodies, $body;
    last if @bodies == 12;
}
is scalar(@bodies), 12, 'found 4 bodies for each backend';

# a larger sample of bodies, for how many keys a new server takes: about a
# quarter; 12 bodies alone are too few for a bound that holds in every run
my @sample = map { "Sample $_: a document that only this request reads." } 1 .. 120;
sub route_sample {
    my @to = map { $ng->request(POST => '/t', body => $_)->{body} } @sample;
    chomp @to;
    return \@to;
}
my $sample_before = route_sample();

my ($before, $d) = route_all();
is scalar(grep { /^b[123]$/ } @$before), 12, 'the bodies are served';
my %seen = map { $_ => 1 } @$before;
is scalar(keys %seen), 3, 'they cover the three backends: ' . join(' ', @$before);
idle_ok($d, 'before the reload');

# holds the 12 bodies in flight on "/slow3"; returns the connections and
# how many of them each backend has, as the decisions say
sub hold {
    my $from = $ng->log_size;
    my @held;
    for my $body (@bodies) {
        my $c = $ng->conn;
        $c->send(POST => '/slow3', body => $body);
        push @held, $c;
    }
    my $d = wait_until { my $d = $ng->decisions($from); @$d >= 12 && $d } 5;
    my %n;
    $n{ $name{ $_->{server} } }++ for @$d;
    return (\@held, \%n, [ map { $name{ $_->{server} } } @$d ]);
}

my ($held, $n, $where) = hold();
is scalar(@$where), 12, '12 requests in flight: ' . join(' ', map { "$_=$n->{$_}" } sort keys %$n);

my $old = $ng->workers;
my $from = $ng->log_size;
$ng->reload;
my $new = $ng->workers;
ok !grep({ my $o = $_; grep { $_ == $o } @$new } @$old), "new workers @$new replace @$old";
ok scalar(@{ $ng->old_workers }), 'the old workers are still finishing their requests';

my $in = $ng->inflight('up') || {};
is_deeply { map { ($name{$_} => $in->{$_}) } keys %$in }, { map { ($_ => $n->{$_} // 0) } qw(b1 b2 b3) },
          "the new workers' status shows the old workers' 12 requests in flight";

# the new workers see the old workers' requests: one probe per backend
my %one;
$one{ $before->[$_] } //= $_ for 0 .. $#bodies;
my @idx = sort { $a <=> $b } values %one;

for my $i (@idx) {
    my $from = $ng->log_size;
    my $r = $ng->request(POST => '/t', body => $bodies[$i]);
    my ($x) = @{ $ng->decisions($from) };
    is $r->{status}, 200, "probe of body $i succeeded";
    ok $x && grep({ $_ == $x->{pid} } @$new), 'decided by a new worker';
    is $x && $x->{first_inflight}, $n->{ $before->[$i] } // 0,
       "it saw the old workers' $n->{ $before->[$i] } requests in flight at its first choice $before->[$i]";
}

my @got = map { $_->read(10) } @$held;
is scalar(grep { $_->{status} == 200 } @got), 12, 'the 12 requests in flight across the reload finished with 200';
is_deeply [ sort map { my $b = $_->{body}; chomp $b; $b } @got ], [ sort @$where ],
          'they were answered by the backends they were sent to';
$_->close for @$held;

ok wait_until(sub { !@{ $ng->old_workers } }, 10), 'the old workers exited';

$in = $ng->inflight('up') || {};
is_deeply [ values %$in ], [0, 0, 0], 'the status shows 0 in flight everywhere';

my ($after, $d2) = route_all();
is_deeply $after, $before, 'after the reload the same bodies go to the same backends';
idle_ok($d2, 'after the reload, all done');

# a reload that adds b4 while requests are in flight
($held, $n, $where) = hold();
is scalar(@$where), 12, '12 requests in flight: ' . join(' ', map { "$_=$n->{$_}" } sort keys %$n);

my $requests = sub {
    my $r = $ng->request(GET => '/status?format=json');
    my $st = eval { JSON::PP::decode_json($r->{body}) } || {};
    return { map { ($name{ $_->{server} } => $_->{requests}) }
             @{ $st->{upstreams}{up}{servers} || [] } };
};
my $old_requests = $requests->();

$from = $ng->log_size;
$ng->reload(config(qw(b1 b2 b3 b4)));

# counters of the servers that stay are kept, the new one starts at zero
my $new_requests = $requests->();
is_deeply [ map { $new_requests->{$_} } qw(b1 b2 b3 b4) ],
          [ (map { $old_requests->{$_} } qw(b1 b2 b3)), 0 ],
          'after the reload: b1-b3 keep their request counters, b4 starts at 0'
    or diag explain [ $old_requests, $new_requests ];

my ($kept, $moved) = (0, 0);
for my $i (0 .. $#bodies) {
    my $from = $ng->log_size;
    my $r = $ng->request(POST => '/t', body => $bodies[$i]);
    my ($x) = @{ $ng->decisions($from) };
    next unless ok $x && $r->{status} == 200, "probe $i after adding b4";

    if ($x->{route} eq 'affinity' && $name{ $x->{server} } eq 'b4') {
        $moved++;
        is $x->{first_inflight}, 0, "probe $i: its key moved to the new b4";
    } else {
        $kept++;
        is $x->{first_inflight}, $n->{ $before->[$i] } // 0,
           "probe $i: its first choice $before->[$i] still counts its $n->{ $before->[$i] } requests from before the reload"
            or diag $x->{line};
    }
}
note "of the 12 probes, $kept stayed and $moved moved to b4";

@got = map { $_->read(10) } @$held;
is scalar(grep { $_->{status} == 200 } @got), 12, 'the requests in flight across the second reload finished';
$_->close for @$held;
ok wait_until(sub { !@{ $ng->old_workers } }, 10), 'the old workers exited';

$in = $ng->inflight('up') || {};
is_deeply [ values %$in ], [0, 0, 0, 0], 'with b4: the status shows 0 in flight everywhere';

($after, $d2) = route_all();
idle_ok($d2, 'with b4, all done');
for my $i (0 .. $#bodies) {
    ok $after->[$i] eq $before->[$i] || $after->[$i] eq 'b4',
       "body $i: $before->[$i] -> $after->[$i] (stays, or moves to the new server)";
}

my $sample_after = route_sample();
my @wrong = grep { $sample_after->[$_] ne $sample_before->[$_]
                   && $sample_after->[$_] ne 'b4' } 0 .. $#sample;
is scalar(@wrong), 0, 'every sample body stays on its server or moves to b4'
    or diag join ' ', map { "$_:$sample_before->[$_]->$sample_after->[$_]" } @wrong;
my $to_b4 = grep { $sample_after->[$_] eq 'b4' } 0 .. $#sample;
ok $to_b4 >= 6 && $to_b4 <= 60,
   "b4 took some of the 120 sample keys and at most half ($to_b4; a quarter expected)";

unlike scalar $ng->log, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing();
