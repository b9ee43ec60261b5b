#!/usr/bin/python3
"""The noisy tenant (issue 45): per-tenant TTFT from run.py --trace files.

    /usr/bin/python3 bench/noisy_report.py MAIN_TRACE_DIR BASE_TRACE_DIR \
        [--ttft-target 2.0]

MAIN_TRACE_DIR holds the traces of workload "noisy" (tenant0 sends 4
times each other tenant's rate, the cluster over capacity), one file per
arm and seed (noisy-ARM-SEED.jsonl); BASE_TRACE_DIR those of
"noisy_equal" (the same tenants at one rate, under capacity), arm pa_v2.
For each arm and seed: each quiet tenant's (tenant1..7, or as many as
the baseline has: run.py --scale scales them) TTFT P50 and P90
(model seconds, answered requests) as a ratio to its own in the baseline
run of the same seed, the worst and the median of the quiet tenants; the noisy
tenant's P50/P90; the requests answered 429/503 by tenant class; the
goodput (goodput(): requests answered within --ttft-target, 2 model
seconds by default, a second of the run and as a share of the offered, a
shed request counting as not good).  Then the medians (and ranges) over
the seeds.

Then, per arm and seed, what the issue's fairness criterion asks: Jain's
index (sum x)^2 / (n sum x^2) over the tenants of the prefill served
(prompt tokens not cached, counted at each answer's first token) while
every tenant had a request pending (sent, no first token yet; the share
of the run that window covers is printed), and where the quiet tenants'
time went: in the module's queue (the trace's "queued", from
$prefix_aware_wait) and after it (TTFT less that).  Prints Markdown.
"""

import collections
import glob
import json
import os
import re
import statistics
import sys


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    f = int(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def load(path, key="group"):
    """A trace's answered TTFTs, its 429/503 and its other failures, by
    the field `key` of each line (the tenant; prio_report: the band)."""
    by = collections.defaultdict(list)
    shed = collections.Counter()
    other = collections.Counter()
    with open(path) as f:
        rs = [json.loads(line) for line in f]
    for r in rs:
        g = r.get(key)
        if r["status"] == 200 and r["ttft"] is not None:
            by[g].append(r["ttft"])
        elif r["status"] in (429, 503):
            shed[g] += 1
        else:
            other[g] += 1
    return by, shed, other


def goodput(path, target):
    """Goodput: (requests answered 200 with a TTFT within target, model
    seconds, a second of the run, their share of all offered, their
    number, offered, the run's span in s).  A shed request (429/503) or
    any other failure is offered and not good; the span runs from the
    first arrival to the last answer's end (the trace's "done", else its
    first token).  Any arm's trace, the peers' included."""
    offered = good = 0
    start = end = None
    with open(path) as f:
        rs = [json.loads(line) for line in f]
    for r in rs:
        offered += 1
        start = r["t"] if start is None else min(start, r["t"])
        e = r.get("done")
        if e is None and r["ttft"] is not None and r["wait"] is not None:
            e = r["t"] + r["wait"] + r["ttft"]
        if e is not None:
            end = e if end is None else max(end, e)
        if (r["status"] == 200 and r["ttft"] is not None
                and r["ttft"] <= target):
            good += 1
    span = end - start if end is not None and start is not None else 0.0
    return (good / span if span > 0 else float("nan"),
            good / offered if offered else float("nan"), good, offered, span)


def jain(xs):
    sq = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * sq) if sq else float("nan")


def quiet_of(by):
    """the quiet tenants of a trace's groups: every "tenantK" but tenant0
    (8 tenants at 4 instances, 32 with run.py --scale 4)"""
    return sorted((g for g in by if g and g.startswith("tenant")
                   and g != "tenant0"), key=lambda g: int(g[6:]))


def fairness(path, tenants=8):
    """Jain's index of prefill served while every tenant had a request
    pending, and that window's share of the run."""
    ev = []
    reqs = []
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        r = json.loads(line)
        if r["status"] != 200 or r["ttft"] is None or r["wait"] is None:
            continue
        send = r["t"] + r["wait"]
        first = send + r["ttft"]
        work = max((r["prompt"] or 0) - (r["cached"] or 0), 0)
        ev.append((send, 1, r["group"]))
        ev.append((first, -1, r["group"]))
        reqs.append((first, r["group"], work))
    ev.sort(key=lambda e: (e[0], e[1]))
    pending = collections.Counter()
    wins = []
    start = None
    for t, d, g in ev:
        pending[g] += d
        full = sum(1 for v in pending.values() if v > 0) == tenants
        if full and start is None:
            start = t
        elif not full and start is not None:
            wins.append((start, t))
            start = None
    if not ev:
        return float("nan"), 0.0
    span = ev[-1][0] - ev[0][0]
    served = collections.Counter()
    for first, g, work in reqs:
        if any(a <= first <= b for a, b in wins):
            served[g] += work
    share = sum(b - a for a, b in wins) / span if span else 0.0
    xs = [served["tenant%d" % k] for k in range(tenants)]
    return jain(xs), share


def split(path):
    """The quiet tenants' time in the module's queue and after it: P50 and
    P90 of each, model seconds (None where the trace has no "queued")."""
    q, e = [], []
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        r = json.loads(line)
        if (r["group"] == "tenant0" or r["status"] != 200
                or r["ttft"] is None):
            continue
        w = r.get("queued")
        if w is None:
            return None
        q.append(w)
        e.append(r["ttft"] - w)
    return pct(q, 50), pct(q, 90), pct(e, 50), pct(e, 90)


def runs(d, wl):
    out = {}
    for p in glob.glob(os.path.join(d, "%s-*.jsonl" % wl)):
        m = re.match(r"%s-(.+)-(\d+)\.jsonl$" % wl, os.path.basename(p))
        if m:
            out[(m.group(1), int(m.group(2)))] = p
    return out


def mr(xs):
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    return "%.2f (%.2f..%.2f)" % (statistics.median(xs), min(xs), max(xs))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    target = 2.0
    if "--ttft-target" in argv:
        k = argv.index("--ttft-target")
        target = float(argv[k + 1])
        argv = argv[:k] + argv[k + 2:]
    main_dir, base_dir = argv[0], argv[1]
    base = {s: load(p) for (a, s), p in runs(base_dir, "noisy_equal").items()
            if a == "pa_v2"}
    per_arm = collections.defaultdict(list)
    lines = ["| arm | seed | quiet P50 worst x base | quiet P50 median x "
             "base | quiet P90 worst x base | quiet P90 median x base | "
             "quiet P50 / P90 s (median tenant) | noisy P50 / P90 s | "
             "answered quiet / noisy | 429/503 quiet / noisy | other errors "
             "| within %g s a second | within %g s of offered |"
             % (target, target),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (arm, seed), p in sorted(runs(main_dir, "noisy").items()):
        by, shed, other = load(p)
        if seed not in base:
            continue
        bby = base[seed][0]
        quiet = quiet_of(bby)
        r50 = [pct(by[t], 50) / pct(bby[t], 50) for t in quiet]
        r90 = [pct(by[t], 90) / pct(bby[t], 90) for t in quiet]
        q50 = statistics.median(pct(by[t], 50) for t in quiet)
        q90 = statistics.median(pct(by[t], 90) for t in quiet)
        row = dict(w50=max(r50), m50=statistics.median(r50), w90=max(r90),
                   m90=statistics.median(r90), q50=q50, q90=q90,
                   n50=pct(by["tenant0"], 50), n90=pct(by["tenant0"], 90),
                   aq=sum(len(by[t]) for t in quiet), an=len(by["tenant0"]),
                   sq=sum(shed[t] for t in quiet), sn=shed["tenant0"],
                   err=sum(other.values()))
        g = goodput(p, target)
        row["good"], row["share"] = g[0], g[1]
        per_arm[arm].append(row)
        lines.append("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f | "
                     "%.2f / %.2f | %d / %d | %d / %d | %d | %.2f | %.1f %% "
                     "|" % (
                         arm, seed, row["w50"], row["m50"], row["w90"],
                         row["m90"], q50, q90, row["n50"], row["n90"],
                         row["aq"], row["an"], row["sq"], row["sn"],
                         row["err"], g[0], 100 * g[1]))
    lines += ["", "Medians over the seeds (ranges):", "",
              "| arm | seeds | quiet P50 worst x base | quiet P90 worst x "
              "base | quiet P50 median x base | quiet P90 median x base | "
              "noisy P90 s | 429/503 noisy | 429/503 quiet | within %g s "
              "a second | within %g s of offered |" % (target, target),
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm, rows in sorted(per_arm.items()):
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | "
                     "%s |" % (
                         arm, len(rows), mr([r["w50"] for r in rows]),
                         mr([r["w90"] for r in rows]),
                         mr([r["m50"] for r in rows]),
                         mr([r["m90"] for r in rows]),
                         mr([r["n90"] for r in rows]),
                         mr([r["sn"] for r in rows]),
                         mr([r["sq"] for r in rows]),
                         mr([r["good"] for r in rows]),
                         mr([100 * r["share"] for r in rows])))
    bl = ["", "Baseline (noisy_equal, pa_v2): each quiet tenant's TTFT P50 / "
          "P90 s, median of the quiet tenants:", ""]
    for seed, (bby, bshed, bother) in sorted(base.items()):
        quiet = quiet_of(bby)
        bl.append("- seed %d: %.3f / %.3f s, %d answered, %d shed, %d "
                  "other errors" % (
                      seed, statistics.median(pct(bby[t], 50) for t in quiet),
                      statistics.median(pct(bby[t], 90) for t in quiet),
                      sum(len(v) for v in bby.values()),
                      sum(bshed.values()), sum(bother.values())))
    fl = ["", "Fairness and the quiet tenants' time (see the top of "
          "bench/noisy_report.py):", "",
          "| arm | seed | Jain's index, prefill served while all pending "
          "| that window's share of the run | quiet: in the queue P50 / "
          "P90 s | quiet: after the queue P50 / P90 s |",
          "|---|---|---|---|---|---|"]
    for (arm, seed), p in sorted(runs(main_dir, "noisy").items()):
        j, share = fairness(p, len(quiet_of(load(p)[0])) + 1)
        sp = split(p)
        fl.append("| %s | %d | %.3f | %.0f %% | %s | %s |" % (
            arm, seed, j, 100 * share,
            "%.3f / %.3f" % sp[:2] if sp else "-",
            "%.3f / %.3f" % sp[2:] if sp else "-"))
    print("\n".join(lines + bl + fl))


if __name__ == "__main__":
    main()
