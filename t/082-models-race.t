# The status page against model slots renamed by another worker's
# discovery poll.  One backend answers GET /v1/models with, in turn, set A
# (128 short ids, half of them with a quote), nothing, set B (128 ids of
# 100 bytes of control characters, newlines and quotes), nothing, ...: the
# empty answers free the slots, so every other poll (models_interval=100ms)
# gives all 128 slots of the models zone to other names, in whichever of
# the two workers wins the round.  Meanwhile the Prometheus and the JSON
# pages are scraped in a loop, from both workers.
#
# Every model name a page shows must be one of the 256 ids, escaped for its
# format (a name read from the zone while it is rewritten is torn: a mix of
# two ids, or an id printed with the escaping of another), no worker may
# exit (the ASan build aborts a worker at a heap overflow: the escaping
# once counted one name's bytes and copied another's), and the error log
# must have no sanitizer report.  Run it with the ASan nginx (RULES.md):
#
#   ASAN_OPTIONS=detect_leaks=0 TEST_NGINX_BINARY=build/asan/nginx/objs/nginx \
#   TEST_NGINX_LOAD_MODULES= prove -I t/lib t/082-models-race.t
#
# PA_RACE_SECONDS (default 20) is how long the pages are scraped.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);

my $SECONDS = $ENV{PA_RACE_SECONDS} // 20;

my @A = map { $_ % 2 ? sprintf('a"%03d', $_) : sprintf('a-%03d', $_) } 0 .. 127;
my @B = map { sprintf('b%03d', $_) . ("\x01\n\"" x 32) } 0 .. 127;
my %known = map { ($_ => 1) } @A, @B;

my $port = free_port();
my $be = PrefixAware::Scenario->new(name => 'backends');
my $html = $be->root . '/html';

sub list {
    my ($f, @ids) = @_;
    open my $fh, '>', "$html/$f" or die "$html/$f: $!\n";
    print $fh JSON::PP->new->ascii->encode(
        { object => 'list', data => [ map { { id => $_ } } @ids ] });
    close $fh;
    die "$f is larger than the 64 KB a poll reads\n" if -s "$html/$f" > 60000;
}

list('a.json', @A);
list('b.json', @B);
list('none.json');

# the backend's connections are numbered in order and a poll is one
# connection: by the number modulo 4 the answers go A, none, B, none, ...
$be->start(<<"_EOC_");
    map \$connection \$models_file {
        "~(^|[02468])[159]\$|[13579][37]\$"  a.json;
        "~(^|[02468])[37]\$|[13579][159]\$"  b.json;
        default                              none.json;
    }

    server {
        listen 127.0.0.1:$port;
        location = /v1/models {
            default_type application/json;
            alias $html/\$models_file;
        }
        location / { return 200 "b1\\n"; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'race', workers => 2);
my $listen = $ng->port;

$ng->start(<<"_EOC_");
    upstream up {
        prefix_aware models=discover models_interval=100ms model_header=X-Model;
        server 127.0.0.1:$port;
    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_

my %workers = map { ($_ => 1) } @{ $ng->workers };

sub status_json {
    my $r = $ng->request(GET => '/status?format=json');
    return eval { JSON::PP::decode_json($r->{body}) };
}

# both sets are taken in turn
my %seen;
ok wait_until(sub {
    my $st = status_json() or return 0;
    for my $m (@{ $st->{upstreams}{up}{models}{list} || [] }) {
        $seen{ substr($m->{name}, 0, 1) } = 1;
    }
    return $seen{a} && $seen{b};
}, 10), 'the models zone holds set A, then set B';

# the pages, scraped in a loop: the names are picked out of the text (a
# decoder in Perl would read a page in the time of a hundred scrapes)

my $json = JSON::PP->new->ascii->allow_nonref;
my ($pages, $names, @bad) = (0, 0);
my $start = time;

while (time - $start < $SECONDS && @bad < 5) {
    my $prom = ($pages++ % 4) != 3;
    my $r = $ng->request(GET => '/status?format=' . ($prom ? 'prometheus' : 'json'));

    if ($r->{status} != 200) {
        push @bad, "status $r->{status}";
        next;
    }

    if ($prom) {
        my @lines = $r->{body} =~ /^(nginx_prefix_aware_model_.*)$/mg;

        for my $line (@lines) {
            my ($name) = $line =~ /^nginx_prefix_aware_model_[a-z_]+\{upstream="up",model="((?:[^"\\\n]|\\[\\"n])*)"(?:,server="[^"]*"|,set="[a-z]+")?\} \d+$/;

            if (!defined $name) {
                push @bad, 'prometheus: a line that does not parse: '
                           . $json->encode($line);
                last;
            }

            $name =~ s/\\(.)/$1 eq 'n' ? "\n" : $1/ge;
            $names++;

            if (!$known{$name}) {
                push @bad, 'prometheus: a torn name: ' . $json->encode($name);
                last;
            }
        }

        next;
    }

    my ($list) = $r->{body} =~ /"list": \[(.*?)\n        \],\n        "servers"/s;

    if (!defined $list || $r->{body} =~ /[\x00-\x09\x0b-\x1f]/) {
        push @bad, 'json: the page is not JSON';
        next;
    }

    for my $e ($list =~ /\{ "name": ("(?:[^"\\]|\\.)*"), "set"/g) {
        my $name = eval { $json->decode($e) };
        $names++;

        if (!defined $name || !$known{$name}) {
            push @bad, "json: a torn name: $e";
            last;
        }
    }
}

diag sprintf '%d pages, %d model names in %.1fs', $pages, $names, time - $start;

is join("\n", @bad), '', 'every name on every page is one of the ids, whole and escaped';

# the error log (at debug level: large), line by line: worker exits,
# alerts, and the first sanitizer report (a worker's stderr goes there):
# AddressSanitizer's, or UndefinedBehaviorSanitizer's in the module's code
# (nginx 1.22's own debug log passes a NULL string of length 0 to memcpy,
# "http exten", which is not this test's business)
my (@exits, @alerts, @report);
open my $log, '<', $ng->errlog or die $ng->errlog . ": $!\n";
while (my $line = <$log>) {
    push @exits, $line if $line =~ /exited on signal|exited with code/;
    push @alerts, $line if $line =~ /\[(?:alert|emerg|crit)\]/;
    push @report, $line if (@report && @report < 40)
                           || $line =~ /^==\d+==ERROR: \w+Sanitizer/
                           || $line =~ m{(?:prefix_aware|/pa_)\w*\.[ch]:\d+:\d+: runtime error:};
}
close $log;

is "@exits", '', 'no worker exited';
is_deeply { map { ($_ => 1) } @{ $ng->workers } }, \%workers, 'the same two workers';
ok !@report, 'no sanitizer report' or diag join '', @report;
is "@alerts", '', 'no alert in the error log';

$ng->stop;
$be->stop;

done_testing;
