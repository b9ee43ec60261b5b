#!/usr/bin/python3
"""Work under the upstream's lock: builds of the module side by side.

With "zone" in an upstream, nginx's peers lock (peers_wlock) is a
spinlock shared by every worker: what a balancer does while it holds it
makes the other workers spin (ngx_rwlock_wlock, then sched_yield).  This
runs, for each module build given (--module NAME=PATH, an old and a new
one) and with and without "zone", an nginx of WORKERS workers in front of
SERVERS backends (one nginx that answers `return 200` on SERVERS ports),
prefix_aware's default, and wrk at CONNS connections posting rotating
bodies of SIZE bytes.  Rounds are interleaved (every build and zone
setting once per round), figures are medians over the rounds; the
requests per second of each build are given as a ratio to the first
build's in the same round.  perf samples the workers (cpu-clock) during
each run: the share of their samples in ngx_rwlock_wlock and
sched_yield is the time spent spinning on the lock.

    /usr/bin/python3 bench/lock.py --module old=/tmp/old.so \\
        --module new=objs/ngx_http_prefix_aware_module.so \\
        [--workers 8] [--servers 64] [--size 65536] [--rounds 5] \\
        [--duration 5] [--conns 32] [--out bench/results/lock.md]

The machine is shared: say so next to the figures.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import instructions as P  # noqa: E402  (ports, waiting)
import overhead as O  # noqa: E402  (the backend, wrk's script and output)

NGINX = os.environ.get("NGINX_BIN", "/usr/sbin/nginx")
PERF = shutil.which("perf")

PROXY = """
load_module %(module)s;
worker_processes %(workers)d;
daemon off;
pid %(tmp)s/proxy.pid;
error_log %(tmp)s/proxy-error.log warn;
events { worker_connections 4096; }
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
        prefix_aware;
%(servers)s
        keepalive 64;
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

SPIN = re.compile(r"ngx_rwlock_wlock|sched_yield|ngx_rwlock_rlock")


def workers_of(master):
    out = subprocess.run(["pgrep", "-P", str(master)], capture_output=True,
                         text=True).stdout
    return [int(x) for x in out.split()]


def spin_share(data):
    """the share of samples in the lock's spin and yield"""
    p = subprocess.run([PERF, "report", "-i", data, "--stdio",
                        "--sort", "sym", "--percent-limit", "0"],
                       capture_output=True, text=True)
    share = 0.0
    for line in p.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[.\]\s+(\S+)", line)
        if m and SPIN.search(m.group(2)):
            share += float(m.group(1))
    return share


def run_one(tmp, name, module, zone, opts, bports, script):
    port = P.free_port()
    servers = "\n".join("        server 127.0.0.1:%d;" % p for p in bports)
    conf = os.path.join(tmp, "proxy.conf")
    with open(conf, "w") as f:
        f.write(PROXY % dict(tmp=tmp, port=port, servers=servers,
                             module=module, workers=opts.workers,
                             zone="zone u 4m;" if zone else ""))
    log = open(os.path.join(tmp, "proxy.log"), "w")
    p = subprocess.Popen([NGINX, "-p", tmp, "-c", conf], stdout=log,
                         stderr=subprocess.STDOUT)
    perf = None
    data = os.path.join(tmp, "perf.data")
    try:
        P.wait_port(port, p)
        # warm: the keepalive connections to the backends, the index
        O.wrk("http://127.0.0.1:%d" % port, script, opts.conns, 1, "raw",
              opts.size, 64)
        if PERF and not opts.no_perf:
            pids = ",".join(str(w) for w in workers_of(p.pid))
            perf = subprocess.Popen(
                [PERF, "record", "-q", "-e", "cpu-clock", "-F", "999",
                 "-o", data, "-p", pids, "--", "sleep",
                 str(opts.duration)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cpu0 = O.cpu_seconds(p.pid)
        res = O.wrk("http://127.0.0.1:%d" % port, script, opts.conns,
                    opts.duration, "raw", opts.size, 64)
        cpu = O.cpu_seconds(p.pid) - cpu0
        res["cpu_us"] = cpu * 1e6 / res["requests"] if res["requests"] \
            else 0.0
        if perf:
            perf.wait(timeout=opts.duration + 60)
            res["spin"] = spin_share(data)
            if opts.keep:
                shutil.copy(data, os.path.join(opts.keep, "perf.%s.%s.data"
                                               % (name, "zone" if zone
                                                  else "nozone")))
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()
    return res


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", action="append", required=True,
                    help="NAME=PATH of a module build (repeatable; the "
                         "first is the base of the ratios)")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--servers", type=int, default=64)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--no-perf", action="store_true")
    ap.add_argument("--keep", default=None,
                    help="a directory for the last round's perf data")
    ap.add_argument("--out", default=os.path.join(HERE, "results",
                                                  "lock.md"))
    opts = ap.parse_args(argv)
    builds = [m.split("=", 1) for m in opts.module]
    tmp = tempfile.mkdtemp(prefix="pa-lock-")
    os.chmod(tmp, 0o755)
    for d in ("b_body", "b_proxy", "b_fcgi", "b_uwsgi", "b_scgi",
              "p_body", "p_proxy", "p_fcgi", "p_uwsgi", "p_scgi"):
        os.makedirs(os.path.join(tmp, d))
    script = os.path.join(tmp, "bodies.lua")
    with open(script, "w") as f:
        f.write(O.LUA % dict(size=opts.size, kind="raw", n=64))
    bports = [P.free_port() for _ in range(opts.servers)]
    bconf = os.path.join(tmp, "backend.conf")
    with open(bconf, "w") as f:
        f.write(O.backend_conf(tmp, bports))
    blog = open(os.path.join(tmp, "backend.log"), "w")
    backend = subprocess.Popen([NGINX, "-p", tmp, "-c", bconf], stdout=blog,
                               stderr=subprocess.STDOUT)
    runs = {}
    t0 = time.monotonic()
    try:
        for p in bports:
            P.wait_port(p, backend)
        for rnd in range(opts.rounds):
            for zone in (True, False):
                for name, path in builds:
                    r = run_one(tmp, name, os.path.abspath(path), zone, opts,
                                bports, script)
                    runs.setdefault((zone, name), []).append(r)
                    print("round %d zone=%s %-6s %8.0f req/s %7.1f us "
                          "CPU/req  spin %5.2f %%  non2xx %d" % (
                              rnd + 1, "on" if zone else "off", name,
                              r.get("rps", -1), r["cpu_us"],
                              r.get("spin", -1), r["non2xx"]), flush=True)
    finally:
        backend.terminate()
        backend.wait(timeout=30)
        blog.close()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    base = builds[0][0]
    lines = ["# Work under the upstream's lock", "",
             "%d workers, %d servers (one backend nginx, `return 200`), "
             "prefix_aware's default, wrk -c%d, %d rotating raw bodies of "
             "%d bytes, %d s per run, %d interleaved rounds; medians. "
             "ratio: requests per second over the %s build's in the same "
             "round. CPU: the proxy's user + system time per request "
             "(/proc). spin: the share of the workers' perf samples "
             "(cpu-clock, 999 Hz) in ngx_rwlock_wlock/rlock and sched_yield. "
             "Machine: %d cores, shared with other jobs while measured." % (
                 opts.workers, opts.servers, opts.conns, 64, opts.size,
                 opts.duration, opts.rounds, base, os.cpu_count()), "",
             "| zone | build | req/s | ratio | CPU us/req | spin % | "
             "non-2xx |",
             "|---|---|---|---|---|---|---|"]
    for zone in (True, False):
        for name, _ in builds:
            rs = runs[(zone, name)]
            ratios = [r["rps"] / b["rps"] for r, b in
                      zip(rs, runs[(zone, base)])]
            lines.append("| %s | %s | %.0f | %.3f | %.1f | %s | %d |" % (
                "on" if zone else "off", name, med([r["rps"] for r in rs]),
                med(ratios), med([r["cpu_us"] for r in rs]),
                "%.2f" % med([r["spin"] for r in rs]) if "spin" in rs[0]
                else "-", sum(r["non2xx"] for r in rs)))
    lines += ["", "Wall time %.0f s." % (time.monotonic() - t0)]
    os.makedirs(os.path.dirname(opts.out), exist_ok=True)
    with open(opts.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
