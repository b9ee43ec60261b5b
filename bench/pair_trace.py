#!/usr/bin/python3
"""Two arms' traces of the same stream, request by request.

run.py --trace DIR writes DIR/WORKLOAD-STRATEGY-SEED.jsonl, one line a
request: its arrival t, the instance it went to, its prompt and cached
tokens, its route and match depth, its TTFT (model seconds).  The same
workload and seed give the same requests (the same i) under every
strategy, so two arms' runs can be paired request by request.

For the slowest requests of arm B (at or over B's P90, and over its
P99), this prints each one beside the same request under arm A, and
says where B's extra time went:

  - "compute": B computed more of its prompt (tokens not cached) than A,
    by more than --margin tokens: it went where less of it was held;
  - "queue": B found more prefill ahead of it on its server (the tokens
    not cached of the requests routed there before it that had not had
    their first token when it came) than A did, by more than --margin;
  - "both": both of the above;
  - "nginx queue": B waited in the module's queue (the trace's queued)
    more than A, by over half of B's extra time (checked first);
  - "slow in A too": A's TTFT for it is at or over A's own P90;
  - "other": none of these (the engine's batch, decode, lateness).

For workloads of conversations (the trace's session and turn), it also
says for each arm how many turns after a session's first went to
another server than the session's previous turn ("moved"), and what
they and the turns that stayed computed.

--only KEY=VALUE (or KEY!=VALUE, repeatable) keeps the requests whose
trace field is (is not) that value: --only band=1 for a priority band,
--only group!=tenant0 for the quiet tenants of workload noisy.

    /usr/bin/python3 bench/pair_trace.py A.jsonl B.jsonl [--margin 512]
        [--list 20] [--only band=1]
"""

import argparse
import json
import math
import sys


def keep(r, only):
    """whether request r passes every (key, op, value) of only"""
    for key, op, value in only:
        if (str(r.get(key)) == value) != (op == "="):
            return False
    return True


def parse_only(specs):
    """KEY=VALUE / KEY!=VALUE strings as (key, op, value)"""
    out = []
    for s in specs:
        if "!=" in s:
            k, v = s.split("!=", 1)
            out.append((k, "!=", v))
        elif "=" in s:
            k, v = s.split("=", 1)
            out.append((k, "=", v))
        else:
            raise ValueError("--only %r: KEY=VALUE or KEY!=VALUE" % s)
    return out


def load(path):
    """the trace's answered requests, by i"""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("status", 200) != 200 or r.get("ttft") is None:
                continue
            out[r["i"]] = r
    return out


def pct(xs, p):
    """interpolated percentile, as run.py's"""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    f = int(math.floor(k))
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def uncached(r):
    return max(0, (r.get("prompt") or 0) - (r.get("cached") or 0))


def queued(r):
    return r.get("queued") or 0.0


def sent(r):
    """when the request reached its server: its arrival, the client's
    delay and its time in the module's queue (the TTFT counts the last)"""
    return r["t"] + (r.get("wait") or 0) + queued(r)


def on_server(reqs, value):
    """value(r, before, at) for each request, by i: before, the requests
    sent to its server before it; at, when it reached its server"""
    by = {}
    for r in reqs.values():
        by.setdefault(r.get("instance"), []).append(r)
    out = {}
    for rs in by.values():
        rs.sort(key=sent)
        for k, r in enumerate(rs):
            out[r["i"]] = value(r, rs[:k], sent(r))
    return out


def ahead(reqs):
    """each request's prefill ahead of it on its server when it came: the
    tokens not cached of those there before it without a first token"""
    return on_server(reqs, lambda r, before, at: sum(
        uncached(q) for q in before
        if q["t"] + (q.get("wait") or 0) + q["ttft"] > at))


def running(before, at):
    """those of before not yet answered to the end at "at" (the trace's
    done; one without counts as running)"""
    return [q for q in before if q.get("done") is None or q["done"] > at]


def in_flight(reqs):
    """each request's count of requests on its server when it came: those
    sent there before it and still running"""
    return on_server(reqs, lambda r, before, at: len(running(before, at)))


def why(a, b, aa, ab, a_p90, margin):
    extra = b["ttft"] - a["ttft"]
    if extra > 0 and queued(b) - queued(a) > extra / 2:
        return "nginx queue"
    more_c = uncached(b) - uncached(a) > margin
    more_q = ab - aa > margin
    if more_c and more_q:
        return "both"
    if more_c:
        return "compute"
    if more_q:
        return "queue"
    if a["ttft"] >= a_p90:
        return "slow in A too"
    return "other"


def sessions(reqs):
    """(moved, their uncached tokens, their TTFT median, stayed, theirs,
    theirs) over the turns after a session's first"""
    by = {}
    for r in reqs.values():
        if r.get("session") is not None and r.get("turn") is not None:
            by.setdefault(r["session"], []).append(r)
    moved, stayed = [], []
    for rs in by.values():
        rs.sort(key=lambda r: r["turn"])
        for prev, r in zip(rs, rs[1:]):
            (moved if r.get("instance") != prev.get("instance")
             else stayed).append(r)
    return (len(moved), sum(uncached(r) for r in moved),
            pct([r["ttft"] for r in moved], 50), len(stayed),
            sum(uncached(r) for r in stayed),
            pct([r["ttft"] for r in stayed], 50))


def summary(reqs):
    t = [r["ttft"] for r in reqs.values()]
    p = sum(r.get("prompt") or 0 for r in reqs.values())
    c = sum(r.get("cached") or 0 for r in reqs.values())
    return (len(t), pct(t, 50), pct(t, 90), pct(t, 99),
            100.0 * c / p if p else float("nan"))


def report(a, b, margin=512, nlist=20, names=("A", "B"), only=()):
    """the lines of the report of two traces (dicts by i); with only,
    the requests of B that pass it (prefill ahead counts every request)"""
    aa, ab = ahead(a), ahead(b)
    fa, fb = in_flight(a), in_flight(b)
    common = sorted(i for i in set(a) & set(b) if keep(b[i], only))
    a = {i: a[i] for i in common}
    b = {i: b[i] for i in common}
    lines = []
    for name, reqs in zip(names, (a, b)):
        n, p50, p90, p99, hit = summary(reqs)
        lines.append("%s: %d requests, TTFT P50 %.3f P90 %.3f P99 %.3f s, "
                     "KV hit %.1f %%" % (name, n, p50, p90, p99, hit))
    if not common:
        return lines
    for name, reqs in zip(names, (a, b)):
        mv, mu, mt, st, su, stt = sessions(reqs)
        if mv + st:
            lines.append("%s: of %d later turns, %d moved (%d tokens "
                         "computed, TTFT median %.3f s), %d stayed (%d, "
                         "%.3f s)" % (name, mv + st, mv, mu, mt, st, su,
                                      stt))
    a_p90 = pct([r["ttft"] for r in a.values()], 90)
    b_t = [r["ttft"] for r in b.values()]
    for tail, p in (("P90", 90), ("P99", 99)):
        cut = pct(b_t, p)
        slow = sorted((i for i in common if b[i]["ttft"] >= cut),
                      key=lambda i: -b[i]["ttft"])
        counts = {}
        for i in slow:
            w = why(a[i], b[i], aa[i], ab[i], a_p90, margin)
            counts[w] = counts.get(w, 0) + 1
        lines.append("%s's requests at or over its %s (%.3f s): %d; %s" % (
            names[1], tail, cut, len(slow), ", ".join(
                "%s %d" % (k, counts[k]) for k in
                ("nginx queue", "compute", "queue", "both",
                 "slow in A too", "other")
                if k in counts)))
        lines.append("%s's extra time there: %.3f s in all (%s - %s over "
                     "the same requests)" % (
                         names[1], sum(b[i]["ttft"] - a[i]["ttft"]
                                       for i in slow), names[1], names[0]))
    cut = pct(b_t, 90)
    slow = sorted((i for i in common if b[i]["ttft"] >= cut),
                  key=lambda i: -b[i]["ttft"])[:nlist]
    lines += ["", "| i | t | session | %s TTFT | %s TTFT | %s server, route, "
              "depth | %s server, route, depth | uncached %s / %s | "
              "prefill ahead %s / %s | in flight there %s / %s | in nginx's queue "
              "%s / %s s | why |" % (
                  names[1], names[0], names[1], names[0], names[1], names[0],
                  names[1], names[0], names[1], names[0], names[1],
                  names[0]),
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i in slow:
        x, y = b[i], a[i]
        lines.append("| %d | %.2f | %s | %.3f | %.3f | %s %s %s | %s %s %s "
                     "| %d / %d | %d / %d | %d / %d | %.3f / %.3f | %s |" % (
                         i, x["t"], x.get("session"), x["ttft"], y["ttft"],
                         x.get("instance"), x.get("route"), x.get("depth"),
                         y.get("instance"), y.get("route"), y.get("depth"),
                         uncached(x), uncached(y), ab[i], aa[i],
                         fb[i], fa[i], queued(x), queued(y),
                         why(y, x, aa[i], ab[i], a_p90, margin)))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", help="arm A's trace (the baseline)")
    ap.add_argument("b", help="arm B's trace")
    ap.add_argument("--margin", type=int, default=512,
                    help="tokens: more than this is more (default 512)")
    ap.add_argument("--list", type=int, default=20,
                    help="B's slowest requests listed (default 20)")
    ap.add_argument("--names", default="A,B",
                    help="the arms' names, A,B")
    ap.add_argument("--only", action="append", default=[],
                    metavar="KEY=VALUE",
                    help="only B's requests whose trace field KEY is "
                         "(KEY!=VALUE: is not) VALUE; repeatable")
    opts = ap.parse_args(argv)
    names = tuple(opts.names.split(",", 1))
    if len(names) != 2:
        sys.exit("pair_trace.py: --names A,B")
    try:
        only = parse_only(opts.only)
    except ValueError as e:
        sys.exit("pair_trace.py: %s" % e)
    print("\n".join(report(load(opts.a), load(opts.b), opts.margin,
                           opts.list, names, only)))


if __name__ == "__main__":
    main()
