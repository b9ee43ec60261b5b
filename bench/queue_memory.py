#!/usr/bin/python3
"""Worker memory per request waiting in the queue (queue=), issue 45.

The conditions of bench/stream_memory.py (its OpenAI chat body of
BODY_CHARS characters, a distinct prefix each, nginx's default
client_body_buffer_size: the body in a temp file; its loopback backend in
a process of its own; the workers' memory at rest before and while the
requests are held, (held - before) / N), with one server of threshold=1
whose backend never answers, so that:

    waiting   "prefix_aware threshold=1 queue=16384 queue_timeout=1h":
              one request holds the server, N wait in the queue (no
              upstream connection; the status page must say N wait)
    inflight  "prefix_aware threshold=1" (no queue): the same N requests
              go past threshold to the backend and wait there for their
              answer's first byte (an upstream connection each): what
              every request through the module holds while it is in
              flight and nothing has come back yet

Each arm with a fresh nginx of WORKERS workers (reuseport), ROUNDS times,
alternating.  The workers' VmRSS and Pss (/proc/PID/smaps_rollup: shared
pages divided among the processes that map them, the queue's zone among
them) are summed.  Prints a markdown table (also written to OUT).

Environment: N (10000), BODY_CHARS (12000), ROUNDS (3), WORKERS (2),
EXTRA (parameters added to both arms' prefix_aware line, none), TRIM
(1: then gdb makes each worker call glibc's malloc_trim(0), and the
memory is read again: what was free in malloc but kept; needs gdb),
NGINX (/usr/sbin/nginx), MODULE (objs/ngx_http_prefix_aware_module.so),
OUT (build/queue_memory.md).  Loopback only; every phase has a timeout.
"""

import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stream_memory import (backend_process as serve, free_port,  # noqa: E402
                           post, proc_kb, rss_kb, run_nginx, start_backend,
                           stop_nginx, worker_pids)

N = int(os.environ.get("N", "10000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
WORKERS = int(os.environ.get("WORKERS", "2"))
MODULE = os.environ.get("MODULE", "objs/ngx_http_prefix_aware_module.so")
OUT = os.environ.get("OUT", "build/queue_memory.md")
BODY_CHARS = int(os.environ.get("BODY_CHARS", "12000"))
TRIM = os.environ.get("TRIM", "0") == "1"
HOLD = int(os.environ.get("HOLD", "0"))

PHASE_TIMEOUT = 180

EXTRA = os.environ.get("EXTRA", "")

ARMS = {
    "waiting": "prefix_aware threshold=1 queue=16384 queue_timeout=1h %s;"
               % EXTRA,
    "inflight": "prefix_aware threshold=1 %s;" % EXTRA,
}


async def hold(reader, writer):
    """The backend: reads, never answers, until nginx closes."""
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass
    finally:
        writer.close()


def backend_process(sock):
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    serve(sock, hold)


def pss_kb(pid):
    return proc_kb(pid, "smaps_rollup", "Pss")


def memory(workers):
    return (sum(rss_kb(w) for w in workers),
            sum(pss_kb(w) for w in workers))


def start_nginx(arm, port, backend_port):
    d = tempfile.mkdtemp(prefix="pa-queuemem-")
    fds = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1],
              3 * N // WORKERS + 2048)
    return d, run_nginx(d, "load_module %s;" % os.path.abspath(MODULE),
                        WORKERS, fds, ARMS[arm], backend_port, port,
                        "reuseport",
                        "location = /status { prefix_aware_status; }")


async def upstream_status(port, name="up"):
    """The status page's JSON of upstream name (its "queue", "servers")."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /status?format=json HTTP/1.0\r\nHost: x\r\n\r\n")
    data = await reader.read()
    writer.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])["upstreams"][name]


def counts(st):
    """(requests waiting in the queue, in flight on every server)"""
    return (st.get("queue", {}).get("waiting", 0),
            sum(s.get("inflight", 0) for s in st["servers"]))


async def status(port):
    return counts(await upstream_status(port))


async def until(port, arm, n):
    """until n wait (waiting) or n + 1 are in flight (inflight)"""
    while True:
        waiting, inflight = await status(port)
        if (arm == "waiting" and waiting == n and inflight == 1) \
           or (arm == "inflight" and inflight == n + 1):
            return
        await asyncio.sleep(0.1)


async def client(port, i, opened, release):
    reader, writer = await post(port, i)
    opened.append(i)
    await release.wait()
    writer.close()


async def send(port, first, n, release):
    opened = []
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(client(port, first + i, opened,
                                                release)))
        if i % 100 == 99:
            await asyncio.sleep(0.01)
    return tasks


async def one_round(arm):
    be, backend_port = start_backend(backend_process)
    port = free_port()
    d, master = start_nginx(arm, port, backend_port)
    try:
        await asyncio.sleep(0.3)
        workers = worker_pids(master, WORKERS)

        # the server held by one request for the whole round
        keep = asyncio.Event()
        holder = await send(port, 10 ** 7, 1, keep)
        await asyncio.wait_for(until(port, "inflight", 0), PHASE_TIMEOUT)

        # warm up: the workers' pools and buffers reach their steady size
        release = asyncio.Event()
        warm = await send(port, -100000, 100 * WORKERS, release)
        await asyncio.wait_for(until(port, arm, 100 * WORKERS),
                               PHASE_TIMEOUT)
        release.set()
        await asyncio.gather(*warm, return_exceptions=True)
        await asyncio.wait_for(until(port, arm, 0), PHASE_TIMEOUT)
        await asyncio.sleep(1)

        before = memory(workers)

        release = asyncio.Event()
        tasks = await send(port, 0, N, release)
        t0 = time.time()
        await asyncio.wait_for(until(port, arm, N), PHASE_TIMEOUT)
        took = time.time() - t0
        await asyncio.sleep(1)

        during = memory(workers)
        trimmed = during

        if HOLD:
            print("holding %d s: workers %r" % (HOLD, workers), flush=True)
            await asyncio.sleep(HOLD)

        if TRIM:
            # what of it is free in malloc but kept by the process
            for w in workers:
                subprocess.run(["gdb", "-p", str(w), "-batch", "-ex",
                                "call (int) malloc_trim(0)"],
                               capture_output=True, timeout=60)
            trimmed = memory(workers)

        release.set()
        keep.set()
        await asyncio.gather(*tasks, *holder, return_exceptions=True)
        return ((during[0] - before[0]) * 1024 / N,
                (during[1] - before[1]) * 1024 / N, took,
                (trimmed[0] - before[0]) * 1024 / N)
    finally:
        stop_nginx(d, be)


async def main():
    results = {arm: [] for arm in ARMS}
    for r in range(ROUNDS):
        for arm in ARMS:
            rss, pss, took, trimmed = await one_round(arm)
            results[arm].append((rss, pss, trimmed))
            print("round %d %-9s %7.0f B RSS %7.0f B Pss per request "
                  "(%d held %.1f s after the last was sent)%s"
                  % (r + 1, arm, rss, pss, N, took,
                     " %7.0f B RSS after malloc_trim(0)" % trimmed
                     if TRIM else ""),
                  flush=True)
    return results


def report(results):
    def col(v, k):
        xs = [x[k] for x in v]
        return "%.0f (%.0f .. %.0f)" % (statistics.median(xs), min(xs),
                                       max(xs))

    lines = [
        "# Worker memory per request waiting in the queue",
        "",
        "%d requests held at once, OpenAI chat bodies of %d characters, "
        "%d workers, %d rounds (median, range), bytes per request." % (
            N, BODY_CHARS, WORKERS, ROUNDS),
        "",
        "| arm | VmRSS | Pss |%s" % (" VmRSS after malloc_trim(0) |"
                                   if TRIM else ""),
        "|---|---|---|%s" % ("---|" if TRIM else ""),
    ]
    for a, v in results.items():
        lines.append("| %s | %s | %s |%s" % (a, col(v, 0), col(v, 1),
                                             " %s |" % col(v, 2)
                                             if TRIM else ""))
    w = statistics.median(x[0] for x in results["waiting"])
    f = statistics.median(x[0] for x in results["inflight"])
    lines += ["", "waiting - inflight: %+.0f B of VmRSS per request" % (w - f),
              ""]
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(OUT) or ".", exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)


if __name__ == "__main__":
    if "--help" in sys.argv or "-h" in sys.argv:
        print(__doc__)
        sys.exit(0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if N + 1024 > hard:
        sys.exit("N=%d needs %d descriptors, the hard limit is %d"
                 % (N, N + 1024, hard))
    signal.alarm(ROUNDS * len(ARMS) * (4 * PHASE_TIMEOUT + 30))
    report(asyncio.run(main()))
