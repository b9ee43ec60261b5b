# The models zone of an upstream with models=discover keeps a record per
# server name (its last answer to GET /v1/models), kept across reloads of
# the same size.  Records must be freed as the main zone's are (t/041-zone.t)
# once no configuration that a live process runs has the name, so that
# server names that come and go at every reload (pod addresses) do not
# fill the zone: before, after some fifteen reloads of 100 new names the
# zone was full, an alert came at every poll and new servers counted as
# serving every model.
#
# Reloads with 100 servers, each time with other names (PA_MODELS_RELOADS,
# default 40), models_interval=100ms: after each, a poll has written the
# records of the new names; every 10th, once the old workers are gone, the
# zone holds the records of at most the last two configurations (those
# that ran when the master last freed, at the reload), never an alert.
# Then a model listed by the real backend still goes to it.
#
# worker_processes 2; the backends run in a nginx of their own.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Scenario qw(free_port wait_until);
use JSON::PP ();

my $RELOADS = $ENV{PA_MODELS_RELOADS} // 40;

my $port = free_port();
my $be = PrefixAware::Scenario->new(name => 'backends');
my $html = $be->root . '/html';

open my $fh, '>', "$html/models.json" or die "$html: $!\n";
print $fh '{"object":"list","data":[{"id":"lora-a"}]}';
close $fh;

$be->start(<<"_EOC_");
    server {
        listen 127.0.0.1:$port;
        location = /v1/models {
            default_type application/json;
            alias $html/models.json;
        }
        location / { return 200 "b1\\n"; }
    }
_EOC_

my $ng = PrefixAware::Scenario->new(name => 'models-zone', workers => 2);

# b1, then "down" servers: never chosen, but polled (refused at once), so
# each has a record in the models zone
sub config {
    my ($down) = @_;
    my $servers = join '', map { "        server $_ down;\n" } @$down;
    my $listen = $ng->port;
    return <<"_EOC_";
    upstream up {
        prefix_aware index=off models=discover models_interval=100ms
                     model_header=X-Model;
        server 127.0.0.1:$port;
$servers    }

    server {
        listen 127.0.0.1:$listen;
        location = /status { prefix_aware_status; }
        location / { proxy_pass http://up; }
    }
_EOC_
}

sub names {
    my ($round) = @_;
    my $net = sprintf '127.%d.%d', 1 + int($round / 250), $round % 250;
    return [ map { "$net.$_:80" } 1 .. 99 ];
}

# the models zone's server records: { name => record }
sub records {
    my $r = $ng->request(GET => '/status?format=json');
    my $st = eval { JSON::PP::decode_json($r->{body}) } or return;
    return { map { ($_->{server} => $_) }
             @{ $st->{upstreams}{up}{models}{servers} || [] } };
}

sub try_reload {
    my ($http) = @_;
    my %old = map { $_ => 1 } @{ $ng->workers };
    $ng->write_conf($http);
    kill HUP => $ng->master;
    return wait_until {
        my $w = $ng->workers;
        return @$w == 2 && !grep { $old{$_} } @$w;
    } 20;
}

$ng->start(config([]));

my ($took, $polled, $bad, @counts) = (0, 0, 0);
my $start = time;

for my $round (1 .. $RELOADS) {
    my $names = names($round);
    $took++ if try_reload(config($names));

    # a poll of the new names: their records are there, failing
    $polled++ if wait_until {
        my $rec = records() or return 0;
        return !grep { !$rec->{$_} || !$rec->{$_}{failing} } @$names;
    } 5;

    next if $round % 10;

    wait_until { !@{ $ng->old_workers } } 5;

    # the master frees at a reload: one more, to the same names, frees the
    # records of the configurations before
    $took++ if try_reload(config($names));
    wait_until { !@{ $ng->old_workers } } 5;

    my $rec = records() or next;
    push @counts, scalar keys %$rec;
    $bad++ if keys %$rec > 2 * 100;
}

diag sprintf '%d reloads with 99 new server names each in %.0f s; '
           . 'server records every 10th: %s',
     $RELOADS, time - $start, join ' ', @counts;

is $took, $RELOADS + int($RELOADS / 10), 'every reload took effect';
is $polled, $RELOADS, 'after each a poll recorded the new servers';
is $bad, 0, 'every 10th, the zone held the records of at most two configurations';

my $r = $ng->request(GET => '/t', headers => [ 'X-Model' => 'lora-a' ]);
is $r->{body}, "b1\n", 'a model listed by b1 goes to it';

my $rec = records();
ok $rec->{"127.0.0.1:$port"} && !$rec->{"127.0.0.1:$port"}{serves_all},
   'b1 has its list, it does not count as serving every model';

my @alerts = grep { /\[(?:alert|crit|emerg)\]|exited on signal/ } $ng->log;
ok !@alerts, 'no alert (the models zone was never full), no crash'
    or diag join "\n", @alerts[0 .. ($#alerts < 2 ? $#alerts : 2)];

$ng->stop;
$be->stop;

done_testing();
