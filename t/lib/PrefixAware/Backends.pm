package PrefixAware::Backends;

# The backends of the Test::Nginx::Socket-format suites (t/00*.t): server
# blocks of the test nginx itself, on fixed loopback ports next to the
# default 1984, each answering with its own name, so that a response says
# which backend served it:
#
#     b1 127.0.0.1:1985   b2 127.0.0.1:1986   b3 127.0.0.1:1987
#     b4 127.0.0.1:1988   nothing listens on 127.0.0.1:1990 (refused)
#
#     location /      return 200 "bN\n" at once
#     location /slow  the same "bN\n" after about one second: limit_rate 1k
#                     and 1.1 KB of response headers hold the rest of the
#                     response back for a second
#
# The ports are fixed on purpose: a server's place on the ring depends on
# its "127.0.0.1:PORT" name, and the suites assert which backend a given
# body or id goes to (the expectations were found with the ring of src/ and
# are checked against nginx by the suites themselves).
#
# A suite loads this after Test::Nginx::Socket, so that the runner comes
# from whichever lib/ prove put first:
#
#     use Test::Nginx::Socket 'no_plan';
#     use FindBin;
#     use lib "$FindBin::Bin/lib";
#     use PrefixAware::Backends;
#
# and every block's http_config gets the backend servers appended.

use strict;
use warnings;

use Exporter 'import';

our @EXPORT_OK = qw(backends_config id_header);

our %PORT = (b1 => 1985, b2 => 1986, b3 => 1987, b4 => 1988);
our $REFUSED = 1990;

sub id_header () { 'X-Amzn-SageMaker-Prefix-Aware-Id' }

sub backends_config () {
    my $pad = 'p' x 1100;
    my $conf = "\n    # backends (t/lib/PrefixAware/Backends.pm)\n";

    for my $name (sort keys %PORT) {
        $conf .= <<"_EOC_";
    server {
        listen 127.0.0.1:$PORT{$name};
        access_log off;
        location / {
            return 200 "$name\\n";
        }
        location /slow {
            limit_rate 1k;
            add_header X-Pad $pad;
            return 200 "$name\\n";
        }
    }
_EOC_
    }

    return $conf;
}

Test::Nginx::Socket::add_block_preprocessor(sub {
    my $block = shift;
    my $http_config = $block->http_config;
    $http_config = '' unless defined $http_config;
    $block->set_value(http_config => $http_config . backends_config());
});

1;
