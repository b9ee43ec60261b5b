#!/usr/bin/python3
"""The LoRA benchmark (docs/models.md): 8 adapters of one base model over
4 simulated instances, each adapter served by 2 of them (llmsim --models,
which answers 404 for an adapter an instance does not serve), the "lora"
workload of workloads.py (Zipf-popular adapters, system prompts of their
own).  Arms, each on the same request stream and the same instances:

  pa_models    nginx + prefix_aware models=discover: the sets from each
               instance's GET /v1/models, routing by prefix within them
  pa_blind     nginx + prefix_aware without sets (errors where an adapter
               is missing)
  round_robin  nginx round robin over the 4 instances (errors likewise)
  rr_by_hand   nginx round robin restricted by hand: an upstream of its 2
               instances per adapter, the client's path naming the adapter
               (/lora-K/v1/chat/completions): what an operator writes
               without the module

    unshare -n sh -c 'ip link set lo up && /usr/bin/python3 bench/lora.py'

It reuses run.py's simulator, proxies, client and summaries; the table
(medians over the seeds, and each seed's ratio to rr_by_hand) goes to
stdout and to --out.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "sim"))

import run  # noqa: E402
import workloads  # noqa: E402

ARMS = ["pa_models", "pa_blind", "round_robin", "rr_by_hand"]
BASE = "rr_by_hand"


def by_hand_conf(tmp, port, backends):
    """One upstream per adapter, its two instances, round robin."""
    conf = run.nginx_conf(tmp, port, backends, "", module=False)
    ups = []
    locs = []
    for k in range(workloads.PARAMS["lora"]["adapters"]):
        name = workloads.adapter_name(k)
        servers = "".join("        server 127.0.0.1:%d max_fails=0;\n"
                          % backends[i] for i in workloads.adapter_hosts(k))
        ups.append("    upstream %s {\n%s        keepalive 64;\n    }\n"
                   % (name.replace("-", "_"), servers))
        locs.append("""        location /%s/ {
            proxy_pass http://%s/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
        }
""" % (name, name.replace("-", "_")))
    conf = conf.replace("    upstream llm {", "".join(ups) + "    upstream llm {", 1)
    return conf.replace("        location / {", "".join(locs)
                        + "        location / {", 1)


def patch(models):
    start_sim = run.start_sim
    start_proxy = run.start_proxy

    def sim(tmp, ports, opts, pooled=False):
        # run.start_sim's command, with --models
        orig = run.PROCS.start

        def start(name, cmd, logp):
            return orig(name, cmd + ["--models", models], logp)
        run.PROCS.start = start
        try:
            return start_sim(tmp, ports, opts, pooled)
        finally:
            run.PROCS.start = orig

    def proxy(strategy, tmp, port, backends, opts):
        if strategy != "rr_by_hand":
            return start_proxy(strategy, tmp, port, backends, opts)
        os.makedirs(tmp, exist_ok=True)
        for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(os.path.join(tmp, d), exist_ok=True)
        cfg = os.path.join(tmp, "nginx.conf")
        with open(cfg, "w") as f:
            f.write(by_hand_conf(tmp, port, backends))
        p = run.PROCS.start(strategy, [run.NGINX, "-p", tmp, "-c", cfg],
                            os.path.join(tmp, "proxy.log"))
        run.wait_port(port, p)
        return p

    run.start_sim = sim
    run.start_proxy = proxy


def by_hand(reqs):
    out = []
    for r in reqs:
        adapter = r.group.split("/")[0]
        out.append(workloads.Request(r.t, r.session, r.turn,
                                     "/" + adapter + r.path, r.body, r.group,
                                     r.max_tokens, r.style))
    return out


def median(xs):
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return float("nan")
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--rate", type=float, default=None)
    ap.add_argument("--kv-blocks", type=int, default=2048)
    ap.add_argument("--time-scale", type=float, default=0.5)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "lora.md"))
    a = ap.parse_args(argv)

    opts = argparse.Namespace(
        instances=4, base_port=18400, kv_blocks=a.kv_blocks,
        time_scale=a.time_scale, pa_length=4096, pa_threshold=10,
        pa_format="auto", request_timeout=300.0, max_seconds=1800.0,
        keep_tmp=False)
    run.ARMS["pa_models"] = "models=discover models_interval=2s"
    run.ARMS["pa_blind"] = ""
    arms = [x for x in a.arms.split(",") if x]
    err = run.check_arms([x for x in arms if run.is_pa(x)], opts)
    if err:
        sys.exit("lora.py: " + err)
    patch(workloads.lora_models())

    results = {arm: [] for arm in arms}
    t0 = time.monotonic()
    try:
        for si in range(a.seeds):
            wl = workloads.generate("lora", n=a.n, rate=a.rate,
                                    seed=workloads.PARAMS["lora"]["seed"] + si)
            run.log("lora seed %d: %s" % (si + 1, wl.describe()))
            for arm in arms:
                reqs = by_hand(wl.requests) if arm == "rr_by_hand" else None
                res = run.run_one(arm, wl, opts, reqs=reqs, slot=si)
                results[arm].append(res)
    finally:
        run.PROCS.stop_all()

    lines = ["| arm | errors | hit rate | TTFT p50 | TTFT p90 | TTFT mean | "
             "hit / by hand | TTFT p50 / by hand | TTFT mean / by hand |",
             "|---|---|---|---|---|---|---|---|---|"]
    for arm in arms:
        rs = results[arm]
        errs = [r["n"] - r["ok"] for r in rs]
        row = ["%s" % arm,
               "%s (of %d)" % ("/".join(str(e) for e in errs), rs[0]["n"]),
               "%.1f%%" % (100 * median(r["hit_rate"] for r in rs)),
               "%.3f" % median(r["ttft_p50"] for r in rs),
               "%.3f" % median(r["ttft_p90"] for r in rs),
               "%.3f" % median(r["ttft_mean"] for r in rs)]
        if BASE in results and arm != BASE:
            base = results[BASE]
            for key in ("hit_rate", "ttft_p50", "ttft_mean"):
                rat = [r[key] / b[key] for r, b in zip(rs, base) if b[key]]
                row.append("%.2f (%.2f..%.2f)" % (median(rat), min(rat),
                                                  max(rat)))
        else:
            row += ["", "", ""]
        lines.append("| " + " | ".join(row) + " |")
    head = ("lora workload, %d seeds, %d requests each at %s req/s (model "
            "time), %d instances of %d KV blocks, time scale %g; errors per "
            "seed; medians over the seeds, ratios per seed (median, range); "
            "%.0f s wall" % (a.seeds, results[arms[0]][0]["n"],
                             a.rate or workloads.PARAMS["lora"]["rate"],
                             opts.instances, opts.kv_blocks, opts.time_scale,
                             time.monotonic() - t0))
    text = head + "\n\n" + "\n".join(lines) + "\n"
    print(text)
    for arm in arms:
        for r in results[arm]:
            if r["errors"]:
                print("%s errors: %s" % (arm, r["errors"]))
    if a.out:
        os.makedirs(os.path.dirname(a.out), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
