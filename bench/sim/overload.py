"""overload: what two of the peers (bench/sim/peers.py) do when the pool
is full, as their code does it; used by peers.Dynamo (busy=) and
peers.LLMD (flow=1).  docs/benchmarks.md, "The peers at overload".

Dynamo's busy threshold (ai-dynamo/dynamo docs/fault-tolerance/
request-rejection.md and docs/design-docs/request-rejection.md, commit
0aa1dccb4341; lib/runtime/src/pipeline/network/egress/push_router.rs,
generate_with_fault_detection: the check comes after the KV router chose
its instance, which it keeps while any worker is free): off by default
(--admission-control none); with --active-decode-blocks-threshold X a
worker is busy when active_decode_blocks / kv_total_blocks > X, with
--active-prefill-tokens-threshold N when active_prefill_tokens > N
(either one); when every worker is busy the frontend answers 503 at once,
{"message": "Service temporarily unavailable: All workers are busy,
please retry later", "type": "service_unavailable", "code": 503}.

llm-d's flow control (kubernetes-sigs/gateway-api-inference-extension,
read at its main branch of 2026): every request goes through
FlowController.EnqueueAndWait (pkg/epp/requestcontrol/admission.go); the
shard processor (pkg/epp/flowcontrol/controller/internal/processor.go)
dispatches while the saturation filter (controller/internal/filter.go)
does not pause it: bands from the highest priority down, strictly; in a
band the fairness policy picks the flow, the ordering policy the request
(registry/config.go defaults: global-strict fairness, i.e. the band's
oldest request whatever its flow, FCFS ordering; round robin between flows
is the other policy shipped, rr=1 here); per-band capacity 1 GB of request
bytes (defaultPriorityBandMaxBytes), no global limit; no default TTL
(controller/config.go DefaultRequestTTL 0: a request waits until its
client gives up), expired items found by a scan every second
(defaultExpiryCleanupInterval).  Saturation (saturationdetector/framework/
plugins/utilizationdetector/detector.go): the mean over the pods of
max(waiting / QueueDepthThreshold, KV usage / KVCacheUtilThreshold),
saturated at >= 1.0; defaults 5 and 0.8 (saturationdetector/config.go),
on the metrics the scheduler scrapes (every 50 ms here, peers.LLMD).
Outcomes (admission.go translateFlowControlOutcome): rejected at capacity
-> ResourceExhausted (429); TTL expired -> ServiceUnavailable (503); a
sheddable request (priority < 0) while saturated -> 429 at once
(rejectIfSheddableAndSaturated).
"""

import asyncio
import collections
import json

DYNAMO_BUSY_BODY = json.dumps({
    "message": "Service temporarily unavailable: All workers are busy, "
               "please retry later",
    "type": "service_unavailable", "code": 503})


def active_prefill_tokens(inst):
    """Prompt tokens an instance still has to prefill: its waiting
    requests' prompts and its running requests' uncomputed part."""
    n = sum(s.prompt_len for s in inst.waiting)
    for s in inst.running:
        if s.computed < s.prompt_len:
            n += s.prompt_len - s.computed
    return n


def dynamo_all_busy(insts, kv_usage, blocks, prefill):
    """Dynamo's busy test over every worker: True if each one is over a
    threshold that is set (blocks: fraction of KV blocks, > ; prefill:
    tokens, >; 0 leaves a threshold unset)."""
    if not insts or (blocks <= 0 and prefill <= 0):
        return False
    for inst in insts:
        busy = ((blocks > 0 and kv_usage(inst) > blocks)
                or (prefill > 0 and active_prefill_tokens(inst) > prefill))
        if not busy:
            return False
    return True


class _Item:
    __slots__ = ("seq", "flow", "prio", "size", "t", "fut", "outcome",
                 "done")

    def __init__(self, seq, flow, prio, size, t):
        self.seq = seq
        self.flow = flow
        self.prio = prio
        self.size = size
        self.t = t
        self.fut = None
        self.outcome = None
        self.done = False


class FlowControl:
    """The router's queue: bands by priority, flows in a band, FCFS in a
    flow.  saturated(): the pool's saturation signal (callable); now():
    model seconds; scale: wall seconds per model second (asyncio sleeps).

    Outcomes of admit(): None (dispatched: route it), or (status, reason):
    429 rejected at the band's capacity or sheddable while saturated, 503
    its TTL expired in the queue."""

    def __init__(self, saturated, now, scale, cap=1e9, ttl=0.0, rr=False,
                 poll=0.005, sweep=1.0):
        self.saturated = saturated
        self.now = now
        self.scale = scale
        self.cap = cap
        self.ttl = ttl
        self.rr = rr
        self.poll = poll
        self.sweep = sweep
        # priority -> flow -> deque of items (insertion order of flows)
        self.bands = {}
        self.bytes = collections.Counter()
        self.cursor = {}            # priority -> last flow served (rr)
        self.seq = 0
        self.held = 0
        self.last_sweep = 0.0
        self.task = None
        self.counts = collections.Counter()
        self.order = []             # (prio, flow) of each dispatch (tests)

    # -- queue ---------------------------------------------------------

    def _push(self, it):
        band = self.bands.setdefault(it.prio, collections.OrderedDict())
        band.setdefault(it.flow, collections.deque()).append(it)
        self.bytes[it.prio] += it.size
        self.held += 1

    def _remove(self, it):
        q = self.bands[it.prio][it.flow]
        q.remove(it)
        self.bytes[it.prio] -= it.size
        self.held -= 1

    def _select(self):
        """The next item: the highest band with items; in it the oldest
        head (global strict) or the next flow after the last served
        (round robin)."""
        for prio in sorted(self.bands, reverse=True):
            band = self.bands[prio]
            flows = [f for f, q in band.items() if q]
            if not flows:
                continue
            if not self.rr:
                f = min(flows, key=lambda f: band[f][0].seq)
            else:
                keys = list(band)
                last = self.cursor.get(prio)
                start = keys.index(last) + 1 if last in band else 0
                f = next(keys[(start + k) % len(keys)]
                         for k in range(len(keys))
                         if band[keys[(start + k) % len(keys)]])
                self.cursor[prio] = f
            return band[f][0]
        return None

    def dispatch(self):
        """Release items while the pool is not saturated (one dispatch
        cycle after another, as the shard processor loops); expire the
        items past their TTL at each sweep.  -> the number released."""
        now = self.now()
        if self.ttl > 0 and now - self.last_sweep >= self.sweep:
            self.last_sweep = now
            for band in self.bands.values():
                for q in band.values():
                    for it in [it for it in q if now - it.t >= self.ttl]:
                        self._finish(it, (503, "request timed out in "
                                          "queue"))
                        self.counts["expired"] += 1
        n = 0
        while self.held and not self.saturated():
            it = self._select()
            self._finish(it, None)
            self.order.append((it.prio, it.flow))
            self.counts["dispatched"] += 1
            n += 1
        return n

    def _finish(self, it, outcome):
        self._remove(it)
        it.outcome = outcome
        it.done = True
        if it.fut is not None and not it.fut.done():
            it.fut.set_result(outcome)

    # -- the request's side --------------------------------------------

    def enqueue(self, flow, prio, size):
        """Queue a request (synchronously); -> the item, or (status,
        reason) if it is rejected at once."""
        if prio < 0 and self.saturated():
            self.counts["shed_sheddable"] += 1
            return None, (429, "system saturated, sheddable request "
                               "dropped")
        if size and self.bytes[prio] + size > self.cap:
            self.counts["rejected_capacity"] += 1
            return None, (429, "queue at capacity")
        self.seq += 1
        it = _Item(self.seq, flow, prio, size, self.now())
        self._push(it)
        self.counts["enqueued"] += 1
        return it, None

    async def admit(self, flow, prio, size):
        it, shed = self.enqueue(flow, prio, size)
        if shed is not None:
            return shed
        self.dispatch()
        if not it.done:
            it.fut = asyncio.get_running_loop().create_future()
            if self.task is None or self.task.done():
                self.task = asyncio.ensure_future(self._run())
            try:
                await it.fut
            except asyncio.CancelledError:
                # the client went away while held (EvictedContextCancelled)
                if not it.done:
                    self._remove(it)
                    it.done = True
                    self.counts["cancelled"] += 1
                raise
        if it.outcome is not None:
            self.counts["held_then_shed"] += 1
        return it.outcome

    async def _run(self):
        while self.held:
            await asyncio.sleep(self.poll * self.scale)
            self.dispatch()
