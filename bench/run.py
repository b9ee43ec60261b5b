#!/usr/bin/python3
"""Routing benchmark driver: proxies in front of simulated vLLM instances.

For each workload and strategy it starts N simulated instances
(bench/sim/llmsim.py, fresh caches) and a real proxy on loopback, replays
the same request stream through the proxy with an asyncio/aiohttp client,
and reads the instances' /metrics before and after.  Every process it
starts is stopped at the end of its run, on error too.

Strategies: round_robin, random, least_conn (nginx, with a zone),
nginx_hash (nginx "hash $request_body consistent"), haproxy_hash (HAProxy
2.6 "balance hash req.body,bytes(0,4096)", consistent, balance factor 150)
and prefix_aware (nginx + objs/ngx_http_prefix_aware_module.so, skipped
with a message if it is not built), with any other prefix_aware "arms"
(named parameter sets, bench/arms.conf or --arm).  "pooled" is nginx
least_conn in front of instances that share one KV cache (llmsim.py
--pooled): the routing upper bound.  "ideal" is computed offline: the hit
rate of one LRU cache as large as all instances' caches together.
--seeds N runs every workload and strategy on N seeds' streams; the
report gives medians and ranges, and ratios to round robin and to the
pooled bound within each seed.

    run.py smoke                 seconds; asserts (make bench-smoke)
    run.py demo                  < 2 minutes, a small table (make demo)
    run.py bench                 everything, 3 seeds, bench/results/ (make bench)
    run.py run --workloads rag --strategies round_robin,prefix_aware,pooled ...

Times in the report are model seconds (wall seconds / --time-scale).
Standard library + aiohttp (+ matplotlib for plots).
"""

import argparse
import asyncio
import atexit
import collections
import copy
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "sim"))

import workloads  # noqa: E402
import llmsim  # noqa: E402
import peers  # noqa: E402

try:
    import aiohttp
except ImportError:  # pragma: no cover
    sys.exit("run.py: aiohttp is missing: use Debian's /usr/bin/python3 "
             "(python3-aiohttp)")

# BENCH_MODULE_SO: a copy of the module to load instead of the build's
# (a long run then does not see a rebuild in the middle of it)
MODULE_SO = os.environ.get("BENCH_MODULE_SO") or os.path.join(
    ROOT, "objs", "ngx_http_prefix_aware_module.so")
NGINX = os.environ.get("NGINX_BIN", "/usr/sbin/nginx")
HAPROXY = os.environ.get("HAPROXY_BIN", shutil.which("haproxy") or "/usr/sbin/haproxy")
PYTHON = os.environ.get("BENCH_PYTHON", "/usr/bin/python3")
# the simulator's step-loop lateness, as a share of each instance's time,
# above which a run is run again and flagged (--max-lag sets it): one
# Python process hosts every instance, and a run in which it fell behind
# measures it, not the router (16 instances of the short workload: up to
# 100 %+ while the virtual machine's host took CPU time, "steal")
MAX_LAG = 0.03

ALL_STRATEGIES = ["round_robin", "random", "least_conn", "nginx_hash",
                  "haproxy_hash", "prefix_aware"]
LABELS = {
    "round_robin": "nginx round robin",
    "random": "nginx random",
    "least_conn": "nginx least_conn (zone)",
    "nginx_hash": "nginx hash $request_body consistent",
    "haproxy_hash": "HAProxy hash req.body,bytes(0,4096) bf150",
    "prefix_aware": "nginx + prefix_aware index=off",
    "pooled": "pooled bound: least_conn, one shared cache",
    "oracle": "oracle: prefix_aware's choice on the caches' own depths",
    "ideal": "ideal (one LRU of all caches, offline)",
    # the peers (bench/sim/peers.py), routed by llmsim's front
    "sglang": "SGLang gateway cache_aware",
    "llmd": "llm-d default profile (prefix 3, queue 2, KV 2)",
    "dynamo": "Dynamo KV router (KV events)",
    "prodstack": "vLLM production-stack prefixaware",
    "aibrix": "AIBrix prefix-cache",
    "dualmap": "DualMap (AIBrix dualmap)",
}
PEER_LABELS = {
    "llmd@precise=1": "llm-d precise prefix scorer (prefix 3, queue 2, KV 2)",
    "dynamo@events=0": "Dynamo KV router without events (ttl 120 s)",
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# processes


class Procs:
    """The processes this driver started; all stopped at exit."""

    def __init__(self):
        self.procs = []
        atexit.register(self.stop_all)

    def start(self, name, cmd, logpath):
        f = open(logpath, "ab")
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        f.close()
        p.bench_name = name
        p.bench_log = logpath
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, timeout=10):
        if p.poll() is None:
            try:
                p.send_signal(sig)
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                # its own process group (start_new_session), started by us
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)
            except ProcessLookupError:
                pass
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(self.procs):
            self.stop(p)


PROCS = Procs()


def _on_signal(signum, frame):
    PROCS.stop_all()
    sys.exit(128 + signum)


signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)


def free_ports(n, kind=socket.SOCK_STREAM):
    socks = []
    ports = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, kind)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def port_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def bench_ports(opts, slot=0):
    """Fixed ports (the rings of nginx hash and prefix_aware place servers
    by address, so fixed ports make runs repeatable), or free ones.  Seed
    number `slot` of a multi-seed run takes the slot-th block of ports
    after the base, so that each seed also samples another ring placement
    while all strategies of one seed share theirs."""
    n = opts.instances + 1
    if opts.base_port:
        base = opts.base_port + slot * n
        ports = list(range(base, base + n))
        if all(port_free(p) for p in ports):
            return ports
        log("run.py: ports %d..%d busy, using free ones (ring placement will "
            "differ from run to run)" % (ports[0], ports[-1]))
    return free_ports(n)


def proc_cpu(pid):
    """CPU seconds (user + system) a process of ours has used."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def cpu_times():
    """(steal, total) jiffies of all CPUs (/proc/stat), or None: the time a
    virtual machine's host gave its CPUs to others counts as steal."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[7] if len(v) > 7 else 0, sum(v[:8])
    except (OSError, ValueError):
        return None


def steal_share(t0, t1):
    """Share of the CPUs' time stolen between two cpu_times()."""
    if not t0 or not t1 or t1[1] <= t0[1]:
        return float("nan")
    return (t1[0] - t0[0]) / (t1[1] - t0[1])


def wait_port(port, proc, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s; log %s:\n%s" % (
                proc.bench_name, proc.returncode, proc.bench_log,
                tail(proc.bench_log)))
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s: port %d not open after %gs" % (proc.bench_name, port,
                                                           timeout))


def tail(path, n=2000):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------
# proxy configurations


def nginx_conf(tmp, port, backends, directive, module=False):
    # bench-only nginx: one worker, everything in tmp, bodies kept in memory
    # so that $request_body (nginx_hash) is always set
    lines = []
    if module:
        lines.append("load_module %s;" % MODULE_SO)
    if os.geteuid() == 0:
        lines.append("user root;")
    servers = "\n".join("        server 127.0.0.1:%d max_fails=0;" % b
                        for b in backends)
    # the module's runs: $pa_split, a 50/50 split of the prefix groups
    # (conversation, document, tenant, file, template) between prefix
    # routing and least outstanding for "strategy=$pa_split" arms, as a
    # canary splits by tenant: a group split between the arms would share
    # its cache entries across them; and the strategy of each response in
    # a header the client records
    split = """
    split_clients "${http_x_bench_group}" $pa_split {
        50%  prefix;
        *    least_outstanding;
    }""" if module else ""
    lines.append("""
worker_processes 1;
daemon off;
pid %(tmp)s/nginx.pid;
error_log %(tmp)s/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path %(tmp)s/client_body;
    proxy_temp_path %(tmp)s/proxy;
    fastcgi_temp_path %(tmp)s/fastcgi;
    uwsgi_temp_path %(tmp)s/uwsgi;
    scgi_temp_path %(tmp)s/scgi;%(split)s
    upstream llm {
        %(directive)s
%(servers)s
        keepalive 256;
    }
    server {
        listen 127.0.0.1:%(port)d backlog=4096;
        client_max_body_size 64m;
        client_body_buffer_size 1m;
%(status)s
        location / {
            proxy_pass http://llm;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering on;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;%(arm_header)s
        }
    }
}
""" % dict(tmp=tmp, port=port, directive=directive, servers=servers,
           split=split,
           arm_header="\n            add_header X-Prefix-Aware-Strategy "
                      "$prefix_aware_strategy;"
                      "\n            add_header X-Prefix-Aware-Route "
                      "$prefix_aware_route;"
                      "\n            add_header X-Prefix-Aware-Depth "
                      "$prefix_aware_depth;"
                      "\n            add_header X-Prefix-Aware-Wait "
                      "$prefix_aware_wait;" if module else "",
           status="        location = /prefix-aware-status { prefix_aware_status; }"
           if module else ""))
    return "\n".join(lines)


def haproxy_conf(tmp, port, backends, balance=None):
    servers = "\n".join("    server s%d 127.0.0.1:%d" % (i, b)
                        for i, b in enumerate(backends))
    balance = balance or ("balance hash req.body,bytes(0,4096)\n"
                          "    hash-type consistent\n"
                          "    hash-balance-factor 150")
    return """global
    nbthread 1
    maxconn 4000
    pidfile %(tmp)s/haproxy.pid
defaults
    mode http
    option http-no-delay
    timeout connect 5s
    timeout client 600s
    timeout server 600s
    timeout http-request 60s
frontend fe
    bind 127.0.0.1:%(port)d
    default_backend llm
backend llm
    option http-buffer-request
    %(balance)s
%(servers)s
""" % dict(tmp=tmp, port=port, servers=servers, balance=balance)


STRATEGY_DIRECTIVE = {
    "round_robin": "",
    "random": "random;",
    "least_conn": "least_conn;\n        zone llm_zone 256k;",
    "nginx_hash": "hash $request_body consistent;",
    # least_conn in front of simulated instances that share one KV cache
    # (llmsim.py --pooled): the routing upper bound
    "pooled": "least_conn;\n        zone llm_zone 256k;",
}

# strategies that run against a pooled-cache simulator
POOLED = {"pooled"}

# routed by the simulator's own front (llmsim.py --front), no proxy: the
# module's choice on the depths the caches hold, not on what an index
# remembers
ORACLE = {"oracle"}
ORACLE_PARAMS = ("threshold", "balance", "match", "length", "model",
                 "choice", "work")
ORACLE_MODELS = ("exact", "lru", "held")
ORACLE_CHOICES = ("module", "ttft")
ORACLE_WORK = ("count", "first")


def is_oracle(strategy):
    return strategy.split("@")[0] in ORACLE


def is_peer(strategy):
    """A peer's routing policy (bench/sim/peers.py), run in llmsim's front:
    "sglang", "llmd@precise=1", "dynamo@events=0+ttl=60"..."""
    return strategy.split("@")[0] in peers.PEERS


def peer_args(strategy):
    """llmsim.py --front-peer NAME --front-peer-params k=v,k=v; ValueError
    on an unknown parameter."""
    name, _, params = strategy.partition("@")
    params = params.replace("+", ",")
    peers.parse_params(params, dict(peers.PEERS[name].DEFAULTS, seed=1))
    return ["--front-peer", name, "--front-peer-params", params]


def front_args(strategy, opts):
    return (peer_args(strategy) if is_peer(strategy)
            else oracle_args(strategy, opts))


def oracle_args(strategy, opts):
    """llmsim.py --front-* for "oracle" or "oracle@k=v+k=v" (threshold,
    balance, match, length; model=exact|lru|held; choice=module|ttft;
    work=count|first): -> list of arguments; ValueError if bad."""
    params = {"threshold": str(opts.pa_threshold)}
    if "@" in strategy:
        for kv in strategy.split("@", 1)[1].split("+"):
            k, _, v = kv.partition("=")
            if k not in ORACLE_PARAMS or not v:
                raise ValueError("%s: oracle parameters are %s"
                                 % (strategy, ", ".join(ORACLE_PARAMS)))
            if k == "model":
                if v not in ORACLE_MODELS:
                    raise ValueError("%s: model is one of %s"
                                     % (strategy, ", ".join(ORACLE_MODELS)))
            elif k == "choice":
                if v not in ORACLE_CHOICES:
                    raise ValueError("%s: choice is one of %s"
                                     % (strategy, ", ".join(ORACLE_CHOICES)))
            elif k == "work":
                if v not in ORACLE_WORK:
                    raise ValueError("%s: work is one of %s"
                                     % (strategy, ", ".join(ORACLE_WORK)))
            else:
                float(v)
            params[k] = v
    out = []
    for k in ORACLE_PARAMS:
        if k in params:
            out += ["--front-" + k, params[k]]
    return out


def module_available():
    return os.path.exists(MODULE_SO)


# ---------------------------------------------------------------------------
# prefix_aware arms
#
# An arm is a name and a string of prefix_aware parameters, merged over the
# base (--pa-length, --pa-threshold, --pa-format): "threshold=20" replaces
# the base's threshold, "index=off" is added, "threshold=" (empty value)
# leaves threshold out so that the module's default applies.  Arms come
# from bench/arms.conf (--arms-file) and --arm 'NAME PARAMS'; the legacy
# "prefix_aware@threshold=20+length=2048" names still work.  Parameters are
# passed to nginx as written: nginx -t checks every arm before a run.

ARMS_FILE = os.path.join(HERE, "arms.conf")
ARM_SECTIONS = ("main", "sensitivity")
ARMS = collections.OrderedDict()          # name -> parameter string
ARM_GROUPS = {s: [] for s in ARM_SECTIONS}
_ARM_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_ARM_TOKEN = re.compile(r"^[^\s;{}'\"#\\]+$")


def _check_arm(name, params, where):
    if not _ARM_NAME.match(name):
        raise ValueError("%s: arm name %r: letters, digits, _ . - only"
                         % (where, name))
    if name in LABELS and name != "prefix_aware":
        raise ValueError("%s: arm name %r is a strategy's" % (where, name))
    for tok in params.split():
        if not _ARM_TOKEN.match(tok):
            raise ValueError("%s: arm %s: parameter %r has a character nginx "
                             "would not take as one word" % (where, name, tok))


def parse_arms(text, where="arms"):
    """bench/arms.conf -> (arms {name: params}, {section: [names]}).

    Lines "NAME PARAMS..." under "[main]" (the default) or "[sensitivity]";
    "#" starts a comment."""
    arms = collections.OrderedDict()
    groups = {s: [] for s in ARM_SECTIONS}
    section = "main"
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        here = "%s:%d" % (where, n)
        m = re.match(r"^\[\s*(\S+)\s*\]$", line)
        if m:
            section = m.group(1)
            if section not in groups:
                raise ValueError("%s: unknown section [%s] (have %s)" % (
                    here, section, ", ".join(ARM_SECTIONS)))
            continue
        parts = line.split(None, 1)
        name, params = parts[0], (parts[1] if len(parts) > 1 else "")
        _check_arm(name, params, here)
        if name in arms:
            raise ValueError("%s: arm %s defined twice" % (here, name))
        arms[name] = " ".join(params.split())
        groups[section].append(name)
    return arms, groups


def load_arms(path, extra=()):
    """Fill ARMS and ARM_GROUPS from the arms file and --arm definitions
    ("NAME PARAMS"; these join the main group)."""
    ARMS.clear()
    for s in ARM_SECTIONS:
        ARM_GROUPS[s] = []
    if path and os.path.exists(path):
        with open(path) as f:
            arms, groups = parse_arms(f.read(), path)
        ARMS.update(arms)
        for s in ARM_SECTIONS:
            ARM_GROUPS[s] = list(groups[s])
    elif path and path != ARMS_FILE:
        raise ValueError("%s: no such arms file" % path)
    for a in extra:
        parts = a.split(None, 1)
        if not parts:
            continue
        name, params = parts[0], (parts[1] if len(parts) > 1 else "")
        _check_arm(name, params, "--arm")
        ARMS[name] = " ".join(params.split())
        for s in ARM_SECTIONS:
            if name in ARM_GROUPS[s]:
                ARM_GROUPS[s].remove(name)
        ARM_GROUPS["main"].append(name)


def merge_params(base, over):
    """"length=4096 threshold=10" + "threshold=20 index=off" ->
    "length=4096 threshold=20 index=off"; "k=" drops k."""
    out = collections.OrderedDict()
    for tok in list(base) + list(over):
        k, eq, v = tok.partition("=")
        if not eq:
            out[tok] = None
        elif v == "":
            out.pop(k, None)
        else:
            out[k] = v
    return " ".join(k if v is None else "%s=%s" % (k, v) for k, v in out.items())


def pa_params(opts, strategy="prefix_aware"):
    base = ["length=%s" % opts.pa_length, "threshold=%s" % opts.pa_threshold,
            "format=%s" % opts.pa_format, "index=%s" % opts.pa_index]
    if strategy in ARMS:
        over = ARMS[strategy].split()
    elif strategy.startswith("prefix_aware@"):
        over = [x for x in strategy.split("@", 1)[1].split("+") if x]
        _check_arm("prefix_aware", " ".join(over), strategy)
    elif strategy == "prefix_aware":
        over = []
    else:
        raise ValueError("%r is not a prefix_aware arm" % strategy)
    # "capacity=@kv": the simulator's cache per instance, in tokens;
    # "@kv*4", "@kv/4": a value that many times off, for comparisons
    return re.sub(r"(^| )capacity=@kv(?:([*/])(\d+))?(?= |$)",
                  lambda m: "%scapacity=%d" % (
                      m.group(1), kv_capacity(opts, m.group(2),
                                              m.group(3))),
                  merge_params(base, over))


def kv_capacity(opts, op, n):
    """the simulator's cache per instance in tokens, times or over n"""
    tokens = opts.kv_blocks * llmsim.BLOCK_TOKENS
    if op == "*":
        return tokens * int(n)
    if op == "/":
        return max(1024, tokens // max(int(n), 1))
    return tokens


SYNC_KEY = "bench-hosts-share-this-key"


def pa_directive(opts, strategy="prefix_aware"):
    """prefix_aware's directive for a strategy: "prefix_aware", an arm's
    name, or "prefix_aware@threshold=20+length=2048" (legacy).  An arm's
    "sync" (and "sync.load=work", "sync.interval=10ms") adds
    prefix_aware_sync between the run's hosts (--hosts): this host
    (opts.sync_host) listens on its port of opts.sync_ports and sends to
    every host's, its own too, as one config on every host would."""
    p = pa_params(opts, strategy).split()
    sync = [t for t in p if t == "sync" or t.startswith("sync.")]
    p = [t for t in p if t not in sync]
    d = "prefix_aware %s;" % " ".join(p) if p else "prefix_aware;"
    if sync:
        ports = getattr(opts, "sync_ports", None) or []
        h = getattr(opts, "sync_host", 0)
        if not ports:
            # the check of the configuration before the runs
            ports, h = free_ports(1, socket.SOCK_DGRAM), 0
        d += "\n        prefix_aware_sync 127.0.0.1:%d key=%s %s %s;" % (
            ports[h], SYNC_KEY,
            " ".join("peer=127.0.0.1:%d" % q for q in ports),
            " ".join(t[len("sync."):] for t in sync if t != "sync"))
    return d


def is_pa(strategy):
    return strategy in ARMS or strategy.split("@")[0] == "prefix_aware"


def label(strategy):
    if strategy in PEER_LABELS:
        return PEER_LABELS[strategy]
    if "@" in strategy and is_peer(strategy):
        name, _, params = strategy.partition("@")
        return "%s (%s)" % (LABELS[name], params.replace("+", " "))
    if strategy in ARMS:
        if strategy == "prefix_aware":
            return "nginx + prefix_aware (%s)" % (ARMS[strategy] or "base")
        return "nginx + prefix_aware %s (%s)" % (strategy, ARMS[strategy])
    if "@" in strategy and is_pa(strategy):
        return "nginx + prefix_aware " + strategy.split("@", 1)[1]
    if "@" in strategy and is_oracle(strategy):
        params = strategy.split("@", 1)[1]
        if "choice=ttft" in params:
            return "oracle: the soonest expected first token on the " \
                   "caches' own depths and queues (%s)" \
                   % params.replace("+", " ")
        if "model=" in params and "model=exact" not in params:
            return "oracle: prefix_aware's choice on a model of the caches " \
                   "(%s)" % params.replace("+", " ")
        return "%s (%s)" % (LABELS["oracle"], params.replace("+", " "))
    return LABELS.get(strategy, strategy)


def check_arms(strategies, opts):
    """nginx -t on each prefix_aware arm's configuration, so that a bad
    parameter fails now, not an hour into make bench.  -> error or None."""
    tmp = tempfile.mkdtemp(prefix="pa-bench-check-")
    try:
        for s in strategies:
            if not is_pa(s):
                continue
            cfg = os.path.join(tmp, "nginx.conf")
            with open(cfg, "w") as f:
                f.write(nginx_conf(tmp, 1, [2, 3], pa_directive(opts, s),
                                   module=True))
            r = subprocess.run([NGINX, "-t", "-q", "-p", tmp, "-c", cfg],
                               capture_output=True, text=True)
            if r.returncode != 0:
                return "%s (%s): nginx -t failed:\n%s" % (
                    s, pa_directive(opts, s), (r.stderr or r.stdout).strip())
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def start_proxy(strategy, tmp, port, backends, opts):
    os.makedirs(tmp, exist_ok=True)
    for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    logp = os.path.join(tmp, "proxy.log")
    if strategy == "haproxy_hash":
        cfg = os.path.join(tmp, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(haproxy_conf(tmp, port, backends))
        p = PROCS.start(strategy, [HAPROXY, "-db", "-f", cfg], logp)
    else:
        if is_pa(strategy):
            if not module_available():
                raise FileNotFoundError(MODULE_SO)
            directive = pa_directive(opts, strategy)
        else:
            directive = STRATEGY_DIRECTIVE[strategy]
        cfg = os.path.join(tmp, "nginx.conf")
        with open(cfg, "w") as f:
            f.write(nginx_conf(tmp, port, backends, directive,
                               module=is_pa(strategy)))
        p = PROCS.start(strategy, [NGINX, "-p", tmp, "-c", cfg], logp)
    wait_port(port, p)
    return p


def start_sim(tmp, ports, opts, pooled=False, front=0, front_args=()):
    logp = os.path.join(tmp, "llmsim.log")
    cmd = [PYTHON, os.path.join(HERE, "sim", "llmsim.py"),
           "--ports", ",".join(map(str, ports)),
           "--names", ",".join("i%d" % i for i in range(len(ports))),
           "--kv-blocks", str(opts.kv_blocks),
           "--time-scale", str(opts.time_scale),
           "--max-seconds", str(opts.max_seconds)]
    if pooled:
        cmd.append("--pooled")
    if front:
        cmd += ["--front", str(front)] + list(front_args)
    p = PROCS.start("llmsim", cmd, logp)
    for port in ports + ([front] if front else []):
        wait_port(port, p)
    return p


# ---------------------------------------------------------------------------
# metrics

_METRIC = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')


def parse_metrics(text):
    out = collections.defaultdict(float)
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _METRIC.match(line)
        if not m:
            continue
        name, labels, value = m.groups()
        if name.endswith("_bucket"):
            continue
        if name.endswith("_total"):
            name = name[:-6]
        try:
            out[name] += float(value)
        except ValueError:
            pass
    return out


async def scrape(session, ports):
    res = []
    for port in ports:
        async with session.get("http://127.0.0.1:%d/metrics" % port) as r:
            res.append(parse_metrics(await r.text()))
    return res


_ROUTE = re.compile(r'^nginx_prefix_aware_server_routed_total\{[^}]*route="(\w+)"\}\s+(\d+)',
                    re.M)


async def pa_routes(session, url):
    """prefix_aware's own counts: why each request went where it went."""
    try:
        async with session.get(url + "/prefix-aware-status?format=prometheus") as r:
            text = await r.text()
    except aiohttp.ClientError:
        return None
    out = collections.Counter()
    for route, n in _ROUTE.findall(text):
        out[route] += int(n)
    return dict(out)


# ---------------------------------------------------------------------------
# client


class Rec:
    __slots__ = ("idx", "t_sched", "t_send", "t_first", "t_done", "status",
                 "instance", "out_tokens", "cached", "prompt", "error", "arm",
                 "route", "depth", "routed", "resp_id", "prev", "done",
                 "queued", "shed")

    def __init__(self, idx):
        self.idx = idx
        self.t_sched = self.t_send = self.t_first = self.t_done = None
        self.status = 0
        self.instance = None
        self.out_tokens = 0
        self.cached = None
        self.prompt = None
        self.error = None
        self.arm = None
        self.route = None
        self.depth = None
        self.queued = None      # ms in the module's queue ($prefix_aware_wait)
        self.routed = True      # False: sent past the routers (--bypass)
        self.resp_id = None     # a Responses answer's id (stored shape)
        self.prev = None        # the Rec whose answer this one continues
        self.done = None        # asyncio.Event, set when answered (prev's)
        self.shed = False       # answered 429/503 by the router on purpose


def is_shed(status, headers):
    """A 429 or 503 the router answered on purpose (load shedding): the
    module's queue answers with Retry-After, the peers' overload variants
    (bench/sim/overload.py) with X-Bench-Shed.  A 503 without either (the
    module's "no server of model", a dead engine) stays a failure."""
    return status in (429, 503) and (
        "Retry-After" in headers or "X-Bench-Shed" in headers)


_USAGE = re.compile(rb'"usage":\{"prompt_tokens":(\d+),"completion_tokens":(\d+)'
                    rb'.*?"cached_tokens":(\d+)')
# the Responses API's usage (prompt, cached, output) and Anthropic's
# (prompt, cached, output), as llmsim writes them
_USAGE_RESPONSES = re.compile(
    rb'"usage":\{"input_tokens":(\d+),"input_tokens_details":'
    rb'\{"cached_tokens":(\d+)\},"output_tokens":(\d+)')
_USAGE_MESSAGES = re.compile(
    rb'"usage":\{"input_tokens":(\d+),"cache_creation_input_tokens":\d+,'
    rb'"cache_read_input_tokens":(\d+),"output_tokens":(\d+)')
_RESP_ID = re.compile(rb'"response":\{"id":"(resp_[0-9a-f]+)"')
API_PATHS = ("/v1/responses", "/v1/messages")
PREV = workloads.PREV_PLACEHOLDER.encode()


async def do_request(session, url, req, rec, timeout):
    body = req.body
    if rec.prev is not None:
        # a stored conversation's turn: after the previous turn's answer,
        # continuing the last answer of the session that succeeded (none:
        # an id no engine holds, answered 404)
        await rec.prev.done.wait()
        p = rec.prev
        while p is not None and p.resp_id is None:
            p = p.prev
        body = body.replace(PREV, (p.resp_id if p else "resp_none")
                            .encode(), 1)
    try:
        await _do_request(session, url, req, body, rec, timeout)
    finally:
        if rec.done is not None:
            rec.done.set()


async def _do_request(session, url, req, body, rec, timeout):
    rec.t_send = time.monotonic()
    # the first token: the first chunk for chat and completions, the first
    # delta event for the Responses and Messages APIs (whose streams open
    # with events sent before any token)
    api = req.path.endswith(API_PATHS)
    headers = {"Content-Type": "application/json",
               "Accept": "text/event-stream",
               "X-Bench-Session": str(req.session),
               "X-Bench-Group": str(req.group)}
    if req.priority is not None:
        # the workload's band (prio): for prefix_aware priority=$variable
        headers["X-Bench-Priority"] = str(req.priority)
    try:
        async with session.post(url + req.path, data=body, headers=headers,
                                timeout=aiohttp.ClientTimeout(
                                    total=timeout)) as r:
            rec.status = r.status
            rec.instance = r.headers.get("X-Instance")
            rec.arm = r.headers.get("X-Prefix-Aware-Strategy")
            rec.route = r.headers.get("X-Prefix-Aware-Route")
            rec.depth = r.headers.get("X-Prefix-Aware-Depth")
            rec.queued = r.headers.get("X-Prefix-Aware-Wait")
            ntok = 0
            last = b""
            async for chunk in r.content.iter_any():
                if rec.t_first is None and chunk.strip() and (
                        not api or b'delta"' in last[-16:] + chunk):
                    rec.t_first = time.monotonic()
                if api and rec.resp_id is None:
                    m = _RESP_ID.search(last[-64:] + chunk)
                    if m:
                        rec.resp_id = m.group(1).decode()
                ntok += chunk.count(b'"finish_reason"') + chunk.count(b'{"token"')
                last = (last + chunk)[-4096:]
            rec.t_done = time.monotonic()
            m = _USAGE.search(last)
            mr = _USAGE_RESPONSES.search(last) or _USAGE_MESSAGES.search(last)
            if m:
                rec.prompt = int(m.group(1))
                rec.out_tokens = int(m.group(2))
                rec.cached = int(m.group(3))
            elif mr:
                rec.prompt = int(mr.group(1))
                rec.cached = int(mr.group(2))
                rec.out_tokens = int(mr.group(3))
            else:
                rec.out_tokens = ntok
            if r.status != 200:
                rec.resp_id = None
                # one error key for every id a store did not hold
                last = re.sub(rb"resp_[0-9a-f]+", b"resp_*", last)
            if r.status != 200:
                rec.error = "HTTP %d: %s" % (r.status, last[:200])
                rec.shed = is_shed(r.status, r.headers)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
        rec.error = "%s: %s" % (type(e).__name__, e)
        rec.t_done = time.monotonic()


def spread(url, reqs, opts):
    """The address each request is sent to: `url` (one router), or, with
    --hosts N, one of N routers chosen at random per request (a layer-4
    balancer spreads new connections, and each request of the benchmark
    is a client's connection); with --bypass F, a share F of the requests
    goes straight to a random engine, as other clients of the engines do.
    Seeded, so that every strategy of a seed sees the same spread."""
    urls = url if isinstance(url, list) else [url]
    engines = getattr(opts, "engine_urls", None) or []
    bypass = getattr(opts, "bypass", 0.0) or 0.0
    rnd = random.Random("spread-%s-%d" % (opts.seed, len(reqs)))
    out = []
    for _ in reqs:
        if engines and rnd.random() < bypass:
            out.append(rnd.choice(engines))
        else:
            out.append(urls[rnd.randrange(len(urls))])
    return out


async def drive(url, reqs, opts, closed=0):
    """Replay reqs; open loop at their arrival times (x time scale), or
    closed loop with `closed` workers each taking whole sessions.  `url`
    is one router's address or a list of them (--hosts)."""
    recs = [Rec(i) for i in range(len(reqs))]
    # a stored conversation's turn waits for its session's previous one
    last = {}
    for i, r in enumerate(reqs):
        if PREV in r.body and r.session in last:
            recs[i].prev = last[r.session]
        recs[i].done = asyncio.Event()
        last[r.session] = recs[i]
    urls = spread(url, reqs, opts)
    engines = set(getattr(opts, "engine_urls", None) or [])
    for rec, u in zip(recs, urls):
        rec.routed = u not in engines
    conn = aiohttp.TCPConnector(limit=0, force_close=False,
                                enable_cleanup_closed=True)
    timeout = opts.request_timeout
    async with aiohttp.ClientSession(connector=conn) as session:
        t0 = time.monotonic()
        if closed:
            sessions = collections.OrderedDict()
            for i, r in enumerate(reqs):
                sessions.setdefault(r.session, []).append(i)
            queue = collections.deque(sessions.values())

            async def worker():
                while queue:
                    for i in queue.popleft():
                        recs[i].t_sched = time.monotonic()
                        await do_request(session, urls[i], reqs[i], recs[i],
                                         timeout)
            await asyncio.gather(*(worker() for _ in range(closed)))
        else:
            tasks = []
            scale = opts.time_scale
            for i, r in enumerate(reqs):
                target = t0 + r.t * scale
                d = target - time.monotonic()
                if d > 0:
                    await asyncio.sleep(d)
                recs[i].t_sched = target
                tasks.append(asyncio.ensure_future(
                    do_request(session, urls[i], r, recs[i], timeout)))
            await asyncio.gather(*tasks)
        t1 = time.monotonic()
    return recs, t0, t1


# ---------------------------------------------------------------------------
# one run


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    f = math.floor(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def summarize(strategy, wl, recs, t0, t1, before, after, opts, ports,
              warmup=0.0):
    scale = opts.time_scale
    all_recs = recs
    recs = recs[int(len(recs) * warmup):]   # latency figures after warm-up
    ok = [r for r in recs if r.error is None and r.status == 200
          and r.t_first is not None]
    ttft = [(r.t_first - r.t_send) / scale for r in ok]
    # the requests that went through a router (all but --bypass's)
    ttft_routed = [(r.t_first - r.t_send) / scale for r in ok if r.routed]
    e2e = [(r.t_done - r.t_send) / scale for r in ok]
    delta = []
    for b, a in zip(before, after):
        delta.append({k: a.get(k, 0) - b.get(k, 0) for k in a})
    q = sum(d.get("vllm:prefix_cache_queries", 0) for d in delta)
    h = sum(d.get("vllm:prefix_cache_hits", 0) for d in delta)
    per_inst = collections.Counter(r.instance for r in ok)
    names = ["i%d" % i for i in range(len(ports))]
    counts = [per_inst.get(n, 0) for n in names]
    peaks = [a.get("llmsim:peak_requests_inflight", 0) for a in after]
    lag = sum(d.get("llmsim:step_lag_seconds", 0) for d in delta)
    busy = [d.get("llmsim:busy_seconds", 0) for d in delta]
    dur = (max(r.t_done for r in all_recs if r.t_done) - t0) / scale \
        if all_recs else 0
    out_tok = sum(r.out_tokens for r in all_recs if r.error is None)
    n_done = sum(1 for r in all_recs if r.error is None and r.status == 200)
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    cached_client = [r.cached for r in ok if r.cached is not None]
    prompt_client = [r.prompt for r in ok if r.prompt]
    # shed: answered 429/503 on purpose (is_shed), counted apart, neither
    # an error nor in the percentiles (those are the served requests')
    shed = collections.Counter(r.status for r in recs if r.shed)
    errors = collections.Counter((r.error or "")[:80] for r in recs
                                 if r not in ok and not r.shed)
    # the module's strategy of each request: hit rate and TTFT by arm
    arms = {}
    for a in sorted(set(r.arm for r in ok if r.arm)):
        rs = [r for r in ok if r.arm == a]
        pr = sum(r.prompt for r in rs if r.prompt and r.cached is not None)
        arms[a] = {
            "n": len(rs),
            "ttft_p50": pct([(r.t_first - r.t_send) / scale for r in rs], 50),
            "ttft_p90": pct([(r.t_first - r.t_send) / scale for r in rs], 90),
            "hit_rate_client": (sum(r.cached for r in rs
                                    if r.prompt and r.cached is not None) / pr
                                if pr else float("nan"))}
    # late sends: the client could not keep the schedule
    late = [r.t_send - r.t_sched for r in recs if r.t_sched is not None]
    return {
        "strategy": strategy,
        "workload": wl.name,
        "n": len(recs),
        "ok": len(ok),
        "shed": sum(shed.values()),
        "shed_by_status": {str(k): v for k, v in sorted(shed.items())},
        "errors": dict(errors),
        "ttft_p50": pct(ttft, 50), "ttft_p90": pct(ttft, 90),
        "ttft_p99": pct(ttft, 99), "ttft_mean": mean(ttft),
        "ttft_routed_p50": pct(ttft_routed, 50),
        "ttft_routed_p90": pct(ttft_routed, 90),
        "ttft_routed_p99": pct(ttft_routed, 99),
        "e2e_p50": pct(e2e, 50), "e2e_p90": pct(e2e, 90),
        "hit_rate": h / q if q else float("nan"),
        "hit_rate_client": (sum(cached_client) / sum(prompt_client)
                            if prompt_client else float("nan")),
        "prefill_tokens": sum(d.get("llmsim:prefill_tokens", 0) for d in delta),
        "duration": dur,
        "req_per_s": n_done / dur if dur else float("nan"),
        "out_tok_per_s": out_tok / dur if dur else float("nan"),
        "per_instance": counts,
        "balance_req": (max(counts) / mean(counts)) if sum(counts) else float("nan"),
        "peak_inflight": peaks,
        "balance_peak": (max(peaks) / mean(peaks)) if sum(peaks) else float("nan"),
        "busy": busy,
        "step_lag": lag,
        "client_late_p99": pct(late, 99) if late else 0.0,
        "ttfts": ttft,
        "arms": arms,
        "wall": t1 - t0,
    }


def run_one(strategy, wl, opts, closed=0, reqs=None, quiet=False, warmup=0.0,
            slot=0):
    reqs = reqs if reqs is not None else wl.requests
    tmp = tempfile.mkdtemp(prefix="pa-bench-%s-" % strategy)
    os.chmod(tmp, 0o755)
    sim = proxy = None
    proxies = []
    hosts = getattr(opts, "hosts", 1) or 1
    try:
        ports = bench_ports(opts, slot)
        sim_ports, pport = ports[:-1], ports[-1]
        opts.engine_urls = ["http://127.0.0.1:%d" % p for p in sim_ports]
        # prefix_aware_sync between the hosts (an arm's "sync"): a UDP port
        # each
        opts.sync_ports = free_ports(hosts, socket.SOCK_DGRAM)
        opts.sync_host = 0
        if is_oracle(strategy) or is_peer(strategy):
            sim = start_sim(tmp, sim_ports, opts, front=pport,
                            front_args=front_args(strategy, opts))
            hosts = 1
        else:
            sim = start_sim(tmp, sim_ports, opts, pooled=strategy in POOLED)
            proxy = start_proxy(strategy, tmp, pport, sim_ports, opts)
            proxies.append(proxy)
        url = "http://127.0.0.1:%d" % pport
        # --hosts N: N routers, each its own nginx (own zones and index),
        # in front of the same engines
        urls = [url]
        for h, hport in enumerate(free_ports(hosts - 1)):
            htmp = os.path.join(tmp, "host%d" % (h + 1))
            opts.sync_host = h + 1
            proxies.append(start_proxy(strategy, htmp, hport, sim_ports,
                                       opts))
            urls.append("http://127.0.0.1:%d" % hport)

        async def go():
            async with aiohttp.ClientSession() as s:
                # through the proxy once, so that a broken proxy fails here
                async with s.get(url + "/ping") as r:
                    if r.status != 200:
                        raise RuntimeError("%s: GET /ping -> %d" % (strategy,
                                                                    r.status))
                before = await scrape(s, sim_ports)
            recs, t0, t1 = await drive(urls, reqs, opts, closed)
            routes = None
            async with aiohttp.ClientSession() as s:
                after = await scrape(s, sim_ports)
                if is_pa(strategy):
                    routes = await pa_routes(s, url)
            return recs, t0, t1, before, after, routes

        cpu0 = proc_cpu(sim.pid)
        st0 = cpu_times()
        recs, t0, t1, before, after, routes = asyncio.run(go())
        sim_cpu = proc_cpu(sim.pid) - cpu0
        steal = steal_share(st0, cpu_times())
        res = summarize(strategy, wl, recs, t0, t1, before, after, opts,
                        sim_ports, warmup)
        res["routes"] = routes
        if opts.trace:
            res["trace_path"] = write_trace(opts.trace, strategy, wl, reqs,
                                            recs, t0, opts)
        res["sim_cpu"] = sim_cpu / res["wall"] if res["wall"] else float("nan")
        res["steal"] = steal
        if any(p.poll() is not None for p in proxies):
            res["errors"]["proxy exited"] = 1
        res["hosts"] = hosts
        res["bypass"] = getattr(opts, "bypass", 0.0) or 0.0
        if not quiet:
            log("  %-13s ok %d/%d%s  TTFT p50 %.3f p90 %.3f p99 %.3f s%s  "
                "hit %.1f%%  "
                "req/inst %s  peak %s  (wall %.1fs, sim lag %.2fs, sim CPU %.0f%%, "
                "steal %.0f%%)"
                % (strategy, res["ok"], res["n"], shed_note(res),
                   res["ttft_p50"], res["ttft_p90"], res["ttft_p99"],
                   " (of the served)" if res["shed"] else "",
                   100 * res["hit_rate"], res["per_instance"],
                   [int(x) for x in res["peak_inflight"]], res["wall"],
                   res["step_lag"], 100 * res["sim_cpu"], 100 * steal))
            if res["errors"]:
                log("    errors:", res["errors"])
            if routes:
                log("    prefix_aware routes:", routes)
        return res
    finally:
        for p in proxies:
            PROCS.stop(p)
        if sim is not None:
            PROCS.stop(sim)
        if opts.keep_tmp:
            log("  kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def write_trace(outdir, strategy, wl, reqs, recs, t0, opts):
    """One JSON line per request: what it was, where it went, what it hit
    (--trace DIR; read by bench/noisy_report.py and bench/prio_report.py,
    not by run.py's reports).  Times in model seconds: t the arrival in
    the stream, wait the send's delay after it, ttft, queued (the wait in
    the module's queue), done (the answer's end, from the run's start);
    band: the request's X-Bench-Priority (workload prio), else null."""
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "%s-%s-%s.jsonl" % (
        wl.name, strategy, wl.params.get("seed")))
    scale = opts.time_scale
    with open(path, "w") as f:
        for q, r in zip(reqs, recs):
            f.write(json.dumps(dict(
                i=r.idx, t=q.t, session=q.session, turn=q.turn,
                group=q.group, band=q.priority, instance=r.instance,
                status=r.status, shed=r.shed, max_tokens=q.max_tokens,
                prompt=r.prompt, cached=r.cached, route=r.route,
                depth=r.depth, arm=r.arm,
                queued=float(r.queued) / 1000 / scale
                if r.queued not in (None, "", "-") else None,
                ttft=(r.t_first - r.t_send) / scale
                if r.t_first and r.t_send else None,
                wait=(r.t_send - t0) / scale - q.t if r.t_send else None,
                done=(r.t_done - t0) / scale if r.t_done else None))
                + "\n")
    return path


# ---------------------------------------------------------------------------
# the ideal: one LRU as large as all caches together, offline


def ideal_hit_rate(reqs, capacity_blocks):
    lru = collections.OrderedDict()
    q = h = 0
    for r in reqs:
        data, _, _, _, _ = llmsim.parse_prompt(r.path, r.body)
        hashes = llmsim.block_hashes(data)
        plen = llmsim.num_tokens(len(data))
        limit = (plen - 1) // llmsim.BLOCK_TOKENS
        n = 0
        for x in hashes[:limit]:
            if x not in lru:
                break
            n += 1
        q += plen
        h += n * llmsim.BLOCK_TOKENS
        # touch tail first so that the head stays the most recent
        for x in reversed(hashes):
            if x in lru:
                lru.move_to_end(x)
            else:
                lru[x] = None
        while len(lru) > capacity_blocks:
            lru.popitem(last=False)
    return h / q if q else float("nan")


# ---------------------------------------------------------------------------
# reports


def fmt(x, f="%.3f"):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f % x


def ratio(x, base):
    if base is None or x is None or not base or math.isnan(base) or math.isnan(x):
        return "-"
    return "%.2f" % (x / base)


def table(results, ideal=None, sweep=None):
    base = next((r for r in results if r["strategy"] == "round_robin"), None)
    g = lambda k: base[k] if base else None  # noqa: E731
    rows = ["| strategy | ok | TTFT P50 s | P90 s | P99 s | KV hit | req/s | "
            "out tok/s | max/mean req | max/mean peak in-flight |"
            + (" max rate @SLO |" if sweep else ""),
            "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if sweep else "")]
    for r in results:
        s = r["strategy"]
        cells = [
            label(s),
            "%d/%d%s" % (r["ok"], r["n"], shed_note(r)),
            "%s (%s)" % (fmt(r["ttft_p50"]), ratio(r["ttft_p50"], g("ttft_p50"))),
            "%s (%s)" % (fmt(r["ttft_p90"]), ratio(r["ttft_p90"], g("ttft_p90"))),
            "%s (%s)" % (fmt(r["ttft_p99"]), ratio(r["ttft_p99"], g("ttft_p99"))),
            "%s (%s)" % (fmt(100 * r["hit_rate"], "%.1f%%"),
                         ratio(r["hit_rate"], g("hit_rate"))),
            "%s (%s)" % (fmt(r["req_per_s"], "%.2f"), ratio(r["req_per_s"], g("req_per_s"))),
            "%s (%s)" % (fmt(r["out_tok_per_s"], "%.0f"),
                         ratio(r["out_tok_per_s"], g("out_tok_per_s"))),
            "%s (%s)" % (fmt(r["balance_req"], "%.2f"),
                         ratio(r["balance_req"], g("balance_req"))),
            "%s (%s)" % (fmt(r["balance_peak"], "%.2f"),
                         ratio(r["balance_peak"], g("balance_peak"))),
        ]
        if sweep:
            sw, allpass = sweep.get(s, (None, False))
            b = sweep.get("round_robin", (None, False))[0]
            if sw:
                cells.append("%s%s (%s)" % ("&ge; " if allpass else "",
                                            fmt(sw, "%.1f"), ratio(sw, b)))
            else:
                cells.append("< lowest" if s in sweep else "-")
        rows.append("| " + " | ".join(cells) + " |")
    if ideal is not None:
        rows.append("| %s | | | | | %s (%s) | | | | |%s" % (
            LABELS["ideal"], fmt(100 * ideal, "%.1f%%"),
            ratio(ideal, g("hit_rate")), " |" if sweep else ""))
    return "\n".join(rows)


def plots(wlname, results, ideal, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no plots")
        return []
    files = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        xs = sorted(r["ttfts"])
        if not xs:
            continue
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", label=label(r["strategy"]))
    ax.set_xscale("log")
    ax.set_xlabel("TTFT, model seconds (log)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("%s: TTFT CDF" % wlname)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    f = os.path.join(outdir, "%s_ttft_cdf.png" % wlname)
    fig.savefig(f, dpi=90)
    plt.close(fig)
    files.append(f)

    names = [r["strategy"] for r in results]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    hits = [100 * r["hit_rate"] for r in results]
    a1.bar(range(len(names)), hits, color="tab:blue")
    if ideal is not None:
        a1.axhline(100 * ideal, color="tab:red", ls="--", label="ideal (offline)")
        a1.legend(fontsize=7)
    a1.set_xticks(range(len(names)))
    a1.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    a1.set_ylabel("KV cache hit rate, % of prompt tokens")
    a1.set_ylim(0, 100)
    a1.set_title("%s: prefix cache hits" % wlname)
    w = 0.38
    a2.bar([i - w / 2 for i in range(len(names))],
           [r["balance_req"] for r in results], w, label="requests max/mean")
    a2.bar([i + w / 2 for i in range(len(names))],
           [r["balance_peak"] for r in results], w, label="peak in-flight max/mean")
    a2.axhline(1.0, color="grey", lw=0.8)
    a2.set_xticks(range(len(names)))
    a2.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    a2.set_title("%s: load balance (1 = even)" % wlname)
    a2.legend(fontsize=7)
    fig.tight_layout()
    f = os.path.join(outdir, "%s_hits_balance.png" % wlname)
    fig.savefig(f, dpi=90)
    plt.close(fig)
    files.append(f)
    return files


def machine():
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f
                        if l.startswith("model name")), "?")
    except OSError:
        cpu = "?"
    ver = lambda cmd: subprocess.run(cmd, capture_output=True, text=True).stderr.splitlines()[0] \
        if shutil.which(cmd[0]) or os.path.exists(cmd[0]) else "?"  # noqa: E731
    try:
        hv = subprocess.run([HAPROXY, "-v"], capture_output=True,
                            text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        hv = "?"
    try:
        nv = ver([NGINX, "-v"])
    except (OSError, IndexError):
        nv = "?"
    return "%s, %d cores, %s; %s; %s; Python %s, aiohttp %s" % (
        cpu, os.cpu_count(), platform.platform(), nv, hv,
        platform.python_version(), aiohttp.__version__)


# ---------------------------------------------------------------------------
# several seeds: medians, ranges and ratios


def med_range(xs):
    """-> (median, min, max) of the numbers in xs (None and NaN left out),
    or None."""
    xs = sorted(x for x in xs if x is not None
                and not (isinstance(x, float) and math.isnan(x)))
    if not xs:
        return None
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0
    return (med, xs[0], xs[-1])


AGG_KEYS = ("hit_rate", "ttft_p50", "ttft_p90", "ttft_p99", "ttft_mean",
            "ttft_routed_p50", "ttft_routed_p90", "ttft_routed_p99",
            "balance_req", "balance_peak", "req_per_s", "out_tok_per_s")
WITHIN_POOLED = 1.25


def _div(a, b):
    if a is None or b is None or not b:
        return None
    if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
        return None
    return a / b


def aggregate(seeds, names):
    """seeds: [{"seed": s, "ideal": hit rate, "results": [run_one dicts]}].
    -> {strategy: {key: (median, min, max) over the seeds,
                   key_rr: the same of the ratio to round robin of the same
                           seed, key_pooled (+ key_pooled_list): of the ratio
                           to the pooled bound of the same seed,
                   hit_of_ideal, seeds, ok, n}, "ideal": {...}}"""
    out = collections.OrderedDict()
    for name in names:
        rows = []
        for sd in seeds:
            by = {r["strategy"]: r for r in sd["results"]}
            if name in by:
                rows.append((by[name], by.get("round_robin"), by.get("pooled"),
                             sd.get("ideal")))
        if not rows:
            continue
        a = {"seeds": len(rows), "seed_list": [sd["seed"] for sd in seeds],
             "ok": sum(r["ok"] for r, _, _, _ in rows),
             "shed": sum(r.get("shed", 0) for r, _, _, _ in rows),
             "n": sum(r["n"] for r, _, _, _ in rows)}
        for k in AGG_KEYS:
            a[k] = med_range([r.get(k) for r, _, _, _ in rows])
            a[k + "_rr"] = med_range([_div(r.get(k), rr.get(k)) if rr else None
                                      for r, rr, _, _ in rows])
            pl = [_div(r.get(k), p.get(k)) if p else None for r, _, p, _ in rows]
            a[k + "_pooled"] = med_range(pl)
            a[k + "_pooled_list"] = [x for x in pl if x is not None]
        a["hit_of_ideal"] = med_range([_div(r.get("hit_rate"), i)
                                       for r, _, _, i in rows])
        out[name] = a
    ideals = [sd.get("ideal") for sd in seeds]
    rrs = [{r["strategy"]: r for r in sd["results"]}.get("round_robin")
           for sd in seeds]
    out["ideal"] = {
        "seeds": len(seeds),
        "hit_rate": med_range(ideals),
        "hit_rate_rr": med_range([_div(i, rr["hit_rate"]) if rr else None
                                  for i, rr in zip(ideals, rrs)]),
        "hit_of_ideal": (1.0, 1.0, 1.0)}
    return out


def fmt_mr(mr, f="%.2f", scale=1.0, suffix=""):
    """(median, min, max) -> "0.74 (0.70..0.81)"; no range when it is one
    value at this precision."""
    if mr is None:
        return "-"
    med, lo, hi = (x * scale for x in mr)
    s = (f % med) + suffix
    if f % lo != f % hi:
        s += " (%s..%s)" % (f % lo, f % hi)
    return s


def within_cell(a, key):
    xs = a.get(key + "_pooled_list")
    if not xs:
        return "-"
    med = a[key + "_pooled"][0]
    k = sum(1 for x in xs if x <= WITHIN_POOLED)
    return "%s %.2f (%d/%d)" % ("yes" if med <= WITHIN_POOLED else "no", med,
                                k, len(xs))


def agg_table(agg, names):
    """The comparison table: hit rate, % of ideal, TTFT ratios to round
    robin, TTFT within 1.25x of the pooled bound, balance, throughput."""
    rows = ["| strategy | ok | KV hit | %% of ideal | TTFT P50 (x RR) | "
            "P90 (x RR) | P99 (x RR) | P50 within %gx of pooled | "
            "P90 within %gx of pooled | max/mean req | req/s (x RR) |"
            % (WITHIN_POOLED, WITHIN_POOLED),
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in names:
        a = agg.get(s)
        if a is None:
            continue
        bound = s == "pooled"
        rows.append("| " + " | ".join([
            ("**%s**" % label(s)) if bound else label(s),
            "%d/%d%s" % (a["ok"], a["n"], ", %d shed" % a["shed"]
                         if a.get("shed") else ""),
            fmt_mr(a["hit_rate"], "%.1f", 100, "%"),
            fmt_mr(a["hit_of_ideal"], "%.0f", 100, "%"),
            fmt_mr(a["ttft_p50_rr"]), fmt_mr(a["ttft_p90_rr"]),
            fmt_mr(a["ttft_p99_rr"]),
            "bound" if bound else within_cell(a, "ttft_p50"),
            "bound" if bound else within_cell(a, "ttft_p90"),
            fmt_mr(a["balance_req"]),
            fmt_mr(a["req_per_s_rr"]),
        ]) + " |")
    i = agg.get("ideal")
    if i and i["hit_rate"]:
        rows.append("| %s | | %s | 100%% | | | | | | | |" % (
            LABELS["ideal"], fmt_mr(i["hit_rate"], "%.1f", 100, "%")))
    return "\n".join(rows)


def agg_abs_table(agg, names, sweep=None):
    """Absolute figures (medians and ranges over the seeds)."""
    rows = ["| strategy | TTFT P50 s | P90 s | P99 s | KV hit (x RR) | "
            "out tok/s | out tok/s (x RR) | max/mean peak in-flight |"
            + (" max rate @SLO, first seed |" if sweep else ""),
            "|---|---|---|---|---|---|---|---|" + ("---|" if sweep else "")]
    for s in names:
        a = agg.get(s)
        if a is None:
            continue
        cells = [label(s), fmt_mr(a["ttft_p50"], "%.3f"),
                 fmt_mr(a["ttft_p90"], "%.3f"), fmt_mr(a["ttft_p99"], "%.3f"),
                 fmt_mr(a["hit_rate_rr"]), fmt_mr(a["out_tok_per_s"], "%.0f"),
                 fmt_mr(a["out_tok_per_s_rr"]), fmt_mr(a["balance_peak"])]
        if sweep:
            sw, allpass = sweep.get(s, (None, False))
            b = sweep.get("round_robin", (None, False))[0]
            if sw:
                cells.append("%s%s (%s)" % ("&ge; " if allpass else "",
                                            fmt(sw, "%.1f"), ratio(sw, b)))
            else:
                cells.append("< lowest" if s in sweep else "-")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


AGG_NOTE = ("Each figure is the median over the seeds, (min..max) its range. "
            "x RR: ratio to nginx round robin in the same seed's run (median "
            "and range of the per-seed ratios). %% of ideal: hit rate / the "
            "offline ideal of the same stream. Within %gx of pooled: the "
            "median per-seed ratio of the TTFT to the pooled bound's (least_conn "
            "over instances that share one KV cache of the same total size), "
            "yes if at most %g, (k/n): the seeds within." % (WITHIN_POOLED,
                                                              WITHIN_POOLED))


def merged_results(per_seed, names):
    """One result per strategy for the plots: TTFTs of all seeds, medians."""
    out = []
    for s in names:
        rs = [r for sd in per_seed for r in sd["results"] if r["strategy"] == s]
        if not rs:
            continue
        m = {"strategy": s, "ttfts": [x for r in rs for x in r["ttfts"]]}
        for k in ("hit_rate", "balance_req", "balance_peak"):
            mr = med_range([r[k] for r in rs])
            m[k] = mr[0] if mr else float("nan")
        out.append(m)
    return out


def lag_share(r):
    """The simulator's step-loop lateness as a share of each instance's
    time: the lateness summed over the instances, over wall x instances."""
    n = len(r["per_instance"]) or 1
    return r["step_lag"] / (r["wall"] * n) if r["wall"] else 0.0


def run_notes(results):
    lines = []
    for r in results:
        if r["errors"]:
            lines.append("- %s errors: `%s`" % (r["strategy"], r["errors"]))
        if r.get("runs", 1) > 1:
            lines.append("- %s: run %d times, the simulator having fallen "
                         "behind; the run that lagged least is reported"
                         % (r["strategy"], r["runs"]))
        if lag_share(r) > MAX_LAG:
            lines.append("- %s: simulator fell behind by %.1f %% of each "
                         "instance's time (figures less reliable)" % (
                             r["strategy"], 100 * lag_share(r)))
    for r in results:
        if r.get("routes"):
            lines.append("- %s: why requests went where they went (the module's "
                         "counters): `%s`" % (label(r["strategy"]), r["routes"]))
    lines += ["", "Simulator (%d instances, one process): CPU %s of one core; "
              "step-loop lag %s of the run's wall time." % (
                  len(results[0]["per_instance"]) if results else 0,
                  ", ".join("%s %.0f%%" % (r["strategy"], 100 * r.get("sim_cpu", float("nan")))
                            for r in results),
                  ", ".join("%s %.1f%%" % (r["strategy"], 100 * lag_share(r))
                            for r in results if r["wall"])),
              "", "CPU time the virtual machine's host took for others "
              "(steal): " + ", ".join(
                  "%s %.1f%%" % (r["strategy"], 100 * r.get("steal",
                                                           float("nan")))
                  for r in results),
              "", "Per-instance requests: " + "; ".join(
                  "%s %s" % (r["strategy"], r["per_instance"]) for r in results)]
    return lines


def lag_flags(per_seed):
    return ["%s seed %s (%.0f%%)" % (r["strategy"], sd["seed"],
                                     100 * lag_share(r))
            for sd in per_seed for r in sd["results"]
            if lag_share(r) > MAX_LAG]


def setup_line(opts, rate):
    return ("Setup: %d simulated instances (%s, %d KV blocks = %d tokens each; "
            "the pooled bound: one cache of %d blocks), time scale %g, "
            "open-loop Poisson arrivals at %.2f req/s (model time); "
            "prefix_aware `%s`. Figures in model seconds." % (
                opts.instances, llmsim.MODEL["name"] + " on " + llmsim.GPU["name"],
                opts.kv_blocks, opts.kv_blocks * llmsim.BLOCK_TOKENS,
                opts.kv_blocks * opts.instances, opts.time_scale, rate,
                pa_directive(opts)))


def arms_lines(names, opts):
    pas = [s for s in names if is_pa(s)]
    if not pas:
        return []
    return ["prefix_aware arms: " + "; ".join(
        "%s `%s`" % (s, pa_directive(opts, s)) for s in pas), ""]


def write_workload_page(outdir, wlname, per_seed, main, sens, agg, opts,
                        sweep=None, sweep_rates=None):
    first = per_seed[0]
    wl = first["wl"]
    pngs = plots(wlname, merged_results(per_seed, main),
                 med_range([sd["ideal"] for sd in per_seed])[0], outdir)
    lines = ["# Workload `%s`" % wlname, "",
             workloads.DESCRIPTIONS.get(wlname, ""), "",
             "Parameters (first seed): `%s`" % json.dumps(wl.params), "",
             setup_line(opts, wl.params["rate"]), "",
             "Seeds: %s." % ", ".join(str(sd["seed"]) for sd in per_seed), ""]
    lines += arms_lines(main + sens, opts)
    lines += ["## Over %d seed%s" % (len(per_seed), "s" if len(per_seed) > 1 else ""),
              "", AGG_NOTE, "", agg_table(agg, main), "",
              agg_abs_table(agg, main, sweep), ""]
    if sweep is not None:
        lines += ["Max rate @SLO (first seed's stream only): highest offered "
                  "load (req/s, model time) whose P90 TTFT stayed under %.2f s "
                  "with every request answered: a ladder %s (stopping at the "
                  "first miss), then %d bisection steps between the last pass "
                  "and the first miss. Each point is a fresh %g-model-second "
                  "run whose first %d%% is left out as warm-up; &ge;: the "
                  "highest rate tried passed."
                  % (opts.slo, ", ".join("%g" % x for x in sweep_rates),
                     opts.sweep_probes, opts.sweep_seconds,
                     100 * opts.sweep_warmup), ""]
    if sens:
        lines += ["### prefix_aware's parameters", "",
                  "The same streams; prefix_aware arms with other parameters "
                  "(the base: `%s`)." % pa_directive(opts), "",
                  agg_table(agg, sens), ""]
    for i, sd in enumerate(per_seed):
        lines += ["## Seed %s" % sd["seed"], "", sd["wl"].describe(), "",
                  "(x) = ratio to nginx round robin in this run.", "",
                  table(sd["results"], sd["ideal"], sweep if i == 0 else None), ""]
        lines += run_notes(sd["results"]) + [""]
    if pngs:
        lines += ["## Plots", "", "TTFTs of all seeds together; hit rate and "
                  "balance: medians over the seeds.", ""]
    for f in pngs:
        lines.append("![%s](%s)" % (os.path.basename(f), os.path.basename(f)))
    with open(os.path.join(outdir, "%s.md" % wlname), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------
# modes


def strategies_for(opts, required_pa=False):
    names = []
    for s in opts.strategies.split(","):
        s = s.strip()
        if s == "arms":                     # the arms file's [main] arms
            names += ARM_GROUPS["main"]
        elif s:
            names.append(s)
    for a in ARM_GROUPS["main"]:            # --arm ... always runs
        if a in opts.cli_arms and a not in names:
            names.append(a)
    names = list(collections.OrderedDict.fromkeys(names))
    for s in names:
        if (s not in STRATEGY_DIRECTIVE and s != "haproxy_hash"
                and not is_oracle(s) and not is_pa(s) and not is_peer(s)):
            sys.exit("run.py: unknown strategy %r (have %s, pooled, arms, "
                     "the arms %s, prefix_aware@k=v+k=v, oracle@k=v+k=v, "
                     "the peers %s)" % (
                         s, ", ".join(ALL_STRATEGIES), ", ".join(ARMS) or "-",
                         ", ".join(sorted(peers.PEERS))))
        if is_peer(s):
            try:
                peer_args(s)
            except ValueError as e:
                sys.exit("run.py: %s: %s" % (s, e))
        if is_oracle(s):
            try:
                oracle_args(s, opts)
            except ValueError as e:
                sys.exit("run.py: %s" % e)
        if is_pa(s):
            try:
                pa_directive(opts, s)
            except ValueError as e:
                sys.exit("run.py: %s" % e)
    if any(is_pa(s) for s in names) and not module_available():
        msg = ("prefix_aware: %s is not built (make module); " % MODULE_SO)
        if required_pa:
            log("run.py: " + msg + "cannot run without it")
            sys.exit(2)
        log("run.py: " + msg + "skipping this strategy")
        names = [s for s in names if not is_pa(s)]
    if module_available():
        err = check_arms(names, opts)
        if err:
            sys.exit("run.py: " + err)
    return names


def sensitivity_for(opts):
    if opts.sensitivity is None:
        names = list(ARM_GROUPS["sensitivity"])
    else:
        names = [s.strip() for s in opts.sensitivity.split(",") if s.strip()]
    for s in names:
        if not is_pa(s):
            sys.exit("run.py: --sensitivity: %r is not a prefix_aware arm" % s)
        try:
            pa_directive(opts, s)
        except ValueError as e:
            sys.exit("run.py: %s" % e)
    if names and not module_available():
        log("run.py: prefix_aware parameters: skipped, module not built")
        return []
    if names:
        err = check_arms(names, opts)
        if err:
            sys.exit("run.py: " + err)
    return names


def seeds_for(wlname, opts):
    if opts.seed_list:
        return list(opts.seed_list)
    first = opts.seed if opts.seed is not None else workloads.PARAMS[wlname]["seed"]
    return [first + i for i in range(opts.nseeds)]


# workloads whose contexts need a larger engine cache than --kv-blocks'
# preset: agentic histories and uneven prompts reach 128k tokens, so each
# instance gets 24,576 blocks (393,216 tokens, what an H100 80GB holds for
# Llama-3.1-8B: see docs/benchmarks.md); an explicit --kv-blocks wins
WORKLOAD_KV_BLOCKS = {"agentic": 24576, "uneven": 24576}

# the parameters that make a workload's population (documents, prompts,
# files, tenants, adapters, apps), multiplied by --scale with the rate
SCALE_KEYS = {"rag": ("docs",), "templated": ("templates",),
              "code": ("files",), "tenants": ("tenants",),
              "lora": ("adapters",), "agentic": ("apps",),
              "noisy": ("tenants",), "noisy_equal": ("tenants",),
              "noisy_quiet": ("tenants",), "prio": ("tenants",)}


def opts_for(wlname, opts):
    """The options of one workload's runs: its engine cache
    (WORKLOAD_KV_BLOCKS) unless --kv-blocks was given."""
    o = copy.copy(opts)
    if not getattr(opts, "kv_explicit", False):
        o.kv_blocks = WORKLOAD_KV_BLOCKS.get(wlname, opts.kv_blocks)
    return o


def wl_overrides(wlname, opts, n=None, rate=None):
    """workloads.generate() overrides: --n/--rate (or the workload's own),
    times --scale, and the population (SCALE_KEYS) times --population
    (by default --scale); an explicit n or rate (the sweep's) is taken as
    it is."""
    p = workloads.PARAMS[wlname]
    k = getattr(opts, "scale", 1)
    kp = getattr(opts, "population", None) or k
    out = {"n": n or (opts.n or p["n"]) * k,
           "rate": rate or (opts.rate or p["rate"]) * k}
    if getattr(opts, "shape", None) and "shape" in p:
        out["shape"] = opts.shape
    if getattr(opts, "stream_rate", None):
        out["stream_rate"] = opts.stream_rate * k
    for key in SCALE_KEYS.get(wlname, ()):
        out[key] = p[key] * kp
    return out


def quiet_host(limit=0.02, window=5.0, longest=90.0):
    """Wait until the CPU time the virtual machine's host takes (steal) is
    under limit over a window, at most longest seconds: the simulator's
    lag comes with the host's bursts, which last minutes."""
    t_end = time.monotonic() + longest
    while True:
        t0 = cpu_times()
        time.sleep(window)
        st = steal_share(t0, cpu_times())
        if not st > limit or time.monotonic() >= t_end:
            return st


def run_unlagged(run, strategy, opts, wait=quiet_host):
    """run() once, and again while the simulator fell behind (a run in
    which it did measures the simulator, one Python process for every
    instance, not the router), up to opts.lag_retries more times, each
    after the host's steal has calmed down; the run that lagged least,
    with "runs" set to the number of runs.  With --trace, every run
    writes the same file: the kept run's trace is put back in it."""
    def trace(res):
        if not res.get("trace_path"):
            return None
        with open(res["trace_path"], "rb") as f:
            return f.read()

    r = run()
    kept = trace(r)
    runs = 1
    while lag_share(r) > opts.max_lag and runs <= opts.lag_retries:
        log("  %s: simulator behind by %.1f %% of each instance's time "
            "(over --max-lag %.1f %%): run again"
            % (strategy, 100 * lag_share(r), 100 * opts.max_lag))
        wait()
        r2 = run()
        runs += 1
        if lag_share(r2) < lag_share(r):
            r = r2
            kept = trace(r)
    if kept is not None:
        with open(r["trace_path"], "wb") as f:
            f.write(kept)
    r["runs"] = runs
    return r


def run_workload(wlname, strategies, opts, rate=None, n=None, closed=0,
                 seed=None, slot=0):
    opts = opts_for(wlname, opts)
    wl = workloads.generate(wlname,
                            seed=seed if seed is not None else opts.seed,
                            **wl_overrides(wlname, opts, n, rate))
    log("== %s, seed %s (%s)" % (wl.name, wl.params["seed"], wl.describe()))
    ideal = ideal_hit_rate(wl.requests, opts.instances * opts.kv_blocks)
    results = []
    for s in strategies:
        r = run_unlagged(lambda: run_one(s, wl, opts, closed=closed,
                                         slot=slot), s, opts)
        r["seed"] = wl.params["seed"]
        results.append(r)
    log("  ideal hit rate %.1f%%" % (100 * ideal))
    return wl, results, ideal


def run_seeds(wlname, strategies, opts, closed=0):
    """Every strategy on the streams of each seed, seed after seed (the
    strategies of one seed run back to back, on the same ports)."""
    per = []
    for i, seed in enumerate(seeds_for(wlname, opts)):
        wl, results, ideal = run_workload(wlname, strategies, opts,
                                          closed=closed, seed=seed, slot=i)
        per.append({"seed": wl.params["seed"], "wl": wl, "ideal": ideal,
                    "results": results})
    return per


def print_table(results, ideal):
    base = next((r for r in results if r["strategy"] == "round_robin"), None)
    print("%-30s %9s %9s %9s %8s %9s %9s" % (
        "strategy", "TTFT P50", "TTFT P90", "hit rate", "req/s", "max/mean",
        "peak m/m"))
    for r in results:
        rel = ""
        if base and r is not base and base["ttft_p50"]:
            rel = "  P50 %+.0f%%, P90 %+.0f%% vs round robin" % (
                100 * (r["ttft_p50"] / base["ttft_p50"] - 1),
                100 * (r["ttft_p90"] / base["ttft_p90"] - 1))
        print("%-30s %8.3fs %8.3fs %8.1f%% %8.2f %9.2f %9.2f%s" % (
            label(r["strategy"])[:30], r["ttft_p50"],
            r["ttft_p90"], 100 * r["hit_rate"], r["req_per_s"],
            r["balance_req"], r["balance_peak"], rel))
    if ideal is not None:
        print("%-30s %9s %9s %8.1f%%" % ("ideal (offline LRU)", "", "",
                                          100 * ideal))


def shed_note(r):
    """", 12 shed (429: 12)" when the router shed requests on purpose."""
    if not r.get("shed"):
        return ""
    return ", %d shed (%s)" % (r["shed"], ", ".join(
        "%s: %d" % kv for kv in sorted(r.get("shed_by_status", {}).items())))


def check_complete(results):
    """Every request answered, or shed on purpose (429/503, is_shed): a
    router that sheds at overload has not failed the run."""
    bad = [r for r in results if r["ok"] + r.get("shed", 0) != r["n"]]
    for r in bad:
        log("FAIL: %s answered %d of %d requests%s: %s" % (
            r["strategy"], r["ok"], r["n"], shed_note(r), r["errors"]))
    return not bad


def mode_smoke(opts):
    strategies = strategies_for(opts, required_pa=True)
    wlname = opts.workloads.split(",")[0]
    per = run_seeds(wlname, strategies, opts)
    ok = True
    checks = 0
    for sd in per:
        results = sd["results"]
        print_table(results, sd["ideal"])
        ok = check_complete(results) and ok
        checks += 1
        by = {r["strategy"]: r for r in results}
        rr = by.get("round_robin")
        for s in ("prefix_aware", "pa_v2", "pooled"):
            x = by.get(s)
            if not (rr and x):
                continue
            checks += 1
            if not x["hit_rate"] > rr["hit_rate"]:
                log("FAIL: %s hit rate %.1f%% is not above round robin's "
                    "%.1f%%" % (s, 100 * x["hit_rate"], 100 * rr["hit_rate"]))
                ok = False
            else:
                log("ok: %s hit rate %.1f%% > round robin %.1f%%"
                    % (s, 100 * x["hit_rate"], 100 * rr["hit_rate"]))
    print()
    print(agg_table(aggregate(per, strategies), strategies))
    if ok:
        print("bench-smoke: %d passed, 0 failed" % checks)
    else:
        print("bench-smoke: FAILED")
    return 0 if ok else 1


def mode_demo(opts):
    strategies = strategies_for(opts, required_pa=True)
    wl, results, ideal = run_workload(opts.workloads.split(",")[0], strategies, opts)
    print()
    print("workload: %s" % wl.describe())
    print("%d simulated %s instances, %d-token KV cache each; times in model "
          "seconds" % (opts.instances, llmsim.MODEL["name"],
                       opts.kv_blocks * llmsim.BLOCK_TOKENS))
    print_table(results, ideal)
    return 0 if check_complete(results) else 1


def sweep_point(wlname, strategy, opts, rate, slo, seed=None):
    n = max(60, int(rate * opts.sweep_seconds))
    opts = opts_for(wlname, opts)
    wl = workloads.generate(wlname,
                            seed=seed if seed is not None else opts.seed,
                            **wl_overrides(wlname, opts, n, rate))
    r = run_one(strategy, wl, opts, quiet=True, warmup=opts.sweep_warmup)
    good = r["ok"] == r["n"] and r["ttft_p90"] <= slo
    lagged = lag_share(r) > opts.max_lag
    log("    sweep %-13s %6.2f req/s: P90 %.3f s %s%s" % (
        strategy, rate, r["ttft_p90"], "ok" if good else "over SLO",
        " (simulator lagged %.1fs of %.1fs)" % (r["step_lag"], r["wall"])
        if lagged else ""))
    return good


def sweep_strategy(wlname, strategy, opts, rates, slo, seed=None):
    """The highest offered load whose P90 TTFT stays under the SLO: a
    ladder of rates (ascending, stops at the first miss), then
    sweep_probes bisection steps between the last pass and the first miss.  Each point is a
    fresh run of sweep_seconds (model time) whose first sweep_warmup share
    is left out.  -> (best rate or None, the highest rate tried passed)"""
    best = None
    fail = None
    for rate in rates:
        if sweep_point(wlname, strategy, opts, rate, slo, seed):
            best = rate
        else:
            fail = rate
            break
    if fail is None or best is None:
        return best, fail is None
    for _ in range(opts.sweep_probes):      # bisect between pass and miss
        mid = round((best + fail) / 2.0, 2)
        if not best < mid < fail:
            break
        if sweep_point(wlname, strategy, opts, mid, slo, seed):
            best = mid
        else:
            fail = mid
    return best, False


def strip_ttfts(results):
    return [{k: v for k, v in r.items() if k != "ttfts"} for r in results]


def mode_bench(opts):
    main = strategies_for(opts)
    sens_arms = sensitivity_for(opts) if opts.sensitivity != "" else []
    sens_wls = [w for w in opts.sensitivity_workloads.split(",") if w]
    outdir = opts.out
    os.makedirs(outdir, exist_ok=True)
    t_start = time.monotonic()
    summary = []
    raw = {}
    for wlname in opts.workloads.split(","):
        extra = ([s for s in sens_arms if s not in main]
                 if wlname in sens_wls else [])
        per = run_seeds(wlname, main + extra, opts)
        sens = []
        if extra:
            sens = ([s for s in ("round_robin", "prefix_aware") if s in main]
                    + extra + (["pooled"] if "pooled" in main else []))
        agg = aggregate(per, main + extra)
        sweep = None
        rates = None
        if opts.sweep:
            base = per[0]["wl"].params["rate"]
            rates = [round(base * m, 2) for m in opts.sweep_mult]
            sweep = {}
            log("  rate sweep %s (seed %s), SLO P90 TTFT <= %.2f s"
                % (rates, per[0]["seed"], opts.slo))
            for s in main:
                sweep[s] = sweep_strategy(wlname, s, opts, rates, opts.slo,
                                          seed=per[0]["seed"])
        write_workload_page(outdir, wlname, per, main, sens, agg,
                            opts_for(wlname, opts), sweep, rates)
        summary.append((wlname, per, agg, sweep, sens))
        raw[wlname] = {
            "params": per[0]["wl"].params,
            "seeds": [{"seed": sd["seed"], "params": sd["wl"].params,
                       "ideal": sd["ideal"],
                       "results": strip_ttfts(sd["results"])} for sd in per],
            "sweep": sweep,
            "aggregate": agg}
        with open(os.path.join(outdir, "raw.json"), "w") as f:
            json.dump(raw, f, indent=1, default=str)
    nseeds = max(len(p) for _, p, _, _, _ in summary) if summary else 0
    lines = ["# Benchmark summary", "",
             "Machine: %s" % machine(), "",
             "Run: `%s`, %.0f s wall. %d simulated instances of %s on %s, "
             "%d KV blocks (%d tokens) each, time scale %g; prefix_aware `%s`; "
             "%d seed%s per workload. Times are model seconds." % (
                 " ".join(sys.argv[1:]), time.monotonic() - t_start,
                 opts.instances, llmsim.MODEL["name"], llmsim.GPU["name"],
                 opts.kv_blocks, opts.kv_blocks * llmsim.BLOCK_TOKENS,
                 opts.time_scale, pa_directive(opts), nseeds,
                 "s" if nseeds != 1 else ""), "",
             AGG_NOTE, ""]
    lines += arms_lines(main + sens_arms, opts)
    if not module_available():
        lines += ["**prefix_aware was not run: %s was not built.**" % MODULE_SO, ""]
    for wlname, per, agg, sweep, sens in summary:
        lines += ["## %s" % wlname, "", workloads.DESCRIPTIONS.get(wlname, ""),
                  "", "Seeds %s; first seed: %s%s" % (
                      ", ".join(str(sd["seed"]) for sd in per),
                      per[0]["wl"].describe(),
                      "; %d KV blocks per instance" % opts_for(
                          wlname, opts).kv_blocks
                      if opts_for(wlname, opts).kv_blocks != opts.kv_blocks
                      else ""), "",
                  agg_table(agg, main), "", agg_abs_table(agg, main, sweep), ""]
        if sens:
            lines += ["prefix_aware's parameters on the same streams:", "",
                      agg_table(agg, sens), ""]
        flags = lag_flags(per)
        if flags:
            lines += ["Simulator fell behind (step-loop lag summed over the "
                      "instances > 5 %% of the run's wall time; figures less "
                      "reliable, usually other jobs on the machine): %s."
                      % ", ".join(flags), ""]
        lines += ["Details, per-seed tables and plots: [%s.md](%s.md)"
                  % (wlname, wlname), ""]
    ov = os.path.join(outdir, "overhead.md")
    if os.path.exists(ov):
        lines += ["## Router overhead", "", "See [overhead.md](overhead.md).", ""]
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    log("wrote %s/summary.md" % outdir)
    ok = all(check_complete(sd["results"]) for _, per, _, _, _ in summary
             for sd in per)
    return 0 if ok else 1


def arm_table(per):
    """The module's runs by the strategy that served each request (the
    X-Prefix-Aware-Strategy header): client-side KV hit rate and TTFT, as
    ratios to round robin in the same seed, medians (min-max) over the
    seeds.  A "strategy=$pa_split" run has two rows, one per arm."""
    rows = collections.OrderedDict()
    for sd in per:
        rr = next((r for r in sd["results"] if r["strategy"] == "round_robin"),
                  None)
        for r in sd["results"]:
            for a, x in sorted(r.get("arms", {}).items()):
                d = rows.setdefault((r["strategy"], a), collections.defaultdict(list))
                d["n"].append(x["n"])
                d["hit"].append(x["hit_rate_client"])
                d["p50"].append(x["ttft_p50"])
                d["p90"].append(x["ttft_p90"])
                if rr:
                    d["hit_rr"].append(_div(x["hit_rate_client"],
                                            rr["hit_rate_client"]))
                    d["p50_rr"].append(_div(x["ttft_p50"], rr["ttft_p50"]))
                    d["p90_rr"].append(_div(x["ttft_p90"], rr["ttft_p90"]))
    out = ["| run | arm | requests | KV hit (client) | x round robin | "
           "TTFT P50 s | x round robin | P90 s | x round robin |",
           "|---|---|---|---|---|---|---|---|---|"]
    for (strategy, a), d in rows.items():
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            strategy, a, fmt_mr(med_range(d["n"]), "%.0f"),
            fmt_mr(med_range(d["hit"]), "%.1f", 100, "%"),
            fmt_mr(med_range(d["hit_rr"])),
            fmt_mr(med_range(d["p50"]), "%.3f"),
            fmt_mr(med_range(d["p50_rr"])),
            fmt_mr(med_range(d["p90"]), "%.3f"),
            fmt_mr(med_range(d["p90_rr"]))))
    return "\n".join(out)


def mode_run(opts):
    strategies = strategies_for(opts)
    ok = True
    for wlname in opts.workloads.split(","):
        per = run_seeds(wlname, strategies, opts, closed=opts.closed)
        for sd in per:
            print("\n## seed %s: %s\n" % (sd["seed"], sd["wl"].describe()))
            print(table(sd["results"], sd["ideal"]))
            ok = check_complete(sd["results"]) and ok
        if len(per) > 1:
            agg = aggregate(per, strategies)
            print("\n## %s: %d seeds (%s)\n" % (
                wlname, len(per), ", ".join(str(sd["seed"]) for sd in per)))
            print(agg_table(agg, strategies))
            print()
            print(agg_abs_table(agg, strategies))
        if any(r.get("arms") for sd in per for r in sd["results"]):
            print("\n## %s: the module's runs by arm\n" % wlname)
            print(arm_table(per))
    return 0 if ok else 1


# --- many routers (make bench-hosts): N independent nginx hosts, and
# other clients that reach the engines past every router

HOSTS_CONDITIONS = [(1, 0.0), (2, 0.0), (4, 0.0), (1, 0.3)]


def hosts_cell(a, key, f="%.2f", scale=1.0):
    mr = a.get(key) if a else None
    return fmt_mr(mr, f, scale) if mr else "-"


def hosts_table(wlname, by_cond, strategies):
    """One workload: the module (each of `strategies`) in each condition,
    against round robin in the same condition, and against itself with one
    host and no bypass (the loss the hosts and the other clients cost).
    With a bypass, the requests that went through a router apart too
    ("routed"), and their P90 x rr over the P90 x rr of the run with the
    same hosts and no bypass."""
    lines = ["| module | hosts | bypass | KV hit | hit - 1 host (points) | "
             "TTFT P50 x rr | P90 x rr | P99 x rr | P50 s | P90 s | "
             "P50 x 1 host | P90 x 1 host | routed P50 x rr | "
             "routed P90 x rr | routed P99 x rr | routed P90 x rr / "
             "no bypass | max/mean req | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
             "---|---|---|"]
    for strategy, cond in [(st, c) for st in strategies
                           for c in sorted(by_cond)]:
        base = by_cond.get((1, 0.0), {}).get(strategy)
        a = by_cond.get(cond, {}).get(strategy)
        if not a:
            continue
        d_hit = d50 = d90 = "-"
        if base and a is not base:
            h, h0 = a["hit_rate"][0], base["hit_rate"][0]
            d_hit = "%+.1f" % (100 * (h - h0))
            d50 = "%.2f" % _div(a["ttft_p50"][0], base["ttft_p50"][0])
            d90 = "%.2f" % _div(a["ttft_p90"][0], base["ttft_p90"][0])
        nb = by_cond.get((cond[0], 0.0), {}).get(strategy)
        r_nb = "-"
        if cond[1] and nb and a.get("ttft_routed_p90_rr"):
            r_nb = "%.2f" % _div(a["ttft_routed_p90_rr"][0],
                                 nb["ttft_p90_rr"][0])
        lines.append("| %s | %d | %d %% | %s | %s | %s | %s | %s | %s | %s "
                     "| %s | %s | %s | %s | %s | %s | %s | %d |" % (
                         strategy, cond[0], round(100 * cond[1]),
                         hosts_cell(a, "hit_rate", "%.1f", 100),
                         d_hit, hosts_cell(a, "ttft_p50_rr"),
                         hosts_cell(a, "ttft_p90_rr"),
                         hosts_cell(a, "ttft_p99_rr"),
                         hosts_cell(a, "ttft_p50", "%.3f"),
                         hosts_cell(a, "ttft_p90", "%.3f"),
                         d50, d90,
                         hosts_cell(a, "ttft_routed_p50_rr"),
                         hosts_cell(a, "ttft_routed_p90_rr"),
                         hosts_cell(a, "ttft_routed_p99_rr"), r_nb,
                         hosts_cell(a, "balance_req"),
                         a["n"] - a["ok"]))
    return "\n".join(lines)


def mode_hosts(opts):
    """Each workload, each condition of HOSTS_CONDITIONS (or --hosts and
    --bypass alone when given), the seeds: round robin and the module's
    default, medians and ranges; bench/results/hosts/ (or --out)."""
    strategies = strategies_for(opts)
    mods = [s for s in strategies if s != "round_robin"]
    strategy = mods[0]
    conds = HOSTS_CONDITIONS
    if opts.hosts_conditions:
        conds = [(int(c.split("/")[0]), float(c.split("/")[1]))
                 for c in opts.hosts_conditions.split(",")]
    elif opts.hosts != 1 or opts.bypass:
        conds = [(opts.hosts, opts.bypass)]
    outdir = opts.out or os.path.join(HERE, "results", "hosts")
    os.makedirs(outdir, exist_ok=True)
    pages = ["# Many routers, one cluster\n",
             "%s against round robin, each in the same condition: N "
             "independent nginx hosts (each its own zones and index) in "
             "front of the same %d simulated engines, each request sent to "
             "one host at random (a layer-4 balancer spreading "
             "connections), and a share of the requests sent straight to "
             "a random engine (other clients). Medians over the seeds, "
             "ranges in brackets; `x rr`: the ratio to round robin in the "
             "same condition and seed; `x 1 host`: the module's TTFT "
             "against its own with one host and no bypass.\n"
             % (label(strategy), opts.instances),
             "Setup: %d simulated instances of %d KV blocks (%d tokens) "
             "each, time scale %g, each workload at its own offered load; "
             "the module: `%s`.\n" % (
                 opts.instances, opts.kv_blocks,
                 opts.kv_blocks * llmsim.BLOCK_TOKENS, opts.time_scale,
                 pa_directive(opts, strategy)), ""]
    raw = {}
    ok = True
    for wlname in opts.workloads.split(","):
        by_cond = {}
        for hosts, bypass in conds:
            opts.hosts, opts.bypass = hosts, bypass
            log("== %s: %d host(s), bypass %.0f %%" % (wlname, hosts,
                                                        100 * bypass))
            per = run_seeds(wlname, strategies, opts)
            for sd in per:
                ok = check_complete(sd["results"]) and ok
            by_cond[(hosts, bypass)] = aggregate(per, strategies)
            raw.setdefault(wlname, {})["%d/%.2f" % (hosts, bypass)] = [
                {"seed": sd["seed"], "results": strip_ttfts(sd["results"])}
                for sd in per]
        pages.append("## %s\n" % wlname)
        pages.append(hosts_table(wlname, by_cond, mods))
        pages.append("")
        with open(os.path.join(outdir, "summary.md"), "w") as f:
            f.write("\n".join(pages) + "\n")
        with open(os.path.join(outdir, "raw.json"), "w") as f:
            json.dump(raw, f, indent=1, default=str)
    print("\n".join(pages))
    return 0 if ok else 1


BENCH_STRATEGIES = ALL_STRATEGIES + ["arms", "pooled"]

# the side-by-side with the peers (make bench-peers): every peer, the
# module's default (pa_v2), index=off (the base arm prefix_aware), round
# robin, the oracles and the pooled bound
PEER_STRATEGIES = ["round_robin", "prefix_aware", "pa_v2",
                   "sglang", "llmd", "llmd@precise=1", "dynamo",
                   "dynamo@events=0", "prodstack", "aibrix", "dualmap",
                   "oracle", "oracle@choice=ttft", "pooled"]

PRESETS = {
    # seconds: a small long-context run, round robin vs prefix_aware, and
    # the pooled bound
    "smoke": dict(workloads="rag",
                  strategies="round_robin,prefix_aware,pa_v2,pooled",
                  n=160, rate=10.0, kv_blocks=1536, time_scale=0.25, seeds="1"),
    # < 2 minutes
    "demo": dict(workloads="rag", strategies="round_robin,pa_v2",
                 n=None, rate=None, kv_blocks=2048, time_scale=0.5, seeds="1"),
    # the full benchmark
    "bench": dict(workloads=",".join(workloads.NAMES),
                  strategies=",".join(BENCH_STRATEGIES),
                  n=None, rate=None, kv_blocks=2048, time_scale=0.5, seeds="3"),
    "run": dict(workloads="rag", strategies=",".join(BENCH_STRATEGIES),
                n=None, rate=None, kv_blocks=2048, time_scale=0.5, seeds="1"),
    # many routers, one cluster (make bench-hosts): round robin and the
    # module's default in each condition of HOSTS_CONDITIONS
    "hosts": dict(workloads=",".join(workloads.NAMES),
                  strategies="round_robin,pa_v2,pa_sync",
                  n=None, rate=None, kv_blocks=2048, time_scale=0.5,
                  seeds="3"),
    # the peers' table, one per workload (make bench-peers): no sweep, no
    # sensitivity tables; bench/results/peers<instances>/
    "peers": dict(workloads=",".join(workloads.NAMES),
                  strategies=",".join(PEER_STRATEGIES),
                  n=None, rate=None, kv_blocks=2048, time_scale=0.5,
                  seeds="3"),
}


def parse_seeds(v):
    """"3" -> 3 seeds from the workload's own (or --seed); "1,5,9" -> those."""
    v = str(v).strip()
    if "," in v:
        return 0, [int(x) for x in v.split(",") if x.strip()]
    n = int(v)
    if n < 1:
        raise ValueError("--seeds must be >= 1")
    return n, None


def main(argv=None):
    global MAX_LAG
    ap = argparse.ArgumentParser(description="prefix-aware routing benchmark")
    ap.add_argument("mode", choices=list(PRESETS))
    ap.add_argument("--workloads")
    ap.add_argument("--strategies",
                    help="comma-separated: %s, pooled (least_conn over a "
                         "pooled-cache simulator), oracle (the module's "
                         "choice on exact cache depths), an arm's name, "
                         "arms (the arms file's [main] arms), "
                         "prefix_aware@k=v+k=v" % ", ".join(ALL_STRATEGIES))
    ap.add_argument("--n", type=int, help="requests per run")
    ap.add_argument("--rate", type=float, help="offered load, req/s model time")
    ap.add_argument("--seed", type=int,
                    help="the first seed (default: each workload's own)")
    ap.add_argument("--seeds",
                    help="N: run every workload/strategy with N seeds (the "
                         "first one, +1, +2...); or a comma-separated list "
                         "(bench: 3, other modes: 1)")
    ap.add_argument("--arms-file", default=ARMS_FILE,
                    help="prefix_aware arms: NAME PARAMS lines under [main] "
                         "or [sensitivity] (default bench/arms.conf)")
    ap.add_argument("--arm", action="append", default=[], metavar="'NAME PARAMS'",
                    help="one more prefix_aware arm, run with the others, "
                         "e.g. --arm 'pa_t20 threshold=20' (repeatable)")
    ap.add_argument("--closed", type=int, default=0,
                    help="closed loop with this many workers (run mode)")
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--scale", type=int, default=1,
                    help="K times the instances, each workload's offered "
                         "load and requests, and its population (documents, "
                         "system prompts, files, tenants, adapters, apps): "
                         "the same load per instance and the cache scaled "
                         "with the instances (--scale 4: 16 instances)")
    ap.add_argument("--population", type=int, default=None,
                    help="K times each workload's population instead of "
                         "--scale's (--scale 4 --population 1: 16 "
                         "instances, the 4-instance runs' 8 tenants of "
                         "noisy or prio)")
    ap.add_argument("--base-port", type=int, default=18400,
                    help="instances on base..base+N-1, the proxy on base+N; "
                         "seed k of a multi-seed run on the k-th block of N+1 "
                         "ports after (0: any free ports)")
    ap.add_argument("--hosts", type=int, default=1,
                    help="N routers (separate nginx instances, own zones "
                         "and index) in front of the same engines, each "
                         "request to one of them at random")
    ap.add_argument("--hosts-conditions", default=None,
                    help="hosts mode: HOSTS/BYPASS,... (1/0,4/0,1/0.3)")
    ap.add_argument("--bypass", type=float, default=0.0,
                    help="share of requests sent straight to a random "
                         "engine, past every router (other clients)")
    ap.add_argument("--kv-blocks", type=int)
    ap.add_argument("--time-scale", type=float)
    ap.add_argument("--pa-length", type=int, default=4096)
    ap.add_argument("--pa-threshold", type=int, default=10)
    ap.add_argument("--pa-format", default="auto")
    ap.add_argument("--shape", choices=workloads.SHAPES, default=None,
                    help="the API the agentic workload's requests speak: "
                         "chat, responses, messages, or stored (Responses "
                         "with previous_response_id); default chat")
    ap.add_argument("--stream-rate", type=float, default=None,
                    help="generate each workload's stream at this rate (x "
                         "--scale) and send the same requests at --rate, "
                         "their times scaled: the same requests at any "
                         "load (agentic's stream otherwise depends on its "
                         "rate)")
    ap.add_argument("--pa-index", default="off",
                    help="index= of the prefix_aware strategy and the base "
                         "of the arms (default off: routing v1, SageMaker's; "
                         "pa_v2 is the module's default, index=auto)")
    ap.add_argument("--max-lag", type=float, default=MAX_LAG,
                    help="a run whose simulator fell behind by more than "
                         "this share of each instance's time is run again "
                         "(default %g)" % MAX_LAG)
    ap.add_argument("--lag-retries", type=int, default=3,
                    help="at most this many reruns of a lagged run; the "
                         "one that lagged least is kept (0: none)")
    ap.add_argument("--request-timeout", type=float, default=300.0)
    ap.add_argument("--max-seconds", type=float, default=1800.0,
                    help="the simulator exits by itself after this (safety)")
    ap.add_argument("--out", default=None,
                    help="bench/results (bench), bench/results/peersN "
                         "(peers, N instances)")
    ap.add_argument("--sweep", action="store_true",
                    help="bench: also sweep the rate for the SLO")
    ap.add_argument("--no-sweep", dest="sweep", action="store_false")
    ap.add_argument("--sweep-seconds", type=float, default=16.0,
                    help="model seconds of requests per sweep point")
    ap.add_argument("--sweep-warmup", type=float, default=0.25)
    ap.add_argument("--sweep-probes", type=int, default=2,
                    help="bisection steps after the ladder")
    ap.add_argument("--sweep-mult", default="0.5,1,2,4",
                    help="ladder of rates, times the workload's rate")
    ap.add_argument("--slo", type=float, default=1.0,
                    help="P90 TTFT SLO for the sweep, model seconds")
    ap.add_argument("--keep-tmp", action="store_true")
    ap.add_argument("--trace", default=None,
                    help="write one JSON line per request of every run "
                         "(where it went, what it hit) into this directory")
    ap.add_argument("--sensitivity", default=None,
                    help="bench: prefix_aware arms for the parameter tables "
                         "(default: the arms file's [sensitivity] arms; '' "
                         "for none)")
    ap.add_argument("--sensitivity-workloads", default="rag,templated")
    ap.set_defaults(sweep=None)
    opts = ap.parse_args(argv)
    opts.kv_explicit = opts.kv_blocks is not None
    MAX_LAG = opts.max_lag          # the pages flag what was run again
    if opts.scale < 1:
        sys.exit("run.py: --scale must be >= 1")
    opts.instances *= opts.scale
    if opts.out is None:
        opts.out = os.path.join(HERE, "results", "peers%d" % opts.instances
                                if opts.mode == "peers" else "")
    if opts.mode == "peers":
        if opts.sensitivity is None:
            opts.sensitivity = ""
    preset = PRESETS[opts.mode]
    for k, v in preset.items():
        if getattr(opts, k, None) is None:
            setattr(opts, k, v)
    if opts.sweep is None:
        opts.sweep = opts.mode == "bench"
    if opts.mode == "peers":
        opts.sweep = False
    opts.sweep_mult = [float(x) for x in str(opts.sweep_mult).split(",")]
    try:
        opts.nseeds, opts.seed_list = parse_seeds(opts.seeds)
        load_arms(opts.arms_file, opts.arm)
    except ValueError as e:
        sys.exit("run.py: %s" % e)
    opts.cli_arms = [a.split(None, 1)[0] for a in opts.arm if a.split()]
    if not os.access(NGINX, os.X_OK):
        sys.exit("run.py: %s not found (apt-get install nginx)" % NGINX)
    t0 = time.monotonic()
    try:
        rc = {"smoke": mode_smoke, "demo": mode_demo, "bench": mode_bench,
              "run": mode_run, "peers": mode_bench,
            "hosts": mode_hosts}[opts.mode](opts)
    finally:
        PROCS.stop_all()
    log("run.py %s: %.1f s wall" % (opts.mode, time.monotonic() - t0))
    return rc


if __name__ == "__main__":
    sys.exit(main())
