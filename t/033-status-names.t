# Names with the characters the formats escape, and pages of any size.
#
# nginx.conf takes any byte in a quoted upstream name, with \", \\, \n and
# \t as escapes, and a server named by a unix socket path can hold them
# too (a host name or an address cannot): the JSON decodes to the exact
# names, the Prometheus text escapes them in label values as the text
# format asks (\\, \", \n) and passes promtool.  The status page is
# written into buffers that grow as it does: a page of megabytes (50
# upstreams of 40 servers, names of about 200 characters, most of them
# escaped) and a line longer than the first buffer come out whole, with
# a Content-Length that is their size.  A plain Test::More scenario (see
# t/lib/PrefixAware/Status.pm); without promtool the suite fails.

use strict;
use warnings;

use Test::More;
use File::Temp ();
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Status;

my $promtool = $ENV{PROMTOOL} || 'promtool';
if (!ok system("command -v $promtool >/dev/null 2>&1") == 0,
        "$promtool is installed (Debian package prometheus: make deps-test)")
{
    done_testing;
    exit;
}

# a string as a quoted nginx.conf parameter
sub conf_quote {
    my $s = shift;
    $s =~ s/([\\"])/\\$1/g;
    $s =~ s/\n/\\n/g;
    $s =~ s/\t/\\t/g;
    return qq("$s");
}

# the page in both formats: the JSON decoded, the text, and that each
# came whole (Content-Length is the body's size, a HEAD says the same)
sub pages {
    my ($ngx, $what) = @_;
    my %page;
    for my $format (qw(json prometheus)) {
        my $r = $ngx->request(GET => "/status?format=$format");
        my $h = $ngx->request(HEAD => "/status?format=$format");
        is $r->{status}, 200, "$what: $format is 200";
        is $r->{headers}{'content-length'}, length $r->{body},
           "$what: $format: Content-Length is the size of the body ("
           . length($r->{body}) . ' bytes)';
        is $h->{headers}{'content-length'}, length $r->{body},
           "$what: $format: HEAD has the same Content-Length";
        $page{$format} = $r->{body};
    }
    my $json = eval { JSON::PP->new->decode($page{json}) };
    ok $json, "$what: the JSON decodes" or diag $@;
    return ($json, $page{prometheus});
}

# the text passes promtool, and says what the JSON says
sub prometheus_ok {
    my ($ngx, $what, $json, $text) = @_;
    my ($rc, $lint) = $ngx->promtool($text);
    is $rc, 0, "$what: promtool check metrics accepts the text";
    is $lint, '', "$what: promtool has nothing to say" or diag $lint;
    my ($v) = PrefixAware::Status::parse_prometheus($text);
    my @problems = PrefixAware::Status::compare_samples(
        $v, PrefixAware::Status::prometheus_from_json($json));
    is_deeply \@problems, [], "$what: every sample is the JSON figure, and there is no other"
        or diag join "\n", @problems[0 .. ($#problems < 9 ? $#problems : 9)];
    return $v;
}

my $dir = File::Temp::tempdir('pa033-XXXXXX', TMPDIR => 1,
                              CLEANUP => !$ENV{TEST_NGINX_NO_CLEAN});
my $port = PrefixAware::Status::free_port();

# --- names with ", \, a line feed, a tab, braces, UTF-8 -----------------

{
    my $up = qq(odd "q" back\\slash\nline\ttab {x}=,\xc3\xa9);
    my $sock = qq($dir/b "q" \\ \n.sock);
    my ($qup, $qsock, $qpass) = map { conf_quote($_) } $up, "unix:$sock", "http://$up";

    my $ngx = PrefixAware::Status->start(http => <<"_EOC_", locations => <<"_EOC_");
    upstream $qup {
        prefix_aware index=off length=1024;
        server $qsock;
        server 127.0.0.1:$port;
    }
    server {
        listen $qsock;
        listen 127.0.0.1:$port;
        access_log off;
        location / {
            return 200 "ok\\n";
        }
    }
_EOC_
        location / {
            proxy_pass $qpass;
            # the default, the upstream's name, is no valid Host
            proxy_set_header Host localhost;
        }
_EOC_

    my %status;
    for my $i (1 .. 20) {
        $status{ $ngx->request(POST => '/invocations', body => "body $i")->{status} }++;
    }
    is_deeply \%status, { 200 => 20 }, "names: 20 requests served" or diag explain \%status;

    my ($json, $text) = pages($ngx, 'names');
    is_deeply [ keys %{ $json->{upstreams} } ], [ $up ], 'names: the upstream is named exactly';
    my $u = $json->{upstreams}{$up};
    is_deeply [ map { $_->{server} } @{ $u->{servers} } ], [ "unix:$sock", "127.0.0.1:$port" ],
              'names: the servers are named exactly';
    is_deeply [ map { $_->{address} } @{ $u->{servers} } ], [ "unix:$sock", "127.0.0.1:$port" ],
              '... and so are their addresses';
    my @rq = map { $_->{requests} } @{ $u->{servers} };
    ok $rq[0] > 0 && $rq[1] > 0 && $rq[0] + $rq[1] == 20,
       "names: both servers had requests: @rq";

    my $v = prometheus_ok($ngx, 'names', $json, $text);
    my $sample = 'nginx_prefix_aware_server_requests_total'
        . qq({upstream="odd \\"q\\" back\\\\slash\\nline\ttab {x}=,\xc3\xa9",)
        . qq(server="unix:$dir/b \\"q\\" \\\\ \\n.sock"});
    like $text, qr/^\Q$sample\E $rq[0]$/m, 'names: a sample with its labels escaped, as written';
    is scalar(grep { /^nginx_prefix_aware_server_routed_total\{/ } keys %$v), 10,
       'names: 10 routed samples, none cut at a quote or a line feed';

    $ngx->stop;
    unlike $ngx->error_log, qr/\[(?:alert|crit|emerg)\]/, 'names: no alert in the error log';
}

# --- 50 upstreams of 40 servers, long names ------------------------------

{
    my (@ups, $http);
    for my $i (1 .. 50) {
        # 200 characters, 120 of them escaped in both formats
        my $name = sprintf('upstream %02d ', $i) . ('"\\' x 60) . ('u' x 68);
        my @srv = map { "unix:/nonexistent/pa033/$i/" . ('s' x 60) . qq( "\\ $_.sock) } 1 .. 40;
        push @ups, [ $name, \@srv ];
        $http .= '    upstream ' . conf_quote($name) . " {\n"
               . "        prefix_aware index=off;\n"
               . join('', map { '        server ' . conf_quote($_) . ";\n" } @srv)
               . "    }\n";
    }

    my $ngx = PrefixAware::Status->start(http => $http, locations => '');
    my ($json, $text) = pages($ngx, 'many');

    is_deeply [ sort keys %{ $json->{upstreams} } ], [ sort map { $_->[0] } @ups ],
              'many: the 50 upstreams, named exactly';
    is_deeply [ map { [ map { $_->{server} } @{ $json->{upstreams}{ $_->[0] }{servers} } ] } @ups ],
              [ map { $_->[1] } @ups ],
              'many: 40 servers each, named exactly, in order';
    ok length($text) > 4 * 1024 * 1024, 'many: the text is ' . length($text)
       . ' bytes (the first buffer is 4096)';

    my $v = prometheus_ok($ngx, 'many', $json, $text);
    is scalar(keys %$v), 50 * 40 + 50 * 40 * 11,
        'many: 40 samples an upstream (4 of them keys by API, 9 stored '
        . 'responses), 11 a server (5 routes)';
    like $text, qr/\n\z/, 'many: the text ends with a whole line';

    $ngx->stop;
    unlike $ngx->error_log, qr/\[(?:alert|crit|emerg)\]/, 'many: no alert in the error log';
}

# --- a line longer than the first buffer ---------------------------------

{
    # 2040 double quotes: 4080 bytes in nginx.conf, within its 4096-byte
    # token; 4080 escaped in a label, so every sample line is longer than
    # the first buffer
    my $name = '"' x 2040;

    my $ngx = PrefixAware::Status->start(http => <<"_EOC_", locations => '');
    upstream ${\ conf_quote($name)} {
        prefix_aware index=off;
        server 127.0.0.1:$port;
    }
_EOC_

    my ($json, $text) = pages($ngx, 'long');
    is_deeply [ keys %{ $json->{upstreams} } ], [ $name ], 'long: the upstream is named exactly';
    my ($line) = $text =~ /^(nginx_prefix_aware_length\{.*)$/m;
    is length($line // ''), length(qq(nginx_prefix_aware_length{upstream=""} 4096)) + 4080,
       'long: the first sample is whole (' . length($line // '') . ' bytes)';
    prometheus_ok($ngx, 'long', $json, $text);

    $ngx->stop;
    unlike $ngx->error_log, qr/\[(?:alert|crit|emerg)\]/, 'long: no alert in the error log';
}

done_testing;
