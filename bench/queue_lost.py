#!/usr/bin/python3
"""Issue 45's "Nothing lost" at scale: 500+ requests waiting in the queue
(queue=) through client aborts, nginx -s reload and kill -9 of a worker.

nginx (2 workers, reuseport) with the module in front of SERVERS (4)
loopback backends, each in a process of its own, that answer every
request after DELAY (0.5) seconds; the upstream is

    prefix_aware threshold=4 queue=2000 queue_timeout=60s

so 16 requests are in flight and the rest of CLIENTS (600) wait.  Each
client opens its connection, asks GET /pid on it (the worker that holds
it), then sends one OpenAI chat request (Connection: close) and reads the
answer.  The backends note each request they see (its X-Lost-Id, and the
worker's pid nginx adds) and those whose upstream connection nginx closed
before the answer; they tell it at GET /stats.

Scenarios, each with a fresh nginx and backends:

    A  client abort: 10 % of the clients (seeded: SEED) close their
       connection after 0.2 to 0.8 times the wait expected at their place
       (i x DELAY / (SERVERS x THRESHOLD) s: while waiting, unless they
       are among the first or were served sooner); every other one must
       end 200 (or 429/503 with Retry-After and a one-line reason);
       shed.gone must equal the aborted clients whose request never
       reached a backend and waited (the access log's $prefix_aware_wait
       above 0, no $upstream_addr: a request reset before nginx read it
       never waited).
    B  nginx -s reload (same configuration) once WAIT (500) wait; then
       EXTRA (20) new clients (on the new workers); every request must
       end 200 (or 429/503+Retry-After), none reset, closed or timed out.
    B2 the same with a changed, still valid configuration: queue=2500,
       another queue zone for the new workers (the old workers keep
       theirs until they exit).
    C  kill -9 of the worker with the most pending clients once WAIT wait:
       its clients' connections die with it (lost by nature: counted,
       not a failure); every other request must end 200 (or 429/503+
       Retry-After); shed.lost must equal the dead worker's clients whose
       request never reached a backend (those that waited); exactly one
       "exited on signal 9" in the error log.
    D  B and C at once: nginx -s reload (same configuration), then kill -9
       of the old worker with the most pending clients (no worker is
       started in its place): the checks of C, and the other old worker
       exits once its requests are answered.
    F  past capacity: queue=F_QUEUE (300) queue_timeout=F_TIMEOUT (5s):
       the clients past the queue's places are answered 429 at once, those
       that wait longer than the time out 429 then: each with Retry-After
       and the one-line reason ("... the queue is full", "... the
       queue's time out"), as many as shed.full and shed.timeout count.
    H  HTTP/2 (a second listen with http2, prior knowledge): the same
       clients as streams, CLIENTS / H2_CONNS (60) on each of H2_CONNS
       (10) connections; A's 10 % reset their stream (RST_STREAM, CANCEL)
       instead, and the last connection is dropped whole at H2_DROP (4) s
       (its unanswered streams count as aborted); the checks of A (the
       status is read, Retry-After is not: HPACK-compressed).

In every scenario: waiting and every server's in-flight count return to 0
within ZERO_TIMEOUT (30 s) of the last answer (the time it took is
reported), no [alert]/[crit]/[emerg] and no other worker crash in the
error log.  Prints a markdown summary (also written to OUT,
build/queue_lost.md) and exits 1 when any check fails.

Environment: CLIENTS (600), WAIT (500), SERVERS (4), THRESHOLD (4),
QUEUE (2000), DELAY (0.5), EXTRA (20), SEED (45), SCENARIOS (A,B,B2,C,D,F,H),
H2_CONNS (10), H2_DROP (4.0),
F_QUEUE (300), F_TIMEOUT (5s),
CLIENT_TIMEOUT (120), ZERO_TIMEOUT (30), ABORT_RST (1: A's clients
abort with a TCP RST, not a FIN), LOGS (build/queue_lost_logs: each
scenario's error log is copied there), SAN_LOGS (with a sanitizer
build: the directory of ASan's and UBSan's log_path, where they honour it;
every scenario then fails on a new report in it but nginx's own known one
at start, UBSan's nonnull argument in ngx_init_cycle; the workers' reports
are looked for in the error log in any case, but UBSan's misaligned stores
in nginx's own HTTP/2 code), NGINX (/usr/sbin/nginx),
BENCH_MODULE_SO (objs/ngx_http_prefix_aware_module.so; empty for an
nginx with the module built in), OUT.  Loopback only, free ports chosen
at run time; runs under nice.  Debian's /usr/bin/python3, no extra
packages (nginx start/stop and the backends' processes are
bench/stream_memory.py's, the status page reading bench/queue_memory.py's).
"""

import asyncio
import json
import os
import random
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stream_memory import (backend_process as serve, free_port,  # noqa: E402
                           run_nginx, start_backend, stop_nginx)
import stream_memory  # noqa: E402
from queue_memory import counts, upstream_status  # noqa: E402


def env(name, default, kind=int):
    v = os.environ.get(name, "")
    return kind(v) if v.strip() else default


CLIENTS = env("CLIENTS", 600)
WAIT = env("WAIT", 500)
SERVERS = env("SERVERS", 4)
THRESHOLD = env("THRESHOLD", 4)
QUEUE = env("QUEUE", 2000)
DELAY = env("DELAY", 0.5, float)
EXTRA = env("EXTRA", 20)
SEED = env("SEED", 45)
CLIENT_TIMEOUT = env("CLIENT_TIMEOUT", 120.0, float)
ZERO_TIMEOUT = env("ZERO_TIMEOUT", 30.0, float)
SCENARIOS = os.environ.get("SCENARIOS", "A,B,B2,C,D,F,H").split(",")
MODULE = os.environ.get("BENCH_MODULE_SO",
                        "objs/ngx_http_prefix_aware_module.so")
OUT = os.environ.get("OUT", "build/queue_lost.md")
SAN_LOGS = os.environ.get("SAN_LOGS", "")
ABORT_RST = os.environ.get("ABORT_RST", "") == "1"
LOGS = os.environ.get("LOGS", "build/queue_lost_logs")
ABORT_SHARE = 0.10
H2_CONNS = env("H2_CONNS", 10)
H2_DROP = env("H2_DROP", 4.0, float)
H2_LISTEN = "\n        listen 127.0.0.1:%d reuseport http2;\n"

UPSTREAM = "prefix_aware threshold=%d queue=%d queue_timeout=60s;"
# scenario F: a queue that fills, and a time out shorter than the backlog
F_QUEUE = env("F_QUEUE", 300)
UPSTREAM_F = "prefix_aware threshold=%d queue=%d queue_timeout=%s;" % (
    THRESHOLD, F_QUEUE, os.environ.get("F_TIMEOUT", "5s"))

# each request's id, status, wait in the queue (ms) and upstream address:
# whether a client that went away had waited (a request reset before nginx
# had read it never reached the queue)
LOG_FORMAT = ("log_format lost '$http_x_lost_id $status $prefix_aware_wait "
              "$upstream_addr';")

LOCATIONS = """
        access_log %s/access.log lost;
        proxy_set_header X-Pid $pid;
        location = /pid { return 200 "$pid\\n"; }
        location = /status { prefix_aware_status; }
"""


# --- the backends (one process each) ----------------------------------------

SEEN = {}          # X-Lost-Id -> the nginx worker's pid
CLOSED = []        # X-Lost-Id of requests nginx closed before the answer


def headers(head):
    h = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        h[k.strip().lower()] = v.strip().decode("latin-1")
    return h


async def slow(reader, writer):
    """Answers a request after DELAY s; GET /stats: what it saw."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        h = headers(head)
        if head.startswith(b"GET /stats"):
            data = json.dumps({"seen": SEEN, "closed": CLOSED}).encode()
            writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n"
                         % len(data) + data)
            await writer.drain()
            return
        if int(h.get(b"content-length", "0")):
            await reader.readexactly(int(h[b"content-length"]))
        rid = h.get(b"x-lost-id", "?")
        SEEN[rid] = h.get(b"x-pid", "?")
        try:
            if await asyncio.wait_for(reader.read(1), DELAY) == b"":
                CLOSED.append(rid)
                return
        except asyncio.TimeoutError:
            pass
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 12\r\nConnection: close\r\n\r\n"
                     b'{"ok":true}\n')
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
            ConnectionError):
        pass
    finally:
        writer.close()


def backend(sock):
    os.nice(5)
    serve(sock, slow)


async def backend_stats(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /stats HTTP/1.0\r\n\r\n")
    data = await reader.read()
    writer.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


# --- the clients ------------------------------------------------------------

class Client:
    def __init__(self, i, abort_after=None):
        self.i = i
        self.abort_after = abort_after
        self.pid = None
        self.outcome = None
        self.detail = ""
        self.ended = None


def chat(i):
    return json.dumps({"model": "m", "messages": [
        {"role": "system", "content": "client %d of the queue's lost "
         "test: answer tersely." % i},
        {"role": "user", "content": "question %d" % i}]}).encode()


def request(i):
    body = chat(i)
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"X-Lost-Id: %d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n"
            % (i, len(body)) + body)


async def connect(port, c):
    """Opens c's connection and learns its worker: (reader, writer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    n = int(headers(head)[b"content-length"])
    c.pid = int(await reader.readexactly(n))
    return reader, writer


async def read_all(reader):
    data = b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return data
        data += chunk


def classify(data):
    """(outcome, detail) of an answer."""
    if not data:
        return "closed", "connection closed without an answer"
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return "garbled", repr(data[:80])
    if status == 200:
        return "200", ""
    if status in (429, 503):
        h = headers(head)
        lines = body.rstrip(b"\n").split(b"\n")
        if b"retry-after" not in h:
            return "%d without Retry-After" % status, repr(body[:80])
        if len(lines) != 1 or not lines[0]:
            return "%d without a one-line reason" % status, repr(body[:80])
        return str(status), body.strip().decode("latin-1")
    return "status %d" % status, repr(body[:80])


async def run_client(c, reader, writer):
    try:
        writer.write(request(c.i))
        await writer.drain()
        if c.abort_after is not None:
            try:
                data = await asyncio.wait_for(read_all(reader),
                                              c.abort_after)
            except asyncio.TimeoutError:
                c.outcome = "aborted"
                if ABORT_RST:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                    writer.transport.abort()
                writer.close()
                return
        else:
            data = await asyncio.wait_for(read_all(reader), CLIENT_TIMEOUT)
        c.outcome, c.detail = classify(data)
    except asyncio.TimeoutError:
        c.outcome = "timeout"
    except ConnectionResetError:
        c.outcome = "reset"
    except OSError as e:
        c.outcome, c.detail = "error", str(e)
    finally:
        c.ended = time.monotonic()
        writer.close()


# --- HTTP/2 clients: many streams on a connection (scenario H) -------------
#
# A client of the least HTTP/2 (RFC 9113) that nginx needs: prior knowledge,
# requests in literal header fields, the status read from nginx's HEADERS
# (":status" indexed for 200, else a literal of 3 raw digits: nginx writes
# it so); the other headers are HPACK-compressed and not read.

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(kind, flags, sid, payload=b""):
    return (len(payload).to_bytes(3, "big") + bytes([kind, flags])
            + sid.to_bytes(4, "big") + payload)


def hpack_literal(name, value):
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def h2_status(block):
    """The :status of a HEADERS block as nginx writes it, else None."""
    if block[:1] == b"\x88":
        return 200
    if block[:1] == b"\x48" and block[1] == 3:
        return int(block[2:5])
    return None


async def h2_connection(port, clients, drop_at=None):
    """Sends each client's request on a stream of one connection, RSTs
    those with abort_after when it passes, drops the whole connection at
    drop_at (its unanswered streams: "aborted"), reads the answers."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(H2_PREFACE + h2_frame(4, 0, 0))
    streams, status = {}, {}

    def end(sid, outcome):
        c = streams.pop(sid, None)
        if c is not None and c.outcome is None:
            c.outcome, c.ended = outcome, time.monotonic()

    def rst(sid):
        if sid in streams:
            writer.write(h2_frame(3, 0, sid, (8).to_bytes(4, "big")))
            end(sid, "aborted")

    def drop():
        for sid in list(streams):
            end(sid, "aborted")
        writer.transport.abort()

    for k, c in enumerate(clients):
        sid = 2 * k + 1
        body = chat(c.i)
        block = b"".join(hpack_literal(n, v) for n, v in (
            (":method", "POST"), (":scheme", "http"),
            (":path", "/v1/chat/completions"), (":authority", "x"),
            ("content-type", "application/json"),
            ("content-length", str(len(body))), ("x-lost-id", str(c.i))))
        writer.write(h2_frame(1, 4, sid, block) + h2_frame(0, 1, sid, body))
        streams[sid] = c
        if c.abort_after is not None:
            loop.call_later(c.abort_after, rst, sid)
    await writer.drain()
    if drop_at is not None:
        loop.call_later(drop_at, drop)

    try:
        while streams:
            head = await asyncio.wait_for(reader.readexactly(9),
                                          CLIENT_TIMEOUT)
            kind, flags = head[3], head[4]
            sid = int.from_bytes(head[5:9], "big") & 0x7fffffff
            payload = await reader.readexactly(int.from_bytes(head[:3],
                                                              "big"))
            if kind == 4 and not flags & 1:           # SETTINGS: ack
                writer.write(h2_frame(4, 1, 0))
            elif kind == 6 and not flags & 1:         # PING: ack
                writer.write(h2_frame(6, 1, 0, payload))
            elif kind == 1 and sid in streams:        # HEADERS
                status[sid] = h2_status(payload)
            elif kind == 3:                           # RST_STREAM
                end(sid, "reset")
            if kind in (0, 1) and flags & 1 and sid in streams:
                st = status.get(sid)
                end(sid, str(st) if st in (200, 429, 503)
                    else "status %s" % st)
    except asyncio.TimeoutError:
        for sid in list(streams):
            end(sid, "timeout")
    except (asyncio.IncompleteReadError, OSError):
        pass
    for sid in list(streams):
        end(sid, "closed")
    writer.close()


OK = ("200", "429", "503")
DIED = ("closed", "reset")


# --- a scenario -------------------------------------------------------------

class Run:
    """One scenario: nginx, its backends, its clients."""

    def __init__(self, name, upstream):
        self.name = name
        self.upstream = upstream
        self.dir = tempfile.mkdtemp(prefix="pa-queuelost-")
        # nginx's compiled-in error log (prefix/logs/error.log) until the
        # configuration's is opened: an nginx built from source looks there
        os.makedirs(os.path.join(self.dir, "logs"))
        self.backends = [start_backend(backend) for _ in range(SERVERS)]
        self.ports = [p for _, p in self.backends]
        self.port = free_port()
        self.port2 = free_port()
        servers = "".join("\n        server 127.0.0.1:%d;" % p
                          for p in self.ports[:-1])
        load = "load_module %s;" % os.path.abspath(MODULE) if MODULE else ""
        self.master = run_nginx(self.dir, load, 2, 4096,
                                upstream + servers,
                                self.ports[-1], self.port, "reuseport",
                                LOCATIONS % self.dir
                                + (H2_LISTEN % self.port2
                                   if name == "H" else ""), LOG_FORMAT)
        self.clients = []
        self.max_waiting = 0
        self.watching = True
        self.checks = []       # (ok, text)
        self.notes = []
        self.figures = {}

    def check(self, ok, text):
        self.checks.append((bool(ok), text))

    def conf(self):
        return os.path.join(self.dir, "nginx.conf")

    def signal(self, sig):
        subprocess.run([stream_memory.NGINX, "-p", self.dir, "-c",
                        self.conf(), "-s", sig], check=True,
                       capture_output=True)

    def workers(self):
        out = subprocess.run(["pgrep", "-P", str(self.master)],
                             capture_output=True, text=True).stdout.split()
        return [int(p) for p in out]

    def error_log(self):
        with open(os.path.join(self.dir, "error.log"),
                  errors="replace") as f:
            return f.read()

    def access_log(self):
        """X-Lost-Id -> (status, ms waited, upstream address)"""
        logged = {}
        with open(os.path.join(self.dir, "access.log")) as f:
            for line in f:
                i, status, wait, addr = line.split(None, 3)
                if i != "-":
                    # "-": the module had not seen the request
                    logged[i] = (int(status),
                                 int(wait) if wait.isdigit() else 0,
                                 addr.strip())
        return logged

    async def status(self):
        st = await upstream_status(self.port)
        self.max_waiting = max(self.max_waiting, counts(st)[0])
        return st

    async def watch(self):
        while self.watching:
            try:
                await self.status()
            except (OSError, ValueError, KeyError, IndexError):
                pass
            await asyncio.sleep(0.2)

    async def until(self, cond, timeout):
        """Seconds until cond(status) held, None past timeout."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            try:
                if cond(await self.status()):
                    return time.monotonic() - t0
            except (OSError, ValueError, KeyError, IndexError):
                pass
            await asyncio.sleep(0.1)
        return None

    async def start_h2(self, n, abort):
        """n clients over H2_CONNS connections (client i on connection
        i % H2_CONNS); the last connection dropped at H2_DROP s."""
        self.clients = [Client(i, abort.get(i)) for i in range(n)]
        tasks = []
        for k in range(H2_CONNS):
            tasks.append(asyncio.create_task(h2_connection(
                self.port2, self.clients[k::H2_CONNS],
                H2_DROP if k == H2_CONNS - 1 else None)))
        return tasks

    async def start_clients(self, first, n, abort=None):
        """n clients from first on: connected, then sending."""
        abort = abort or {}
        batch = []
        for i in range(first, first + n):
            c = Client(i, abort.get(i))
            batch.append((c, await connect(self.port, c)))
        self.clients += [c for c, _ in batch]
        tasks = []
        for k, (c, (reader, writer)) in enumerate(batch):
            tasks.append(asyncio.create_task(run_client(c, reader, writer)))
            if k % 50 == 49:
                await asyncio.sleep(0.02)
        return tasks

    def stop(self):
        os.makedirs(LOGS, exist_ok=True)
        shutil.copy(os.path.join(self.dir, "error.log"),
                    os.path.join(LOGS, "%s-error.log" % self.name))
        stop_nginx(self.dir, self.backends[0][0])
        for be, _ in self.backends[1:]:
            be.terminate()
            be.join()


async def scenario(name):
    run = Run(name, UPSTREAM_F if name == "F" else UPSTREAM % (THRESHOLD,
                                                              QUEUE))
    try:
        return await drive(run)
    finally:
        run.watching = False
        run.stop()


async def drive(run):
    name = run.name
    rng = random.Random("%d-%s" % (SEED, name))
    await asyncio.sleep(0.3)
    watcher = asyncio.create_task(run.watch())
    abort = {}
    if name in ("A", "H"):
        # within the time client i is expected to wait (the places free
        # at SERVERS x THRESHOLD every DELAY): most abort while waiting
        rate = SERVERS * THRESHOLD / DELAY
        for i in rng.sample(range(CLIENTS), int(CLIENTS * ABORT_SHARE)):
            abort[i] = max(0.05, rng.uniform(0.2, 0.8) * i / rate)
    if name == "H":
        tasks = await run.start_h2(CLIENTS, abort)
    else:
        tasks = await run.start_clients(0, CLIENTS, abort)
    want = min(WAIT, F_QUEUE) if name == "F" else WAIT
    took = await run.until(lambda st: counts(st)[0] >= want, 60)
    run.check(took is not None, "%d waited at once" % want)
    killed = None
    t_event = time.monotonic()

    if name in ("B", "B2", "D"):
        if name == "B2":
            with open(run.conf()) as f:
                text = f.read()
            with open(run.conf(), "w") as f:
                f.write(text.replace("queue=%d " % QUEUE,
                                     "queue=%d " % (QUEUE + 500)))
            run.notes.append("configuration changed before the reload: "
                             "queue=%d (a new queue zone)" % (QUEUE + 500))
        run.figures["waiting at the reload"] = counts(await run.status())[0]
        run.signal("reload")
        await asyncio.sleep(0.5)
        tasks += await run.start_clients(CLIENTS, EXTRA)

    if name in ("C", "D"):
        pending = {}
        for c in run.clients:
            if c.outcome is None:
                pending[c.pid] = pending.get(c.pid, 0) + 1
        killed = max(pending, key=pending.get)
        st = await run.status()
        run.figures["waiting at the kill"] = counts(st)[0]
        run.figures["pending clients by worker at the kill"] = \
            ", ".join("%d: %d" % kv for kv in sorted(pending.items()))
        lost0 = st["queue"]["shed"]["lost"]
        os.kill(killed, signal.SIGKILL)
        t_event = time.monotonic()
        t = await run.until(lambda st: st["queue"]["shed"]["lost"] > lost0,
                            15)
        run.figures["places of the dead worker given back after (s)"] = \
            "%.2f" % t if t is not None else "not within 15 s"

    await asyncio.gather(*tasks, return_exceptions=True)
    last = max(c.ended for c in run.clients)
    run.figures["last answer after the event (s)"] = "%.1f" % (
        last - t_event)
    t_look = time.monotonic()
    zero = await run.until(lambda st: counts(st) == (0, 0), ZERO_TIMEOUT)
    run.figures["counts at 0 after the last answer (s)"] = (
        "%.2f" % (t_look - last + zero) if zero is not None
        else "not within %.0f s" % ZERO_TIMEOUT)
    run.watching = False
    await watcher
    st = await run.status()
    q = st["queue"]
    run.check(zero is not None, "waiting and in flight back to 0 within "
              "%.0f s of the last answer (now %r)" % (ZERO_TIMEOUT,
                                                      counts(st)))
    run.figures["max waiting seen (polled)"] = run.max_waiting
    run.figures["max_waiting (status page)"] = q.get("max_waiting")
    run.figures["queue: released / shed"] = "%s / %s" % (
        q.get("released"), json.dumps(q.get("shed"), sort_keys=True))

    seen, closed = {}, set()
    for p in run.ports:
        s = await backend_stats(p)
        seen.update(s["seen"])
        closed.update(s["closed"])

    by = {}
    for c in run.clients:
        by[c.outcome] = by.get(c.outcome, 0) + 1
    run.figures["outcomes"] = ", ".join("%s: %d" % kv
                                        for kv in sorted(by.items()))

    bad = [c for c in run.clients
           if c.outcome not in OK and c.outcome != "aborted"
           and not (killed and c.pid == killed and c.outcome in DIED)]
    run.check(not bad, "every other request ended 200/429/503 with "
              "Retry-After (%d did not%s)" % (
                  len(bad), ": " + "; ".join(
                      "#%d %s %s" % (c.i, c.outcome, c.detail)
                      for c in bad[:5]) if bad else ""))
    shed = [c for c in run.clients if c.outcome in ("429", "503")]
    if shed:
        run.notes.append("shed: " + ", ".join(sorted(
            {c.detail for c in shed})))

    if name == "F":
        full = [c for c in shed if c.detail.endswith("queue is full")]
        late = [c for c in shed if c.detail.endswith("queue's time out")]
        run.figures["429 queue full / time out"] = "%d / %d" % (
            len(full), len(late))
        run.check(len(full) + len(late) == len(shed) and shed,
                  "every 429/503 says the queue is full or timed out")
        run.check(q["shed"]["full"] == len(full)
                  and q["shed"]["timeout"] == len(late),
                  "shed.full %d and shed.timeout %d = the clients' 429s"
                  % (q["shed"]["full"], q["shed"]["timeout"]))
        run.check(q.get("max_waiting", 0) <= F_QUEUE,
                  "at most queue=%d waited" % F_QUEUE)

    if name in ("A", "H"):
        gone = [c for c in run.clients if c.outcome == "aborted"]
        unseen = [c for c in gone if str(c.i) not in seen]
        logged = run.access_log()
        waited = [c for c in unseen if str(c.i) in logged
                  and logged[str(c.i)][1] > 0 and logged[str(c.i)][2] == "-"]
        if name == "H":
            run.notes.append("aborted: by RST_STREAM (%d streams due at "
                             "their time, unless answered first) and the "
                             "unanswered streams of the connection dropped "
                             "at %.1f s" % (len(abort), H2_DROP))
        run.figures["aborted: reached no backend / in flight"] = \
            "%d / %d" % (len(unseen), len(gone) - len(unseen))
        run.figures["of those that reached no backend: waited (access "
                    "log: a wait, no upstream) / other"] = "%d / %d" % (
                        len(waited), len(unseen) - len(waited))
        if len(waited) < len(unseen):
            other = [c for c in unseen if c not in waited]
            run.notes.append("reached no backend without a wait logged: " +
                             ", ".join("#%d %s" % (c.i, logged.get(
                                 str(c.i), "not logged")) for c in other[:5]))
        run.check(q["shed"]["gone"] == len(waited),
                  "shed.gone %d = aborted clients that waited and reached "
                  "no backend, %d" % (q["shed"]["gone"], len(waited)))
    else:
        run.check(q["shed"]["gone"] == 0, "shed.gone %d = 0"
                  % q["shed"]["gone"])

    if name in ("C", "D"):
        dead = [c for c in run.clients if c.pid == killed]
        died = [c for c in dead if c.outcome in DIED]
        waited = [c for c in died if str(c.i) not in seen]
        run.figures["the killed worker's clients: answered before / "
                    "connection died (waiting / at a backend)"] = \
            "%d / %d (%d / %d)" % (len(dead) - len(died), len(died),
                                   len(waited), len(died) - len(waited))
        run.check(q["shed"]["lost"] == len(waited),
                  "shed.lost %d = the killed worker's clients whose request "
                  "reached no backend, %d" % (q["shed"]["lost"],
                                              len(waited)))
        log = run.error_log()
        run.check(log.count("exited on signal 9") == 1,
                  "one worker exited on signal 9 (the one killed)")
        lines = [ln for ln in log.splitlines()
                 if "waiting in a worker that died" in ln]
        run.notes.append("log: " + (lines[0].split("] ", 1)[-1]
                                    if lines else "no reaper line"))
    else:
        run.check(q["shed"]["lost"] == 0, "shed.lost %d = 0"
                  % q["shed"]["lost"])

    if name in ("B", "B2", "D"):
        t = 0.0
        while len(run.workers()) > 2 and t < ZERO_TIMEOUT:
            await asyncio.sleep(0.2)
            t += 0.2
        run.check(len(run.workers()) == 2, "the old workers exited")

    log = run.error_log()
    crashes = log.count("exited on signal") - (1 if killed else 0)
    worst = [ln for ln in log.splitlines()
             if ("[alert]" in ln or "[crit]" in ln or "[emerg]" in ln)
             and "process %d exited on signal 9" % (killed or 0) not in ln]
    run.check(crashes == 0 and not worst,
              "no crash, no [alert]/[crit]/[emerg] in the error log%s"
              % (": " + worst[0] if worst else ""))
    # nginx sends its processes' stderr to the error log once it is open:
    # a sanitizer build's reports in the workers land there
    reports = [ln for ln in log.splitlines()
               if ("runtime error:" in ln or "Sanitizer" in ln)
               and not (SAN_KNOWN_V2 in ln and "misaligned address" in ln)]
    if SAN_LOGS:
        reports += sanitizer_reports()
    run.check(not reports, "no sanitizer report in the error log%s%s" % (
        " nor in " + SAN_LOGS if SAN_LOGS else "",
        ": " + "; ".join(reports[:3]) if reports else ""))
    return run


SAN_SEEN = set()
# nginx 1.22's own, at every start without -g: ngx_init_cycle() copies the
# empty conf_param with ngx_pstrdup(NULL) (UBSan: nonnull argument)
SAN_KNOWN = "ngx_init_cycle src/core/ngx_cycle.c:118"
# and its HTTP/2 frames' fields written unaligned on purpose (x86-64:
# NGX_HAVE_NONALIGNED), in ngx_http_v2.c and ngx_http_v2_filter_module.c:
# UBSan's "store to misaligned address" in nginx's own HTTP/2 code
SAN_KNOWN_V2 = "src/http/v2/ngx_http_v2"


def sanitizer_reports():
    """The new reports in SAN_LOGS (ASan's and UBSan's log_path), but
    nginx's own known one: their first lines."""
    found = []
    for f in sorted(os.listdir(SAN_LOGS)):
        if f in SAN_SEEN:
            continue
        SAN_SEEN.add(f)
        with open(os.path.join(SAN_LOGS, f), errors="replace") as r:
            text = r.read()
        for report in text.split("\n\n"):
            if report.strip() and SAN_KNOWN not in report:
                found.append("%s: %s" % (f, report.strip().splitlines()[0]))
    return found


DESCRIPTIONS = {
    "A": "client abort: %d%% of the clients close while waiting"
         % (ABORT_SHARE * 100),
    "B": "nginx -s reload (same configuration) while %d+ wait" % WAIT,
    "B2": "nginx -s reload (queue=N changed) while %d+ wait" % WAIT,
    "C": "kill -9 of one worker while %d+ wait" % WAIT,
    "D": "nginx -s reload, then kill -9 of an old worker, while %d+ wait"
         % WAIT,
    "H": "HTTP/2: %d streams on %d connections, %d%% reset while waiting, "
         "one connection dropped" % (CLIENTS, H2_CONNS, ABORT_SHARE * 100),
    "F": "past capacity: %s" % UPSTREAM_F,
}


def report(runs):
    lines = ["# Nothing lost: the queue at %d clients" % CLIENTS, "",
             "nginx 2 workers, %d backends answering after %.1f s, "
             "`%s`, seed %d, %s." % (
                 SERVERS, DELAY, UPSTREAM % (THRESHOLD, QUEUE), SEED,
                 MODULE or "module built in"), ""]
    failed = 0
    for run in runs:
        lines += ["## %s: %s" % (run.name, DESCRIPTIONS[run.name]), ""]
        lines += ["| figure | value |", "|---|---|"]
        lines += ["| %s | %s |" % kv for kv in run.figures.items()]
        lines.append("")
        for ok, text in run.checks:
            lines.append("- %s %s" % ("ok:  " if ok else "FAIL:", text))
            failed += not ok
        for n in run.notes:
            lines.append("- note: " + n)
        lines.append("")
    lines.append("%d checks failed" % failed if failed else
                 "every check passed")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(OUT) or ".", exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    return failed


async def main():
    runs = []
    for name in SCENARIOS:
        t0 = time.monotonic()
        runs.append(await scenario(name))
        print("scenario %s done in %.0f s" % (name, time.monotonic() - t0),
              flush=True)
    return runs


if __name__ == "__main__":
    if "--help" in sys.argv or "-h" in sys.argv:
        print(__doc__)
        sys.exit(0)
    unknown = set(SCENARIOS) - set(DESCRIPTIONS)
    if unknown:
        sys.exit("unknown scenarios %s (A, B, B2, C, D, F, H)"
                 % ", ".join(unknown))
    os.nice(5)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.alarm(len(SCENARIOS) * int(CLIENT_TIMEOUT + 2 * ZERO_TIMEOUT
                                      + 120))
    sys.exit(1 if report(asyncio.run(main())) else 0)
