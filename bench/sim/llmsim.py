#!/usr/bin/python3
"""llmsim: a simulated vLLM inference instance, for routing benchmarks.

One process hosts one or more instances, each on its own loopback port and
each with its own KV cache, scheduler and metrics, so that four instances
cost one Python process.  Nothing is computed: the step loop sleeps for the
time a GPU would take, which a roofline cost model derives from the batch.

What is modelled (see docs/benchmarks.md for the calibration and sources):

* Tokens.  The prompt text (after a Llama-3 chat template for chat
  requests) is UTF-8 encoded and cut into 4-byte pieces; each piece is a
  token (~4 bytes per token, the usual figure for English with a BPE
  vocabulary).  Equal text prefixes therefore give equal token prefixes.
* Prefix cache (vLLM automatic prefix caching).  Blocks of 16 tokens
  (64 bytes); block i is named by hash(name of block i-1, its bytes), so a
  block is only reused after the same whole prefix.  Only full prompt
  blocks are cached, once computed.  A cached block not used by a running
  request is evictable, least recently freed first (the tail of a request
  is freed before its head, as vLLM does).  The cache has --kv-blocks
  blocks, shared with the running requests: a request reserves blocks for
  its prompt and max_tokens when admitted, or waits.  Hits are the longest
  cached block prefix, at most prompt-1 tokens (the last token is always
  recomputed).
* Continuous batching (vLLM V1 scheduler, chunked prefill).  Each step
  schedules one token for every decoding request, then prefill chunks of
  admitted and waiting requests (first come first served) within
  --max-batched-tokens; at most --max-num-seqs requests run.  The step
  lasts max(compute, memory) + overhead:
      compute = (2 P (prefill + decode tokens) + attention FLOPs) / (peak x mfu)
      memory  = (weight bytes + KV bytes read by decoders) / (bandwidth x eff)
  so it grows with the prefill tokens actually computed (cache misses) and
  with the decoding requests and their contexts.  TTFT = queueing +
  prefill of the uncached tokens (+ the first step's decode).
* Time.  Every modelled duration is multiplied by --time-scale before it
  is slept (0.5: twice as fast as the modelled GPU).  Reported times
  (/metrics, usage) are in model seconds; a client divides its wall-clock
  figures by the same factor.  llmsim:step_lag_seconds_total shows whether
  the simulator itself fell behind (it should stay near zero).

* Pooled cache (--pooled).  All instances of the process share one KV
  cache of --kv-blocks x instances blocks: every instance hits every
  block any of them computed, and all share the capacity (running
  requests' reservations included).  Each instance keeps its own
  scheduler, batch and step loop.  This is the routing upper bound: no
  router in front of separate caches can hit more than one cache of their
  total size that every instance reads (run.py's "pooled" arm puts
  least_conn in front of it).

* Oracle (--front PORT).  One more port, in front of the process's
  instances, routes each request with prefix_aware's choice (the deepest
  holder within the bounds; see class Oracle) on the depth each
  instance's cache holds now, which no real router knows: the limit of
  that choice in front of separate caches, between the module and the
  pooled bound.  --front-model lru / held route on a model of the caches
  as the module's index keeps it instead, for trying models of the
  engine's LRU without building them into the module.

* Peers (--front PORT --front-peer NAME): the front routes with the
  policy of another router (SGLang's gateway, llm-d, Dynamo,
  production-stack, AIBrix, DualMap: bench/sim/peers.py) instead of the
  oracle's, reading the instances' queues, KV usage and caches where
  that router reads the engines'.

Endpoints: POST /v1/chat/completions, POST /v1/completions (SSE with
"stream": true), POST /invocations (SageMaker; OpenAI chat or completion
bodies, or {"inputs": ..., "parameters": {...}}, or any other bytes taken
as the prompt), POST /v1/responses (OpenAI's Responses API, JSON or its
SSE events; each instance keeps the responses it made unless "store" is
false, continues one named by previous_response_id, and answers GET and
DELETE /v1/responses/{id} and POST /v1/responses/{id}/cancel, 404 for an
id it did not make, as vLLM with VLLM_ENABLE_RESPONSES_API_STORE=1),
POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API,
JSON or its SSE events), GET /ping, GET /health, GET /v1/models, GET
/metrics, POST /admin/reset (clears the cache and the peak gauges when
idle).  Prompts are rendered as the module's keys read them: the system
prompt, the tools, then the conversation (bench/sim/apis.py).
Every response carries "X-Instance: <name>".

Models (--models): each instance serves the base model and its LoRA
adapters; GET /v1/models lists them, as vLLM --enable-lora does, and a
request whose "model" is another one is answered 404 ("The model `x` does
not exist.", llmsim:model_not_found).  An adapter's prompt is cached apart
from the same text under another adapter (vLLM mixes the adapter into its
block hashes): its blocks are named after an adapter tag first.

Usage: llmsim.py --ports 8001,8002,8003,8004 [--kv-blocks 4096]
                 [--time-scale 1.0] [--names a,b,c,d] [--pooled]
                 [--models "a,b;b,c;c,d;d,a"] [--front PORT]
Standard library + aiohttp only.
"""

import argparse
import asyncio
import collections
import json
import math
import os
import signal
import sys
import time

from aiohttp import web

import apis

BYTES_PER_TOKEN = 4
BLOCK_TOKENS = 16
BLOCK_BYTES = BYTES_PER_TOKEN * BLOCK_TOKENS
HASH_SEED = 0x5EED

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
                640.0, 2560.0]

# Llama-3.1-8B-Instruct, bf16, on one H100 SXM 80GB (see docs/benchmarks.md)
MODEL = {
    "name": "meta-llama/Llama-3.1-8B-Instruct",
    "params": 8.03e9,            # parameters
    "weight_bytes": 16.06e9,     # bf16 weights
    "layers": 32,
    "hidden": 4096,
    "kv_bytes_per_token": 2 * 32 * 8 * 128 * 2,   # K+V, 32 layers, 8 kv heads x 128, bf16
}
GPU = {
    "name": "NVIDIA H100 SXM 80GB",
    "peak_flops": 989e12,        # dense bf16
    "mfu": 0.45,                 # achieved fraction in prefill
    "bandwidth": 3.35e12,        # HBM3, bytes/s
    "bw_eff": 0.77,              # achieved fraction in decode
    "step_overhead": 0.0010,     # scheduler, sampling, launch: seconds per step
}


# ---------------------------------------------------------------------------
# tokens and blocks (shared with the benchmark driver's offline ideal cache)

LLAMA3_BOS = "<|begin_of_text|>"


def chat_template(messages, tools=None):
    """Llama-3 chat template, text only; the tools (a list) after the
    system message (bench/sim/apis.py renders the three APIs alike)."""
    return apis.render(apis.chat_messages(messages),
                       tools if isinstance(tools, list) else None)


def num_tokens(nbytes):
    return max(1, -(-nbytes // BYTES_PER_TOKEN))


def block_hashes(data):
    """Chained hashes of the full 16-token blocks of the prompt bytes."""
    out = []
    h = HASH_SEED
    end = len(data) - len(data) % BLOCK_BYTES
    for i in range(0, end, BLOCK_BYTES):
        h = hash((h, data[i:i + BLOCK_BYTES]))
        out.append(h)
    return out


API_PATHS = ("/v1/responses", "/v1/messages", "/v1/messages/count_tokens")


def parse_prompt(path, body, store=None):
    """-> (prompt bytes, max_tokens, stream, kind, include_usage).

    kind: "chat", "completion", "tgi", "responses", "messages" or
    "count_tokens" (the response format)."""
    return parse_request(path, body, store)[:5]


def parse_request(path, body, store=None):
    """parse_prompt's tuple and, for the Responses and Anthropic APIs, the
    parsed request (apis.parse(); store: the instance's apis.Store, for
    previous_response_id), else None."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        obj = None
    if not isinstance(obj, dict):
        if path.endswith("/invocations"):
            return body, 128, False, "tgi", False, None
        raise ValueError("body is not a JSON object")
    if path.endswith(API_PATHS):
        pr = apis.parse(path, obj, store)
        max_tokens = max(1, min(int(pr["max_tokens"]), 32768))
        return (pr["text"].encode("utf-8"), max_tokens, pr["stream"],
                pr["kind"], False, pr)
    stream = bool(obj.get("stream", False))
    so = obj.get("stream_options") or {}
    include_usage = bool(isinstance(so, dict) and so.get("include_usage"))
    max_tokens = obj.get("max_tokens", obj.get("max_completion_tokens"))
    if "messages" in obj and path != "/v1/completions":
        msgs = obj["messages"]
        if not isinstance(msgs, list):
            raise ValueError("messages must be a list")
        text = chat_template(msgs, obj.get("tools"))
        kind = "chat"
    elif "prompt" in obj:
        p = obj["prompt"]
        if isinstance(p, list):
            p = "".join(x for x in p if isinstance(x, str))
        text = LLAMA3_BOS + str(p)
        kind = "completion"
    elif "inputs" in obj:
        text = LLAMA3_BOS + str(obj["inputs"])
        params = obj.get("parameters") or {}
        if isinstance(params, dict):
            max_tokens = params.get("max_new_tokens", max_tokens)
            stream = bool(params.get("stream", stream))
        kind = "tgi"
    else:
        raise ValueError("neither messages, prompt nor inputs")
    if max_tokens is None:
        max_tokens = 128
    max_tokens = max(1, min(int(max_tokens), 32768))
    return (text.encode("utf-8"), max_tokens, stream, kind, include_usage,
            None)


def request_model(body):
    """The top-level "model" of a JSON body, or None."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    m = obj.get("model") if isinstance(obj, dict) else None
    return m if isinstance(m, str) else None


def parse_models(spec, n):
    """--models "a,b;b,c;..." -> one list of adapter names per instance
    (the base model first), or None for every instance without --models."""
    if not spec:
        return [None] * n
    groups = spec.split(";")
    if len(groups) != n:
        raise ValueError("--models has %d groups for %d instances"
                         % (len(groups), n))
    return [[MODEL["name"]] + [m for m in g.split(",") if m] for g in groups]


# ---------------------------------------------------------------------------
# KV cache


class KVCache:
    """Refcounted cached blocks + LRU of the evictable ones + private blocks."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.ref = {}                          # hash -> refcount, computed blocks
        self.free = collections.OrderedDict()  # hash -> None, refcount 0, LRU first
        self.private = 0                       # reserved, not (yet) cached
        self.evictions = 0

    def occupied(self):
        return len(self.ref) + self.private

    def lookup(self, hashes, limit):
        n = 0
        ref = self.ref
        for h in hashes[:limit]:
            if h not in ref:
                break
            n += 1
        return n

    def can_reserve(self, n):
        return len(self.ref) - len(self.free) + self.private + n <= self.capacity

    def reserve(self, n):
        """Make room for n private blocks, evicting free cached ones."""
        while self.occupied() + n > self.capacity and self.free:
            h, _ = self.free.popitem(last=False)
            del self.ref[h]
            self.evictions += 1
        self.private += n

    def acquire(self, hashes):
        for h in hashes:
            c = self.ref[h]
            if c == 0:
                del self.free[h]
            self.ref[h] = c + 1

    def publish(self, h):
        """A reserved block was computed: cache it if nobody has it yet.
        Returns True if it is now a cached block held by the caller."""
        if h in self.ref:
            return False            # computed twice (concurrent misses): stays private
        self.ref[h] = 1
        self.private -= 1
        return True

    def release(self, hashes, private):
        # tail first, so that the tail is evicted first
        for h in reversed(hashes):
            c = self.ref[h] - 1
            self.ref[h] = c
            if c == 0:
                self.free[h] = None
        self.private -= private

    def clear(self):
        for h in list(self.free):
            del self.ref[h]
        self.free.clear()


# ---------------------------------------------------------------------------
# requests and the engine


class Seq:
    __slots__ = ("rid", "hashes", "prompt_len", "max_tokens", "computed",
                 "cached", "generated", "held", "private", "published_upto",
                 "t_arrival", "t_first", "t_done", "event", "pending",
                 "done", "aborted", "ctx")

    def __init__(self, rid, data, max_tokens, now):
        self.rid = rid
        self.hashes = block_hashes(data)
        self.prompt_len = num_tokens(len(data))
        self.max_tokens = max_tokens
        self.computed = 0          # prompt tokens computed (or from cache)
        self.cached = 0            # prompt tokens from cache
        self.generated = 0
        self.held = []             # cached block hashes this seq refers to
        self.private = 0           # reserved blocks not cached
        self.published_upto = 0    # blocks of hashes[] dealt with
        self.t_arrival = now
        self.t_first = None
        self.t_done = None
        self.event = asyncio.Event()
        self.pending = 0           # tokens generated but not yet sent
        self.done = False
        self.aborted = False


class Instance:
    def __init__(self, name, port, args, cache=None):
        """cache: a KVCache shared with other instances (pooled mode), or
        None for a private one of args.kv_blocks blocks."""
        self.name = name
        self.port = port
        self.args = args
        self.scale = args.time_scale
        self.cache = cache if cache is not None else KVCache(args.kv_blocks)
        self.pooled = cache is not None
        self.waiting = collections.deque()
        self.running = []
        self.wake = asyncio.Event()
        self.next_id = 0
        self.t0 = time.monotonic()
        # metrics (model seconds / tokens)
        self.m = collections.Counter()
        self.ttft_buckets = [0] * (len(TTFT_BUCKETS) + 1)
        self.ttft_sum = 0.0
        self.ttft_count = 0
        self.peak_running = 0
        self.peak_inflight = 0
        self.inflight = 0          # HTTP requests being served
        # what GET /v1/models lists: the base model, and the adapters of
        # --models (None: any model name is accepted)
        self.models = None
        self.store = apis.Store()  # Responses API: this instance's own
        # a peer router's view of the request it is handing over (the
        # front sets it just before calling this instance's handler, which
        # submits without yielding in between): submit() gives it the Seq
        self.front_req = None

    # model time
    def now(self):
        return (time.monotonic() - self.t0) / self.scale

    def submit(self, data, max_tokens):
        self.next_id += 1
        seq = Seq(self.next_id, data, max_tokens, self.now())
        if self.front_req is not None:
            self.front_req.seq = seq
            self.front_req = None
        self.waiting.append(seq)
        self.m["prompt_tokens"] += seq.prompt_len
        self.wake.set()
        return seq

    def abort(self, seq):
        if seq.done:
            return
        seq.aborted = True
        if seq in self.waiting:
            self.waiting.remove(seq)
            seq.done = True
        # a running one is dropped at the next step

    def _admit(self, seq):
        """Prefix lookup and block reservation; False if no room."""
        c = self.cache
        limit = (seq.prompt_len - 1) // BLOCK_TOKENS
        hit = c.lookup(seq.hashes, limit)
        total = -(-(seq.prompt_len + seq.max_tokens) // BLOCK_TOKENS)
        need = total - hit
        # blocks we would take from the free list count as used
        taken = sum(1 for h in seq.hashes[:hit] if c.ref[h] == 0)
        if not c.can_reserve(need + taken):
            if not self.running and need + taken > c.capacity:
                return None     # can never fit
            return False
        c.acquire(seq.hashes[:hit])
        ev = c.evictions
        c.reserve(need)
        self.m["kv_evictions"] += c.evictions - ev
        seq.held = list(seq.hashes[:hit])
        seq.private = need
        seq.published_upto = hit
        seq.cached = hit * BLOCK_TOKENS
        seq.computed = seq.cached
        self.m["prefix_cache_queries"] += seq.prompt_len
        self.m["prefix_cache_hits"] += seq.cached
        return True

    def _publish(self, seq):
        full = min(seq.computed // BLOCK_TOKENS, len(seq.hashes))
        c = self.cache
        for i in range(seq.published_upto, full):
            h = seq.hashes[i]
            if c.publish(h):
                seq.held.append(h)
                seq.private -= 1
        seq.published_upto = max(seq.published_upto, full)

    def _finish(self, seq, now):
        seq.done = True
        seq.t_done = now
        self.cache.release(seq.held, seq.private)
        seq.held = []
        seq.private = 0
        seq.event.set()

    def _schedule(self):
        """One step's batch: list of (seq, prefill_tokens) and decoders."""
        budget = self.args.max_batched_tokens
        decoders = []
        prefill = []
        keep = []
        for seq in self.running:
            if seq.aborted:
                self._finish(seq, self.now())
                continue
            keep.append(seq)
            if seq.computed >= seq.prompt_len:
                if budget > 0:
                    decoders.append(seq)
                    budget -= 1
        self.running = keep
        for seq in self.running:
            if budget <= 0:
                break
            if seq.computed < seq.prompt_len:
                n = min(seq.prompt_len - seq.computed, budget)
                prefill.append((seq, n))
                budget -= n
        while (self.waiting and budget > 0
               and len(self.running) < self.args.max_num_seqs):
            seq = self.waiting[0]
            ok = self._admit(seq)
            if ok is None:          # larger than the whole cache: refuse
                self.waiting.popleft()
                seq.aborted = True
                seq.done = True
                seq.event.set()
                continue
            if not ok:
                break
            self.waiting.popleft()
            self.running.append(seq)
            n = min(seq.prompt_len - seq.computed, budget)
            prefill.append((seq, n))
            budget -= n
        return prefill, decoders

    def step_time(self, prefill, decoders):
        L, d = MODEL["layers"], MODEL["hidden"]
        flops = 0.0
        for seq, n in prefill:
            a, b = seq.computed, seq.computed + n
            flops += 2.0 * MODEL["params"] * n + 2.0 * L * d * (b * b - a * a)
        kv_read = 0
        for seq in decoders:
            ctx = seq.prompt_len + seq.generated
            flops += 2.0 * MODEL["params"] + 4.0 * L * d * ctx
            kv_read += ctx
        t_compute = flops / (GPU["peak_flops"] * GPU["mfu"])
        t_memory = ((MODEL["weight_bytes"] + kv_read * MODEL["kv_bytes_per_token"])
                    / (GPU["bandwidth"] * GPU["bw_eff"]))
        return max(t_compute, t_memory) + GPU["step_overhead"]

    async def run(self):
        loop = asyncio.get_running_loop()
        target = loop.time()
        idle = True
        while True:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                idle = True
            prefill, decoders = self._schedule()
            if not prefill and not decoders:
                # nothing schedulable: aborted requests only, or (pooled
                # cache) waiting for blocks that other instances hold:
                # yield and retry
                await asyncio.sleep(0.001)
                idle = True
                continue
            dt = self.step_time(prefill, decoders)
            # sleep to an absolute deadline, so that the event loop's timer
            # granularity (~1 ms late per sleep) does not accumulate; after
            # an idle wait the deadlines start afresh (else the first steps
            # after a short idle gap would be shortened by the gap)
            t = loop.time()
            if idle or t - target > 0.05:
                target = t          # idle or far behind: start afresh
                idle = False
            target += dt * self.scale
            wait = target - t
            if wait > 0:
                await asyncio.sleep(wait)
            lag = loop.time() - target
            if lag > 0.002:
                self.m["step_lag_seconds"] += lag
            self.m["steps"] += 1
            self.m["busy_seconds"] += dt
            now = self.now()
            for seq, n in prefill:
                seq.computed += n
                self.m["prefill_tokens"] += n
                self._publish(seq)
                if seq.computed >= seq.prompt_len:
                    # the step that completes the prefill samples a token
                    self._emit(seq, now)
            for seq in decoders:
                self._emit(seq, now)
            nrun = len(self.running)
            if nrun > self.peak_running:
                self.peak_running = nrun
            self.running = [s for s in self.running if not s.done]

    def _emit(self, seq, now):
        if seq.done:
            return
        if seq.generated == 0:
            seq.t_first = now
            ttft = now - seq.t_arrival
            self.ttft_sum += ttft
            self.ttft_count += 1
            for i, b in enumerate(TTFT_BUCKETS):
                if ttft <= b:
                    self.ttft_buckets[i] += 1
                    break
            else:
                self.ttft_buckets[-1] += 1
        seq.generated += 1
        seq.pending += 1
        self.m["generation_tokens"] += 1
        if seq.generated >= seq.max_tokens:
            self._finish(seq, now)
            self.m["request_success"] += 1
        seq.event.set()

    def metrics_text(self):
        mn = 'model_name="%s",instance="%s"' % (MODEL["name"], self.name)
        out = []

        def counter(name, value, help_):
            out.append("# HELP %s %s" % (name, help_))
            out.append("# TYPE %s counter" % name)
            out.append("%s_total{%s} %s" % (name, mn, value))

        def gauge(name, value, help_):
            out.append("# HELP %s %s" % (name, help_))
            out.append("# TYPE %s gauge" % name)
            out.append("%s{%s} %s" % (name, mn, value))

        m = self.m
        gauge("vllm:num_requests_running", len(self.running),
              "Number of requests in model execution batches.")
        gauge("vllm:num_requests_waiting", len(self.waiting),
              "Number of requests waiting to be processed.")
        gauge("vllm:kv_cache_usage_perc",
              round((self.cache.occupied() - len(self.cache.free))
                    / self.cache.capacity, 6),
              "KV-cache usage. 1 means 100 percent usage.")
        # vLLM's cache geometry is in the labels of an info gauge
        out.append("# HELP vllm:cache_config_info Information of the "
                   "LLMEngine CacheConfig")
        out.append("# TYPE vllm:cache_config_info gauge")
        out.append('vllm:cache_config_info{block_size="%d",cache_dtype="auto",'
                   'enable_prefix_caching="True",gpu_memory_utilization='
                   '"0.9",num_gpu_blocks="%d",num_gpu_blocks_override="None"'
                   '} 1.0' % (BLOCK_TOKENS, self.cache.capacity))
        counter("vllm:prefix_cache_queries", m["prefix_cache_queries"],
                "Prefix cache queries, in terms of number of queried tokens.")
        counter("vllm:prefix_cache_hits", m["prefix_cache_hits"],
                "Prefix cache hits, in terms of number of cached tokens.")
        counter("vllm:prompt_tokens", m["prompt_tokens"],
                "Number of prefill tokens processed.")
        counter("vllm:generation_tokens", m["generation_tokens"],
                "Number of generation tokens processed.")
        counter("vllm:request_success", m["request_success"],
                "Count of successfully processed requests.")
        name = "vllm:time_to_first_token_seconds"
        out.append("# HELP %s Histogram of time to first token in seconds." % name)
        out.append("# TYPE %s histogram" % name)
        acc = 0
        for b, c in zip(TTFT_BUCKETS, self.ttft_buckets):
            acc += c
            out.append('%s_bucket{%s,le="%s"} %d' % (name, mn, b, acc))
        acc += self.ttft_buckets[-1]
        out.append('%s_bucket{%s,le="+Inf"} %d' % (name, mn, acc))
        out.append("%s_sum{%s} %.6f" % (name, mn, self.ttft_sum))
        out.append("%s_count{%s} %d" % (name, mn, self.ttft_count))
        # simulator's own
        gauge("llmsim:peak_requests_running", self.peak_running,
              "Most requests running in one step since start or reset.")
        gauge("llmsim:peak_requests_inflight", self.peak_inflight,
              "Most HTTP requests in the instance at once since start or reset.")
        gauge("llmsim:kv_cache_blocks", self.cache.capacity,
              "KV cache capacity in 16-token blocks.")
        counter("llmsim:prefill_tokens", m["prefill_tokens"],
                "Prompt tokens computed (cache misses).")
        gauge("llmsim:kv_cache_pooled", int(self.pooled),
              "1 if this instance shares one KV cache with the others of "
              "the process (--pooled; kv_cache_blocks is then the pool's).")
        counter("llmsim:kv_evictions", m["kv_evictions"],
                "Cached blocks evicted to admit this instance's requests.")
        counter("llmsim:busy_seconds", "%.6f" % m["busy_seconds"],
                "Model seconds spent in steps.")
        counter("llmsim:step_lag_seconds", "%.6f" % m["step_lag_seconds"],
                "Wall seconds the step loop overslept (simulator overload).")
        counter("llmsim:requests_refused", m["refused"],
                "Requests refused (bad body, too long, a model not served).")
        counter("llmsim:model_not_found", m["model_not_found"],
                "Requests answered 404 for a model this instance does not "
                "serve (--models).")
        return "\n".join(out) + "\n"

    def reset(self):
        if self.running or self.waiting:
            return False
        self.cache.clear()
        self.peak_running = 0
        self.peak_inflight = self.inflight
        return True


# ---------------------------------------------------------------------------
# HTTP


WORDS = ("the", "of", "and", "to", "in", "is", "that", "for", "it", "as",
         "was", "with", "be", "by", "on", "not", "he", "this", "are", "or")


def token_text(i):
    w = WORDS[i % len(WORDS)]
    return " " + w[:3]     # 4 bytes, ~1 token


def make_app(inst, args):
    async def ping(request):
        return web.Response(text="", headers={"X-Instance": inst.name})

    async def models(request):
        ids = inst.models if inst.models is not None else [MODEL["name"]]
        return web.json_response(
            {"object": "list",
             "data": [{"id": m, "object": "model", "owned_by": "llmsim",
                       "root": MODEL["name"],
                       "parent": None if m == MODEL["name"] else MODEL["name"],
                       "max_model_len": 131072} for m in ids]},
            headers={"X-Instance": inst.name})

    async def metrics(request):
        return web.Response(text=inst.metrics_text(),
                            content_type="text/plain",
                            headers={"X-Instance": inst.name})

    async def reset(request):
        ok = inst.reset()
        return web.json_response({"reset": ok}, status=200 if ok else 409,
                                 headers={"X-Instance": inst.name})

    async def generate(request):
        inst.inflight += 1
        if inst.inflight > inst.peak_inflight:
            inst.peak_inflight = inst.inflight
        try:
            return await _generate(request)
        finally:
            inst.inflight -= 1

    async def _generate(request):
        hdr = {"X-Instance": inst.name}
        body = await request.read()
        api = request.path.endswith(API_PATHS)
        try:
            data, max_tokens, stream, kind, include_usage, parsed = \
                parse_request(request.path, body, inst.store)
        except apis.NotFound as e:
            # previous_response_id of another instance, as vLLM answers
            inst.m["refused"] += 1
            return web.json_response(apis.not_found(e.args[0]), status=404,
                                     headers=hdr)
        except (ValueError, TypeError) as e:
            inst.m["refused"] += 1
            if api:
                return web.json_response(
                    apis.anthropic_error(str(e))
                    if "/v1/messages" in request.path
                    else apis.openai_error(str(e)), status=400, headers=hdr)
            return web.json_response(
                {"object": "error", "message": str(e), "type": "BadRequestError",
                 "code": 400}, status=400, headers=hdr)
        if kind == "count_tokens":
            return web.json_response(
                {"input_tokens": num_tokens(len(data))}, headers=hdr)
        if inst.models is not None:
            model = request_model(body)
            if model is not None and model not in inst.models:
                # as vLLM: an adapter that is not loaded here
                inst.m["refused"] += 1
                inst.m["model_not_found"] += 1
                return web.json_response(
                    {"object": "error",
                     "message": "The model `%s` does not exist." % model,
                     "type": "NotFoundError", "param": None, "code": 404},
                    status=404, headers=hdr)
            if model is not None and model != MODEL["name"]:
                # vLLM keys an adapter's prefix cache by the adapter too
                data = b"\x00lora:" + model.encode("utf-8") + b"\x00" + data
        if num_tokens(len(data)) > args.max_model_len:
            inst.m["refused"] += 1
            return web.json_response(
                {"object": "error", "message": "prompt too long",
                 "type": "BadRequestError", "code": 400}, status=400, headers=hdr)
        seq = inst.submit(data, max_tokens)
        if parsed is not None:
            return await serve_api(request, inst, args, seq, parsed, hdr)
        rid = "%s-%s-%d" % (kind, inst.name, seq.rid)
        created = int(time.time())
        model = MODEL["name"]

        def usage():
            return {"prompt_tokens": seq.prompt_len,
                    "completion_tokens": seq.generated,
                    "total_tokens": seq.prompt_len + seq.generated,
                    "prompt_tokens_details": {"cached_tokens": seq.cached}}

        def chunk(text, first, finish):
            if kind == "chat":
                delta = {"content": text}
                if first:
                    delta["role"] = "assistant"
                o = {"id": rid, "object": "chat.completion.chunk",
                     "created": created, "model": model,
                     "choices": [{"index": 0, "delta": delta,
                                  "logprobs": None, "finish_reason": finish}]}
            elif kind == "completion":
                o = {"id": rid, "object": "text_completion", "created": created,
                     "model": model,
                     "choices": [{"index": 0, "text": text, "logprobs": None,
                                  "finish_reason": finish}]}
            else:
                o = {"token": {"id": 0, "text": text, "special": False}}
                if finish:
                    o["details"] = {"finish_reason": finish,
                                    "generated_tokens": seq.generated}
            return "data: " + json.dumps(o, separators=(",", ":")) + "\n\n"

        try:
            if not stream:
                while not seq.done:
                    await seq.event.wait()
                    seq.event.clear()
                if seq.aborted:
                    return web.json_response(
                        {"object": "error", "message": "request does not fit "
                         "in the KV cache", "type": "BadRequestError",
                         "code": 400}, status=400, headers=hdr)
                text = "".join(token_text(i) for i in range(seq.generated))
                if kind == "chat":
                    o = {"id": rid, "object": "chat.completion",
                         "created": created, "model": model,
                         "choices": [{"index": 0, "message": {
                             "role": "assistant", "content": text},
                             "finish_reason": "length"}],
                         "usage": usage()}
                elif kind == "completion":
                    o = {"id": rid, "object": "text_completion",
                         "created": created, "model": model,
                         "choices": [{"index": 0, "text": text,
                                      "finish_reason": "length"}],
                         "usage": usage()}
                else:
                    o = [{"generated_text": text}]
                return web.json_response(o, headers=hdr)

            resp = web.StreamResponse(status=200, headers=hdr)
            resp.content_type = "text/event-stream"
            resp.headers["Cache-Control"] = "no-cache"
            await resp.prepare(request)
            sent = 0
            loop = asyncio.get_running_loop()
            interval = args.stream_interval
            last = 0.0
            while True:
                await seq.event.wait()
                seq.event.clear()
                if seq.aborted and not seq.generated:
                    break
                if sent and not seq.done and interval > 0:
                    # coalesce tokens: at most one write per interval (wall)
                    wait = last + interval - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                n = seq.pending
                seq.pending = 0
                if n:
                    parts = []
                    for i in range(sent, sent + n):
                        fin = "length" if (seq.done and i == seq.generated - 1) \
                            else None
                        parts.append(chunk(token_text(i), i == 0, fin))
                    sent += n
                    if seq.done and include_usage and kind != "tgi":
                        parts.append("data: " + json.dumps(
                            {"id": rid, "object": "chat.completion.chunk"
                             if kind == "chat" else "text_completion",
                             "created": created, "model": model,
                             "choices": [], "usage": usage()},
                            separators=(",", ":")) + "\n\n")
                    await resp.write("".join(parts).encode())
                    last = loop.time()
                if seq.done:
                    break
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        except (asyncio.CancelledError, ConnectionResetError):
            inst.abort(seq)
            raise

    app = serving_app(ping, generate)
    app.router.add_get("/health", ping)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/admin/reset", reset)
    store_app(app, inst)
    return app


def serving_app(ping, generate):
    """An application with /ping and the generation endpoints."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/ping", ping)
    for path in ("/v1/chat/completions", "/v1/completions", "/invocations",
                 "/v1/responses", "/v1/messages",
                 "/v1/messages/count_tokens"):
        app.router.add_post(path, generate)
    app["generate"] = generate
    return app


async def serve_api(request, inst, args, seq, parsed, hdr):
    """A Responses or Anthropic Messages answer for seq, JSON or SSE; a
    Responses answer is kept in the instance's store unless "store" is
    false, and with "background" answered at once (status queued) while
    it runs."""
    responses = parsed["kind"] == "responses"
    shape = (apis.ResponsesShape(MODEL["name"], parsed) if responses
             else apis.MessagesShape(MODEL["name"]))
    stored = responses and parsed["store"]
    if stored:
        inst.store.put(shape.id, shape.obj("in_progress"), parsed["msgs"],
                       seq)

    def usage():
        return shape.usage(seq.prompt_len, seq.cached, seq.generated)

    def text():
        return "".join(token_text(i) for i in range(seq.generated))

    def final():
        """-> the finished answer object; stores it."""
        if responses:
            e = inst.store.items.get(shape.id) if stored else None
            if e is not None and e["obj"]["status"] == "cancelled":
                return e["obj"]
            o = shape.obj("failed" if seq.aborted else "completed", text(),
                          usage())
            if stored:
                inst.store.finish(shape.id, o, text())
            return o
        return shape.obj(text(), usage())

    async def wait_done():
        while not seq.done:
            await seq.event.wait()
            seq.event.clear()

    def too_large():
        msg = "request does not fit in the KV cache"
        if stored:
            inst.store.items.pop(shape.id, None)
        return web.json_response(
            apis.openai_error(msg) if responses else apis.anthropic_error(msg),
            status=400, headers=hdr)

    try:
        if responses and parsed["background"] and stored:
            async def finish_later():
                await wait_done()
                final()
            asyncio.ensure_future(finish_later())
            return web.json_response(shape.obj("queued"), headers=hdr)
        if not parsed["stream"]:
            await wait_done()
            if seq.aborted and not seq.generated:
                return too_large()
            return web.json_response(final(), headers=hdr)

        resp = web.StreamResponse(status=200, headers=hdr)
        resp.content_type = "text/event-stream"
        resp.headers["Cache-Control"] = "no-cache"
        await resp.prepare(request)
        await resp.write((shape.head() if responses
                          else shape.head(seq.prompt_len)).encode())
        sent = 0
        loop = asyncio.get_running_loop()
        interval = args.stream_interval
        last = 0.0
        while True:
            await seq.event.wait()
            seq.event.clear()
            if seq.aborted and not seq.generated:
                break
            if sent and not seq.done and interval > 0:
                wait = last + interval - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
            n = seq.pending
            seq.pending = 0
            if n:
                await resp.write("".join(
                    shape.delta(token_text(i))
                    for i in range(sent, sent + n)).encode())
                sent += n
                last = loop.time()
            if seq.done:
                break
        if responses:
            o = final()
            await resp.write(shape.tail(text(), o["usage"]).encode())
        else:
            await resp.write(shape.tail(text(), usage()).encode())
        await resp.write_eof()
        return resp
    except (asyncio.CancelledError, ConnectionResetError):
        inst.abort(seq)
        if stored:
            inst.store.finish(shape.id, shape.obj("cancelled"), "")
        raise


def store_app(app, inst):
    """GET and DELETE /v1/responses/{id}, POST /v1/responses/{id}/cancel:
    this instance's stored responses; 404 for any other id."""
    hdr = {"X-Instance": inst.name}

    def missing(rid):
        return web.json_response(apis.not_found(rid), status=404,
                                 headers=hdr)

    async def get(request):
        rid = request.match_info["rid"]
        if rid not in inst.store:
            return missing(rid)
        return web.json_response(inst.store.get(rid)["obj"], headers=hdr)

    async def delete(request):
        rid = request.match_info["rid"]
        if rid not in inst.store:
            return missing(rid)
        inst.store.delete(rid)
        return web.json_response({"id": rid, "object": "response",
                                  "deleted": True}, headers=hdr)

    async def cancel(request):
        rid = request.match_info["rid"]
        if rid not in inst.store:
            return missing(rid)
        e = inst.store.get(rid)
        if e["obj"]["status"] not in ("queued", "in_progress"):
            return web.json_response(
                apis.openai_error("Cannot cancel a synchronous response."),
                status=400, headers=hdr)
        if e["seq"] is not None:
            inst.abort(e["seq"])
            e["seq"].event.set()
        o = dict(e["obj"], status="cancelled")
        inst.store.finish(rid, o, "")
        return web.json_response(o, headers=hdr)

    app.router.add_get("/v1/responses/{rid}", get)
    app.router.add_delete("/v1/responses/{rid}", delete)
    app.router.add_post("/v1/responses/{rid}/cancel", cancel)


# ---------------------------------------------------------------------------
# the oracle: a router with exact knowledge of every instance's cache


class Oracle:
    """Routes each request as prefix_aware's default does (src/pa_choose.c),
    but on the depth each instance's cache holds now rather than on what
    the module's index remembers: the deepest holder of at least "match"
    per cent of the prefix, among those within the cap on requests and
    the bound on work in flight (F x the mean, the request included, plus a
    cold request's work for a match); else the least work within the
    bounds; else the least work.  Work is the uncached prefill plus a
    decode share of 128 tokens and a quarter of the prompt, in tokens.

    What it measures: the hit rate and TTFT that prefix_aware's policy
    would reach if its index were exact, in front of the same separate
    caches.  The gap to pa_v2 is the index's knowledge and the placement
    of cold requests (the least work here; in the module, the less busy
    of the first two servers of the ring walk, cold=two, its
    default); "--front-model lru" takes the knowledge out of it.  The gap
    to the pooled bound is the choice and the partitioning of the
    cache."""

    def __init__(self, insts, args):
        self.insts = insts
        self.model = getattr(args, "front_model", "exact")
        self.stamps = {}                       # block -> {instance: stamp}
        self.counter = [0] * len(insts)        # blocks recorded per instance
        self.held = [0] * len(insts)           # blocks of requests running
        self.threshold = args.front_threshold
        self.balance = args.front_balance
        self.match = args.front_match
        self.length = args.front_length        # tokens indexed
        self.work = [0] * len(insts)
        self.inflight = [0] * len(insts)
        self.choice = getattr(args, "front_choice", "module")
        self.work_model = getattr(args, "front_work", "count")

    def decode(self, total):
        return 128 + total // 4

    def cost(self, total, depth):
        return max(0, total - depth * BLOCK_TOKENS) + self.decode(total)

    def live_work(self, inst):
        """--front-work first: the module's count of an instance's work in
        flight if a request's uncached prefill left it at the request's
        first token (the first bytes of a streamed response), its decode
        share at its end."""
        c = inst.cache
        w = 0
        for seq in list(inst.running) + list(inst.waiting):
            if seq.done:
                continue
            w += self.decode(seq.prompt_len)
            if seq.t_first is None:
                if seq in inst.waiting:
                    limit = (seq.prompt_len - 1) // BLOCK_TOKENS
                    cached = c.lookup(seq.hashes, limit) * BLOCK_TOKENS
                else:
                    cached = seq.cached
                w += max(0, seq.prompt_len - cached)
        return w

    def within(self, i, cost, slack):
        n = len(self.insts)
        if self.threshold and self.inflight[i] >= self.threshold:
            return False
        if self.balance <= 0 or self.work[i] == 0:
            return True
        return (self.work[i] * n
                <= self.balance * (sum(self.work) + cost) + slack * n)

    def cold_within(self, i):
        n = len(self.insts)
        if self.balance <= 0:
            return True
        return self.inflight[i] * n < self.balance * (sum(self.inflight) + 1) + n

    def expected_ttft(self, inst, prompt_len, depth):
        """Model seconds until a request of prompt_len tokens, depth blocks
        of it cached, would sample its first token on inst if it arrived
        now: the prefill of what is queued before it (the running
        requests' rest, the waiting ones' uncached part) and its own, in
        steps of the instance's token budget less its decoders, each step
        as long as the roofline says (Instance.step_time)."""
        c = inst.cache
        queued = 0
        decoders = 0
        kv_read = 0
        for seq in inst.running:
            if seq.computed < seq.prompt_len:
                queued += seq.prompt_len - seq.computed
            else:
                decoders += 1
                kv_read += seq.prompt_len + seq.generated
        for seq in inst.waiting:
            limit = (seq.prompt_len - 1) // BLOCK_TOKENS
            queued += seq.prompt_len - c.lookup(seq.hashes, limit) \
                * BLOCK_TOKENS
        tokens = queued + max(1, prompt_len - depth * BLOCK_TOKENS)
        per_step = max(1, inst.args.max_batched_tokens - decoders)
        steps = -(-tokens // per_step)
        rate = GPU["peak_flops"] * GPU["mfu"]
        compute = (2.0 * MODEL["params"] * (tokens + steps * decoders)
                   / rate)
        memory = steps * ((MODEL["weight_bytes"]
                           + kv_read * MODEL["kv_bytes_per_token"])
                          / (GPU["bandwidth"] * GPU["bw_eff"]))
        return max(compute, memory) + steps * GPU["step_overhead"]

    def choose_ttft(self, data, hashes):
        """--front-choice ttft: the instance where this request's first
        token is expected soonest on the caches' own depths and queues (a
        greedy, per-request best with exact knowledge; ties: the deeper
        match, then the lower index)."""
        total = num_tokens(len(data))
        limit = (total - 1) // BLOCK_TOKENS
        best = None
        for i, inst in enumerate(self.insts):
            d = inst.cache.lookup(hashes, limit)
            k = (self.expected_ttft(inst, total, d), -d, i)
            if best is None or k < best[0]:
                best = (k, i, d)
        _, i, d = best
        return i, self.cost(total, d), ("match" if d else "cold"), d

    def choose(self, data, hashes=None):
        if hashes is None:
            hashes = block_hashes(data)
        if self.choice == "ttft":
            return self.choose_ttft(data, hashes)
        if self.work_model == "first":
            self.work = [self.live_work(inst) for inst in self.insts]
        total = num_tokens(len(data))
        units = min(total, self.length)
        limit = min(len(hashes), self.length // BLOCK_TOKENS)
        if self.model == "exact":
            depth = [inst.cache.lookup(hashes, limit) for inst in self.insts]
        else:
            depth = [self.remembered(i, hashes, limit)
                     for i in range(len(self.insts))]
        slack = self.cost(self.length, 0)
        n = len(self.insts)
        best = None
        over = False
        for i in range(n):
            d = depth[i]
            if d == 0 or d * BLOCK_TOKENS * 100 < self.match * units:
                continue
            c = self.cost(total, d)
            if not self.within(i, c, slack):
                over = True
                continue
            k = (-d, self.work[i] + c, i)
            if best is None or k < best[0]:
                best = (k, i, c)
        if best is not None:
            kind = "match"
        else:
            least = None
            for i in range(n):
                c = self.cost(total, depth[i])
                k = (self.work[i] + c, i)
                if self.within(i, c, 0) and self.cold_within(i):
                    if best is None or k < best[0]:
                        best = (k, i, c)
                if least is None or k < least[0]:
                    least = (k, i, c)
            kind = ("spill" if over else "cold") if best is not None \
                else "least"
            if best is None:
                best = least
        _, i, c = best
        return i, c, kind, depth[i]

    # the index's model of an instance's cache (src/pa_index.c), for
    # --front-model lru and held: a block is held while fewer than the
    # cache's blocks were recorded for its instance since it was last
    # recorded there ("lru", as the module); "held" takes the blocks of the
    # instance's running requests (prompt and max_tokens, as the engine
    # reserves them) off that capacity

    def capacity(self, i):
        cap = self.insts[i].cache.capacity
        if self.model == "held":
            cap = max(cap - self.held[i], cap // 8)
        return cap

    def remembered(self, i, hashes, limit):
        cap = self.capacity(i)
        now = self.counter[i]
        n = 0
        for h in hashes[:limit]:
            st = self.stamps.get(h)
            if st is None or i not in st or now - st[i] > cap:
                break
            n += 1
        return n

    def record(self, i, data, depth, max_tokens, hashes=None):
        if hashes is None:
            hashes = block_hashes(data)
        total = -(-num_tokens(len(data)) // BLOCK_TOKENS)
        self.counter[i] += max(0, total - depth)
        now = self.counter[i]
        for h in hashes:
            self.stamps.setdefault(h, {})[i] = now
        held = total + -(-max_tokens // BLOCK_TOKENS)
        self.held[i] += held
        return held


def make_peer_front(insts, apps, args):
    """An HTTP front that routes with one of the peers' policies
    (bench/sim/peers.py, --front-peer NAME --front-peer-params k=v,...) and
    serves through the chosen instance's own handler (no second hop)."""
    import peers
    router = peers.make(args.front_peer, insts, args.front_peer_params)

    async def ping(request):
        return web.Response(text="", headers={"X-Instance": "peer"})

    async def generate(request):
        body = await request.read()
        try:
            data, max_tokens = parse_prompt(request.path, body)[:2]
        except (ValueError, TypeError):
            data, max_tokens = body, 128
        try:
            prio = int(request.headers.get("X-Bench-Priority", "0"))
        except ValueError:
            prio = 0
        req = peers.Request(data, block_hashes(data), num_tokens(len(data)),
                            max_tokens,
                            flow=request.headers.get("X-Bench-Group", ""),
                            priority=prio, size=len(body))
        shed = await router.admit(req)
        if shed is not None:
            # answered by the router on purpose (overload.py): run.py
            # counts it as shed, not as a failure
            status, reason = shed
            if not reason.startswith("{"):
                reason = json.dumps({"error": {"message": reason,
                                               "code": status}})
            return web.Response(status=status, text=reason,
                                content_type="application/json",
                                headers={"X-Bench-Shed": "1"})
        i = router.choose(req)
        router.routed(i, req)
        insts[i].front_req = req
        try:
            resp = await apps[i]["generate"](request)
        finally:
            insts[i].front_req = None
            router.done(i, req)
        return resp

    return serving_app(ping, generate)


def make_front(insts, apps, args):
    """An HTTP front that routes like Oracle and serves through the chosen
    instance's own handler (no second hop)."""
    if getattr(args, "front_peer", ""):
        return make_peer_front(insts, apps, args)
    oracle = Oracle(insts, args)

    async def ping(request):
        return web.Response(text="", headers={"X-Instance": "oracle"})

    async def generate(request):
        body = await request.read()
        try:
            data, max_tokens = parse_prompt(request.path, body)[:2]
        except (ValueError, TypeError):
            data, max_tokens = body, 128
        hashes = block_hashes(data)
        i, c, kind, depth = oracle.choose(data, hashes)
        oracle.work[i] += c
        oracle.inflight[i] += 1
        held = oracle.record(i, data, depth, max_tokens, hashes)
        try:
            resp = await apps[i]["generate"](request)
        finally:
            oracle.work[i] -= c
            oracle.inflight[i] -= 1
            oracle.held[i] -= held
        return resp

    return serving_app(ping, generate)


def make_instances(names, ports, args):
    """One Instance per port; with args.pooled they share one KVCache of
    args.kv_blocks x instances blocks."""
    pool = (KVCache(args.kv_blocks * len(ports))
            if getattr(args, "pooled", False) else None)
    return [Instance(name, port, args, cache=pool)
            for name, port in zip(names, ports)]


async def serve(app, host, port):
    """Listen with app on host:port; -> its runner, for cleanup."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024, reuse_address=True)
    await site.start()
    return runner


async def amain(args):
    ports = [int(p) for p in args.ports.split(",") if p]
    names = args.names.split(",") if args.names else [str(p) for p in ports]
    if len(names) != len(ports):
        sys.exit("llmsim: --names and --ports differ in length")
    runners = []
    tasks = []
    insts = make_instances(names, ports, args)
    try:
        served = parse_models(args.models, len(insts))
    except ValueError as e:
        sys.exit("llmsim: %s" % e)
    for inst, ids in zip(insts, served):
        inst.models = ids
    pool = insts[0].cache if args.pooled and insts else None
    apps = []
    for inst in insts:
        port = inst.port
        app = make_app(inst, args)
        apps.append(app)
        runners.append(await serve(app, args.host, port))
        tasks.append(asyncio.ensure_future(inst.run()))
    if args.front:
        runners.append(await serve(make_front(insts, apps, args), args.host,
                                   args.front))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    print("llmsim: %d instance(s) on %s:%s, kv %d blocks%s, time scale %g, "
          "pid %d" % (len(ports), args.host, args.ports, args.kv_blocks,
                      " each, pooled: one cache of %d" % pool.capacity
                      if pool else "", args.time_scale, os.getpid()),
          flush=True)
    if args.max_seconds > 0:
        try:
            await asyncio.wait_for(stop.wait(), args.max_seconds)
        except asyncio.TimeoutError:
            print("llmsim: --max-seconds reached, exiting", flush=True)
    else:
        await stop.wait()
    for t in tasks:
        t.cancel()
    for r in runners:
        await r.cleanup()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ports", required=True,
                    help="comma-separated ports, one instance each")
    ap.add_argument("--names", default="",
                    help="comma-separated instance names (default: the ports)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--kv-blocks", type=int, default=4096,
                    help="KV cache capacity per instance, 16-token blocks")
    ap.add_argument("--pooled", action="store_true",
                    help="all instances share one KV cache of kv-blocks x "
                         "instances blocks (the routing upper bound)")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="wall seconds per model second")
    ap.add_argument("--max-batched-tokens", type=int, default=8192)
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument("--max-model-len", type=int, default=131072)
    ap.add_argument("--stream-interval", type=float, default=0.02,
                    help="least wall seconds between two SSE writes of a "
                         "stream (the first token is never delayed)")
    ap.add_argument("--models", default="",
                    help="adapters each instance serves besides the base "
                         "model, instances separated by ';', names by ',' "
                         "(\"a,b;b,c\"); a request naming another model is "
                         "answered 404, and GET /v1/models lists them "
                         "(default: any model is accepted)")
    ap.add_argument("--front", type=int, default=0,
                    help="also serve on this port a router with exact "
                         "knowledge of every instance's cache (the oracle: "
                         "prefix_aware's policy on exact depths)")
    ap.add_argument("--front-threshold", type=int, default=10,
                    help="the oracle's cap on requests in flight (0: none)")
    ap.add_argument("--front-balance", type=float, default=1.25,
                    help="the oracle's bound F on work in flight (0: none)")
    ap.add_argument("--front-match", type=int, default=60,
                    help="per cent of the prefix a match must hold")
    ap.add_argument("--front-model", default="exact",
                    choices=("exact", "lru", "held"),
                    help="the depths the oracle routes on: what the caches "
                         "hold (exact), or a model of them as the module's "
                         "index keeps (lru), less the blocks running "
                         "requests reserve (held)")
    ap.add_argument("--front-choice", default="module",
                    choices=("module", "ttft"),
                    help="the oracle's choice: prefix_aware's (module), or "
                         "the instance where the request's first token is "
                         "expected soonest, from the caches' depths and "
                         "the queues (ttft)")
    ap.add_argument("--front-work", default="count",
                    choices=("count", "first"),
                    help="the work in flight the oracle's choice weighs: "
                         "each request's cost until it ends, as the module "
                         "counts (count), or its uncached prefill until "
                         "its first token and its decode share until it "
                         "ends (first)")
    ap.add_argument("--front-length", type=int, default=8192,
                    help="tokens of the prefix the oracle matches "
                         "(prefix_aware's 32768 characters)")
    ap.add_argument("--front-peer", default="",
                    help="route the --front port with a peer's policy "
                         "instead of the oracle's: sglang, llmd, dynamo, "
                         "prodstack, aibrix, dualmap (bench/sim/peers.py)")
    ap.add_argument("--front-peer-params", default="",
                    help="the peer's parameters, k=v,k=v (peers.py)")
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="exit after this many wall seconds (0: never)")
    args = ap.parse_args(argv)
    if args.time_scale <= 0:
        sys.exit("llmsim: --time-scale must be > 0")
    if args.front_peer:
        import peers
        try:
            peers.make(args.front_peer, [], args.front_peer_params)
        except (ValueError, ZeroDivisionError) as e:
            sys.exit("llmsim: --front-peer: %s" % e)
    asyncio.run(amain(args))


if __name__ == "__main__":
    main()
