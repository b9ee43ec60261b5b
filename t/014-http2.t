# The key does not depend on the protocol: the same body and id over
# HTTP/2 (h2c, prior knowledge, with curl) have the hash and the backend
# they have over HTTP/1.1, whether the body stays in memory or goes to a
# temp file; a bad id gets the same 400.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port ID_HEADER);

# without curl the suite fails: `make deps-test` installs it
my $curl_v = `curl -V 2>/dev/null`;
if (!ok $curl_v =~ /\bHTTP2\b/,
        'curl with HTTP/2 is installed (Debian package curl: make deps-test)')
{
    done_testing();
    exit;
}

my %port = map { $_ => free_port() } qw(b1 b2 b3);

my $be = PrefixAware::Scenario->new(name => 'backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'http2');
my $h1 = $ng->port;
my $h2 = free_port();
my $servers = join '', map { "        server 127.0.0.1:$port{$_};\n" } sort keys %port;

my $front = <<'_EOC_';
        location /mem {
            client_body_buffer_size 128k;
            proxy_pass http://up;
            add_header X-Hash $prefix_aware_hash always;
            add_header X-Route $prefix_aware_route always;
        }
        location /file {
            client_body_buffer_size 1k;
            proxy_pass http://up;
            add_header X-Hash $prefix_aware_hash always;
            add_header X-Route $prefix_aware_route always;
        }
_EOC_

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware index=off length=65536;
$servers    }

    server {
        listen 127.0.0.1:$h1;
        client_max_body_size 1m;
$front    }

    server {
        listen 127.0.0.1:$h2 http2;
        client_max_body_size 1m;
$front    }
_EOC_

my $big = join '', map { sprintf "%05d:the long shared system prompt;", $_ } 0 .. 1999;

my $tmp = $ng->root . '/body';

sub h2 {
    my ($path, $body, @h) = @_;
    my @cmd = ('curl', '-s', '-S', '--http2-prior-knowledge', '-D', '-', '-o', "$tmp.out");
    if (defined $body) {
        open my $fh, '>', $tmp or die $!;
        print $fh $body;
        CORE::close($fh);
        push @cmd, '--data-binary', "\@$tmp";
    }
    push @cmd, '-H', $_ for @h;
    push @cmd, "http://127.0.0.1:$h2$path";

    open my $p, '-|', @cmd or die "curl: $!";
    my $head = do { local $/; <$p> };
    CORE::close($p);

    my %r = (headers => {});
    ($r{proto}, $r{status}) = $head =~ m{^(HTTP/\S+) (\d+)};
    $r{headers}{lc $1} = $2 while $head =~ /^([^:\r\n]+):\s*([^\r\n]*)/mg;
    open my $fh, '<', "$tmp.out" or die $!;
    $r{body} = do { local $/; <$fh> } // '';
    CORE::close($fh);
    return \%r;
}

sub h1 {
    my ($path, $body, @h) = @_;
    return $ng->request(defined $body ? 'POST' : 'GET', $path, body => $body,
                        headers => [ map { split /:\s*/, $_, 2 } @h ]);
}

my @cases = (
    [ 'a short body', '/mem', 'What is the capital of France?' ],
    [ 'a short body and an id', '/mem', 'What is the capital of France?', ID_HEADER . ': tenant-a' ],
    [ 'a 72 KB body in memory', '/mem', $big ],
    [ 'a 72 KB body in a temp file', '/file', $big ],
);

for my $case (@cases) {
    my ($what, $path, $body, @h) = @$case;
    my $r1 = h1($path, $body, @h);
    my $r2 = h2($path, $body, @h);

    is $r2->{proto}, 'HTTP/2', "$what: HTTP/2 was used";
    (my $served = $r1->{body}) =~ s/\n//g;
    is_deeply [ $r2->{status}, $r2->{headers}{'x-hash'}, $r2->{body} ],
              [ $r1->{status}, $r1->{headers}{'x-hash'}, $r1->{body} ],
              "$what: the same status, hash and backend over HTTP/1.1 and HTTP/2"
              . " ($r1->{headers}{'x-hash'}, $served)";
    like $r1->{headers}{'x-hash'} // '', qr/^[0-9a-f]{16}$/, "$what: keyed";
}

is scalar(grep { /a client request body is buffered to a temporary file/ } $ng->log), 2,
   'the 72 KB body went to a temp file over both protocols';

my $r = h2('/mem', 'hello', ID_HEADER . ': ' . ('x' x 65));
is_deeply [ $r->{status}, $r->{body} ], [ 400, "id is longer than 64 characters\n" ],
          'HTTP/2: an id of 65 characters gets the 400';

$r = h2('/mem', undef);
is_deeply [ $r->{status}, $r->{headers}{'x-route'} ], [ 200, 'no_key' ],
          'HTTP/2: a GET without id: no key';

my @alerts = grep { /\[(?:alert|crit|emerg|error)\]/ } $ng->log;
ok !@alerts, 'no error in the log' or diag join "\n", @alerts;

$ng->stop;
$be->stop;

done_testing();
