#!/usr/bin/python3
"""What each request found its engine's KV cache asked for, from a trace.

An engine admits a request only when its KV cache holds the request's
blocks (its prompt and the tokens it may generate) beside those of the
requests it runs; a request it cannot hold waits in the engine's own
queue, first in first out, whatever nginx's order was.  The trace (run.py
--trace) does not say how long a request waited there, so this estimates
what its server's cache was asked for when the request came: over the
requests on that server sent before it and not yet answered to the end,
and itself,

  - each prompt's shared part once: per group (a tenant, a document), the
    most any of them had cached there;
  - each request's own part: its prompt past its cached tokens, and its
    max_tokens (--out-tokens where the trace has none);

and sorts the requests by whether that demand was over --capacity (the
engine's KV cache in tokens: 2,048 blocks of 16 = 32,768 for run.py's
default) or not, with each side's TTFT after the module's queue (P50,
P90) and how many took over --slow seconds.

    /usr/bin/python3 bench/kv_demand.py TRACE.jsonl [TRACE...]
        [--capacity 32768] [--only band=1] [--out-tokens 300]
"""

import argparse
import sys

import pair_trace


def demand(reqs, out_tokens=300):
    """each request's estimate of its server's KV demand when it came"""

    def value(r, before, at):
        here = pair_trace.running(before, at) + [r]
        shared = {}
        own = 0
        for q in here:
            g = q.get("group")
            shared[g] = max(shared.get(g, 0), q.get("cached") or 0)
            mt = q.get("max_tokens")
            own += pair_trace.uncached(q) + (
                out_tokens if mt is None else mt)
        return sum(shared.values()) + own

    return pair_trace.on_server(reqs, value)


def report(reqs, capacity=32768, only=(), out_tokens=300, slow=0.1):
    """the lines for one trace"""
    d = demand(reqs, out_tokens)
    sides = {"at most": [], "over": []}
    for i, r in reqs.items():
        if not pair_trace.keep(r, only):
            continue
        t = r["ttft"] - pair_trace.queued(r)
        sides["over" if d[i] > capacity else "at most"].append(t)
    lines = []
    for side in ("at most", "over"):
        ts = sides[side]
        lines.append(
            "demand %s %d tokens: %d requests, TTFT after the queue P50 "
            "%.3f P90 %.3f s, %d over %.2f s" % (
                side, capacity, len(ts), pair_trace.pct(ts, 50),
                pair_trace.pct(ts, 90), sum(1 for t in ts if t > slow),
                slow))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--capacity", type=int, default=32768,
                    help="the engine's KV cache, tokens (default 32768)")
    ap.add_argument("--only", action="append", default=[],
                    metavar="KEY=VALUE",
                    help="only the requests whose trace field KEY is "
                         "(KEY!=VALUE: is not) VALUE; repeatable")
    ap.add_argument("--out-tokens", type=int, default=300,
                    help="a request's max_tokens where the trace has "
                         "none (default 300)")
    ap.add_argument("--slow", type=float, default=0.1,
                    help="seconds: the count of requests over it")
    opts = ap.parse_args(argv)
    try:
        only = pair_trace.parse_only(opts.only)
    except ValueError as e:
        sys.exit("kv_demand.py: %s" % e)
    for path in opts.traces:
        print(path)
        for line in report(pair_trace.load(path), opts.capacity, only,
                           opts.out_tokens, opts.slow):
            print("  " + line)


if __name__ == "__main__":
    main()
