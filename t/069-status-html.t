# The status page for a person: the status location answers ?format=html,
# and a browser (Accept: text/html), with one self-contained page whose
# script reads the JSON and draws it.  Loaded in a real headless browser
# (Debian's chromium, make deps-test): after its script ran, the page shows
# each upstream, its servers with their state, in-flight requests, routes,
# what the engines' answers said and what other hosts (prefix_aware_sync)
# have in flight on them, and the matched-depth histogram.
# curl (Accept: */*) still gets JSON, Prometheus (text/plain) its text; the
# page names no other file, script or font, and puts names in as text.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port);

my $chromium = $ENV{CHROMIUM} || 'chromium';
if (!ok system("command -v $chromium >/dev/null 2>&1") == 0,
        "$chromium is installed (Debian package chromium: make deps-test)")
{
    done_testing;
    exit;
}

my %port = map { $_ => free_port() } qw(b1 b2 sync peer);
my $key = 'html-page-test-key-0123';

my $be = PrefixAware::Scenario->new(name => 'html-backends');
$be->start($be->backends(%port));

my $ng = PrefixAware::Scenario->new(name => 'html', workers => 2);
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream llm {
        prefix_aware feedback=on;
        prefix_aware_sync 127.0.0.1:$port{sync} "key=$key"
                          peer=127.0.0.1:$port{peer};
        server 127.0.0.1:$port{b1};
        server 127.0.0.1:$port{b2};
    }

    upstream plain {
        prefix_aware index=off;
        server 127.0.0.1:$port{b1};
    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location = /favicon.ico { return 404; }
        location /plain/ { proxy_pass http://plain/; }
        location / { proxy_pass http://llm; }
    }
_EOC_

# a prompt three times: matched twice, 16 blocks of 128 bytes
my $prompt = join '', map { chr(97 + $_ % 26) } 1 .. 2048;
$ng->request(POST => '/x', body => $prompt) for 1 .. 3;
$ng->request(POST => '/plain/x', body => 'hello');

# what curl, Prometheus, a browser and ?format=html get
my $r = $ng->request(GET => '/status');
like $r->{headers}{'content-type'}, qr{^application/json}, 'curl gets JSON';
$r = $ng->request(GET => '/status', headers => [Accept => 'text/plain']);
like $r->{headers}{'content-type'}, qr{^text/plain}, 'text/plain gets Prometheus';

my $accept = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
$r = $ng->request(GET => '/status', headers => [Accept => $accept]);
like $r->{headers}{'content-type'}, qr{^text/html; charset=utf-8}, 'a browser gets the page';
my $page = $r->{body};
$r = $ng->request(GET => '/status?format=html');
is $r->{body}, $page, '?format=html is the same page';
like $page, qr{^<!DOCTYPE html>}, 'an HTML document';
unlike $page, qr{\b(src|href)\s*=|\@import|url\(}i, 'it loads nothing else';
unlike $page, qr{innerHTML|insertAdjacentHTML|document\.write}, 'names go in as text';
is $r->{headers}{'content-length'}, length $page, 'Content-Length';

$r = $ng->request(GET => '/status?format=xml');
is $r->{status}, 400, 'an unknown format is a 400';

# the page in a browser, after its script has read the JSON
my $url = "http://127.0.0.1:$listen/status";
my $dom = `$chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=@{[ $ng->root ]}/chromium --virtual-time-budget=5000 --dump-dom '$url' 2>/dev/null`;
is $? >> 8, 0, 'chromium loaded the page';

(my $text = $dom) =~ s/<[^>]*>/ /g;
$text =~ s/&lt;/</g;
$text =~ s/\s+/ /g;

like $text, qr/2 upstreams, 2 workers, updated/, 'the page read the JSON';
unlike $dom, qr/<div id="err" class="err">[^<]/, 'no error shown';
like $text, qr/upstream llm length 524288, threshold 10, keyed 3/, 'upstream llm';
like $text, qr/upstream plain .* index off/, 'upstream plain, without index';

# the rows of upstream llm (b1 is in upstream plain too)
my ($llm) = $dom =~ m{<h2>upstream llm</h2>(.*?)(?:<h2>|\z)}s;
my @rows = ($llm // '') =~ m{<tr><td class="l">127\.0\.0\.1:(\d+)</td>(.*?)</tr>}g;
my %row = @rows;
ok exists $row{$port{b1}} && exists $row{$port{b2}}, 'a row for each server';

my $json = JSON::PP::decode_json($ng->request(GET => '/status')->{body});
my ($home) = grep { $_->{requests} } @{ $json->{upstreams}{llm}{servers} };
my ($p) = $home->{server} =~ /:(\d+)$/;
my @cells = $row{$p} =~ m{<td>(?:<span[^>]*>)?([^<]*)}g;
is_deeply [ @cells[0 .. 4] ], [ 'up', 0, 0, 3, 3 ],
    'its row: up, nothing in flight, no work, 3 requests, all by affinity'
    or diag "@cells";
is $cells[-3], '0 / 0', 'answers: none confirmed, none short (no usage)';
is $cells[-1], '0 / 0', 'other hosts: none in flight, no work (none heard)';
like $text, qr/sync 127\.0\.0\.1:$port{sync}: 0 of 1 peers heard, load on, sent [1-9]\d*, received 0, refused 0/,
    'the sync line: the peer never answered, the records were sent';
like $text, qr/placed: match 2, cold 1, spill 0, least 0/, 'placements';
like $text, qr/<= 16 2 /, 'the depth histogram: 2 requests matched 16 blocks';

$ng->stop;
$be->stop;

done_testing;
