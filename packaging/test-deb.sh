#!/usr/bin/env bash
# packaging/test-deb.sh PACKAGE.deb: run by make test-deb, as root.
#
# Installs the package with apt-get, then starts a throwaway nginx, Debian's
# own /usr/sbin/nginx, on a config of its own in a temp dir that loads
# modules only through /etc/nginx/modules-enabled/*.conf (the package's link,
# no load_module line of ours), with an upstream using prefix_aware and two
# loopback backends in the same config. Two requests with the same body must
# reach the same backend and carry a non-empty $prefix_aware_hash. Then
# nginx is stopped and the package purged. The system's nginx service and
# /etc/nginx/nginx.conf are not touched.

set -euo pipefail

pkg=libnginx-mod-http-prefix-aware
link=/etc/nginx/modules-enabled/50-mod-http-prefix-aware.conf

if [ $# -ne 1 ] || [ ! -f "$1" ]; then
    echo "test-deb: no package (run make deb first): $*" >&2
    exit 1
fi
deb=$(realpath "$1")

tmp=$(mktemp -d /tmp/pa-deb-XXXXXX)

cleanup() {
    if [ -f "$tmp/nginx.pid" ]; then
        kill -QUIT "$(cat "$tmp/nginx.pid")" 2>/dev/null || true
        sleep 0.5
    fi
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "$pkg" >/dev/null \
        2>&1 || true
    if [ -e "$link" ] || [ -L "$link" ] || [ -L "$link.removed" ]; then
        echo "test-deb: $link left after purge" >&2
        exit 1
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "test-deb: FAIL: $*" >&2
    [ -f "$tmp/error.log" ] && tail -n 20 "$tmp/error.log" >&2
    exit 1
}

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "$deb" >/dev/null
dpkg-query -W -f='installed: ${Package} ${Version}\n' "$pkg"

[ -f /usr/lib/nginx/modules/ngx_http_prefix_aware_module.so ] \
    || fail "no /usr/lib/nginx/modules/ngx_http_prefix_aware_module.so"
[ -L "$link" ] || fail "no $link"
echo "$link -> $(readlink "$link"): $(cat "$link")"

# three free loopback ports
read -r port b1 b2 < <(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

cat > "$tmp/nginx.conf" <<CONF
include /etc/nginx/modules-enabled/*.conf;

pid $tmp/nginx.pid;
error_log $tmp/error.log info;
worker_processes 2;

events {
    worker_connections 64;
}

http {
    access_log off;
    client_body_temp_path $tmp/body;
    proxy_temp_path $tmp/proxy;
    fastcgi_temp_path $tmp/fastcgi;
    uwsgi_temp_path $tmp/uwsgi;
    scgi_temp_path $tmp/scgi;

    upstream llm {
        prefix_aware length=1024;
        server 127.0.0.1:$b1;
        server 127.0.0.1:$b2;
    }

    server {
        listen 127.0.0.1:$b1;
        return 200 "b1";
    }

    server {
        listen 127.0.0.1:$b2;
        return 200 "b2";
    }

    server {
        listen 127.0.0.1:$port;

        location / {
            proxy_pass http://llm;
            add_header X-Key \$prefix_aware_hash always;
        }
    }
}
CONF

# Debian's prefix (/usr/share/nginx, where modules/ is /usr/lib/nginx/modules)
# resolves the package's "load_module modules/..."; every path of ours is
# absolute
/usr/sbin/nginx -c "$tmp/nginx.conf" -e "$tmp/error.log" \
    || fail "nginx did not start"
for _ in $(seq 50); do
    [ -s "$tmp/nginx.pid" ] && break
    sleep 0.1
done

body='{"prompt": "You are a helpful assistant. Summarise the document."}'

request() {
    curl -sS -m 5 -D "$tmp/headers" -o "$tmp/body.out" \
        -H 'Content-Type: text/plain' --data-binary "$1" \
        "http://127.0.0.1:$port/v1/completions" \
        || fail "request failed"
    key=$(tr -d '\r' < "$tmp/headers" | sed -n 's/^X-Key: //Ip')
    echo "$(cat "$tmp/body.out") $key"
}

r1=$(request "$body")
r2=$(request "$body")
echo "same body, first:  backend ${r1% *}, key ${r1#* }"
echo "same body, second: backend ${r2% *}, key ${r2#* }"

case "${r1% *}" in b1|b2) ;; *) fail "unexpected response: $r1" ;; esac
[ -n "${r1#* }" ] || fail "empty \$prefix_aware_hash"
[ "$r1" = "$r2" ] || fail "same body, different backend or key: $r1 / $r2"

# other bodies use both backends: the key decides, not a fixed choice
seen=""
for i in $(seq 16); do
    r=$(request "another prompt number $i")
    seen="$seen ${r% *}"
done
echo "16 other bodies:$seen"
case "$seen" in *b1*) ;; *) fail "b1 never chosen" ;; esac
case "$seen" in *b2*) ;; *) fail "b2 never chosen" ;; esac

grep -E '\[(alert|crit|emerg)\]' "$tmp/error.log" && fail "error log"

echo "test-deb: ok"
