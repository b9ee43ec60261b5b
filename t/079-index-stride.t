# stride=: past the first 8,192 units (64 blocks of 128), the index keeps
# every stride-th block's hash (default 8), so that a long prompt costs
# fewer index records; the matched depth there is a multiple of the
# stride, in blocks as before.
#
# Two upstreams, the default (stride=8) and stride=1 (every block):
# 1. a 40,100-byte body (313 blocks) sent twice: matched 312 blocks with
#    the default (64 + 31 x 8), 313 with stride=1; the index recorded
#    95 hashes a request against 313.
# 2. a 200,000-byte body (1,562 blocks): 1,560 against 1,562.
# 3. a 5,000-byte body (39 blocks, within the head): 39 in both.
# 4. the status page shows each stride.

use strict;
use warnings;

use Test::More;
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port rnd);

my %port = map { $_ => free_port() } qw(b1 b2 b3 b4);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'index-stride');
my $listen = $ng->port;
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" }
                           sort keys %port;

$ng->start(<<"_EOC_");
    upstream thin {
        prefix_aware index=1m;
$servers    }

    upstream every {
        prefix_aware index=1m stride=1;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        client_body_buffer_size 256k;
        client_max_body_size 1m;
        add_header X-Depth \$prefix_aware_depth;
        location /t/ { proxy_pass http://thin/; }
        location /e/ { proxy_pass http://every/; }
        location = /status { prefix_aware_status; }
    }
_EOC_

srand(79);


sub send_body {
    my ($path, $body) = @_;
    my $r = $ng->request(POST => $path, body => $body);
    my ($b) = $r->{body} =~ /^(b\d)$/m;
    return ($b // "status $r->{status}", $r->{headers}{'x-depth'} // '');
}

sub index_of {
    my ($u) = @_;
    my $st = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
    return $st->{upstreams}{$u}{index};
}

# 1.
my $body = rnd(40100);
my ($x, $d) = send_body('/t/', $body);
is $d, '0', 'a new body matches nothing';
is index_of('thin')->{recorded}, 95,
    'stride=8: 95 hashes recorded for 313 blocks';
my ($y, $d2) = send_body('/t/', $body);
is $y, $x, "stride=8: again to $x";
is $d2, '312', '... matched 312 blocks (64 + 31 x 8)';

(undef, $d) = send_body('/e/', $body);
is index_of('every')->{recorded}, 313, 'stride=1: 313 recorded';
(undef, $d) = send_body('/e/', $body);
is $d, '313', '... matched 313 blocks';

# 2.
my $long = rnd(200000);
send_body('/t/', $long);
(undef, $d) = send_body('/t/', $long);
is $d, '1560', 'a 200,000-byte body: 1,560 blocks with stride=8';
send_body('/e/', $long);
(undef, $d) = send_body('/e/', $long);
is $d, '1562', '... 1,562 with stride=1';

# 3.
my $short = rnd(5000);
send_body('/t/', $short);
(undef, $d) = send_body('/t/', $short);
is $d, '39', 'a 5,000-byte body: 39 blocks with stride=8';
send_body('/e/', $short);
(undef, $d) = send_body('/e/', $short);
is $d, '39', '... and with stride=1';

# 4.
is index_of('thin')->{stride}, 8, 'the status page: stride 8 by default';
is index_of('every')->{stride}, 1, '... and stride=1 where written';

$ng->stop;
$be->stop;

done_testing;
