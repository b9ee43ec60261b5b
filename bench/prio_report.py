#!/usr/bin/python3
"""Priority bands (issue 45): each band's TTFT from run.py --trace files.

    /usr/bin/python3 bench/prio_report.py MAIN_TRACE_DIR BASE_TRACE_DIR \\
        [--ttft-target 2.0] [--base-arm ARM] [--workload prio]

Both folders hold traces of workload "prio" (8 tenants at one rate, a
seeded 10 % of the requests in the high band, sent with X-Bench-Priority:
1, the others 0; the trace's "band"), one file per arm and seed
(prio-ARM-SEED.jsonl): MAIN_TRACE_DIR at overload (--rate 44, about 1.5
times the load), BASE_TRACE_DIR at about 0.8 of it (--rate 23).  The
issue's target: the high band's TTFT P90 at overload within 1.2 times the
same band's at 0.8 load.

For each arm and seed of the main folder: each band's TTFT P50 / P90 /
P99 (model seconds, answered requests) and their ratios to the same band's
in the baseline's run of the same seed, of the same arm (--base-arm: of
that arm for every arm); each band's answered and shed (429 or 503)
requests and other failures; the goodput: requests answered with a TTFT
within --ttft-target (model seconds) per second of the run (from the
first arrival to the last answer's end: the trace's "done", else the last
first token), and their share of all requests offered.  Then the medians
(and ranges) over the seeds, and the baseline's own figures.  Loading,
percentiles and the medians are bench/noisy_report.py's.  Prints
Markdown.
"""

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from noisy_report import goodput, load, mr, pct, runs  # noqa: E402

BANDS = ((1, "high"), (0, "low"))
PS = (50, 90, 99)


def ratio(a, b):
    if a != a or b != b or not b:
        return float("nan")
    return a / b


def figures(path, target):
    """One run's figures: {band: {p50, p90, p99, n, shed, other}}, goodput."""
    by, shed, other = load(path, key="band")
    out = {}
    for b, _ in BANDS:
        out[b] = dict(n=len(by[b]), shed=shed[b], other=other[b])
        for p in PS:
            out[b]["p%d" % p] = pct(by[b], p)
    g = goodput(path, target)
    return out, dict(rate=g[0], share=g[1], good=g[2], offered=g[3],
                     span=g[4])


def f3(xs):
    return " / ".join("%.3f" % x for x in xs)


def f2(xs):
    return " / ".join("%.2f" % x for x in xs)


def report(main_dir, base_dir, target=2.0, base_arm=None, wl="prio"):
    base = {k: figures(p, target) for k, p in runs(base_dir, wl).items()}
    per_arm = collections.defaultdict(list)
    head = ["| arm | seed | high P50 / P90 / P99 s | high x base | "
            "low P50 / P90 / P99 s | low x base | answered high / low | "
            "429/503 high / low | other errors | within %g s a second | "
            "within %g s of offered |" % (target, target),
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines = list(head)
    for (arm, seed), p in sorted(runs(main_dir, wl).items()):
        f, g = figures(p, target)
        b = base.get((base_arm or arm, seed))
        row = dict(good=g["rate"], share=g["share"],
                   shed_h=f[1]["shed"], shed_l=f[0]["shed"])
        cells = []
        for band, name in BANDS:
            mine = [f[band]["p%d" % q] for q in PS]
            if b is not None:
                rs = [ratio(f[band]["p%d" % q], b[0][band]["p%d" % q])
                      for q in PS]
            else:
                rs = [float("nan")] * len(PS)
            for q, x, r in zip(PS, mine, rs):
                row["%s%d" % (name, q)] = x
                row["%s%d_x" % (name, q)] = r
            cells += [f3(mine), f2(rs) if b is not None else "-"]
        per_arm[arm].append(row)
        lines.append("| %s | %d | %s | %s | %s | %s | %d / %d | %d / %d | "
                     "%d | %.2f | %.1f %% |" % (
                         arm, seed, cells[0], cells[1], cells[2], cells[3],
                         f[1]["n"], f[0]["n"], f[1]["shed"], f[0]["shed"],
                         f[1]["other"] + f[0]["other"], g["rate"],
                         100 * g["share"]))
    lines += ["", "Medians over the seeds (ranges); the target: the high "
              "band's P90 x base at most 1.2:", "",
              "| arm | seeds | high P50 x base | high P90 x base | high P99 "
              "x base | high P90 s | low P50 x base | low P90 x base | low "
              "P99 x base | low P90 s | 429/503 high | 429/503 low | within "
              "%g s a second | within %g s of offered | high P90 within "
              "1.2 x |" % (target, target),
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm, rows in sorted(per_arm.items()):
        col = lambda k: [r[k] for r in rows]  # noqa: E731
        met = [r["high90_x"] <= 1.2 for r in rows if r["high90_x"] == r[
            "high90_x"]]
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | "
                     "%s | %s | %s | %s | %d of %d seeds |" % (
                         arm, len(rows), mr(col("high50_x")),
                         mr(col("high90_x")), mr(col("high99_x")),
                         mr(col("high90")), mr(col("low50_x")),
                         mr(col("low90_x")), mr(col("low99_x")),
                         mr(col("low90")), mr(col("shed_h")),
                         mr(col("shed_l")), mr(col("good")),
                         mr([100 * x for x in col("share")]),
                         sum(met), len(met)))
    lines += ["", "Baseline (%s): each band's TTFT P50 / P90 / P99 s:" %
              base_dir, "",
              "| arm | seed | high | low | answered high / low | 429/503 "
              "high / low | other errors | within %g s a second | within "
              "%g s of offered |" % (target, target),
              "|---|---|---|---|---|---|---|---|---|"]
    for (arm, seed), (f, g) in sorted(base.items()):
        lines.append("| %s | %d | %s | %s | %d / %d | %d / %d | %d | %.2f | "
                     "%.1f %% |" % (
                         arm, seed, f3(f[1]["p%d" % q] for q in PS),
                         f3(f[0]["p%d" % q] for q in PS), f[1]["n"],
                         f[0]["n"], f[1]["shed"], f[0]["shed"],
                         f[1]["other"] + f[0]["other"], g["rate"],
                         100 * g["share"]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("main_dir", help="the traces at overload (--rate 44)")
    ap.add_argument("base_dir", help="the traces at 0.8 load (--rate 23)")
    ap.add_argument("--ttft-target", type=float, default=2.0,
                    help="goodput: a TTFT within this, model seconds")
    ap.add_argument("--base-arm", default=None,
                    help="compare every arm to this arm's baseline "
                         "(default: each arm to its own)")
    ap.add_argument("--workload", default="prio",
                    help="the traces' workload name")
    a = ap.parse_args(argv)
    print(report(a.main_dir, a.base_dir, a.ttft_target, a.base_arm,
                 a.workload))


if __name__ == "__main__":
    main()
