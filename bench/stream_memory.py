#!/usr/bin/python3
"""Worker memory per held stream: prefix_aware against nginx's random.

An LLM stream holds its request for minutes; whatever the balancer
allocated for the request's key stays in the request's pool until the
stream ends.  This measures it: one nginx worker (two or more when the
streams need more descriptors than one process may hold; their VmRSS is
summed) in front of a loopback backend (a process of its own) that answers with the first event of a stream and then holds the
connection; STREAMS clients each send an OpenAI chat body of about
BODY_CHARS characters and wait for that first event, so that STREAMS
streams are open at once.  The workers' VmRSS is read at rest before and
while they are held; (held - before) / STREAMS is the memory per stream.

Arms, each with a fresh nginx, run in turn and repeated ROUNDS times:

    random        upstream with nginx's "random"
    prefix_aware  upstream with "prefix_aware" (the default: the index
                  on, so the request holds its blocks' hashes, 8 bytes
                  a block of its body, for as long as it lasts)
    index_off     upstream with "prefix_aware index=off length=4096"
                  (SageMaker's semantics: one key, no blocks)

It prints a markdown table (also written to OUT) with the median and
range per arm and the difference, and exits 1 if prefix_aware holds more
than LIMIT_KB per stream above random (with --check).

Environment: STREAMS (2000), BODY_CHARS (12000), ROUNDS (3), LIMIT_KB (4),
ARMS (all three, separated by commas; random and prefix_aware are needed
for the check),
NGINX (/usr/sbin/nginx), MODULE (objs/ngx_http_prefix_aware_module.so),
OUT (build/stream_memory.md).  Loopback only; bounded in time (every
phase has a timeout).  Debian's /usr/bin/python3, no extra packages.
"""

import asyncio
import json
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

STREAMS = int(os.environ.get("STREAMS", "2000"))
BODY_CHARS = int(os.environ.get("BODY_CHARS", "12000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
LIMIT_KB = float(os.environ.get("LIMIT_KB", "4"))
# taken out of the environment: nginx reads an "NGINX" variable as the
# sockets of a binary upgrade, and then neither daemonizes nor listens
NGINX = os.environ.pop("NGINX", "/usr/sbin/nginx")
MODULE = os.environ.get("MODULE", "objs/ngx_http_prefix_aware_module.so")
OUT = os.environ.get("OUT", "build/stream_memory.md")

PHASE_TIMEOUT = 120

# a held stream takes two descriptors in nginx (client, upstream): a
# worker holds at most what the hard limit allows, so more streams are
# spread over more workers (reuseport) and their VmRSS summed
HARD_NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
if HARD_NOFILE == resource.RLIM_INFINITY:
    HARD_NOFILE = 1 << 20
WORKERS = max(1, -(-(2 * STREAMS + 2048) // HARD_NOFILE))
FDS = min(HARD_NOFILE, 2 * STREAMS // WORKERS + 2048)

ALL_ARMS = {
    "random": "random;",
    "prefix_aware": "prefix_aware;",
    "index_off": "prefix_aware index=off length=4096;",
}
ARMS = {a: ALL_ARMS[a] for a in
        os.environ.get("ARMS", ",".join(ALL_ARMS)).split(",")}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Backend:
    """Reads a request, answers the head of an SSE stream, holds it until
    nginx closes the connection (its client went away)."""

    async def handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\n"
                         b"Content-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n"
                         b"e\r\ndata: token\n\n\r\n")
            await writer.drain()
            while await reader.read(4096):
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def backend_process(sock, handle=None):
    """The backend in a process of its own, so that neither it nor the
    clients need more descriptors than the hard limit allows; "handle"
    serves a connection (Backend's by default)."""

    async def serve():
        server = await asyncio.start_server(handle or Backend().handle,
                                            sock=sock, backlog=4096)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def start_backend(target=backend_process):
    """target(sock) in a process of its own serves a listening socket on a
    free loopback port: (the process, the port)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    port = sock.getsockname()[1]
    be = multiprocessing.Process(target=target, args=(sock,), daemon=True)
    be.start()
    sock.close()
    return be, port


def body(i):
    # a distinct prefix per stream, so every key differs
    text = ("stream %06d: " % i) + ("lorem ipsum dolor sit amet " * 600)
    msg = [{"role": "system", "content": text[:BODY_CHARS // 2]},
           {"role": "user", "content": text[BODY_CHARS // 2:BODY_CHARS]}]
    return json.dumps({"model": "m", "stream": True,
                       "messages": msg}).encode()


async def post(port, i):
    """Sends the chat body i on a new connection: (reader, writer)."""
    data = body(i)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(data) + data)
    await writer.drain()
    return reader, writer


async def client(port, i, held, release):
    reader, writer = await post(port, i)
    await reader.readuntil(b"data: token")
    held.append(i)
    await release.wait()
    writer.close()


def proc_kb(pid, name="status", field="VmRSS"):
    """A field of /proc/PID/name, in kB."""
    with open("/proc/%d/%s" % (pid, name)) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError("no " + field)


def rss_kb(pid):
    return proc_kb(pid, "status", "VmRSS")


def worker_pids(master, n=None):
    """The pids of master's n (WORKERS) workers."""
    n = WORKERS if n is None else n
    out = subprocess.run(["pgrep", "-P", str(master)], capture_output=True,
                         text=True).stdout.split()
    if len(out) != n:
        raise RuntimeError("expected %d workers, got %r" % (n, out))
    return [int(p) for p in out]


def run_nginx(d, load, workers, fds, upstream, backend_port, port, listen,
              locations="", http=""):
    """Writes d/nginx.conf, workers with fds descriptors each in front of
    the backend at backend_port ("upstream": the balancer's line; "listen":
    parameters added to the listen line; "locations": beside "location /";
    "http": directives of the http block), starts nginx there and returns
    its master's pid."""
    conf = """
%s
worker_processes %d;
worker_rlimit_nofile %d;
daemon on;
pid %s/nginx.pid;
error_log %s/error.log warn;
events { worker_connections %d; }
http {
    access_log off;
    %s
    client_body_temp_path %s;
    proxy_temp_path %s;
    upstream up {
        %s
        server 127.0.0.1:%d;
    }
    server {
        listen 127.0.0.1:%d backlog=4096 %s;
        client_max_body_size 1m;
        %s
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_read_timeout 600s;
        }
    }
}
""" % (load, workers, fds, d, d, fds - 1024, http, d, d,
       upstream, backend_port, port, listen, locations)
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(conf)
    subprocess.run([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf")],
                   check=True)
    for _ in range(100):
        try:
            with open(os.path.join(d, "nginx.pid")) as f:
                return int(f.read())
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


def stop_nginx(d, be):
    """Stops the nginx of d and the backend process be; removes d."""
    subprocess.run([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf"),
                    "-s", "stop"], capture_output=True)
    be.terminate()
    be.join()
    for _ in range(100):
        if not os.path.exists(os.path.join(d, "nginx.pid")):
            break
        time.sleep(0.05)
    shutil.rmtree(d, ignore_errors=True)


def start_nginx(arm, port, backend_port):
    d = tempfile.mkdtemp(prefix="pa-streammem-")
    load = ""
    if ARMS[arm].startswith("prefix_aware") and MODULE:
        load = "load_module %s;" % os.path.abspath(MODULE)
    return d, run_nginx(d, load, WORKERS, FDS, ARMS[arm], backend_port, port,
                        "reuseport" if WORKERS > 1 else "")


async def one_round(arm):
    be, backend_port = start_backend()
    port = free_port()
    d, master = start_nginx(arm, port, backend_port)
    try:
        await asyncio.sleep(0.3)
        workers = worker_pids(master)

        # warm up: the workers' pools and buffers reach their steady size
        release = asyncio.Event()
        held = []
        warm = [asyncio.create_task(client(port, -1 - i, held, release))
                for i in range(50 * WORKERS)]
        await asyncio.wait_for(wait_held(held, len(warm)), PHASE_TIMEOUT)
        release.set()
        await asyncio.gather(*warm, return_exceptions=True)
        await asyncio.sleep(0.5)

        before = sum(rss_kb(w) for w in workers)

        release = asyncio.Event()
        held = []
        tasks = []
        for i in range(STREAMS):
            tasks.append(asyncio.create_task(client(port, i, held, release)))
            if i % 100 == 99:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(wait_held(held, STREAMS), PHASE_TIMEOUT)
        await asyncio.sleep(0.5)

        during = sum(rss_kb(w) for w in workers)

        release.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True),
                               PHASE_TIMEOUT)
        return (during - before) / STREAMS
    finally:
        stop_nginx(d, be)


async def wait_held(held, n):
    while len(held) < n:
        await asyncio.sleep(0.05)


async def main():
    results = {arm: [] for arm in ARMS}
    for r in range(ROUNDS):
        for arm in ARMS:
            kb = await one_round(arm)
            results[arm].append(kb)
            print("round %d %-13s %.1f kB per held stream" % (r + 1, arm, kb),
                  flush=True)
    return results


def report(results):
    med = {a: statistics.median(v) for a, v in results.items()}
    diff = med["prefix_aware"] - med["random"]
    lines = [
        "# Worker memory per held stream",
        "",
        "%d streams held at once, OpenAI chat bodies of %d characters, "
        "%d worker(s), %d rounds (median, range)." % (STREAMS, BODY_CHARS,
                                                      WORKERS, ROUNDS),
        "",
        "| upstream | kB per stream | range |",
        "|---|---|---|",
    ]
    for a, v in results.items():
        lines.append("| %s | %.1f | %.1f .. %.1f |" % (a, med[a], min(v),
                                                      max(v)))
    lines += ["", "prefix_aware - random: %+.1f kB per stream "
              "(limit %+.1f)" % (diff, LIMIT_KB), ""]
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(OUT) or ".", exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    return diff


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, STREAMS + 1024)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    signal.alarm(ROUNDS * len(ARMS) * (3 * PHASE_TIMEOUT + 30))
    res = asyncio.run(main())
    d = report(res)
    if "--check" in sys.argv and d > LIMIT_KB:
        print("FAIL: prefix_aware holds %.1f kB per stream above random, "
              "more than %.1f" % (d, LIMIT_KB))
        sys.exit(1)
