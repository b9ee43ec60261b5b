#!/usr/bin/python3
"""Worker memory per held stream: prefix_aware against nginx's random.

An LLM stream holds its request for minutes; whatever the balancer
allocated for the request's key stays in the request's pool until the
stream ends.  This measures it: one nginx worker in front of a loopback
backend that answers with the first event of a stream and then holds the
connection; STREAMS clients each send an OpenAI chat body of about
BODY_CHARS characters and wait for that first event, so that STREAMS
streams are open at once.  The worker's VmRSS is read at rest before and
while they are held; (held - before) / STREAMS is the memory per stream.

Arms, each with a fresh nginx, run in turn and repeated ROUNDS times:

    random        upstream with nginx's "random"
    prefix_aware  upstream with "prefix_aware length=4096"

It prints a markdown table (also written to OUT) with the median and
range per arm and the difference, and exits 1 if prefix_aware holds more
than LIMIT_KB per stream above random (with --check).

Environment: STREAMS (2000), BODY_CHARS (12000), ROUNDS (3), LIMIT_KB (4),
NGINX (/usr/sbin/nginx), MODULE (objs/ngx_http_prefix_aware_module.so),
OUT (build/stream_memory.md).  Loopback only; bounded in time (every
phase has a timeout).  Debian's /usr/bin/python3, no extra packages.
"""

import asyncio
import json
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
NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
MODULE = os.environ.get("MODULE", "objs/ngx_http_prefix_aware_module.so")
OUT = os.environ.get("OUT", "build/stream_memory.md")

PHASE_TIMEOUT = 120

ARMS = {
    "random": "random;",
    "prefix_aware": "prefix_aware length=4096;",
}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Backend:
    """Reads a request, answers the head of an SSE stream, holds it."""

    def __init__(self):
        self.release = asyncio.Event()
        self.writers = []

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
            self.writers.append(writer)
            await self.release.wait()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def body(i):
    # a distinct prefix per stream, so every key differs
    text = ("stream %06d: " % i) + ("lorem ipsum dolor sit amet " * 600)
    msg = [{"role": "system", "content": text[:BODY_CHARS // 2]},
           {"role": "user", "content": text[BODY_CHARS // 2:BODY_CHARS]}]
    return json.dumps({"model": "m", "stream": True,
                       "messages": msg}).encode()


async def client(port, i, held, release):
    data = body(i)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(data) + data)
    await writer.drain()
    await reader.readuntil(b"data: token")
    held.append(i)
    await release.wait()
    writer.close()


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def worker_pid(master):
    out = subprocess.run(["pgrep", "-P", str(master)], capture_output=True,
                         text=True).stdout.split()
    if len(out) != 1:
        raise RuntimeError("expected one worker, got %r" % out)
    return int(out[0])


def start_nginx(arm, port, backend_port):
    d = tempfile.mkdtemp(prefix="pa-streammem-")
    load = ""
    if arm == "prefix_aware" and MODULE:
        load = "load_module %s;" % os.path.abspath(MODULE)
    conf = """
%s
worker_processes 1;
worker_rlimit_nofile 20000;
daemon on;
pid %s/nginx.pid;
error_log %s/error.log warn;
events { worker_connections 10000; }
http {
    access_log off;
    client_body_temp_path %s;
    proxy_temp_path %s;
    upstream up {
        %s
        server 127.0.0.1:%d;
    }
    server {
        listen 127.0.0.1:%d backlog=4096;
        client_max_body_size 1m;
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_read_timeout 600s;
        }
    }
}
""" % (load, d, d, d, d, ARMS[arm], backend_port, port)
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(conf)
    subprocess.run([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf")],
                   check=True)
    for _ in range(100):
        try:
            with open(os.path.join(d, "nginx.pid")) as f:
                return d, int(f.read())
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


async def one_round(arm):
    be = Backend()
    server = await asyncio.start_server(be.handle, "127.0.0.1", 0,
                                        backlog=4096)
    backend_port = server.sockets[0].getsockname()[1]
    port = free_port()
    d, master = start_nginx(arm, port, backend_port)
    try:
        await asyncio.sleep(0.3)
        worker = worker_pid(master)

        # warm up: the worker's pools and buffers reach their steady size
        release = asyncio.Event()
        held = []
        warm = [asyncio.create_task(client(port, -1 - i, held, release))
                for i in range(50)]
        await asyncio.wait_for(wait_held(held, 50), PHASE_TIMEOUT)
        be.release.set()
        release.set()
        await asyncio.gather(*warm, return_exceptions=True)
        be.release = asyncio.Event()
        await asyncio.sleep(0.5)

        before = rss_kb(worker)

        release = asyncio.Event()
        held = []
        tasks = []
        for i in range(STREAMS):
            tasks.append(asyncio.create_task(client(port, i, held, release)))
            if i % 100 == 99:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(wait_held(held, STREAMS), PHASE_TIMEOUT)
        await asyncio.sleep(0.5)

        during = rss_kb(worker)

        be.release.set()
        release.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True),
                               PHASE_TIMEOUT)
        return (during - before) / STREAMS
    finally:
        subprocess.run([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf"),
                        "-s", "stop"], capture_output=True)
        server.close()
        for _ in range(100):
            if not os.path.exists(os.path.join(d, "nginx.pid")):
                break
            time.sleep(0.05)
        shutil.rmtree(d, ignore_errors=True)


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
        "one worker, %d rounds (median, range)." % (STREAMS, BODY_CHARS,
                                                    ROUNDS),
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
    want = 4 * STREAMS + 1024
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, hard),
                                                    max(want, hard)))
    signal.alarm(ROUNDS * len(ARMS) * (3 * PHASE_TIMEOUT + 30))
    res = asyncio.run(main())
    d = report(res)
    if "--check" in sys.argv and d > LIMIT_KB:
        print("FAIL: prefix_aware holds %.1f kB per stream above random, "
              "more than %.1f" % (d, LIMIT_KB))
        sys.exit(1)
