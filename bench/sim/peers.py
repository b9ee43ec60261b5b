"""peers: the routing policies of the LLM-aware routers an operator would
pick instead of prefix_aware, reimplemented for llmsim.py's front
(--front-peer NAME), in front of the same simulated instances as the
oracle: no proxy of ours is in their path and their own per-request cost
does not count against them.

Each policy is written from its project's public source, read at the
commit named in its class; the facts and parameters carry over, the code
does not (everything here is ours).  Where a peer reads engine state
(queue length, KV-cache utilisation, the exact cache contents that
"precise" / "events" modes get from vLLM's KV events) it takes it from the
simulated instances, as the oracle does.  Where a peer counts the requests
it has in flight, it counts those it routed and that have not ended.

Common simplifications (docs/benchmarks.md, "The peers"):

* Text.  A peer that matches characters of the request text matches here
  the prompt bytes the simulator computes (the chat template applied,
  ASCII, so characters = bytes) in blocks of 64 bytes (llmsim's 16-token
  blocks), named by chained hashes: a prefix that agrees to within a block
  matches to within 63 characters of where the peer's own structure would.
  Capacities given in characters or in smaller blocks are converted to
  the same number of bytes.
* Time.  Intervals (TTLs, eviction periods, metric refresh) are model
  seconds of the simulator.
* Ties a peer breaks at random are broken by a random.Random seeded with
  the "seed" parameter (default 1), so that a run is repeatable.

Policies (name: params, defaults):

  sglang     threshold=0.3 abs=64 rel=1.5 tree=67108864 evict=120
  llmd       prefix=3 queue=2 kv=2 blocks=256 refresh=0.05 precise=0
             flow=0 qdepth=5 kvsat=0.8 cap=1e9 ttl=0 rr=0
  dynamo     events=1 ttl=120 credit=1.0 scale=1.0 temperature=0
             busy=0 prefill=0
  prodstack  chunk=128
  aibrix     blocks=200000 block=4 std=1 factor=2.0 gap=8
  dualmap    threshold=1000000 vnodes=100 window=200 hot=0.0612
             samples=20 shrink=0.02
"""

import bisect
import collections
import hashlib
import math
import random

import overload

BLOCK_BYTES = 64          # llmsim.BLOCK_BYTES: 16 tokens of 4 bytes
BLOCK_TOKENS = 16


class Request:
    """What a peer sees of one request.  seq: the engine's Seq, set when
    the chosen instance admits the request into its queue (llmsim's
    Instance.submit), so that a peer can see its first token as a router
    that proxies the stream sees it."""

    __slots__ = ("data", "hashes", "tokens", "max_tokens", "seq", "state",
                 "flow", "priority", "size")

    def __init__(self, data, hashes, tokens, max_tokens, flow="",
                 priority=0, size=0):
        self.data = data
        self.hashes = hashes
        self.tokens = tokens
        self.max_tokens = max_tokens
        self.seq = None
        self.state = None
        # what flow control keys on (the front reads X-Bench-Group,
        # X-Bench-Priority and the body's length)
        self.flow = flow
        self.priority = priority
        self.size = size


def kv_usage(inst):
    """vllm:kv_cache_usage_perc as llmsim exports it."""
    c = inst.cache
    return (c.occupied() - len(c.free)) / c.capacity


def parse_params(spec, defaults):
    """"k=v,k=v" (or "+"-separated) over defaults -> dict; ValueError on
    an unknown key or a value that is not a number."""
    out = dict(defaults)
    for kv in spec.replace("+", ",").split(","):
        if not kv:
            continue
        k, eq, v = kv.partition("=")
        if k not in defaults or not eq:
            raise ValueError("unknown parameter %r (have %s)"
                             % (kv, ", ".join(sorted(defaults))))
        out[k] = float(v)
    return out


class Peer:
    DEFAULTS = {}

    def __init__(self, insts, params=""):
        self.insts = insts
        self.n = len(insts)
        self.p = parse_params(params, dict(self.DEFAULTS, seed=1))
        self.rng = random.Random(int(self.p["seed"]))
        self.inflight = [0] * self.n

    def now(self):
        return self.insts[0].now()

    async def admit(self, req):
        """Before choose(): None to route the request now (after holding
        it, for a peer that queues), or (status, body) to answer it so
        (shed).  Only the overload variants (overload.py) hold or shed."""
        return None

    def routed(self, i, req):
        self.inflight[i] += 1

    def done(self, i, req):
        self.inflight[i] -= 1

    def least(self, loads, idx=None):
        """Index of the least load, the first one on ties."""
        idx = range(self.n) if idx is None else idx
        return min(idx, key=lambda i: loads[i])

    def pick_random(self, idx):
        return idx[0] if len(idx) == 1 else self.rng.choice(sorted(idx))


# ---------------------------------------------------------------------------
# SGLang model gateway, cache_aware


class SGLang(Peer):
    """SGLang model gateway (now lightseekorg/smg) policy cache_aware.

    Read: lightseekorg/smg model_gateway/src/policies/cache_aware.rs
    (commit 105332109cb6), crates/kv_index/src/string_tree.rs (09b0a5c4e67f);
    sgl-project/sglang sgl-model-gateway/src/policies/cache_aware.rs; the
    CLI defaults in smg's CliArgs::default and parse_policy_config.

    Defaults (the gateway's CLI): cache_threshold 0.3, balance_abs_threshold
    64, balance_rel_threshold 1.5, eviction_interval 120 s, max_tree_size
    67,108,864 characters per worker.  (The library's CacheAwareConfig
    defaults differ: 0.5 / 32 / 1.1.)

    Decision (HTTP path, text tree): loads are the requests in flight the
    gateway sent each worker.  Imbalanced when max - min > abs AND
    max > rel x min: the least-loaded worker (first on ties), and the text
    is inserted in the tree for it.  Else the match ratio (matched
    characters / request characters) on one radix tree shared by all
    workers, each node tagged with the workers that routed through it: if
    it is above the threshold, the worker the deepest matched node names
    (the tree caches the last worker that routed through it), else the
    least-loaded worker; then the text is inserted for the chosen worker.
    Every eviction_interval, each worker whose tree holds more than
    max_tree_size characters loses its least recently used leaves until
    it fits.  The tree never learns what the engines evicted.
    """

    DEFAULTS = {"threshold": 0.3, "abs": 64, "rel": 1.5,
                "tree": 67108864, "evict": 120.0}

    def __init__(self, insts, params=""):
        super().__init__(insts, params)
        self.nodes = {}             # block -> [{worker: epoch}, last worker]
        self.lru = [collections.OrderedDict() for _ in range(self.n)]
        self.epoch = 0
        self.last_evict = 0.0
        self.counts = collections.Counter()

    def match(self, hashes):
        d = 0
        nodes = self.nodes
        for h in hashes:
            if h not in nodes:
                break
            d += 1
        return d, (nodes[hashes[d - 1]][1] if d else None)

    def insert(self, hashes, w):
        self.epoch += 1
        lru = self.lru[w]
        for h in hashes:
            node = self.nodes.get(h)
            if node is None:
                node = self.nodes[h] = [{}, None]
            node[0][w] = self.epoch
            node[1] = w
        # tail first, so that a prompt's head is its most recent block and
        # leaves go first (the tree evicts leaves)
        for h in reversed(hashes):
            lru[h] = None
            lru.move_to_end(h)

    def evict(self):
        limit = self.p["tree"] // BLOCK_BYTES
        for w in range(self.n):
            lru = self.lru[w]
            while len(lru) > limit:
                h, _ = lru.popitem(last=False)
                node = self.nodes.get(h)
                if node is None:
                    continue
                node[0].pop(w, None)
                if not node[0]:
                    del self.nodes[h]
                elif node[1] == w:
                    node[1] = max(node[0], key=node[0].get)

    def choose(self, req):
        now = self.now()
        if self.p["evict"] > 0 and now - self.last_evict >= self.p["evict"]:
            self.evict()
            self.last_evict = now
        loads = self.inflight
        lo, hi = min(loads), max(loads)
        if hi - lo > self.p["abs"] and hi > lo * self.p["rel"]:
            i = self.least(loads)
            self.counts["imbalanced"] += 1
        else:
            d, w = self.match(req.hashes)
            rate = (d * BLOCK_BYTES / len(req.data)) if req.data else 0.0
            if rate > self.p["threshold"] and w is not None:
                i = w
                self.counts["match"] += 1
            else:
                i = self.least(loads)
                self.counts["low_match"] += 1
        self.insert(req.hashes, i)
        return i


# ---------------------------------------------------------------------------
# llm-d inference scheduler


class LLMD(Peer):
    """llm-d inference scheduler (EPP), its default scheduling profile,
    and its precise prefix-cache variant.

    Read: llm-d/llm-d-inference-scheduler pkg/epp/config/loader/defaults.go
    (commit 159e739b98ed), pkg/plugins/scorer/precise_prefix_cache.go
    (057d2c76bf75) and utils.go (2202f3ca5437); kubernetes-sigs/
    gateway-api-inference-extension pkg/epp/scheduling/framework/plugins/
    prefixcachescorer/plugin.go, queuescorer/queue.go,
    kvcacheutilizationscorer/kvcache_utilization.go (a172f54a01a5).

    Default profile: queue-scorer weight 2, kv-cache-utilization-scorer
    weight 2, prefix-cache-scorer weight 3, max-score picker (random among
    ties).  The precise variant swaps the prefix scorer for
    precise-prefix-cache-scorer at the same weight (the precise guide's
    configuration: precise 3, KV 2, queue 2).

    prefix-cache-scorer: the prompt in blocks of 64 characters (16 tokens x
    4; autotuned from the pods' block size), hashes chained from a seed of
    the model, at most 256 blocks; score = matched blocks / blocks, where
    the walk goes block by block while any pod holds the block and credits
    every pod that holds it.  After the pick the blocks are added to the
    chosen pod's LRU, whose capacity is the pod's number of GPU blocks
    (autotune; 31,250 without metrics).
    queue-scorer: (max - waiting) / (max - min) over the pods' waiting
    queues (vllm:num_requests_waiting), 1 if all equal.
    kv-cache-utilization-scorer: 1 - vllm:kv_cache_usage_perc.
    Metrics are scraped every 50 ms (refresh): the load scorers see a
    snapshot up to that old.
    precise-prefix-cache-scorer: the longest prefix of blocks each pod's
    cache holds (from KV events; here the engine's cache itself), pods
    with a hit normalised min-max among themselves (1.0 when they are
    equal), 0 for the others.
    At overload (flow=1; overload.py): the Inference Extension's flow
    control before the scorers, its saturation detector's thresholds
    qdepth=5 and kvsat=0.8 on the same scraped metrics, per-band capacity
    cap=1e9 bytes (1 GB), no TTL (ttl=0), global-strict fairness (rr=1:
    round robin between flows); the flow is X-Bench-Group, the priority
    X-Bench-Priority.
    """

    DEFAULTS = {"prefix": 3.0, "queue": 2.0, "kv": 2.0, "blocks": 256,
                "refresh": 0.05, "precise": 0,
                "flow": 0, "qdepth": 5, "kvsat": 0.8, "cap": 1e9, "ttl": 0.0,
                "rr": 0}

    def __init__(self, insts, params=""):
        super().__init__(insts, params)
        if self.p["qdepth"] <= 0 or self.p["kvsat"] <= 0:
            raise ValueError("qdepth and kvsat must be > 0")
        if self.p["cap"] < 0 or self.p["ttl"] < 0:
            raise ValueError("cap and ttl must be >= 0")
        self.lru = [collections.OrderedDict() for _ in range(self.n)]
        self.index = collections.defaultdict(set)
        self.snap_t = None
        self.snap = None
        self.fc = None

    def saturation(self):
        """The utilization detector's signal on the scraped metrics: the
        mean over the pods of max(waiting / qdepth, KV usage / kvsat)."""
        snap = self.metrics()
        return sum(max(w / self.p["qdepth"], kv / self.p["kvsat"])
                   for w, kv in snap) / len(snap)

    def saturated(self):
        return not self.insts or self.saturation() >= 1.0

    def flow_control(self):
        if self.fc is None:
            self.fc = overload.FlowControl(
                self.saturated, self.now, self.insts[0].scale,
                cap=self.p["cap"], ttl=self.p["ttl"], rr=bool(self.p["rr"]))
        return self.fc

    async def admit(self, req):
        """flow=1: llm-d's flow control in front of the scorers
        (overload.py): held while the pool is saturated, released band by
        band, 429 / 503 as its admission controller answers."""
        if not self.p["flow"]:
            return None
        return await self.flow_control().admit(req.flow, req.priority,
                                               req.size)

    def metrics(self):
        now = self.now()
        if self.snap is None or now - self.snap_t >= self.p["refresh"]:
            self.snap = [(len(inst.waiting), kv_usage(inst))
                         for inst in self.insts]
            self.snap_t = now
        return self.snap

    def prefix_scores(self, hashes):
        if self.p["precise"]:
            hits = {}
            for i, inst in enumerate(self.insts):
                d = inst.cache.lookup(hashes, len(hashes))
                if d:
                    hits[i] = d
            out = [0.0] * self.n
            if hits:
                lo, hi = min(hits.values()), max(hits.values())
                for i, d in hits.items():
                    out[i] = 1.0 if lo == hi else (d - lo) / (hi - lo)
            return out
        hashes = hashes[:int(self.p["blocks"])]
        total = len(hashes)
        matched = [0] * self.n
        for h in hashes:
            pods = self.index.get(h)
            if not pods:
                break
            for i in pods:
                matched[i] += 1
        return [m / total if total else 0.0 for m in matched]

    def choose(self, req):
        snap = self.metrics()
        qs = [w for w, _ in snap]
        qmin, qmax = min(qs), max(qs)
        score = []
        pre = self.prefix_scores(req.hashes)
        for i in range(self.n):
            q = 1.0 if qmax == qmin else (qmax - qs[i]) / (qmax - qmin)
            score.append(self.p["prefix"] * pre[i] + self.p["queue"] * q
                         + self.p["kv"] * (1.0 - snap[i][1]))
        best = max(score)
        i = self.pick_random([k for k in range(self.n) if score[k] == best])
        if not self.p["precise"]:
            self.add(i, req.hashes[:int(self.p["blocks"])])
        return i

    def add(self, i, hashes):
        lru = self.lru[i]
        cap = self.insts[i].cache.capacity
        for h in hashes:
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
                self.index[h].add(i)
        while len(lru) > cap:
            h, _ = lru.popitem(last=False)
            s = self.index.get(h)
            if s is not None:
                s.discard(i)
                if not s:
                    del self.index[h]


# ---------------------------------------------------------------------------
# NVIDIA Dynamo KV router


class _Active:
    __slots__ = ("blocks", "new_tokens")


class Dynamo(Peer):
    """NVIDIA Dynamo KV router, default selector.

    Read: ai-dynamo/dynamo lib/kv-router/src/scheduling/selector/default.rs
    (commit 07a6c9ce3bb0), lib/kv-router/src/scheduling/config.rs
    (0243c51bb6e8), docs/router/kv_cache_routing.md and the router design
    document (potential active blocks, potential new prefill blocks).

    Defaults (KvRouterConfig::default): overlap_score_credit 1.0,
    prefill_load_scale 1.0, router_temperature 0, use_kv_events true,
    router_ttl_secs 120 (without events), router_track_active_blocks true,
    router_track_output_blocks false, router_assume_kv_reuse true,
    router_track_prefill_tokens true; block size 16 tokens (the engine's).

    Cost of worker w for a request of T tokens with an overlap of o blocks
    on w:  prefill_load_scale x max(0, (P_w + T) / 16 - credit x o) + D_w,
    P_w the uncached prompt tokens of the requests the router sent w that
    have not produced their first token, D_w the distinct prompt blocks of
    the requests active on w together with this request's (shared prefixes
    counted once).  Lowest cost, random among ties (temperature 0; a
    positive temperature samples a softmax of the normalised costs).
    Overlap: with events, the blocks w's cache holds (here the engine's
    cache itself); without (events=0), the router's own decisions: the
    blocks of every request it sent w in the last ttl seconds.
    Not modelled: the router queue (router_queue_threshold 16: requests
    wait in the router while every worker has more than 16 x
    max_num_batched_tokens of prefill pending) and the newer selector's
    optional terms (overlap-credit decay, active-request weight), which
    config.rs at the commit read does not have.
    At overload (busy=X, prefill=N; overload.py): the frontend's busy
    thresholds, off by default; when every worker is busy, 503 at once.
    The selection among the workers is unchanged while one is free.
    """

    DEFAULTS = {"events": 1, "ttl": 120.0, "credit": 1.0, "scale": 1.0,
                "temperature": 0.0, "busy": 0.0, "prefill": 0}

    async def admit(self, req):
        """busy=X (--active-decode-blocks-threshold) and prefill=N
        (--active-prefill-tokens-threshold), both off by default as in
        Dynamo: when every worker is over one of them, 503 at once
        (overload.py)."""
        if overload.dynamo_all_busy(self.insts, kv_usage, self.p["busy"],
                                    self.p["prefill"]):
            self.counts["rejected"] += 1
            return 503, overload.DYNAMO_BUSY_BODY
        return None

    def __init__(self, insts, params=""):
        super().__init__(insts, params)
        if not 0 <= self.p["busy"] <= 1 or self.p["prefill"] < 0:
            raise ValueError("busy must be within 0..1 (a fraction of the "
                             "KV blocks, 0: off), prefill >= 0")
        self.counts = collections.Counter()
        self.active = [dict() for _ in range(self.n)]  # id(req) -> req
        self.refs = [collections.Counter() for _ in range(self.n)]
        self.approx = [dict() for _ in range(self.n)]  # block -> expiry
        self.last_prune = 0.0

    def overlap(self, i, hashes, now):
        if self.p["events"]:
            return self.insts[i].cache.lookup(hashes, len(hashes))
        a = self.approx[i]
        d = 0
        for h in hashes:
            t = a.get(h)
            if t is None or t <= now:
                break
            d += 1
        return d

    def prefill_pending(self, i):
        n = 0
        for r in self.active[i].values():
            if r.seq is None or r.seq.t_first is None:
                n += r.state.new_tokens
        return n

    def costs(self, req, now):
        out = []
        for i in range(self.n):
            o = self.overlap(i, req.hashes, now)
            refs = self.refs[i]
            decode = len(refs) + sum(1 for h in req.hashes if h not in refs)
            prefill = (self.prefill_pending(i) + req.tokens) / BLOCK_TOKENS
            cost = (self.p["scale"] * max(0.0, prefill - self.p["credit"] * o)
                    + decode)
            out.append((cost, o))
        return out

    def choose(self, req):
        now = self.now()
        costs = self.costs(req, now)
        vals = [c for c, _ in costs]
        if self.p["temperature"] > 0:
            i = self.softmax(vals)
        else:
            best = min(vals)
            i = self.pick_random([k for k in range(self.n)
                                  if vals[k] == best])
        st = _Active()
        st.blocks = req.hashes
        st.new_tokens = max(0, req.tokens - costs[i][1] * BLOCK_TOKENS)
        req.state = st
        if not self.p["events"]:
            a = self.approx[i]
            exp = now + self.p["ttl"]
            for h in req.hashes:
                a[h] = exp
            if now - self.last_prune >= self.p["ttl"]:
                self.last_prune = now
                for a in self.approx:
                    for h in [h for h, t in a.items() if t <= now]:
                        del a[h]
        return i

    def softmax(self, vals):
        lo, hi = min(vals), max(vals)
        if lo == hi:
            return self.rng.randrange(self.n)
        scale = -1.0 / ((hi - lo) * self.p["temperature"])
        w = [math.exp((v - lo) * scale) for v in vals]
        x = self.rng.random() * sum(w)
        for i, wi in enumerate(w):
            x -= wi
            if x <= 0:
                return i
        return self.n - 1

    def routed(self, i, req):
        super().routed(i, req)
        self.active[i][id(req)] = req
        refs = self.refs[i]
        for h in req.hashes:
            refs[h] += 1

    def done(self, i, req):
        super().done(i, req)
        if self.active[i].pop(id(req), None) is None:
            return
        refs = self.refs[i]
        for h in req.hashes:
            c = refs[h] - 1
            if c:
                refs[h] = c
            else:
                del refs[h]


# ---------------------------------------------------------------------------
# vLLM production-stack


class ProdStack(Peer):
    """vLLM production-stack router, routing logic "prefixaware".

    Read: vllm-project/production-stack src/vllm_router/routers/
    routing_logic.py (commit 008a23bd4837, PrefixAwareRouter) and
    src/vllm_router/prefix/hashtrie.py (35e4ad377d6e).

    Defaults: HashTrie chunk_size 128 characters; no eviction ("we assume
    that there is no eviction of prefix cache"); no load term.

    Decision: the prompt cut into 128-character chunks (the last one
    shorter), a trie of chunk hashes whose nodes record the endpoints
    routed through them; the walk keeps the set of endpoints that hold
    every chunk so far and stops when the next chunk is unknown or no
    endpoint of the set holds it; a random endpoint of that set (all of
    them when nothing matched); then the prompt is inserted for it.
    (Its "kvaware" logic needs an LMCache controller and is not
    reproduced; the "loadaware" variant some forks carry is not
    upstream.)
    """

    DEFAULTS = {"chunk": 128}

    def __init__(self, insts, params=""):
        super().__init__(insts, params)
        self.trie = {}               # chained chunk key -> set of endpoints

    def keys(self, data):
        c = int(self.p["chunk"])
        k = 0
        out = []
        for i in range(0, len(data), c):
            k = hash((k, data[i:i + c]))
            out.append(k)
        return out

    def choose(self, req):
        keys = self.keys(req.data)
        sel = set(range(self.n))
        for k in keys:
            eps = self.trie.get(k)
            if eps is None or not (eps & sel):
                break
            sel = eps & sel
        i = self.pick_random(list(sel))
        for k in keys:
            self.trie.setdefault(k, set()).add(i)
        return i


# ---------------------------------------------------------------------------
# AIBrix prefix-cache router and its prefix hash table


class _PrefixTable:
    """AIBrix pkg/utils/prefixcacheindexer/hash.go: one LRU of blocks for
    all pods, each block naming the pods it was routed to; MatchPrefix
    walks the blocks while some ready pod holds them, dropping from the
    ready set the pods that do not, and gives each pod the per cent of the
    prompt's blocks matched at its last block."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.store = collections.OrderedDict()   # block -> set of pods

    def match(self, hashes, ready):
        ready = set(ready)
        out = {}
        n = len(hashes)
        for k, h in enumerate(hashes):
            pods = self.store.get(h)
            if not pods:
                break
            hit = ready & pods
            if not hit:
                break
            pct = (k + 1) * 100 // n
            for p in hit:
                out[p] = pct
            ready = hit
        return out

    def add(self, hashes, pod):
        st = self.store
        for h in hashes:
            pods = st.get(h)
            if pods is None:
                pods = st[h] = set()
            else:
                st.move_to_end(h)
            pods.add(pod)
        while len(st) > self.capacity:
            st.popitem(last=False)


class AIBrix(Peer):
    """AIBrix gateway routing algorithm "prefix-cache".

    Read: vllm-project/aibrix pkg/plugins/gateway/algorithms/prefix_cache.go
    (commit 01de8a514d00) and pkg/utils/prefixcacheindexer/hash.go
    (0871c212af9b).

    Defaults: character tokenizer; prefix blocks of 4 tokens (characters);
    one LRU of 200,000 blocks shared by the pods (20 minutes idle
    eviction, longer than any run here); standard-deviation factor 1; load
    gate factor 2.0 and minimum gap 8.  Here blocks are 64 characters and
    the LRU holds the same 800,000 characters (12,500 blocks).

    Decision: counts are the requests in flight the gateway sent each pod.
    Load gate: if max > factor x (mean + 1) and max - min >= gap, only the
    least-loaded pods are candidates for the match.  Among the pods that
    match, the highest per cent first, then the fewest requests (random
    order among equals), the first whose count is within mean + std x
    stddev (over all pods); if none, or nothing matched, the pod with the
    fewest requests (random among equals).  Then the prompt's blocks are
    recorded for the chosen pod.
    """

    DEFAULTS = {"blocks": 200000, "block": 4, "std": 1, "factor": 2.0,
                "gap": 8}

    def __init__(self, insts, params=""):
        super().__init__(insts, params)
        cap = int(self.p["blocks"] * self.p["block"]) // BLOCK_BYTES
        self.table = _PrefixTable(max(1, cap))

    def choose(self, req):
        cnt = self.inflight
        ready = list(range(self.n))
        mean = sum(cnt) / self.n
        lo, hi = min(cnt), max(cnt)
        if hi > self.p["factor"] * (mean + 1) and hi - lo >= self.p["gap"]:
            ready = [i for i in ready if cnt[i] == lo]
        matched = self.table.match(req.hashes, ready)
        i = None
        if matched:
            sd = math.sqrt(sum((c - mean) ** 2 for c in cnt) / self.n)
            pods = sorted(matched)
            self.rng.shuffle(pods)
            pods.sort(key=lambda p: (-matched[p], cnt[p]))
            for p in pods:
                if cnt[p] <= mean + self.p["std"] * sd:
                    i = p
                    break
        if i is None:
            i = self.pick_random([k for k in range(self.n) if cnt[k] == lo])
        self.table.add(req.hashes, i)
        return i


# ---------------------------------------------------------------------------
# DualMap


def _fnv1a64(b):
    h = 14695981039346656037
    for x in b:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def _blake64(b):
    return int.from_bytes(hashlib.blake2b(b, digest_size=8).digest(), "big")


class _Ring:
    def __init__(self, hashfn, n, vnodes):
        self.points = sorted((hashfn(b"i%d-%d" % (i, k)), i)
                             for i in range(n) for k in range(vnodes))
        self.keys = [p for p, _ in self.points]
        self.hashfn = hashfn

    def get(self, key):
        k = bisect.bisect_left(self.keys, self.hashfn(key))
        return self.points[k % len(self.points)][1]


class DualMap(Peer):
    """DualMap (arXiv 2602.06502, ICLR'26) as AIBrix implements it,
    routing algorithm "dualmap", balance type "dualmap" (the default).

    Read: vllm-project/aibrix pkg/plugins/gateway/algorithms/dualmap.go
    (commit 9c8981eab087) with pkg/utils/prefixcacheindexer/hash.go.

    Defaults (its environment variables): balance type dualmap; first
    balance threshold 1,000,000 pending tokens; rebalance threshold
    1,000,000 and waiting latency 60 s; prefill TPOT 0.05; recompute
    punish ratio 0.1; 100 virtual nodes per pod on each ring; hot-prefix
    window 200 requests, hot ratio 0.0612, minimum 20 samples; shrink
    below 2 %.

    Decision: the request's key is its first `depth` prefix blocks, depth
    adapted per prefix (a lazy table: a prefix seen in >= 6.12 % of the
    last 200 keys expands its depth by one block; one whose parent falls
    under 2 % shrinks).  Two candidates: the key's pod on a ring hashed
    with xxhash and on a ring hashed with FNV (on a collision, the next
    pod).  Primary: the candidate with the longer prefix-cache hit (the
    shared prefix table of AIBrix's prefix-cache router, fed with each
    routed prompt), ties to the lower KV-cache usage, then a fixed one
    (Go's math/rand seeded 42 on every call; here the first).  The TTFT
    fallback: if the primary's virtual pending tokens (its waiting
    requests x their mean prompt length + this request's uncached
    tokens) exceed the first balance threshold, the candidate with the
    fewer pending tokens.  With the defaults the global queues are pushed
    and popped at once and the rebalancing never starts, so neither is
    modelled.  Here blocks are 64 characters instead of 4, so that the
    key's depth grows 16 times faster per request than with AIBrix's
    block size; the rings are plain rings of 100 points per pod
    (buraksezer/consistent's partitions and load bound are not
    reproduced).
    """

    DEFAULTS = {"threshold": 1000000, "vnodes": 100, "window": 200,
                "hot": 0.0612, "samples": 20, "shrink": 0.02,
                "blocks": 200000, "block": 4}

    def __init__(self, insts, params=""):
        super().__init__(insts, params)
        v = int(self.p["vnodes"])
        self.ring1 = _Ring(_blake64, self.n, v)
        self.ring2 = _Ring(_fnv1a64, self.n, v)
        cap = int(self.p["blocks"] * self.p["block"]) // BLOCK_BYTES
        self.table = _PrefixTable(max(1, cap))
        self.levels = {}             # depth -> {prefix hash: new depth}
        self.window = collections.deque()
        self.counts = collections.Counter()
        self.decisions = collections.Counter()

    def observe(self, key):
        self.window.append(key)
        self.counts[key] += 1
        if len(self.window) > self.p["window"]:
            old = self.window.popleft()
            self.counts[old] -= 1
            if self.counts[old] <= 0:
                del self.counts[old]
        total = len(self.window)
        if total < self.p["samples"]:
            return False, 0.0
        ratio = self.counts[key] / total
        return ratio >= self.p["hot"], ratio

    def depth(self, hashes):
        """The lazy table's lookup and update (expand a hot prefix by one
        block, shrink below a cold parent); -> the key's depth."""
        n = len(hashes)
        d = 1
        while d <= n:
            nxt = self.levels.get(d, {}).get(hashes[d - 1])
            if nxt is None:
                break
            d = nxt
        d = min(d, n)
        hot, _ = self.observe(hashes[d - 1])
        if hot and d < n:
            self.levels.setdefault(d, {})[hashes[d - 1]] = d + 1
        if d > 1:
            _, pr = self.observe(hashes[d - 2])
            if pr < self.p["shrink"]:
                self.levels.get(d, {}).pop(hashes[d - 1], None)
        return d

    def candidates(self, key):
        a = self.ring1.get(key)
        b = self.ring2.get(key)
        if a == b:
            b = (a + 1) % self.n
        return a, b

    def pending(self, i, req, hit):
        inst = self.insts[i]
        done = max(1, inst.next_id)
        mean = inst.m["prompt_tokens"] / done
        return len(inst.waiting) * mean + max(0, req.tokens - hit)

    def choose(self, req):
        if self.n == 1:
            return 0
        if req.hashes:
            d = self.depth(req.hashes)
            key = req.data[:d * BLOCK_BYTES]
        else:
            key = b"%d" % req.tokens
        a, b = self.candidates(key)
        m = self.table.match(req.hashes, (a, b))
        hit = {i: req.tokens * m.get(i, 0) // 100 for i in (a, b)}
        use = {i: kv_usage(self.insts[i]) for i in (a, b)}

        def better(metric, larger):
            if metric[a] != metric[b]:
                return (a if (metric[a] > metric[b]) == larger else b)
            if use[a] != use[b]:
                return a if use[a] < use[b] else b
            return a

        i = better(hit, True)
        pend = {k: self.pending(k, req, hit[k]) for k in (a, b)}
        if pend[i] > self.p["threshold"]:
            i = better(pend, False)
            self.decisions["fallback"] += 1
        else:
            self.decisions["cache"] += 1
        self.table.add(req.hashes, i)
        return i


PEERS = {"sglang": SGLang, "llmd": LLMD, "dynamo": Dynamo,
         "prodstack": ProdStack, "aibrix": AIBrix, "dualmap": DualMap}


def make(name, insts, params=""):
    if name not in PEERS:
        raise ValueError("unknown peer %r (have %s)"
                         % (name, ", ".join(sorted(PEERS))))
    return PEERS[name](insts, params)
