#!/usr/bin/python3
"""Instructions per request of the proxy, under callgrind (deterministic).

One nginx proxy (master_process off, one process) runs under valgrind
--tool=callgrind in front of a trivial backend (nginx `return 200`, 4
server blocks).  A client sends a fixed stream of POSTs on one keepalive
connection: BODIES rotating bodies of SIZE bytes (raw to /invocations or
OpenAI chat JSON to /v1/chat/completions) that differ in their first
bytes (--kind responses: the same conversation as a Responses body to
/v1/responses, instructions and input items; --kind messages: as an
Anthropic Messages body to /v1/messages, system and messages).  The
proxy is run twice per arm, with N and 2N requests: the
difference of the two totals over N is the cost of a request, free of
start-up and exit.  Arms: round robin (nginx's own), prefix_aware
index=off, prefix_aware (the default), or any directive given.  With
--servers and --zone, the upstream's size and its "zone" (then its peers
are locked: callgrind_annotate on the kept files tells what runs between
ngx_rwlock_wlock and the unlock, e.g. the inclusive cost of
ngx_http_prefix_aware_index_choose, made under the lock before).

    /usr/bin/python3 bench/instructions.py [--size 4096]
        [--kind raw|json|responses|messages]
        [--requests 2000] [--arm rr] [--arm off] [--arm default]
        [--module objs/ngx_http_prefix_aware_module.so] [--keep DIR]

--keep leaves the callgrind files of the 2N runs in DIR, for
callgrind_annotate.  Prints one line per arm: instructions per request,
and the difference to round robin.
"""

import argparse
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import overhead  # noqa: E402  (the trivial backend)

NGINX = os.environ.get("NGINX_BIN", "/usr/sbin/nginx")
VALGRIND = shutil.which("valgrind") or "/usr/bin/valgrind"

ARMS = {
    "rr": None,
    "off": "prefix_aware index=off;",
    "default": "prefix_aware;",
}

PROXY = """
%(load)s
master_process off;
daemon off;
worker_processes 1;
pid %(tmp)s/proxy.pid;
error_log %(tmp)s/proxy-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(tmp)s/p_body;
    proxy_temp_path %(tmp)s/p_proxy;
    fastcgi_temp_path %(tmp)s/p_fcgi;
    uwsgi_temp_path %(tmp)s/p_uwsgi;
    scgi_temp_path %(tmp)s/p_scgi;
    client_max_body_size 64m;
    client_body_buffer_size 128k;
    upstream u {
        %(zone)s
        %(directive)s
%(servers)s
        keepalive 16;
    }
    server {
        listen 127.0.0.1:%(port)d;
        location / {
            proxy_pass http://u;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
"""

# the same conversation (a long system prompt, then "hello") in each API
SHAPES = {
    "json": ('{"messages": [{"role": "system", "content": "',
             '"}, {"role": "user", "content": "hello"}], '
             '"model": "m", "max_tokens": 1}'),
    "responses": ('{"model": "m", "instructions": "',
                  '", "input": [{"role": "user", "content": "hello"}], '
                  '"max_output_tokens": 1, "store": false}'),
    "messages": ('{"model": "m", "max_tokens": 1, "system": "',
                 '", "messages": [{"role": "user", "content": "hello"}]}'),
}

PATHS = {
    "json": "/v1/chat/completions",
    "responses": "/v1/responses",
    "messages": "/v1/messages",
}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("process exited: %d" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("port %d not open" % port)


def bodies(kind, size, n):
    filler = "lorem ipsum dolor sit amet " * (size // 27 + 1)
    out = []
    for i in range(n):
        head = "tenant-%04d " % i
        if kind in SHAPES:
            pre, post = SHAPES[kind]
            pre = pre + head
            out.append((pre + filler[:size - len(pre) - len(post)]
                        + post).encode())
        else:
            out.append((head + filler[:size - len(head)]).encode())
    return out


def send(port, kind, body_list, count):
    path = PATHS.get(kind, "/invocations")
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    bad = 0
    for i in range(count):
        c.request("POST", path, body_list[i % len(body_list)],
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            bad += 1
    c.close()
    return bad


def run_arm(tmp, directive, module, bports, kind, body_list, count, out,
            zone=False):
    port = free_port()
    servers = "\n".join("        server 127.0.0.1:%d;" % p for p in bports)
    load = ("load_module %s;" % module) if directive else ""
    conf = os.path.join(tmp, "proxy.conf")
    with open(conf, "w") as f:
        f.write(PROXY % dict(tmp=tmp, port=port, servers=servers,
                             directive=directive or "",
                             zone="zone u 4m;" if zone else "",
                             load=load))
    cmd = [VALGRIND, "--tool=callgrind", "--callgrind-out-file=" + out,
           NGINX, "-p", tmp, "-c", conf]
    log = open(os.path.join(tmp, "valgrind.log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, p)
        bad = send(port, kind, body_list, count)
    finally:
        # callgrind writes its file at exit, slowly on a busy machine
        for timeout in (30, 60, 600):
            p.terminate()
            try:
                p.wait(timeout=timeout)
                break
            except subprocess.TimeoutExpired:
                pass
        log.close()
    if bad:
        raise RuntimeError("%d answers were not 200" % bad)
    return total(out)


def total(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + path)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--kind", default="raw",
                    choices=("raw", "json", "responses", "messages"))
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--bodies", type=int, default=1000)
    ap.add_argument("--arm", action="append",
                    help="rr, off, default, or a directive "
                         "\"prefix_aware ...;\" (repeatable)")
    ap.add_argument("--module", default=os.path.join(
        ROOT, "objs", "ngx_http_prefix_aware_module.so"))
    ap.add_argument("--keep", default=None)
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--zone", action="store_true",
                    help="\"zone\" in the upstream (its peers locked)")
    opts = ap.parse_args(argv)
    arms = opts.arm or ["rr", "off", "default"]
    module = os.path.abspath(opts.module)

    tmp = tempfile.mkdtemp(prefix="pa-profile-")
    os.chmod(tmp, 0o755)
    for d in ("b_body", "b_proxy", "b_fcgi", "b_uwsgi", "b_scgi",
              "p_body", "p_proxy", "p_fcgi", "p_uwsgi", "p_scgi"):
        os.makedirs(os.path.join(tmp, d))
    if opts.keep:
        os.makedirs(opts.keep, exist_ok=True)
    body_list = bodies(opts.kind, opts.size, opts.bodies)
    bports = [free_port() for _ in range(opts.servers)]
    bconf = os.path.join(tmp, "backend.conf")
    with open(bconf, "w") as f:
        f.write(overhead.backend_conf(tmp, bports))
    blog = open(os.path.join(tmp, "backend.log"), "w")
    backend = subprocess.Popen([NGINX, "-p", tmp, "-c", bconf], stdout=blog,
                               stderr=subprocess.STDOUT)
    results = []
    try:
        for p in bports:
            wait_port(p, backend)
        n = opts.requests
        for arm in arms:
            directive = ARMS.get(arm, arm)
            name = arm.replace(" ", "_").replace(";", "").replace("=", "-")
            out1 = os.path.join(tmp, "cg.%s.1" % name)
            out2 = os.path.join(opts.keep or tmp, "callgrind.out.%s" % name)
            t1 = run_arm(tmp, directive, module, bports, opts.kind,
                         body_list, n, out1, opts.zone)
            t2 = run_arm(tmp, directive, module, bports, opts.kind,
                         body_list, 2 * n, out2, opts.zone)
            per = (t2 - t1) / n
            results.append((arm, per))
            base = results[0][1]
            print("%-40s %5s %6d B: %9.0f instructions/request  "
                  "%+8.0f vs %s" % (arm, opts.kind, opts.size, per,
                                    per - base, results[0][0]), flush=True)
    finally:
        backend.terminate()
        backend.wait(timeout=30)
        blog.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
