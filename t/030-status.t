# prefix_aware_status: after known traffic, the JSON and the Prometheus
# text carry the exact counters; formats, content types, methods and
# access rules; in-flight counts of requests held by slow backends, back
# to 0 when they finish; the three variables in an access log.
#
# Backends a1, a2, a3 are servers of the test nginx on 127.0.0.1:1994..1996
# answering "aN\n", at once on any path but /slow, where the answer takes
# about a second (limit_rate 1k after 1.1 KB of headers).  The servers
# that keys go to were found with the ring of src/ for these fixed ports
# and are checked here, request by request.

use Test::Nginx::Socket 'no_plan';

our %PORT = (a1 => 1994, a2 => 1995, a3 => 1996);
our $ID = 'X-Amzn-SageMaker-Prefix-Aware-Id';

our $BACKENDS = '';
for my $name (sort keys %PORT) {
    my $pad = 'p' x 1100;
    $BACKENDS .= <<"_EOC_";
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

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(http_config => ($block->http_config // '') . $BACKENDS);
});

our $X = '{"model":"llama-3.1-8b-instruct","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Name three primes."}],"max_tokens":16}';
our $Y = 'raw invocation body: summarize the following text ...';

# --- expected status -----------------------------------------------------

# An upstream's expected state: (name, { settings and counters }, servers)
# where a server is [name, weight, state, inflight, requests, affinity,
# spill, failover, no_key].  Buckets not given are 0.
sub up {
    my ($name, $c, @servers) = @_;
    my @b = @{ $c->{buckets} // [] };
    push @b, 0 while @b < 13;
    return { name => $name, %$c, buckets => \@b, servers => \@servers };
}

# the JSON document, compact, in the module's order
sub status_json {
    my @ups = @_;
    my @u;
    for my $u (@ups) {
        my @s = map {
            my ($n, $w, $st, $if, $rq, $af, $sp, $fo, $nk, $sr) = @$_;
            $sr //= 0;
            qq({"server":"$n","address":"$n","weight":$w,"state":"$st","inflight":$if,)
            . qq("requests":$rq,"affinity":$af,"spill":$sp,"failover":$fo,"no_key":$nk,)
            . qq("state_routed":$sr})
        } @{ $u->{servers} };
        # the OpenAI keys by API: all chat unless given
        my $a = $u->{apis} // [$u->{keys}[2], 0, 0, 0];
        push @u, qq("$u->{name}":{"length":$u->{length},"threshold":$u->{threshold},)
            . qq("format":"$u->{format}","keys":{"none":$u->{keys}[0],"body":$u->{keys}[1],"openai":$u->{keys}[2]},)
            . qq("apis":{"chat":$a->[0],"completions":$a->[1],"responses":$a->[2],"messages":$a->[3]},)
            . qq("id":$u->{id},"openai_fallbacks":$u->{openai_fallbacks},"unbuffered":$u->{unbuffered},)
            . qq("rejected":$u->{rejected},"invalid_cache_key":$u->{invalid_cache_key},"keyed":$u->{keyed},"first_choice_usable":$u->{first_choice_usable},)
            . qq("first_choice_inflight":{"buckets":[) . join(',', @{ $u->{buckets} }) . qq(],)
            . qq("le":[0,1,2,4,8,16,32,64,128,256,512,1024,"+Inf"],"sum":$u->{sum}},)
            . qq("responses":{"capacity":65536,"size":0,"evicted":0,"learned":0,"synced":0,)
            . qq("rejected":0,"state":0,"state_lost":0,"unknown":0,"server_lost":0},)
            . qq("servers":[) . join(',', @s) . ']}';
    }
    return '{"version":1,"zone":ZONE,"upstreams":{' . join(',', @u) . '}}';
}

# a pattern matching that JSON with any white space between tokens; ZONE
# stands for the zone's figures (sizes and record counts)
sub json_re {
    my $json = shift;
    my $tok = qr/("(?:[^"\\]|\\.)*"|-?\d+|true|false|null|[{}\[\],:])/;
    my @re;
    for my $part (split /ZONE/, $json, -1) {
        my @tok = $part =~ /$tok/g;
        die "json_re: cannot split $json" if join('', @tok) ne $part;
        push @re, join '\s*', map { quotemeta } @tok;
    }
    return join '\s*\{[^{}]*\}\s*', @re;
}

# the Prometheus samples (not the comments), in the module's order
sub status_prom {
    my @ups = @_;
    my @l;
    my $ul = sub { qq(upstream="$_[0]{name}") };
    my $sl = sub { qq(upstream="$_[0]{name}",server="$_[1][0]") };
    push @l, map { 'nginx_prefix_aware_length{' . $ul->($_) . "} $_->{length}" } @ups;
    push @l, map { 'nginx_prefix_aware_threshold{' . $ul->($_) . "} $_->{threshold}" } @ups;
    for my $u (@ups) {
        my $i = 0;
        push @l, map { 'nginx_prefix_aware_keys_total{' . $ul->($u) . qq(,source="$_"} ) . $u->{keys}[$i++] } qw(none body openai);
    }
    for my $u (@ups) {
        my $i = 0;
        my $a = $u->{apis} // [$u->{keys}[2], 0, 0, 0];
        push @l, map { 'nginx_prefix_aware_keys_api_total{' . $ul->($u) . qq(,api="$_"} ) . $a->[$i++] } qw(chat completions responses messages);
    }
    for my $m (qw(id openai_fallbacks unbuffered rejected invalid_cache_key keyed first_choice_usable)) {
        push @l, map { "nginx_prefix_aware_${m}_total{" . $ul->($_) . "} $_->{$m}" } @ups;
    }
    for my $u (@ups) {
        my ($cum, $k) = (0, 0);
        for my $le (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, '+Inf') {
            $cum += $u->{buckets}[$k++];
            push @l, 'nginx_prefix_aware_first_choice_inflight_bucket{' . $ul->($u) . qq(,le="$le"} $cum);
        }
        push @l, 'nginx_prefix_aware_first_choice_inflight_sum{' . $ul->($u) . "} $u->{sum}";
        push @l, 'nginx_prefix_aware_first_choice_inflight_count{' . $ul->($u) . "} $cum";
    }
    my @each = map { my $u = $_; map { [$u, $_] } @{ $u->{servers} } } @ups;
    push @l, map { 'nginx_prefix_aware_server_weight{' . $sl->(@$_) . "} $_->[1][1]" } @each;
    for (@each) {
        my ($u, $s) = @$_;
        push @l, map { 'nginx_prefix_aware_server_state{' . $sl->($u, $s) . qq(,state="$_"} ) . ($s->[2] eq $_ ? 1 : 0) } qw(up down failed);
    }
    push @l, map { 'nginx_prefix_aware_server_inflight{' . $sl->(@$_) . "} $_->[1][3]" } @each;
    push @l, map { 'nginx_prefix_aware_server_requests_total{' . $sl->(@$_) . "} $_->[1][4]" } @each;
    for (@each) {
        my ($u, $s) = @$_;
        my $i = 5;
        push @l, map { 'nginx_prefix_aware_server_routed_total{' . $sl->($u, $s) . qq(,route="$_"} ) . ($s->[$i++] // 0) } qw(affinity spill failover no_key state);
    }
    # stored responses (responses=, none in this traffic)
    push @l, map { 'nginx_prefix_aware_responses_capacity{' . $ul->($_) . '} 65536' } @ups;
    push @l, map { 'nginx_prefix_aware_responses_stored{' . $ul->($_) . '} 0' } @ups;
    push @l, map { 'nginx_prefix_aware_responses_evicted_total{' . $ul->($_) . '} 0' } @ups;
    push @l, map { my $u = $_; map { 'nginx_prefix_aware_responses_learned_total{' . $ul->($u) . qq(,source="$_"} 0) } qw(answer sync) } @ups;
    push @l, map { 'nginx_prefix_aware_responses_rejected_total{' . $ul->($_) . '} 0' } @ups;
    push @l, map { 'nginx_prefix_aware_state_total{' . $ul->($_) . '} 0' } @ups;
    push @l, map { my $u = $_; map { 'nginx_prefix_aware_state_lost_total{' . $ul->($u) . qq(,reason="$_"} 0) } qw(unknown server) } @ups;
    return @l;
}

# a pattern for the whole Prometheus text: exactly these samples, in this
# order, each family with its HELP and TYPE
sub prom_re {
    my @samples = @_;
    my $re = '\A';
    my $family = '';
    for my $s (@samples) {
        my ($name) = $s =~ /^(\w+)\{/;
        $name =~ s/_(?:bucket|sum|count)$// if $name =~ /first_choice_inflight/;
        if ($name ne $family) {
            $re .= "# HELP \Q$name\E [^\\n]+\\n# TYPE \Q$name\E (?:gauge|counter|histogram)\\n";
            $family = $name;
        }
        $re .= "\Q$s\E\\n";
    }
    return qr/$re\z/;
}

# the traffic of TEST 1 and TEST 2, and the state it leaves
our @TRAFFIC = (
    [ "POST /v1/chat/completions\n$X", '' ],
    [ "POST /v1/chat/completions\n$X", '' ],
    [ "POST /v1/chat/completions\n$X", '' ],
    [ "POST /invocations\n$Y", '' ],
    [ "POST /invocations\n$Y", '' ],
    [ "GET /v1/models", '' ],
    [ "POST /v1/completions\n{\"prompt\": not json", '' ],
    [ "POST /v1/chat/completions\n" . substr($X, 0, -1) . ',"prompt_cache_key":"tenant-1"}', '' ],
    [ "POST /invocations\n$Y", "$ID: tenant-1" ],
    [ "POST /v1/chat/completions\n$X", "$ID: " ],
    [ "POST /v1/chat/completions\n" . substr($X, 0, -1) . ',"prompt_cache_key":42}', '' ],
    [ "GET /v1/models", "$ID: t-1" ],
);
our @TRAFFIC_OUT = (
    [ 200, "a2\n", 'affinity' ], [ 200, "a2\n", 'affinity' ], [ 200, "a2\n", 'affinity' ],
    [ 200, "a2\n", 'failover' ], [ 200, "a2\n", 'failover' ],
    [ 200, "a2\n", 'no_key' ],
    [ 200, "a2\n", 'failover' ],
    [ 200, "a1\n", 'affinity' ],
    [ 200, "a2\n", 'affinity' ],
    [ 400, "id is empty\n", '' ],
    [ 200, "a2\n", 'affinity' ],
    [ 200, "a1\n", 'failover' ],
);
our $AFTER = up('llm', {
        length => 1024, threshold => 4, format => 'auto',
        keys => [2, 4, 5], id => 3, openai_fallbacks => 1, unbuffered => 0,
        rejected => 1, invalid_cache_key => 1, keyed => 10,
        first_choice_usable => 6, buckets => [10], sum => 0 },
    [ '127.0.0.1:1994', 1, 'up',   0, 2, 1, 0, 1, 0 ],
    [ '127.0.0.1:1995', 2, 'up',   0, 9, 5, 0, 3, 1 ],
    [ '127.0.0.1:1996', 1, 'down', 0, 0, 0, 0, 0, 0 ]);
our $UNUSED = up('other', {
        length => 65536, threshold => 1, format => 'body',
        keys => [0, 0, 0], id => 0, openai_fallbacks => 0, unbuffered => 0,
        rejected => 0, invalid_cache_key => 0, keyed => 0, first_choice_usable => 0, sum => 0 },
    [ '127.0.0.1:1996', 3, 'up', 0, 0, 0, 0, 0, 0 ]);

no_shuffle();
no_root_location();
run_tests();

__DATA__

=== TEST 1: known traffic, then the exact counters in JSON; status requests count nowhere
--- http_config
    upstream llm {
        prefix_aware index=off length=1024 threshold=4;
        server 127.0.0.1:1994;
        server 127.0.0.1:1995 weight=2;
        server 127.0.0.1:1996 down;
    }
    upstream plain {
        server 127.0.0.1:1996;
    }
    upstream other {
        prefix_aware index=off length=65536 threshold=1 format=body;
        server 127.0.0.1:1996 weight=3;
    }
--- config
    location / {
        proxy_pass http://llm;
        add_header X-Route $prefix_aware_route always;
    }
    location = /status {
        prefix_aware_status;
    }
--- pipelined_requests eval
[ (map { $_->[0] } @::TRAFFIC), "GET /status", "GET /status?format=json" ]
--- more_headers eval
[ (map { $_->[1] } @::TRAFFIC), "", "" ]
--- error_code eval
[ (map { $_->[0] } @::TRAFFIC_OUT), 200, 200 ]
--- response_headers eval
[ (map { $_->[2] ? "X-Route: $_->[2]" : "!X-Route" } @::TRAFFIC_OUT),
  "Content-Type: application/json", "Content-Type: application/json" ]
--- response_body eval
my $re = ::json_re(::status_json($::AFTER, $::UNUSED));
[ (map { $_->[1] } @::TRAFFIC_OUT), (qr/\A$re\s*\z/) x 2 ]
--- no_error_log
[error]



=== TEST 2: the same traffic, then the Prometheus text, by ?format=prometheus and by Accept: text/plain
--- http_config
    upstream llm {
        prefix_aware index=off length=1024 threshold=4;
        server 127.0.0.1:1994;
        server 127.0.0.1:1995 weight=2;
        server 127.0.0.1:1996 down;
    }
    upstream other {
        prefix_aware index=off length=65536 threshold=1 format=body;
        server 127.0.0.1:1996 weight=3;
    }
--- config
    location / {
        proxy_pass http://llm;
    }
    location = /status {
        prefix_aware_status;
    }
--- pipelined_requests eval
[ (map { $_->[0] } @::TRAFFIC),
  "GET /status?format=prometheus", "GET /status", "GET /status", "GET /status",
  "GET /status?x=1&format=prometheus&y=2", "GET /status?format=json" ]
--- more_headers eval
[ (map { $_->[1] } @::TRAFFIC),
  "", "Accept: text/plain",
  "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
  "Accept: TEXT/PLAIN", "", "Accept: text/plain" ]
--- response_headers eval
[ ("") x @::TRAFFIC,
  ("Content-Type: text/plain; version=0.0.4; charset=utf-8") x 5,
  "Content-Type: application/json" ]
--- response_body eval
my $prom = ::prom_re(::status_prom($::AFTER, $::UNUSED));
my $json = ::json_re(::status_json($::AFTER, $::UNUSED));
[ (map { $_->[1] } @::TRAFFIC_OUT), ($prom) x 5, qr/\A$json\s*\z/ ]
--- error_code eval
[ (map { $_->[0] } @::TRAFFIC_OUT), (200) x 6 ]
--- no_error_log
[error]



=== TEST 3: a fresh upstream: all zeros; JSON for curl's and API clients' Accept, the page for a browser's (t/069-status-html.t)
--- http_config
    upstream other {
        prefix_aware index=off length=65536 threshold=1 format=body;
        server 127.0.0.1:1996 weight=3;
    }
--- config
    location = /status {
        prefix_aware_status;
    }
--- pipelined_requests eval
[ "GET /status", "GET /status", "GET /status" ]
--- more_headers eval
[ "Accept: */*",
  "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
  "Accept: application/json" ]
--- response_headers eval
[ "Content-Type: application/json", "Content-Type: text/html; charset=utf-8",
  "Content-Type: application/json" ]
--- response_body eval
my $json = ::json_re(::status_json($::UNUSED));
[ qr/\A$json\s*\z/, qr/\A<!DOCTYPE html>.*prefix_aware status/s,
  qr/\A$json\s*\z/ ]
--- no_error_log
[error]



=== TEST 4: HEAD has the headers of GET, and no body
--- http_config
    upstream other {
        prefix_aware index=off length=65536 threshold=1 format=body;
        server 127.0.0.1:1996 weight=3;
    }
--- config
    location = /status {
        prefix_aware_status;
    }
--- request
HEAD /status?format=prometheus
--- response_headers
Content-Type: text/plain; version=0.0.4; charset=utf-8
--- response_body
--- no_error_log
[error]



=== TEST 5: only GET and HEAD: POST, PUT and DELETE are 405; an unknown ?format= is 400 (one connection each: nginx closes after a 400)
--- http_config
    upstream other {
        prefix_aware index=off length=65536 threshold=1 format=body;
        server 127.0.0.1:1996 weight=3;
    }
--- config
    location = /status {
        prefix_aware_status;
    }
--- request eval
[ "POST /status\nsome body", "PUT /status\nx", "DELETE /status",
  "GET /status?format=xml", "GET /status?format=", "GET /status?format=JSON",
  "GET /status?format=prometheus2", "GET /status?format=json" ]
--- more_headers eval
[ ("") x 3, ("Accept: text/plain") x 5 ]
--- error_code eval
[ 405, 405, 405, 400, 400, 400, 400, 200 ]
--- response_headers eval
[ ("") x 7, "Content-Type: application/json" ]
--- response_body_like eval
[ ("405 Not Allowed") x 3, ("400 Bad Request") x 4, '^\{' ]
--- no_error_log
[error]



=== TEST 6: allow and deny protect it like any location
--- http_config
    upstream other {
        prefix_aware index=off length=65536 threshold=1 format=body;
        server 127.0.0.1:1996 weight=3;
    }
--- config
    location = /status {
        prefix_aware_status;
        allow 127.0.0.1;
        deny all;
    }
    location = /status-closed {
        prefix_aware_status;
        allow 10.0.0.0/8;
        deny all;
    }
    location = /status-auth {
        prefix_aware_status;
        satisfy any;
        allow 10.0.0.0/8;
        deny all;
        auth_basic "status";
        auth_basic_user_file htpasswd;
    }
--- user_files
>>> ../conf/htpasswd
ops:{PLAIN}secret
--- pipelined_requests eval
[ "GET /status", "GET /status-closed", "GET /status-closed?format=prometheus", "GET /status-auth", "GET /status-auth" ]
--- more_headers eval
[ "", "", "", "", "Authorization: Basic b3BzOnNlY3JldA==" ]
--- error_code eval
[ 200, 403, 403, 401, 200 ]
--- response_body_like eval
[ '^\{', "403 Forbidden", "403 Forbidden", "401 Authorization Required", '^\{' ]



=== TEST 7: in flight: two slow requests of one key are held (threshold=1: the second spills), a status include sees them; afterwards all is 0
--- http_config
    upstream two {
        prefix_aware index=off length=1024 threshold=1;
        server 127.0.0.1:1994;
        server 127.0.0.1:1995;
    }
--- config
    location /slow/ {
        proxy_pass http://two;
    }
    location = /status {
        prefix_aware_status;
    }
    location = /inflight.html {
        root html;
        default_type text/html;
        ssi on;
    }
--- user_files
>>> inflight.html
<!--# include virtual="/slow/1" --><!--# include virtual="/slow/2" --><!--# include virtual="/status" -->
--- pipelined_requests eval
[ "GET /inflight.html", "GET /status", "GET /status?format=prometheus" ]
--- more_headers eval
[ "$::ID: t-1", "", "" ]
--- response_body eval
my $c = { length => 1024, threshold => 1, format => 'auto', keys => [2, 0, 0],
          id => 2, openai_fallbacks => 0, unbuffered => 0, rejected => 0,
          invalid_cache_key => 0,
          keyed => 2, first_choice_usable => 2, buckets => [1, 1], sum => 1 };
my $during = ::json_re(::status_json(::up('two', $c,
    [ '127.0.0.1:1994', 1, 'up', 1, 1, 1, 0, 0, 0 ],
    [ '127.0.0.1:1995', 1, 'up', 1, 1, 0, 1, 0, 0 ])));
my @after = (::up('two', $c,
    [ '127.0.0.1:1994', 1, 'up', 0, 1, 1, 0, 0, 0 ],
    [ '127.0.0.1:1995', 1, 'up', 0, 1, 0, 1, 0, 0 ]));
my $json = ::json_re(::status_json(@after));
[ qr/\Aa1\na2\n$during\s*\z/, qr/\A$json\s*\z/, ::prom_re(::status_prom(@after)) ]
--- timeout: 10
--- no_error_log
[error]



=== TEST 8: the three variables in an access log: through prefix_aware, answered 400, and not through it at all
--- http_config
    upstream llm {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1994;
        server 127.0.0.1:1995;
    }
    upstream plain {
        server 127.0.0.1:1996;
    }
    log_format pa 'source=$prefix_aware_source hash=$prefix_aware_hash '
                  'route=$prefix_aware_route status=$status';
--- config
    location / {
        proxy_pass http://llm;
        access_log logs/pa.log pa;
    }
    location /plain/ {
        proxy_pass http://plain;
        access_log logs/pa.log pa;
    }
    location = /pa.log {
        root logs;
    }
--- pipelined_requests eval
[ "POST /v1/chat/completions\n$::X", "POST /invocations\n$::Y", "GET /v1/models",
  "GET /v1/models", "POST /v1/chat/completions\n$::X", "GET /plain/x", "GET /pa.log" ]
--- more_headers eval
[ "", "", "", "$::ID: t-1", "$::ID: \x01", "", "" ]
--- error_code eval
[ 200, 200, 200, 200, 400, 200, 200 ]
--- response_body eval
[ "a2\n", "a1\n", qr/\Aa[12]\n\z/, "a1\n", "id has a non-printable or non-ASCII byte\n", "a3\n",
  qr/\Asource=chat hash=([0-9a-f]{16}) route=affinity status=200
source=body hash=(?!\1)[0-9a-f]{16} route=affinity status=200
source=none hash= route=no_key status=200
source=none hash=[0-9a-f]{16} route=affinity status=200
source=none hash= route= status=400
source=- hash=- route=- status=200
\z/ ]
--- no_error_log
[error]
