#!/usr/bin/python3
"""Unit tests of the peers' routing policies (bench/sim/peers.py), each on
small cases taken from the peer's own tests or documentation (named in
each test), of the agentic workload's shape, and of run.py's peer and
scale options.

    /usr/bin/python3 -m unittest discover -s bench -p 'test_*.py'
"""

import asyncio
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "sim"))

import llmsim  # noqa: E402
import peers  # noqa: E402
import workloads  # noqa: E402


class Args:
    time_scale = 1.0
    kv_blocks = 256
    max_batched_tokens = 8192
    max_num_seqs = 256
    pooled = False


def cluster(n=4):
    return llmsim.make_instances(["i%d" % i for i in range(n)],
                                 list(range(1, n + 1)), Args())


def request(data, max_tokens=16):
    return peers.Request(data, llmsim.block_hashes(data),
                         llmsim.num_tokens(len(data)), max_tokens)


def route(p, data):
    """choose + routed, as the front does before the request runs."""
    r = request(data)
    i = p.choose(r)
    p.routed(i, r)
    return i, r


def cached(inst, data):
    """data's blocks in inst's cache, as after a finished request."""
    seq = llmsim.Seq(1, data, 1, 0.0)
    assert inst._admit(seq)
    seq.computed = seq.prompt_len
    inst._publish(seq)
    inst._finish(seq, 0.0)


def waiting(inst, k, data=b"w" * 640):
    for _ in range(k):
        inst.waiting.append(llmsim.Seq(0, data, 1, 0.0))


DOC = b"the shared document " * 64          # 1280 bytes, 20 blocks


class TestParams(unittest.TestCase):
    def test_parse(self):
        p = peers.parse_params("threshold=0.5+abs=5", {"threshold": 0.3,
                                                       "abs": 64})
        self.assertEqual(p, {"threshold": 0.5, "abs": 5.0})
        for bad in ("nope=1", "abs", "abs=x"):
            with self.assertRaises(ValueError):
                peers.parse_params(bad, {"abs": 64})
        with self.assertRaises(ValueError):
            peers.make("nginx", cluster())


class TestSGLang(unittest.TestCase):
    def test_balanced_load_follows_the_tree(self):
        # smg cache_aware.rs test_cache_aware_with_balanced_load: the same
        # text goes to the same worker, a text that shares most of it too
        p = peers.make("sglang", cluster(2))
        i1, r1 = route(p, DOC + b"hello world")
        p.done(i1, r1)
        i2, r2 = route(p, DOC + b"hello world")
        p.done(i2, r2)
        i3, _ = route(p, DOC + b"hello")
        self.assertEqual(i1, i2)
        self.assertEqual(i1, i3)

    def test_imbalanced_load_goes_to_the_least_loaded(self):
        # test_cache_aware_with_imbalanced_load: abs 5, rel 2.0, worker 1
        # with 20 requests: always worker 2, whatever the tree says
        p = peers.make("sglang", cluster(2), "abs=5,rel=2.0,threshold=0.5")
        p.insert(request(DOC).hashes, 0)
        p.inflight = [20, 0]
        for _ in range(5):
            self.assertEqual(p.choose(request(DOC)), 1)
        # max - min above abs but max not above rel x min: balanced, and
        # the deepest node names the worker that last routed through it
        # (the imbalanced choices above inserted DOC for worker 2)
        p.inflight = [20, 14]
        self.assertEqual(p.choose(request(DOC)), 1)
        p.insert(request(DOC).hashes, 0)
        self.assertEqual(p.choose(request(DOC)), 0)

    def test_low_match_goes_to_the_least_loaded(self):
        p = peers.make("sglang", cluster(3))
        p.insert(request(DOC[:256]).hashes, 0)    # 4 of 20 blocks: 0.2
        p.inflight = [1, 2, 0]
        self.assertEqual(p.choose(request(DOC)), 2)
        p.inflight = [1, 0, 0]                    # first of the least
        self.assertEqual(p.choose(request(b"x" * 999)), 1)

    def test_eviction_by_size(self):
        p = peers.make("sglang", cluster(2), "tree=640,evict=0")
        p.insert(request(DOC).hashes, 0)           # 20 blocks, limit 10
        p.evict()
        self.assertEqual(len(p.lru[0]), 10)
        d, w = p.match(request(DOC).hashes)
        self.assertEqual((d, w), (10, 0))          # the tail went first


class TestLLMD(unittest.TestCase):
    def test_queue_and_kv_scorers(self):
        # GIE queue scorer: (max - q) / (max - min), 1 when all are equal;
        # KV-utilisation scorer: 1 - usage
        insts = cluster(3)
        p = peers.make("llmd", insts, "prefix=0,kv=0")
        waiting(insts[0], 10)
        waiting(insts[1], 5)
        self.assertEqual(p.choose(request(DOC)), 2)
        insts[2].waiting.clear()
        waiting(insts[2], 10)
        p.snap = None
        self.assertEqual(p.choose(request(DOC)), 1)

    def test_metrics_are_a_snapshot(self):
        insts = cluster(2)
        p = peers.make("llmd", insts, "prefix=0,kv=0,refresh=1000")
        waiting(insts[0], 3)
        self.assertEqual(p.choose(request(DOC)), 1)
        waiting(insts[1], 9)               # not seen before the refresh
        self.assertEqual(p.choose(request(DOC)), 1)

    def test_prefix_scorer_and_its_lru(self):
        # GIE prefix plugin: score = matched blocks / blocks; the chosen
        # pod's LRU gets the request's blocks after the pick
        insts = cluster(2)
        p = peers.make("llmd", insts)
        i = p.choose(request(DOC))
        self.assertEqual(p.prefix_scores(request(DOC).hashes)[i], 1.0)
        half = request(DOC[:640] + b"z" * 640).hashes
        self.assertEqual(p.prefix_scores(half)[i], 0.5)
        self.assertEqual(p.prefix_scores(half)[1 - i], 0.0)
        # at most 256 blocks are hashed
        long = b"L" * 64 * 300
        p.choose(request(long))
        self.assertLessEqual(max(len(x) for x in p.lru), 20 + 256)
        # an LRU of the pod's GPU blocks
        p.add(0, list(range(1000)))
        self.assertEqual(len(p.lru[0]), insts[0].cache.capacity)
        self.assertNotIn(0, p.index.get(0, set()))

    def test_prefix_outweighs_one_loaded_pod(self):
        # weights 3:2:2: a full match beats an idle pod's queue score
        insts = cluster(2)
        p = peers.make("llmd", insts)
        p.add(0, request(DOC).hashes)
        waiting(insts[0], 2)
        self.assertEqual(p.choose(request(DOC)), 0)

    def test_precise_normalisation(self):
        # llm-d utils.go indexedScoresToNormalizedScoredPods: min-max over
        # the pods with a hit, 1.0 when they are equal, 0 without a hit
        insts = cluster(3)
        p = peers.make("llmd", insts, "precise=1")
        cached(insts[0], DOC[:640])
        cached(insts[1], DOC)
        self.assertEqual(p.prefix_scores(request(DOC).hashes),
                         [0.0, 1.0, 0.0])
        insts[1].cache.clear()
        self.assertEqual(p.prefix_scores(request(DOC).hashes),
                         [1.0, 0.0, 0.0])


class TestDynamo(unittest.TestCase):
    def test_overlap_credit_and_decode_blocks(self):
        # docs/router: cost = prefill blocks - overlap + active blocks; the
        # worker holding the prefix wins when loads are equal
        insts = cluster(2)
        p = peers.make("dynamo", insts)
        cached(insts[1], DOC)
        costs = p.costs(request(DOC + b"?"), 0.0)
        # 321 tokens: 20.06 prefill blocks - 20 cached + 20 decode blocks
        self.assertEqual(costs[1], (321 / 16 - 20 + 20, 20))
        self.assertEqual(costs[0], (321 / 16 + 20, 0))
        self.assertEqual(p.choose(request(DOC + b"?")), 1)

    def test_pending_prefill_moves_the_request(self):
        insts = cluster(2)
        p = peers.make("dynamo", insts)
        cached(insts[1], DOC)
        # a long request routed to worker 1, not yet at its first token
        big = b"B" * 64 * 200
        r = request(big)
        r.state = peers._Active()
        r.state.new_tokens = 3200
        p.routed(1, r)
        self.assertEqual(p.choose(request(DOC + b"?")), 0)
        p.done(1, r)
        self.assertEqual(p.choose(request(DOC + b"?")), 1)

    def test_shared_blocks_counted_once(self):
        insts = cluster(1)
        p = peers.make("dynamo", insts)
        _, r1 = route(p, DOC + b"a")
        _, r2 = route(p, DOC + b"b")
        self.assertEqual(len(p.refs[0]), 20)
        p.done(0, r1)
        self.assertEqual(len(p.refs[0]), 20)
        p.done(0, r2)
        self.assertEqual(len(p.refs[0]), 0)

    def test_without_events_remembers_its_decisions_for_ttl(self):
        insts = cluster(2)
        p = peers.make("dynamo", insts, "events=0,ttl=120")
        i, r = route(p, DOC)
        p.done(i, r)
        self.assertEqual(p.overlap(i, request(DOC).hashes, 1.0), 20)
        self.assertEqual(p.choose(request(DOC)), i)
        self.assertEqual(p.overlap(i, request(DOC).hashes, 500.0), 0)


class FastArgs(Args):
    time_scale = 0.01       # 100 model seconds a wall second


def kv_full(inst, share):
    """inst's KV cache a share full of private blocks (active requests)."""
    inst.cache.private = int(share * inst.cache.capacity)


class TestDynamoBusy(unittest.TestCase):
    # docs/design-docs/request-rejection.md (ai-dynamo/dynamo): busy when
    # active_decode_blocks / kv_total_blocks > threshold; 503 when every
    # worker is busy
    def admit(self, p, data=DOC):
        return asyncio.run(p.admit(request(data)))

    def test_every_worker_busy_is_503(self):
        insts = cluster()
        p = peers.make("dynamo", insts, "busy=0.85")
        for inst in insts:
            kv_full(inst, 0.9)
        status, body = self.admit(p)
        self.assertEqual(status, 503)
        self.assertIn("All workers are busy", json.loads(body)["message"])
        self.assertEqual(p.counts["rejected"], 1)

    def test_one_free_worker_routes(self):
        insts = cluster()
        p = peers.make("dynamo", insts, "busy=0.85")
        for inst in insts[:3]:
            kv_full(inst, 0.9)
        kv_full(insts[3], 0.85)         # not over: > is the test
        self.assertIsNone(self.admit(p))

    def test_off_by_default(self):
        insts = cluster()
        p = peers.make("dynamo", insts)
        for inst in insts:
            kv_full(inst, 1.0)
        self.assertIsNone(self.admit(p))

    def test_prefill_tokens_threshold(self):
        insts = cluster()
        p = peers.make("dynamo", insts, "prefill=300")
        for inst in insts:
            waiting(inst, 2)            # 2 x 160 tokens waiting
        self.assertEqual(self.admit(p)[0], 503)
        insts[0].waiting.clear()
        self.assertIsNone(self.admit(p))

    def test_bad_threshold(self):
        with self.assertRaises(ValueError):
            peers.make("dynamo", cluster(), "busy=1.5")


class TestLLMDFlow(unittest.TestCase):
    # gateway-api-inference-extension flow control: held while the
    # utilization detector says saturated (mean of max(waiting / 5,
    # kv / 0.8) >= 1), released band by band, FCFS across a band's flows
    # (global strict) or round robin between them
    def cluster(self):
        return llmsim.make_instances(["i0", "i1"], [1, 2], FastArgs())

    def test_saturation_signal(self):
        insts = self.cluster()
        p = peers.make("llmd", insts, "flow=1")
        self.assertFalse(p.saturated())
        waiting(insts[0], 10)           # 10 / 5 = 2, mean 1.0
        p.snap = None
        self.assertTrue(p.saturated())
        insts[0].waiting.clear()
        kv_full(insts[1], 0.9)          # 0.9 / 0.8 / 2 < 1
        p.snap = None
        self.assertFalse(p.saturated())

    def run_held(self, params, reqs):
        """Saturate the pool, admit reqs ((flow, priority) in arrival
        order), check they are held, free the pool: -> the dispatch
        order and the outcomes."""
        insts = self.cluster()
        p = peers.make("llmd", insts, params)
        for inst in insts:
            waiting(inst, 6)

        async def go():
            tasks = []
            for flow, prio in reqs:
                r = request(DOC)
                r.flow, r.priority, r.size = flow, prio, len(DOC)
                tasks.append(asyncio.ensure_future(p.admit(r)))
                await asyncio.sleep(0)
            await asyncio.sleep(0.01)   # 1 model second, 200 polls
            self.assertFalse(any(t.done() for t in tasks))
            self.assertEqual(p.fc.held, len(reqs))
            for inst in insts:
                inst.waiting.clear()
            return await asyncio.gather(*tasks)

        out = asyncio.run(go())
        return p.fc.order, out

    def test_held_then_released_in_band_order(self):
        reqs = [("a", 0), ("a", 0), ("b", 0), ("c", 1), ("b", 1)]
        order, out = self.run_held("flow=1", reqs)
        self.assertEqual(out, [None] * 5)
        self.assertEqual(order, [(1, "c"), (1, "b"), (0, "a"), (0, "a"),
                                 (0, "b")])

    def test_round_robin_between_flows(self):
        reqs = [("a", 0), ("a", 0), ("a", 0), ("b", 0), ("b", 0)]
        order, _ = self.run_held("flow=1,rr=1", reqs)
        self.assertEqual([f for _, f in order], ["a", "b", "a", "b", "a"])

    def test_not_saturated_goes_at_once(self):
        insts = self.cluster()
        p = peers.make("llmd", insts, "flow=1")
        self.assertIsNone(asyncio.run(p.admit(request(DOC))))
        self.assertEqual(p.fc.counts["dispatched"], 1)

    def test_ttl_is_503_and_capacity_429(self):
        insts = self.cluster()
        p = peers.make("llmd", insts, "flow=1,ttl=2,cap=3000")
        for inst in insts:
            waiting(inst, 6)

        async def go():
            rs = []
            for _ in range(3):
                r = request(DOC)
                r.size = len(DOC)       # 1280 bytes: the third is over
                rs.append(asyncio.ensure_future(p.admit(r)))
            return await asyncio.gather(*rs)

        out = asyncio.run(go())
        self.assertEqual([o[0] for o in out], [503, 503, 429])
        self.assertEqual(p.fc.counts["expired"], 2)
        self.assertEqual(p.fc.held, 0)

    def test_sheddable_is_429_when_saturated(self):
        insts = self.cluster()
        p = peers.make("llmd", insts, "flow=1")
        for inst in insts:
            waiting(inst, 6)
        r = request(DOC)
        r.priority = -1
        self.assertEqual(asyncio.run(p.admit(r))[0], 429)

    def test_off_by_default(self):
        insts = self.cluster()
        p = peers.make("llmd", insts)
        for inst in insts:
            waiting(inst, 6)
        self.assertIsNone(asyncio.run(p.admit(request(DOC))))
        self.assertIsNone(p.fc)


class TestShedThroughTheFront(unittest.TestCase):
    """llmsim's peer front answers a shed request itself, marked so that
    run.py counts it as shed (run.is_shed), not as a failure."""

    def post(self, peer, params, prepare, headers=None):
        from aiohttp import test_utils

        class A:
            front_peer = peer
            front_peer_params = params
        insts = llmsim.make_instances(["i0", "i1"], [1, 2], FastArgs())
        prepare(insts)
        app = llmsim.make_peer_front(insts, [None, None], A())

        async def go():
            async with test_utils.TestClient(
                    test_utils.TestServer(app)) as c:
                r = await c.post("/v1/completions", data=json.dumps(
                    {"prompt": "x" * 640, "max_tokens": 4}),
                    headers=headers or {})
                return r.status, dict(r.headers), await r.text()
        return asyncio.run(go())

    def test_dynamo_busy(self):
        import run

        def full(insts):
            for inst in insts:
                kv_full(inst, 0.95)
        status, hdr, body = self.post("dynamo", "busy=0.85", full)
        self.assertEqual(status, 503)
        self.assertTrue(run.is_shed(status, hdr))
        self.assertEqual(json.loads(body)["type"], "service_unavailable")

    def test_llmd_flow_ttl(self):
        import run

        def saturated(insts):
            for inst in insts:
                waiting(inst, 6)
        status, hdr, body = self.post("llmd", "flow=1,ttl=1", saturated,
                                      {"X-Bench-Group": "t1",
                                       "X-Bench-Priority": "1"})
        self.assertEqual(status, 503)
        self.assertTrue(run.is_shed(status, hdr))
        self.assertIn("timed out in queue", body)


class TestProdStack(unittest.TestCase):
    def test_longest_prefix_then_random(self):
        # hashtrie.py: the endpoints holding every chunk so far
        p = peers.make("prodstack", cluster(4))
        i, _ = route(p, DOC + b"one")
        for _ in range(20):                 # no load term: all follow
            self.assertEqual(route(p, DOC + b"two")[0], i)
        seen = {p.choose(request(b"%d" % k * 200)) for k in range(40)}
        self.assertGreater(len(seen), 1)    # unknown prompts: random

    def test_set_narrows_chunk_by_chunk(self):
        p = peers.make("prodstack", cluster(3))
        a = b"A" * 128 * 4
        for k in p.keys(a[:256]):
            p.trie.setdefault(k, set()).update({0, 1})
        for k in p.keys(a):
            p.trie.setdefault(k, set()).add(1)
        self.assertEqual(p.choose(request(a)), 1)


class TestAIBrix(unittest.TestCase):
    def test_match_within_stddev(self):
        # prefix_cache.go: highest match first, then fewest requests, the
        # first within mean + 1 stddev
        p = peers.make("aibrix", cluster(4))
        p.table.add(request(DOC).hashes, 2)
        p.inflight = [1, 0, 1, 1]          # mean 0.75, sd 0.43: 1 is in
        self.assertEqual(p.choose(request(DOC)), 2)
        p.inflight = [1, 1, 2, 1]          # mean 1.25, sd 0.43: 2 is out
        self.assertEqual(p.choose(request(DOC)), 0)
        p.table.add(request(DOC).hashes, 3)
        # pods 0 (chosen above), 2, 3 all match: the fewest requests among
        # those within mean + sd (2.25 + 2.28): 3
        p.inflight = [2, 0, 6, 1]
        self.assertEqual(p.choose(request(DOC)), 3)

    def test_load_gate(self):
        # AIBRIX_PREFIX_CACHE_LOAD_IMBALANCE_FACTOR 2, MIN_GAP 8: only the
        # least-loaded pods are matched
        p = peers.make("aibrix", cluster(4))
        p.table.add(request(DOC).hashes, 0)
        p.table.add(request(DOC[:640]).hashes, 1)
        p.inflight = [5, 0, 0, 9]          # 9 <= 2 x (3.5 + 1): no gate
        self.assertEqual(p.choose(request(DOC)), 0)
        p.table.add(request(DOC[:640]).hashes, 1)
        p.inflight = [5, 0, 0, 12]         # 12 > 2 x (4.25 + 1), gap 12:
        self.assertEqual(p.choose(request(DOC)), 1)   # only pods 1 and 2

    def test_no_match_least_requests(self):
        p = peers.make("aibrix", cluster(3))
        p.inflight = [2, 0, 1]
        self.assertEqual(p.choose(request(DOC)), 1)

    def test_table_percent_and_lru(self):
        t = peers._PrefixTable(100)
        h = request(DOC).hashes
        t.add(h[:10], 1)
        self.assertEqual(t.match(h, [0, 1]), {1: 50})
        t.add(h[:3], 0)
        self.assertEqual(t.match(h, [0, 1]), {0: 15, 1: 50})
        self.assertEqual(t.match(h, [0]), {0: 15})
        t = peers._PrefixTable(4)           # capacity in blocks, LRU
        t.add(h[:10], 1)
        self.assertEqual(len(t.store), 4)
        self.assertEqual(t.match(h, [1]), {})


class TestDualMap(unittest.TestCase):
    def test_two_candidates_and_cache_affinity(self):
        insts = cluster(4)
        p = peers.make("dualmap", insts)
        a, b = p.candidates(b"some prefix")
        self.assertNotEqual(a, b)
        self.assertEqual((a, b), p.candidates(b"some prefix"))
        r = request(DOC)
        i = p.choose(r)
        self.assertIn(i, p.candidates(DOC[:64]))
        self.assertEqual(p.choose(request(DOC)), i)

    def test_ttft_fallback(self):
        # the primary over the pending-token threshold: the candidate with
        # fewer pending tokens
        insts = cluster(4)
        p = peers.make("dualmap", insts, "threshold=1000")
        i = p.choose(request(DOC))
        a, b = p.candidates(DOC[:64])
        other = b if i == a else a
        insts[i].next_id = 10
        insts[i].m["prompt_tokens"] = 10 * 500
        waiting(insts[i], 10)
        self.assertEqual(p.choose(request(DOC)), other)
        self.assertEqual(p.decisions["fallback"], 1)

    def test_hot_prefix_grows_the_key(self):
        # the lazy table: a prefix seen in >= 6.12 % of the last 200 keys
        # (after 20) goes one block deeper
        p = peers.make("dualmap", cluster(4))
        hashes = request(DOC).hashes
        depths = [p.depth(hashes) for _ in range(40)]
        self.assertEqual(depths[0], 1)
        self.assertGreater(depths[-1], 5)
        self.assertEqual(depths, sorted(depths))


class TestAgentic(unittest.TestCase):
    def test_deterministic(self):
        a = workloads.generate("agentic", n=60)
        b = workloads.generate("agentic", n=60)
        self.assertEqual([r.body for r in a.requests],
                         [r.body for r in b.requests])
        c = workloads.generate("agentic", n=60, seed=9)
        self.assertNotEqual(a.requests[0].body, c.requests[0].body)

    def test_bounds_at_the_defaults(self):
        w = workloads.generate("agentic", n=150)
        top = 0
        for r in w.requests:
            data = llmsim.parse_prompt(r.path, r.body)[0]
            top = max(top, llmsim.num_tokens(len(data)))
            self.assertLessEqual(llmsim.num_tokens(len(data)) + r.max_tokens,
                                 131072)                 # max-model-len
        self.assertGreater(top, 64000)
        self.assertLess(top, 24576 * 16)   # fits run.py's agentic cache

    def test_shape(self):
        # the structure, with every size divided by 10 (the defaults' 300 MB
        # of bodies would take minutes), at 3 requests a second (the
        # default's 1 has fewer agents at once)
        p = dict(workloads.PARAMS["agentic"], n=3000, seed=3, rate=3.0,
                 system_tokens=(200, 400), task_tokens=(10, 40),
                 context_tokens=(6400, 12800), result_tokens=(100, 800),
                 call_tokens=(5, 20))
        reqs = workloads.gen_agentic(p)
        by = {}
        for r in reqs:
            by.setdefault(r.session, []).append(r)
        # agents wholly inside the window: started at t >= 0, in its first
        # half (an agent lasts at most a few hundred seconds)
        end = max(r.t for r in reqs)
        full = [rs for rs in by.values()
                if min(r.turn for r in rs) == 0
                and min(r.t for r in rs) < end / 2]
        self.assertGreater(len(full), 20)
        tok = lambda r: len(llmsim.parse_prompt(   # noqa: E731
            r.path, r.body)[0]) // 4
        for rs in full:
            rs.sort(key=lambda r: r.turn)
            self.assertEqual([r.turn for r in rs], list(range(len(rs))))
            self.assertTrue(6 <= len(rs) <= 31)      # 5-30 tool results
            last = tok(rs[-1])
            self.assertTrue(6000 <= last <= 13000, last)
            for x, y in zip(rs, rs[1:]):
                grow = tok(y) - tok(x)
                # a tool call and a result, turn after turn
                self.assertTrue(100 <= grow <= 800 + 60, grow)
                dx = llmsim.parse_prompt(x.path, x.body)[0]
                dy = llmsim.parse_prompt(y.path, y.body)[0]
                cut = dx.rindex(b"<|start_header_id|>assistant")
                self.assertEqual(dy[:cut], dx[:cut])
                self.assertGreater(y.t, x.t)
        # bursts: agents that start within burst_spread of each other
        starts = sorted(rs[0].t for rs in full)
        close = sum(1 for s, t in zip(starts, starts[1:])
                    if t - s <= p["burst_spread"])
        self.assertGreater(close, len(starts) // 3)
        # many agents at once
        spans = [(rs[0].t, rs[-1].t) for rs in by.values()]
        mid = sorted(t for t, _ in spans)[len(spans) // 2]
        self.assertGreater(sum(1 for a, b in spans if a <= mid <= b), 8)


class TestRunPeers(unittest.TestCase):
    def setUp(self):
        import run
        self.run = run
        self.saved = (dict(run.ARMS),
                      {k: list(v) for k, v in run.ARM_GROUPS.items()})
        run.load_arms(run.ARMS_FILE)

    def tearDown(self):
        self.run.ARMS.clear()
        self.run.ARMS.update(self.saved[0])
        self.run.ARM_GROUPS.update(self.saved[1])

    def test_strategies(self):
        run = self.run
        self.assertTrue(run.is_peer("llmd@precise=1"))
        self.assertFalse(run.is_peer("oracle"))
        self.assertEqual(run.peer_args("dynamo@events=0+ttl=60"),
                         ["--front-peer", "dynamo", "--front-peer-params",
                          "events=0,ttl=60"])
        with self.assertRaises(ValueError):
            run.peer_args("dynamo@nope=1")
        for s in run.PEER_STRATEGIES:
            self.assertTrue(run.is_peer(s) or run.is_oracle(s)
                            or run.is_pa(s) or s in run.STRATEGY_DIRECTIVE,
                            s)
        self.assertIn("precise", run.label("llmd@precise=1"))

    def test_overload_variants_and_shed(self):
        run = self.run
        self.assertEqual(run.peer_args("dynamo@busy=0.85")[-1], "busy=0.85")
        self.assertEqual(run.peer_args("llmd@flow=1")[-1], "flow=1")
        with self.assertRaises(ValueError):
            run.peer_args("llmd@flow=1+nope=2")
        # shed on purpose: the peers' X-Bench-Shed, the module's
        # Retry-After; a bare 503 or a 500 stays a failure
        self.assertTrue(run.is_shed(503, {"X-Bench-Shed": "1"}))
        self.assertTrue(run.is_shed(429, {"Retry-After": "1"}))
        self.assertFalse(run.is_shed(503, {}))
        self.assertFalse(run.is_shed(500, {"X-Bench-Shed": "1"}))
        shed = {"strategy": "dynamo@busy=0.85", "ok": 8, "n": 10, "shed": 2,
                "shed_by_status": {"503": 2}, "errors": {}}
        self.assertTrue(run.check_complete([shed]))
        self.assertIn("2 shed (503: 2)", run.shed_note(shed))
        failed = dict(shed, shed=1, errors={"HTTP 500": 1})
        self.assertFalse(run.check_complete([failed]))

    def test_scale_and_cache(self):
        run = self.run

        class O:
            n = None
            rate = None
            scale = 4
            kv_blocks = 2048
            kv_explicit = False
        O = O()
        o = run.wl_overrides("rag", O)
        p = workloads.PARAMS["rag"]
        self.assertEqual((o["n"], o["rate"], o["docs"]),
                         (4 * p["n"], 4 * p["rate"], 4 * p["docs"]))
        self.assertEqual(run.wl_overrides("rag", O, n=70, rate=2.0)["n"], 70)
        O.population = 1
        o = run.wl_overrides("noisy", O)
        q = workloads.PARAMS["noisy"]
        self.assertEqual((o["n"], o["rate"], o["tenants"]),
                         (4 * q["n"], 4 * q["rate"], q["tenants"]))
        O.population = None
        self.assertEqual(run.opts_for("agentic", O).kv_blocks, 24576)
        self.assertEqual(run.opts_for("rag", O).kv_blocks, 2048)
        O.kv_explicit = True
        self.assertEqual(run.opts_for("agentic", O).kv_blocks, 2048)


if __name__ == "__main__":
    unittest.main()
