#!/usr/bin/python3
"""The many-hosts tables of docs/benchmarks.md from runs of
`bench/run.py hosts` made apart (one host in one run, more in another, the
same seeds): per workload and module, medians (ranges) over the seeds of
the hit rate, TTFT x round robin in the same condition, and TTFT x
`pa_v2` with one host on the same seed.

    bench/hosts_compare.py ONE_HOST.json OTHER.json [OTHER.json ...]
"""
import json, statistics as st, sys

one = json.load(open(sys.argv[1]))
others = [json.load(open(p)) for p in sys.argv[2:]]
def byseed(raw, wl):
    out = {}
    for cond, seeds in raw.get(wl, {}).items():
        for sd in seeds:
            for r in sd['results']:
                out.setdefault(cond, {}).setdefault(r['strategy'], {})[sd['seed']] = r
    return out
def fmt(v, f="%.2f"):
    v = [x for x in v if x is not None]
    if not v: return "-"
    return (f + " (" + f + ".." + f + ")") % (st.median(v), min(v), max(v))
for wl in one:
    base = byseed(one, wl)['1/0.00']
    rows = [('1/0.00', s, base[s]) for s in base if s != 'round_robin']
    rr = {('1/0.00'): base['round_robin']}
    for raw in others:
        b = byseed(raw, wl)
        for cond in b:
            rr[cond] = b[cond]['round_robin']
            rows += [(cond, s, b[cond][s]) for s in b[cond] if s != 'round_robin']
    print("## %s" % wl)
    print("| hosts | module | KV hit | hit - 1 host | P50 x rr | P90 x rr | P99 x rr | P50 x 1 host | P90 x 1 host | max/mean req |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cond, s, per in rows:
        seeds = sorted(per)
        one_h = base['pa_v2']
        hit = [100 * per[x]['hit_rate'] for x in seeds]
        dhit = [100 * (per[x]['hit_rate'] - one_h[x]['hit_rate']) for x in seeds if x in one_h]
        q = lambda k: [per[x][k] / rr[cond][x][k] for x in seeds]
        h1 = lambda k: [per[x][k] / one_h[x][k] for x in seeds if x in one_h]
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            cond.split('/')[0], s, fmt(hit, "%.1f"), fmt(dhit, "%+.1f"),
            fmt(q('ttft_p50')), fmt(q('ttft_p90')), fmt(q('ttft_p99')),
            fmt(h1('ttft_p50')), fmt(h1('ttft_p90')),
            fmt([per[x]['balance_req'] for x in seeds])))
    print()
