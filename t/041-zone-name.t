# The module's shared zone is named "ngx_http_prefix_aware_module:zone":
# a name no zone of the configuration takes by chance (a ':' cannot even be
# part of the zone names of limit_req_zone, limit_conn_zone, keys_zone= or
# ssl_session_cache), so the user's zones, including one named
# "prefix_aware" as the module's zone once was, coexist with it.  Before,
# nginx refused to start: the shared memory zone "prefix_aware" is already
# declared for a different use.

use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib "$FindBin::Bin/lib";
use PrefixAware::Backends;

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a limit_req_zone named prefix_aware
--- http_config
    limit_req_zone $binary_remote_addr zone=prefix_aware:1m rate=100r/s;
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
    }
--- config
    location /t {
        limit_req zone=prefix_aware burst=10;
        proxy_pass http://up;
    }
--- request
GET /t
--- response_body
b1
--- no_error_log
[emerg]
[alert]



=== TEST 2: an upstream zone named prefix_aware, in an upstream with prefix_aware
--- http_config
    upstream up {
        prefix_aware index=off length=1024;
        zone prefix_aware 64k;
        server 127.0.0.1:1985;
    }
--- config
    location /t { proxy_pass http://up; }
--- request
GET /t
--- response_body
b1
--- no_error_log
[emerg]
[alert]



=== TEST 3: a limit_conn_zone named prefix_aware; the status page shows the module zone
--- http_config
    limit_conn_zone $binary_remote_addr zone=prefix_aware:1m;
    upstream up {
        prefix_aware index=off length=1024;
        server 127.0.0.1:1985;
    }
--- config
    location /t {
        limit_conn prefix_aware 10;
        proxy_pass http://up;
    }
    location = /status { prefix_aware_status; }
--- request eval
["GET /t", "GET /status"]
--- response_body_like eval
["^b1\$", '"zone": \{\s*"size": \d+']
--- no_error_log
[emerg]
[alert]
