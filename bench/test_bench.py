#!/usr/bin/python3
"""Unit tests of the benchmark's own parts: the simulator's tokens, blocks,
KV cache and cost model, the workloads and the offline ideal cache.

    /usr/bin/python3 -m unittest discover -s bench -p 'test_*.py'
"""

import asyncio
import collections
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "sim"))

import llmsim  # noqa: E402
import workloads  # noqa: E402


class Args:
    time_scale = 1.0
    kv_blocks = 64
    max_batched_tokens = 8192
    max_num_seqs = 256


class TestTokens(unittest.TestCase):
    def test_equal_prefix_equal_blocks(self):
        a = b"x" * 640 + b"tail one"
        b = b"x" * 640 + b"another tail, longer"
        ha, hb = llmsim.block_hashes(a), llmsim.block_hashes(b)
        self.assertEqual(ha[:10], hb[:10])
        self.assertEqual(len(ha), 10)          # the partial block is not hashed

    def test_chained(self):
        # same block content after different prefixes: different names
        a = llmsim.block_hashes(b"A" * 64 + b"B" * 64)
        b = llmsim.block_hashes(b"C" * 64 + b"B" * 64)
        self.assertNotEqual(a[1], b[1])

    def test_num_tokens(self):
        self.assertEqual(llmsim.num_tokens(1), 1)
        self.assertEqual(llmsim.num_tokens(64), 16)
        self.assertEqual(llmsim.num_tokens(65), 17)

    def test_parse(self):
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}],
                           "max_tokens": 7, "stream": True}).encode()
        data, mt, stream, kind, _ = llmsim.parse_prompt("/v1/chat/completions", body)
        self.assertIn(b"hi", data)
        self.assertEqual((mt, stream, kind), (7, True, "chat"))
        data, mt, stream, kind, _ = llmsim.parse_prompt(
            "/invocations", b'{"inputs": "abc", "parameters": {"max_new_tokens": 3}}')
        self.assertEqual((mt, kind), (3, "tgi"))
        data, _, _, kind, _ = llmsim.parse_prompt("/invocations", b"raw bytes")
        self.assertEqual((data, kind), (b"raw bytes", "tgi"))
        with self.assertRaises(ValueError):
            llmsim.parse_prompt("/v1/chat/completions", b"not json")


class TestKVCache(unittest.TestCase):
    def test_lru_and_refcounts(self):
        c = llmsim.KVCache(4)
        c.reserve(2)
        self.assertTrue(c.publish(1))
        self.assertTrue(c.publish(2))
        c.release([1, 2], 0)                 # free: 2 (tail) first, then 1
        self.assertEqual(list(c.free), [2, 1])
        self.assertEqual(c.lookup([1, 2], 10), 2)
        c.reserve(3)                         # needs one eviction: the tail
        self.assertNotIn(2, c.ref)
        self.assertIn(1, c.ref)
        self.assertEqual(c.lookup([1, 2], 10), 1)

    def test_held_blocks_not_evicted(self):
        c = llmsim.KVCache(2)
        c.reserve(1)
        c.publish(7)
        self.assertFalse(c.can_reserve(2))
        self.assertTrue(c.can_reserve(1))


class TestEngine(unittest.TestCase):
    def test_second_request_hits(self):
        # 400 blocks: a cold prefill of about 0.25 s against a few ms
        # warm, far beyond the event loop's jitter on a busy machine (20
        # blocks, 12 ms against 7, once failed CI by 0.4 ms)
        class Big(Args):
            kv_blocks = 1024

        async def go():
            inst = llmsim.Instance("t", 0, Big())
            task = asyncio.ensure_future(inst.run())
            data = b"p" * 64 * 400 + b"q"
            s1 = inst.submit(data, 2)
            while not s1.done:
                await asyncio.sleep(0.005)
            s2 = inst.submit(data, 2)
            while not s2.done:
                await asyncio.sleep(0.005)
            task.cancel()
            return inst, s1, s2
        inst, s1, s2 = asyncio.run(go())
        self.assertEqual(s1.cached, 0)
        self.assertEqual(s2.cached, 400 * 16)
        self.assertEqual(inst.m["prefix_cache_hits"], 6400)
        self.assertEqual(inst.m["prefix_cache_queries"], 2 * s1.prompt_len)
        self.assertLess(4 * (s2.t_first - s2.t_arrival),
                        s1.t_first - s1.t_arrival)

    def test_metrics_report_the_cache_as_vllm_does(self):
        # what capacity=auto reads: block_size x num_gpu_blocks tokens
        inst = llmsim.Instance("t", 0, Args())
        text = inst.metrics_text()
        line = [x for x in text.splitlines()
                if x.startswith("vllm:cache_config_info{")]
        self.assertEqual(len(line), 1)
        labels = dict(kv.split("=", 1) for kv in
                      line[0][line[0].index("{") + 1:
                              line[0].index("}")].split(","))
        self.assertEqual(labels["block_size"], '"16"')
        self.assertEqual(labels["num_gpu_blocks"], '"%d"' % Args.kv_blocks)
        self.assertIn("vllm:num_requests_waiting{", text)
        self.assertIn("vllm:kv_cache_usage_perc{", text)

    def test_idle_gap_not_credited(self):
        # a request that arrives after a short idle gap takes its whole
        # modelled prefill (the step loop used to credit the gap)
        class Big(Args):
            kv_blocks = 1024

        async def go():
            inst = llmsim.Instance("t", 0, Big())
            task = asyncio.ensure_future(inst.run())
            out = []
            for i, gap in enumerate((0.1, 0.02, 0.03)):
                await asyncio.sleep(gap)
                data = (b"%d" % i) * 16000          # 4000 tokens, uncached
                s = inst.submit(data[:16000], 1)
                model = inst.step_time(
                    [(llmsim.Seq(0, data[:16000], 1, 0.0), s.prompt_len)], [])
                while not s.done:
                    await asyncio.sleep(0.002)
                out.append((s.t_first - s.t_arrival, model))
            task.cancel()
            return out
        for ttft, model in asyncio.run(go()):
            self.assertGreater(ttft, 0.95 * model)

    def test_cost_model(self):
        inst = llmsim.Instance("t", 0, Args())
        s = llmsim.Seq(1, b"x" * 16000, 10, 0.0)     # 4000 tokens
        t_prefill = inst.step_time([(s, 4000)], [])
        self.assertGreater(t_prefill, 0.10)          # ~0.155 s on an H100
        self.assertLess(t_prefill, 0.25)
        s.computed = 4000
        t_decode = inst.step_time([], [s])
        self.assertGreater(t_decode, 0.005)           # ~7 ms per token
        self.assertLess(t_decode, 0.010)


class TestPooled(unittest.TestCase):
    """--pooled: one KV cache shared by every instance of the process."""

    class PArgs(Args):
        kv_blocks = 32
        pooled = True

    def test_one_cache_of_all_capacities(self):
        insts = llmsim.make_instances(["a", "b", "c"], [1, 2, 3], self.PArgs())
        self.assertIs(insts[0].cache, insts[1].cache)
        self.assertIs(insts[0].cache, insts[2].cache)
        self.assertEqual(insts[0].cache.capacity, 3 * 32)
        self.assertTrue(all(i.pooled for i in insts))

        class Sep(Args):
            kv_blocks = 32
            pooled = False
        sep = llmsim.make_instances(["a", "b"], [1, 2], Sep())
        self.assertIsNot(sep[0].cache, sep[1].cache)
        self.assertEqual(sep[0].cache.capacity, 32)
        self.assertFalse(sep[0].pooled)

    def _two(self, pooled):
        class A(Args):
            kv_blocks = 64
        A.pooled = pooled

        async def go():
            a, b = llmsim.make_instances(["a", "b"], [1, 2], A())
            tasks = [asyncio.ensure_future(i.run()) for i in (a, b)]
            data = b"p" * 64 * 20 + b"q"            # 20 full blocks
            s1 = a.submit(data, 2)
            while not s1.done:
                await asyncio.sleep(0.005)
            s2 = b.submit(data, 2)                 # the other instance
            while not s2.done:
                await asyncio.sleep(0.005)
            for t in tasks:
                t.cancel()
            return a, b, s1, s2
        return asyncio.run(go())

    def test_every_instance_hits_every_block(self):
        a, b, s1, s2 = self._two(True)
        self.assertEqual(s1.cached, 0)
        self.assertEqual(s2.cached, 20 * 16)
        self.assertEqual(b.m["prefix_cache_hits"], 320)
        self.assertEqual(a.m["prefix_cache_hits"], 0)
        # the hit costs instance b no prefill of the cached blocks
        self.assertLess(b.m["prefill_tokens"], a.m["prefill_tokens"])

    def test_separate_caches_miss(self):
        a, b, s1, s2 = self._two(False)
        self.assertEqual(s2.cached, 0)

    def test_capacity_shared_with_running_requests(self):
        # blocks held by one instance's running request are not evictable
        # by another's
        c = llmsim.KVCache(8)
        insts = [llmsim.Instance(n, 0, Args(), cache=c) for n in "ab"]
        s1 = llmsim.Seq(1, b"x" * 64 * 5 + b"y", 16, 0.0)   # 5 + 1 + 1 blocks
        self.assertTrue(insts[0]._admit(s1))
        s2 = llmsim.Seq(2, b"z" * 64 * 5 + b"y", 16, 0.0)
        self.assertFalse(insts[1]._admit(s2))               # no room
        insts[0]._finish(s1, 0.0)
        self.assertTrue(insts[1]._admit(s2))


class TestOracle(unittest.TestCase):
    """--front: prefix_aware's choice on the depths the caches hold."""

    class OArgs(Args):
        kv_blocks = 256
        pooled = False
        front_threshold = 10
        front_balance = 1.25
        front_match = 60
        front_length = 8192

    def _cached(self, inst, data):
        # put data's blocks in inst's cache, as a finished request does
        seq = llmsim.Seq(1, data, 1, 0.0)
        self.assertTrue(inst._admit(seq))
        seq.computed = seq.prompt_len
        inst._publish(seq)
        inst._finish(seq, 0.0)

    def test_deepest_holder(self):
        insts = llmsim.make_instances(list("abcd"), [1, 2, 3, 4], self.OArgs())
        o = llmsim.Oracle(insts, self.OArgs())
        doc = b"d" * 64 * 40
        self._cached(insts[2], doc + b"q1")            # 40 blocks on c
        self._cached(insts[1], doc[:64 * 30])           # 30 blocks on b
        i, cost, kind, depth = o.choose(doc + b"q2")
        self.assertEqual((i, kind, depth), (2, "match", 40))
        self.assertEqual(cost, 1 + 128 + (40 * 16 + 1) // 4)

    def test_bounds(self):
        insts = llmsim.make_instances(list("abcd"), [1, 2, 3, 4], self.OArgs())
        o = llmsim.Oracle(insts, self.OArgs())
        doc = b"d" * 64 * 40
        self._cached(insts[2], doc)
        o.inflight[2] = 10                              # at the cap
        i, _, kind, depth = o.choose(doc + b"q")
        self.assertNotEqual(i, 2)
        self.assertEqual((kind, depth), ("spill", 0))
        o.inflight[2] = 1
        o.work = [0, 0, 10 ** 6, 0]                     # far above the mean
        self.assertEqual(o.choose(doc + b"q")[2], "spill")
        o.work = [100, 100, 3000, 100]                  # within the slack
        self.assertEqual(o.choose(doc + b"q")[:1], (2,))

    def test_small_match_is_cold(self):
        insts = llmsim.make_instances(list("ab"), [1, 2], self.OArgs())
        o = llmsim.Oracle(insts, self.OArgs())
        system = b"s" * 64 * 10
        self._cached(insts[1], system)
        # 10 of 40 blocks held: under match=60, not a match but placed
        # cold, by the least work after it: b, where 10 blocks are cached
        i, _, kind, depth = o.choose(system + b"u" * 64 * 30)
        self.assertEqual((i, kind, depth), (1, "cold", 10))
        o.work = [0, 10 ** 5]
        self.assertEqual(o.choose(system + b"u" * 64 * 30)[:3:2], (0, "cold"))

    def test_models_of_the_index(self):
        class M(self.OArgs):
            front_model = "lru"
        insts = llmsim.make_instances(list("ab"), [1, 2], M())
        o = llmsim.Oracle(insts, M())
        doc = b"d" * 64 * 40
        self.assertEqual(o.choose(doc + b"q")[2], "cold")
        held = o.record(0, doc, 0, 16)               # 40 blocks + 1 decode
        self.assertEqual((held, o.counter[0], o.held[0]), (41, 40, 41))
        i, _, kind, depth = o.choose(doc + b"q")
        self.assertEqual((i, kind, depth), (0, "match", 40))
        o.held[0] = 0
        o.record(0, b"x" * 64 * 200, 0, 16)           # 200 more: still held
        self.assertEqual(o.remembered(0, llmsim.block_hashes(doc), 40), 40)
        o.record(0, b"y" * 64 * 100, 0, 16)           # past 256: forgotten
        self.assertEqual(o.remembered(0, llmsim.block_hashes(doc), 40), 0)
        # "held": running requests' blocks shorten the cache's memory
        o.model = "held"
        o.record(1, doc, 0, 16)
        o.held[1] = 0
        o.record(1, b"z" * 64 * 100, 0, 16)          # 100 blocks after it
        self.assertEqual(o.remembered(1, llmsim.block_hashes(doc), 40), 40)
        o.held[1] = 200                              # 256 - 200 < 100
        self.assertEqual(o.remembered(1, llmsim.block_hashes(doc), 40), 0)
        o.held[1] = 10 ** 6                          # never below an eighth
        self.assertEqual(o.capacity(1), 32)

    def test_soonest_first_token(self):
        class T(self.OArgs):
            front_choice = "ttft"
        insts = llmsim.make_instances(list("abc"), [1, 2, 3], T())
        o = llmsim.Oracle(insts, T())
        doc = b"d" * 64 * 40
        self._cached(insts[1], doc)
        # idle: where 40 of the 41 blocks are cached
        i, _, kind, depth = o.choose(doc + b"q")
        self.assertEqual((i, kind, depth), (1, "match", 40))
        self.assertLess(o.expected_ttft(insts[1], 641, 40),
                        o.expected_ttft(insts[0], 641, 0))
        # b has a long prompt waiting: its cached doc is not worth the wait
        insts[1].submit(b"w" * 4 * 60000, 1)
        i, _, kind, depth = o.choose(doc + b"q")
        self.assertEqual((i, kind, depth), (0, "cold", 0))
        # nothing cached anywhere: the least queued, the lower index on ties
        self.assertEqual(o.choose(b"z" * 64 * 8)[:1], (0,))
        insts[0].submit(b"v" * 4 * 1000, 1)
        self.assertEqual(o.choose(b"z" * 64 * 8)[:1], (2,))

    def test_work_until_first_token(self):
        class W(self.OArgs):
            front_work = "first"
        insts = llmsim.make_instances(list("ab"), [1, 2], W())
        o = llmsim.Oracle(insts, W())
        doc = b"d" * 64 * 40                            # 640 tokens
        self._cached(insts[1], doc)
        self.assertEqual(o.live_work(insts[0]), 0)
        # waiting: its uncached prefill (640 or 16 tokens) and its decode
        # share (128 + a quarter of the prompt)
        insts[0].submit(doc + b"q" * 64, 1)
        seq = insts[1].submit(doc + b"q" * 64, 1)
        self.assertEqual(o.live_work(insts[0]), 656 + 128 + 164)
        self.assertEqual(o.live_work(insts[1]), 16 + 128 + 164)
        # its first token sampled: the decode share only, until it ends
        seq.t_first = 1.0
        self.assertEqual(o.live_work(insts[1]), 128 + 164)
        seq.done = True
        self.assertEqual(o.live_work(insts[1]), 0)
        o.choose(doc + b"z")
        self.assertEqual(o.work, [656 + 128 + 164, 0])

    def test_strategy_parameters(self):
        import run
        o = Opts()
        o.pa_threshold = 10
        self.assertEqual(run.oracle_args("oracle", o),
                         ["--front-threshold", "10"])
        self.assertEqual(run.oracle_args("oracle@balance=0+threshold=20", o),
                         ["--front-threshold", "20", "--front-balance", "0"])
        self.assertTrue(run.is_oracle("oracle@match=0"))
        self.assertFalse(run.is_oracle("pa_v2"))
        self.assertEqual(run.oracle_args("oracle@model=held", o),
                         ["--front-threshold", "10", "--front-model", "held"])
        self.assertEqual(run.oracle_args("oracle@choice=ttft", o),
                         ["--front-threshold", "10", "--front-choice", "ttft"])
        self.assertEqual(run.oracle_args("oracle@work=first", o),
                         ["--front-threshold", "10", "--front-work", "first"])
        for bad in ("oracle@cold=ring", "oracle@balance=", "oracle@match=x",
                    "oracle@model=x", "oracle@choice=x", "oracle@work=x"):
            with self.assertRaises(ValueError):
                run.oracle_args(bad, o)


class TestWorkloads(unittest.TestCase):
    def test_deterministic(self):
        for name in workloads.NAMES:
            a = workloads.generate(name, n=30)
            b = workloads.generate(name, n=30)
            self.assertEqual([r.body for r in a.requests],
                             [r.body for r in b.requests], name)
            self.assertEqual(len(a.requests), 30)
            ts = [r.t for r in a.requests]
            self.assertEqual(ts, sorted(ts))
            for r in a.requests:
                llmsim.parse_prompt(r.path, r.body)   # the simulator takes it

    def test_uneven_lengths(self):
        w = workloads.generate("uneven", n=400)
        toks = sorted(len(r.body) / workloads.BYTES_PER_TOKEN
                      for r in w.requests)
        p50, p90 = toks[len(toks) // 2], toks[int(len(toks) * 0.9)]
        self.assertTrue(3000 < p50 < 9000, p50)
        self.assertTrue(30000 < p90 < 110000, p90)
        self.assertLess(toks[-1], 131072)          # the simulator's limit
        new = sum(1 for r in w.requests if r.turn == 0)
        self.assertTrue(0.8 < new / len(w.requests) < 0.95, new)

    def test_stream_rate(self):
        # the same requests at twice the rate: agentic's own stream at 2.0
        # starts more agents; with stream_rate=1.0 the stream is the one
        # at 1.0, its times halved
        base = workloads.generate("agentic", n=60, rate=1.0)
        fast = workloads.generate("agentic", n=60, rate=2.0,
                                  stream_rate=1.0)
        own = workloads.generate("agentic", n=60, rate=2.0)
        self.assertEqual([r.body for r in fast.requests],
                         [r.body for r in base.requests])
        for a, b in zip(base.requests, fast.requests):
            self.assertAlmostEqual(b.t, a.t / 2.0)
        self.assertEqual(fast.params["rate"], 2.0)
        self.assertNotEqual([r.session for r in own.requests],
                            [r.session for r in base.requests])
        with self.assertRaises(ValueError):
            workloads.generate("rag", n=5, rate=1.0, stream_rate=-1.0)

    def test_rag_shares_documents(self):
        w = workloads.generate("rag", n=200)
        groups = [r.group for r in w.requests]
        self.assertLess(len(set(groups)), 100)

    def test_chat_history_grows(self):
        w = workloads.generate("chat", n=200)
        by = {}
        for r in w.requests:
            by.setdefault(r.session, []).append(r)
        turns = max(by.values(), key=len)
        msgs = [json.loads(r.body)["messages"] for r in turns]
        for a, b in zip(msgs, msgs[1:]):
            self.assertEqual(b[:len(a)], a)


class TestLora(unittest.TestCase):
    """The lora workload and llmsim --models."""

    def test_placement(self):
        hosts = [workloads.adapter_hosts(k) for k in range(8)]
        self.assertTrue(all(len(h) == 2 for h in hosts))
        per = [sum(i in h for h in hosts) for i in range(4)]
        self.assertEqual(per, [4, 4, 4, 4])
        groups = workloads.lora_models().split(";")
        self.assertEqual(len(groups), 4)
        served = llmsim.parse_models(workloads.lora_models(), 4)
        for k, h in enumerate(hosts):
            for i in range(4):
                self.assertEqual(workloads.adapter_name(k) in served[i],
                                 i in h)
        self.assertTrue(all(s[0] == llmsim.MODEL["name"] for s in served))
        with self.assertRaises(ValueError):
            llmsim.parse_models("a;b", 4)
        self.assertEqual(llmsim.parse_models("", 2), [None, None])

    def test_bodies_name_their_adapter(self):
        w = workloads.generate("lora", n=200)
        adapters = set()
        for r in w.requests:
            model = llmsim.request_model(r.body)
            self.assertEqual(model, r.group.split("/")[0])
            adapters.add(model)
        self.assertEqual(len(adapters), 8)
        self.assertIsNone(llmsim.request_model(b"not json"))
        self.assertIsNone(llmsim.request_model(b'{"model": 1}'))


class TestTenants(unittest.TestCase):
    def setUp(self):
        self.w = workloads.generate("tenants")
        self.p = self.w.params
        self.users = {}
        for r in self.w.requests:
            self.users.setdefault(r.session, []).append(r)

    def test_few_long_system_prompts_many_users(self):
        systems = {}
        for r in self.w.requests:
            m = json.loads(r.body)["messages"]
            self.assertEqual(m[0]["role"], "system")
            systems.setdefault(r.group, set()).add(m[0]["content"])
        self.assertLessEqual(len(systems), self.p["tenants"])
        self.assertGreaterEqual(len(systems), 2)
        lo, hi = self.p["system_tokens"]
        for g, texts in systems.items():
            self.assertEqual(len(texts), 1, g)           # one prompt a tenant
            n = len(next(iter(texts))) / workloads.BYTES_PER_TOKEN
            self.assertGreater(n, lo)
            self.assertLess(n, hi + 50)
            # longer than prefix_aware's default length (4096 characters)
            self.assertGreater(len(next(iter(texts))), 4096)
        per_tenant = {}
        for u, rs in self.users.items():
            self.assertEqual(len(set(r.group for r in rs)), 1)
            per_tenant.setdefault(rs[0].group, set()).add(u)
        self.assertGreater(len(self.users), 3 * len(systems))
        self.assertGreater(max(len(v) for v in per_tenant.values()), 5)

    def test_history_grows_turn_by_turn(self):
        ulo, uhi = self.p["user_tokens"]
        alo, ahi = self.p["answer_tokens"]
        deepest = 0
        for u, rs in self.users.items():
            rs.sort(key=lambda r: r.turn)
            turns = [r.turn for r in rs]
            self.assertEqual(turns, list(range(turns[0], turns[-1] + 1)))
            self.assertLess(turns[-1], self.p["turns"][1])
            deepest = max(deepest, turns[-1])
            msgs = [json.loads(r.body)["messages"] for r in rs]
            for r, m in zip(rs, msgs):
                # system, then user/assistant pairs, then this turn's user
                self.assertEqual(len(m), 2 + 2 * r.turn)
                self.assertEqual([x["role"] for x in m[1:]],
                                 ["user", "assistant"] * r.turn + ["user"])
                self.assertTrue(alo <= r.max_tokens <= ahi)
                n = len(m[-1]["content"]) / workloads.BYTES_PER_TOKEN
                self.assertTrue(ulo <= n <= uhi + 5, n)
            for a, b in zip(msgs, msgs[1:]):
                self.assertEqual(b[:len(a)], a)          # a prefix of the next
                self.assertEqual(len(b), len(a) + 2)
        self.assertGreaterEqual(deepest, self.p["turns"][0] - 1)

    def test_steady_offered_load(self):
        rs = self.w.requests
        self.assertEqual(len(rs), self.p["n"])
        self.assertGreaterEqual(rs[0].t, 0.0)
        span = rs[-1].t - rs[0].t
        self.assertLess(abs(len(rs) / span / self.p["rate"] - 1), 0.3)
        # the second half is as busy as the first
        half = rs[len(rs) // 2].t
        self.assertLess(abs(half / span - 0.5), 0.15)

    def test_pooled_cache_matters(self):
        # the working set fits in the four caches together, not in one
        import run
        one = run.ideal_hit_rate(self.w.requests, 2048)
        four = run.ideal_hit_rate(self.w.requests, 4 * 2048)
        self.assertGreater(four, 0.85)
        self.assertGreater(four - one, 0.15)


class Opts:
    pa_length = 4096
    pa_threshold = 10
    pa_format = "auto"
    pa_index = "off"


class TestLagRetries(unittest.TestCase):
    class O:
        max_lag = 0.03
        lag_retries = 3

    def runs(self, lags):
        import run
        it = iter(lags)

        def one():
            # 4 instances, 10 s: lag share = step_lag / 40
            return {"step_lag": 40 * next(it), "wall": 10.0,
                    "per_instance": [1, 1, 1, 1]}
        return run.run_unlagged(one, "x", self.O, wait=lambda: None)

    def test_clean_run_once(self):
        r = self.runs([0.01, 0.5, 0.5])
        self.assertEqual(r["runs"], 1)
        self.assertAlmostEqual(r["step_lag"], 0.4)

    def test_again_until_clean(self):
        r = self.runs([0.5, 0.02, 0.9])
        self.assertEqual(r["runs"], 2)
        self.assertAlmostEqual(r["step_lag"], 0.8)

    def test_least_lagged_of_all_tries(self):
        r = self.runs([0.5, 0.2, 0.3, 0.4, 0.0])
        self.assertEqual(r["runs"], 4)
        self.assertAlmostEqual(r["step_lag"], 8.0)

    def test_trace_of_the_kept_run(self):
        """--trace: every run writes the same file; the least lagged
        run's is what stays"""
        import tempfile
        import run
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.jsonl")
            it = iter([0.5, 0.2, 0.3, 0.4])

            def one():
                lag = next(it)
                with open(path, "w") as f:
                    f.write("lag %s\n" % lag)
                return {"step_lag": 40 * lag, "wall": 10.0,
                        "per_instance": [1, 1, 1, 1], "trace_path": path}
            r = run.run_unlagged(one, "x", self.O, wait=lambda: None)
            self.assertEqual(r["runs"], 4)
            with open(path) as f:
                self.assertEqual(f.read(), "lag 0.2\n")

    def test_steal_share(self):
        import math
        import run
        self.assertAlmostEqual(run.steal_share((10, 100), (20, 200)), 0.1)
        self.assertTrue(math.isnan(run.steal_share(None, (20, 200))))
        self.assertTrue(math.isnan(run.steal_share((10, 100), (10, 100))))
        st, tot = run.cpu_times()
        self.assertGreaterEqual(tot, st)

    def test_share_is_per_instance(self):
        import run
        r = {"step_lag": 16.0, "wall": 20.0, "per_instance": [1] * 16}
        self.assertAlmostEqual(run.lag_share(r), 0.05)


class TestArms(unittest.TestCase):
    def setUp(self):
        import run
        self.run = run
        self.saved = (dict(run.ARMS), {k: list(v) for k, v in run.ARM_GROUPS.items()})

    def tearDown(self):
        self.run.ARMS.clear()
        self.run.ARMS.update(self.saved[0])
        self.run.ARM_GROUPS.update(self.saved[1])

    def test_parse(self):
        arms, groups = self.run.parse_arms(
            "# comment\npa_a  threshold=20   # why\n[sensitivity]\n"
            "pa_b length=1024 index=off\n\n[main]\npa_c balance=1.25\n")
        self.assertEqual(arms, {"pa_a": "threshold=20",
                                "pa_b": "length=1024 index=off",
                                "pa_c": "balance=1.25"})
        self.assertEqual(groups, {"main": ["pa_a", "pa_c"],
                                  "sensitivity": ["pa_b"]})
        for bad in ("[other]\n", "pa_a x\npa_a y\n", "round_robin x=1\n",
                    "pa;x a=1\n", "pa_x a=1;\n", "pa_x a={\n"):
            with self.assertRaises(ValueError, msg=bad):
                self.run.parse_arms(bad)

    def test_the_repository_arms_file(self):
        with open(self.run.ARMS_FILE) as f:
            arms, groups = self.run.parse_arms(f.read())
        self.assertIn("pa_threshold_20", groups["sensitivity"])

    def test_merge(self):
        m = self.run.merge_params
        base = ["length=4096", "threshold=10", "format=auto"]
        self.assertEqual(m(base, []), "length=4096 threshold=10 format=auto")
        self.assertEqual(m(base, ["threshold=20", "index=off"]),
                         "length=4096 threshold=20 format=auto index=off")
        self.assertEqual(m(base, ["threshold="]), "length=4096 format=auto")
        self.assertEqual(m(base, ["flag"]),
                         "length=4096 threshold=10 format=auto flag")

    def test_directives(self):
        run = self.run
        run.load_arms(None, ["pa_off index=off threshold=", "pa_t4 threshold=4"])
        o = Opts()
        self.assertEqual(run.pa_directive(o),
                         "prefix_aware length=4096 threshold=10 format=auto "
                         "index=off;")
        self.assertEqual(run.pa_directive(o, "pa_off"),
                         "prefix_aware length=4096 format=auto index=off;")
        self.assertEqual(run.pa_directive(o, "pa_t4"),
                         "prefix_aware length=4096 threshold=4 format=auto "
                         "index=off;")
        self.assertEqual(run.pa_directive(o, "prefix_aware@threshold=20+length=2048"),
                         "prefix_aware length=2048 threshold=20 format=auto "
                         "index=off;")
        self.assertTrue(run.is_pa("pa_t4"))
        self.assertTrue(run.is_pa("prefix_aware@threshold=4"))
        self.assertFalse(run.is_pa("least_conn"))
        self.assertFalse(run.is_pa("pooled"))
        self.assertEqual(run.ARM_GROUPS["main"], ["pa_off", "pa_t4"])
        self.assertIn("threshold=4", run.label("pa_t4"))
        # the simulator's cache, and values that many times off
        run.load_arms(None, ["pa_kv capacity=@kv", "pa_x4 capacity=@kv*4",
                             "pa_q4 capacity=@kv/4"])
        o.kv_blocks = 2048
        tokens = 2048 * run.llmsim.BLOCK_TOKENS
        for arm, cap in (("pa_kv", tokens), ("pa_x4", 4 * tokens),
                         ("pa_q4", tokens // 4)):
            self.assertIn(" capacity=%d" % cap, run.pa_directive(o, arm))
        # the base arm can be redefined
        run.load_arms(None, ["prefix_aware threshold=12 index=auto"])
        self.assertEqual(run.pa_directive(o),
                         "prefix_aware length=4096 threshold=12 format=auto "
                         "index=auto;")


def fake(strategy, seed, **kw):
    r = {"strategy": strategy, "seed": seed, "ok": 10, "n": 10,
         "hit_rate": 0.3, "ttft_p50": 0.2, "ttft_p90": 1.0, "ttft_p99": 2.0,
         "ttft_mean": 0.4, "balance_req": 1.0, "balance_peak": 1.0,
         "req_per_s": 10.0, "out_tok_per_s": 1000.0}
    r.update(kw)
    return r


class TestAggregate(unittest.TestCase):
    def test_med_range(self):
        import run
        self.assertEqual(run.med_range([3, 1, 2]), (2, 1, 3))
        self.assertEqual(run.med_range([4, 1, 2, 3]), (2.5, 1, 4))
        self.assertEqual(run.med_range([None, float("nan"), 5]), (5, 5, 5))
        self.assertIsNone(run.med_range([]))

    def test_ratios_within_each_seed(self):
        import run
        seeds = []
        # round robin's TTFT differs per seed; prefix_aware is half of it in
        # every seed, the pooled bound a third
        for seed, base in ((1, 0.2), (2, 0.4), (3, 0.8)):
            seeds.append({"seed": seed, "ideal": 0.6, "results": [
                fake("round_robin", seed, ttft_p50=base, hit_rate=0.3),
                fake("prefix_aware", seed, ttft_p50=base / 2, hit_rate=0.45,
                     ttft_p90=1.5 if seed == 3 else 1.1),
                fake("pooled", seed, ttft_p50=base / 3, hit_rate=0.57)]})
        agg = run.aggregate(seeds, ["round_robin", "prefix_aware", "pooled"])
        pa = agg["prefix_aware"]
        self.assertEqual(pa["ttft_p50"], (0.2, 0.1, 0.4))
        for x in pa["ttft_p50_rr"]:
            self.assertAlmostEqual(x, 0.5)
        self.assertAlmostEqual(pa["ttft_p50_pooled"][0], 1.5)
        self.assertAlmostEqual(pa["hit_of_ideal"][0], 0.75)
        self.assertAlmostEqual(pa["hit_rate_rr"][0], 1.5)
        self.assertEqual((pa["ok"], pa["n"], pa["seeds"]), (30, 30, 3))
        self.assertAlmostEqual(agg["ideal"]["hit_rate"][0], 0.6)
        # P90: 1.1 against the bound's 1.0 in two seeds, 1.5 in one
        self.assertTrue(run.within_cell(pa, "ttft_p90").startswith("yes 1.10 (2/3)"))
        self.assertTrue(run.within_cell(pa, "ttft_p50").startswith("no 1.50 (0/3)"))
        t = run.agg_table(agg, ["round_robin", "prefix_aware", "pooled"])
        self.assertIn("| 0.50 |", t)                  # P50 x RR, no range
        self.assertIn("75%", t)
        self.assertIn("bound", t)
        self.assertIn("60.0%", t)                     # the ideal row
        self.assertIn("0.133 (0.067..0.267)", run.agg_abs_table(agg, ["pooled"]))
        self.assertEqual(run.fmt_mr((0.5, 0.4, 0.7)), "0.50 (0.40..0.70)")

    def test_missing_baselines(self):
        import run
        agg = run.aggregate([{"seed": 1, "ideal": 0.5, "results": [
            fake("prefix_aware", 1)]}], ["prefix_aware", "round_robin"])
        self.assertNotIn("round_robin", agg)
        self.assertIsNone(agg["prefix_aware"]["ttft_p50_rr"])
        self.assertEqual(run.within_cell(agg["prefix_aware"], "ttft_p50"), "-")
        run.agg_table(agg, ["prefix_aware"])

    def test_ports_per_seed(self):
        import run

        class O:
            instances = 4
            base_port = 0
        # free ports when there is no base
        self.assertEqual(len(run.bench_ports(O(), 2)), 5)
        O.base_port = 29100
        if not all(run.port_free(p) for p in range(29100, 29115)):
            self.skipTest("ports 29100..29114 busy")
        self.assertEqual(run.bench_ports(O(), 0), list(range(29100, 29105)))
        self.assertEqual(run.bench_ports(O(), 2), list(range(29110, 29115)))

    def test_seeds(self):
        import run
        self.assertEqual(run.parse_seeds("3"), (3, None))
        self.assertEqual(run.parse_seeds("4,9"), (0, [4, 9]))

        class O:
            seed_list = None
            seed = None
            nseeds = 3
        self.assertEqual(run.seeds_for("rag", O()),
                         [workloads.PARAMS["rag"]["seed"] + i for i in range(3)])
        O.seed = 10
        self.assertEqual(run.seeds_for("tenants", O()), [10, 11, 12])


class TestIdeal(unittest.TestCase):
    def test_ideal(self):
        import run
        w = workloads.generate("templated", n=100)
        big = run.ideal_hit_rate(w.requests, 10 ** 6)
        small = run.ideal_hit_rate(w.requests, 50)
        self.assertGreater(big, 0.7)
        self.assertLess(small, big)



class TestTrace(unittest.TestCase):
    def test_trace(self):
        import tempfile
        import run
        w = workloads.generate("chat", n=5)
        recs = [run.Rec(i) for i in range(5)]
        for i, r in enumerate(recs):
            r.t_send = 100.0 + w.requests[i].t * 0.5 + 0.01
            r.t_first = r.t_send + 0.02
            r.status = 200
            r.instance = "i%d" % (i % 2)
            r.prompt, r.cached = 1000 + i, 16 * i
            r.route, r.depth = "affinity", str(i)

        class O:
            time_scale = 0.5
        with tempfile.TemporaryDirectory() as d:
            run.write_trace(d, "pa_v2", w, w.requests, recs, 100.0, O())
            path = os.path.join(d, "chat-pa_v2-%s.jsonl" % w.params["seed"])
            lines = [json.loads(x) for x in open(path)]
        self.assertEqual(len(lines), 5)
        self.assertEqual([x["instance"] for x in lines],
                         ["i0", "i1", "i0", "i1", "i0"])
        self.assertEqual(lines[3]["cached"], 48)
        self.assertEqual(lines[3]["depth"], "3")
        self.assertEqual(lines[2]["session"], w.requests[2].session)
        self.assertAlmostEqual(lines[1]["ttft"], 0.04)
        self.assertAlmostEqual(lines[1]["wait"], 0.02)


if __name__ == "__main__":
    unittest.main()


class TestHosts(unittest.TestCase):
    """--hosts and --bypass: where each request is sent."""

    class O:
        seed = 7
        bypass = 0.3
        engine_urls = ["e0", "e1", "e2", "e3"]

    def test_spread_over_hosts_and_bypass(self):
        import run
        reqs = list(range(4000))
        urls = run.spread(["h0", "h1", "h2", "h3"], reqs, self.O())
        n = collections.Counter(urls)
        bypass = sum(v for k, v in n.items() if k.startswith("e"))
        self.assertAlmostEqual(bypass / 4000.0, 0.3, delta=0.03)
        for h in ("h0", "h1", "h2", "h3"):
            self.assertAlmostEqual(n[h] / 4000.0, 0.7 / 4, delta=0.03)
        for e in self.O.engine_urls:
            self.assertGreater(n[e], 0)
        # the same spread for every strategy of a seed
        self.assertEqual(urls, run.spread(["h0", "h1", "h2", "h3"], reqs,
                                          self.O()))

    def test_one_router_no_bypass(self):
        import run

        class O:
            seed = 1
            bypass = 0.0
            engine_urls = ["e0"]
        self.assertEqual(run.spread("u", [1, 2, 3], O()), ["u", "u", "u"])

    def test_hosts_table_routed_apart(self):
        """with a bypass, the routed requests' P90 x rr over the P90 x rr
        of the same hosts without bypass"""
        import run

        def agg(p90_rr, routed_p90_rr):
            a = {k: (1.0, 1.0, 1.0) for k in (
                "hit_rate", "ttft_p50", "ttft_p90", "ttft_p50_rr",
                "ttft_p99_rr", "balance_req")}
            a.update(n=10, ok=10, ttft_p90_rr=(p90_rr, p90_rr, p90_rr))
            if routed_p90_rr is not None:
                a["ttft_routed_p90_rr"] = (routed_p90_rr,) * 3
            return a
        by_cond = {(4, 0.0): {"pa_v2": agg(0.60, 0.60)},
                   (4, 0.3): {"pa_v2": agg(0.90, 0.63)}}
        rows = run.hosts_table("chat", by_cond, ["pa_v2"]).split("\n")
        cells = [c.strip() for c in rows[3].split("|")]
        self.assertEqual(cells[3], "30 %")
        self.assertEqual(cells[14], "0.63")
        self.assertEqual(cells[16], "1.05")
        # no bypass: no ratio of its own
        self.assertEqual([c.strip() for c in rows[2].split("|")][16], "-")



# ---------------------------------------------------------------------------
# the Responses and Anthropic Messages APIs (bench/sim/apis.py)

import apis  # noqa: E402


SYS = "You are an agent. " * 20
TOOL = {"name": "read_file", "description": "Read a file",
        "parameters": {"type": "object", "required": ["path"]}}


class TestApiRender(unittest.TestCase):
    def test_chat_without_tools_as_before(self):
        msgs = [{"role": "system", "content": "s"},
                {"role": "user", "content": [{"type": "text", "text": "u"}]},
                "not a message"]
        self.assertEqual(
            llmsim.chat_template(msgs),
            "<|begin_of_text|>"
            "<|start_header_id|>system<|end_header_id|>\n\ns<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nu<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n")

    def test_one_conversation_one_prompt_in_each_shape(self):
        chat = json.dumps({
            "messages": [{"role": "system", "content": SYS},
                         {"role": "user", "content": "hello"}],
            "tools": [{"type": "function", "function": TOOL}]}).encode()
        resp = json.dumps({
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "hello"}]}],
            "instructions": SYS,
            "tools": [dict(TOOL, type="function")]}).encode()
        resp_str = json.dumps({"instructions": SYS, "input": "hello",
                               "tools": [dict(TOOL, type="function")]}).encode()
        anth = json.dumps({
            "system": [{"type": "text", "text": SYS,
                        "cache_control": {"type": "ephemeral"}}],
            "max_tokens": 5,
            "tools": [{"name": "read_file", "description": "Read a file",
                       "input_schema": TOOL["parameters"]}],
            "messages": [{"role": "user", "content": "hello"}]}).encode()
        a = llmsim.parse_prompt("/v1/chat/completions", chat)[0]
        b = llmsim.parse_prompt("/v1/responses", resp)[0]
        c = llmsim.parse_prompt("/v1/responses", resp_str)[0]
        d, mt, _, kind, _ = llmsim.parse_prompt("/v1/messages", anth)
        self.assertEqual(a, b)
        self.assertEqual(a, c)
        self.assertEqual(a, d)
        self.assertEqual((mt, kind), (5, "messages"))
        # the tools after the system prompt, before the conversation
        self.assertLess(a.index(b"read_file"), a.index(b"hello"))
        self.assertLess(a.index(SYS.encode()), a.index(b"read_file"))

    def test_items(self):
        self.assertEqual(apis.responses_items([
            {"type": "function_call", "name": "f", "arguments": "{}",
             "call_id": "c"},
            {"type": "function_call_output", "call_id": "c", "output": "42"},
            {"type": "reasoning", "summary": [{"type": "summary_text",
                                               "text": "why"}]},
            {"type": "item_reference", "id": "x"}]),
            [("assistant", "f{}"), ("tool", "42"), ("assistant", "why"),
             ("", "")])
        self.assertEqual(apis.anthropic_messages({"messages": [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t", "name": "f",
                 "input": {"a": 1}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t",
                 "content": [{"type": "text", "text": "r"}]}]}]}),
            [("assistant", 'f{"a":1}'), ("user", "r")])

    def test_bad_bodies(self):
        for path, body in (("/v1/responses", {"model": "m"}),
                           ("/v1/responses", {"input": 3}),
                           ("/v1/responses", {"input": "x",
                                              "instructions": 1}),
                           ("/v1/messages", {"messages": []}),
                           ("/v1/messages", {"max_tokens": 1})):
            with self.assertRaises(ValueError, msg=repr(body)):
                llmsim.parse_prompt(path, json.dumps(body).encode())

    def test_previous_response(self):
        st = apis.Store()
        st.put("resp_a", {"status": "completed"},
               [("system", "S"), ("user", "one")])
        st.finish("resp_a", {"status": "completed"}, "answer")
        body = json.dumps({"previous_response_id": "resp_a",
                           "input": "two"}).encode()
        data = llmsim.parse_prompt("/v1/responses", body, st)[0]
        first = apis.render([("system", "S"), ("user", "one")])
        # the stored conversation, its answer, then the new input
        self.assertTrue(data.startswith(first[:-len(apis.ASSISTANT)]
                                        .encode()))
        self.assertIn(b"answer", data)
        self.assertTrue(data.index(b"answer") < data.index(b"two"))
        with self.assertRaises(apis.NotFound):
            llmsim.parse_prompt("/v1/responses", json.dumps(
                {"previous_response_id": "resp_b", "input": "x"}).encode(),
                st)
        # a router's look at the body: no store, the new input only
        self.assertNotIn(b"answer",
                         llmsim.parse_prompt("/v1/responses", body)[0])


class SimArgs(Args):
    kv_blocks = 1024
    max_model_len = 131072
    stream_interval = 0.0
    time_scale = 0.01


def sse_events(text):
    return [ln[len("event: "):] for ln in text.split("\n")
            if ln.startswith("event: ")]


class TestApiServer(unittest.TestCase):
    """Two instances answering the Responses and Messages APIs over
    HTTP, each with its own store."""

    def run_with(self, fn):
        from aiohttp.test_utils import TestClient, TestServer

        async def go():
            insts = [llmsim.Instance(n, 0, SimArgs()) for n in ("a", "b")]
            tasks = [asyncio.ensure_future(i.run()) for i in insts]
            clients = []
            for inst in insts:
                c = TestClient(TestServer(llmsim.make_app(inst, SimArgs())))
                await c.start_server()
                clients.append(c)
            try:
                return await fn(*clients)
            finally:
                for c in clients:
                    await c.close()
                for t in tasks:
                    t.cancel()
        return asyncio.run(go())

    def test_responses_store(self):
        async def fn(a, b):
            out = {}
            r = await a.post("/v1/responses", json={
                "model": "m", "instructions": SYS, "input": "hi",
                "max_output_tokens": 3})
            first = await r.json()
            out["first"] = first
            r = await a.post("/v1/responses", json={
                "model": "m", "previous_response_id": first["id"],
                "input": "more", "max_output_tokens": 3})
            out["second"] = await r.json()
            r = await b.post("/v1/responses", json={
                "previous_response_id": first["id"], "input": "x"})
            out["other"] = (r.status, await r.json())
            r = await b.get("/v1/responses/" + first["id"])
            out["other_get"] = r.status
            r = await a.get("/v1/responses/" + first["id"])
            out["get"] = (r.status, await r.json())
            r = await a.post("/v1/responses/%s/cancel" % first["id"])
            out["cancel_done"] = r.status
            r = await a.delete("/v1/responses/" + first["id"])
            out["delete"] = (r.status, await r.json())
            r = await a.get("/v1/responses/" + first["id"])
            out["after_delete"] = r.status
            r = await a.post("/v1/responses", json={
                "input": "no store", "store": False, "max_output_tokens": 2})
            nostore = await r.json()
            r = await a.get("/v1/responses/" + nostore["id"])
            out["nostore_get"] = r.status
            r = await a.post("/v1/responses", json={
                "input": "bg", "background": True,
                "max_output_tokens": 4000})
            bg = await r.json()
            r = await a.post("/v1/responses/%s/cancel" % bg["id"])
            out["bg"] = (bg["status"], r.status, (await r.json())["status"])
            return out
        out = self.run_with(fn)
        first, second = out["first"], out["second"]
        self.assertEqual(first["status"], "completed")
        self.assertTrue(first["id"].startswith("resp_"))
        self.assertEqual(first["output"][0]["content"][0]["type"],
                         "output_text")
        self.assertEqual(second["previous_response_id"], first["id"])
        # the stored conversation is the second turn's cached prefix
        self.assertGreaterEqual(
            second["usage"]["input_tokens_details"]["cached_tokens"],
            first["usage"]["input_tokens"] - 16)
        self.assertGreater(second["usage"]["input_tokens"],
                           first["usage"]["input_tokens"])
        self.assertEqual(out["other"][0], 404)
        self.assertEqual(out["other"][1]["error"]["message"],
                         "Response with id '%s' not found." % first["id"])
        self.assertEqual(out["other_get"], 404)
        self.assertEqual(out["get"][0], 200)
        self.assertEqual(out["get"][1]["id"], first["id"])
        self.assertEqual(out["cancel_done"], 400)
        self.assertEqual(out["delete"], (200, {"id": first["id"],
                                               "object": "response",
                                               "deleted": True}))
        self.assertEqual(out["after_delete"], 404)
        self.assertEqual(out["nostore_get"], 404)
        self.assertEqual(out["bg"], ("queued", 200, "cancelled"))

    def test_responses_stream(self):
        async def fn(a, b):
            r = await a.post("/v1/responses", json={
                "input": "hi", "stream": True, "max_output_tokens": 3})
            return r.headers["Content-Type"], await r.text()
        ctype, text = self.run_with(fn)
        self.assertTrue(ctype.startswith("text/event-stream"))
        self.assertEqual(sse_events(text), [
            "response.created", "response.in_progress",
            "response.output_item.added", "response.content_part.added"]
            + ["response.output_text.delta"] * 3 + [
            "response.output_text.done", "response.content_part.done",
            "response.output_item.done", "response.completed"])
        datas = [json.loads(ln[6:]) for ln in text.split("\n")
                 if ln.startswith("data: ")]
        self.assertEqual([d["sequence_number"] for d in datas],
                         list(range(len(datas))))
        done = datas[-1]["response"]
        self.assertEqual(done["status"], "completed")
        self.assertEqual(done["output"][0]["content"][0]["text"], "".join(
            d["delta"] for d in datas
            if d["type"] == "response.output_text.delta"))
        self.assertEqual(done["id"], datas[0]["response"]["id"])

    def test_messages(self):
        body = {"model": "m", "system": SYS, "max_tokens": 3,
                "tools": [{"name": "f", "input_schema": {}}],
                "messages": [{"role": "user", "content": "hi"}]}

        async def fn(a, b):
            r = await a.post("/v1/messages", json=body)
            m = await r.json()
            r = await a.post("/v1/messages", json=dict(body, stream=True))
            text = await r.text()
            r = await a.post("/v1/messages/count_tokens", json=body)
            ct = await r.json()
            r = await a.post("/v1/messages", json={"messages": []})
            bad = (r.status, await r.json())
            return m, text, ct, bad
        m, text, ct, bad = self.run_with(fn)
        self.assertEqual((m["type"], m["role"], m["stop_reason"]),
                         ("message", "assistant", "max_tokens"))
        self.assertEqual(m["usage"]["output_tokens"], 3)
        self.assertEqual(ct["input_tokens"], m["usage"]["input_tokens"])
        self.assertEqual(sse_events(text), [
            "message_start", "content_block_start", "ping"]
            + ["content_block_delta"] * 3 + [
            "content_block_stop", "message_delta", "message_stop"])
        self.assertIn('"cache_read_input_tokens":', text)
        self.assertEqual(bad[0], 400)
        self.assertEqual(bad[1]["type"], "error")


class TestAgenticShapes(unittest.TestCase):
    def test_same_conversations_in_each_api(self):
        ws = {sh: workloads.generate("agentic", n=40, shape=sh)
              for sh in workloads.SHAPES}
        chat = ws["chat"].requests
        for sh, w in ws.items():
            self.assertEqual([(r.t, r.session, r.turn) for r in w.requests],
                             [(r.t, r.session, r.turn) for r in chat], sh)
            self.assertEqual({r.path for r in w.requests},
                             {workloads.SHAPE_PATHS[sh]})
        for i in (0, 7, 39):
            a = llmsim.parse_prompt(chat[i].path, chat[i].body)[0]
            for sh in ("responses", "messages"):
                r = ws[sh].requests[i]
                b = llmsim.parse_prompt(r.path, r.body)[0]
                # system prompt and task alike, tool calls rendered in
                # each API's own way: within 1 % of the length
                self.assertEqual(a[:1000], b[:1000])
                self.assertLess(abs(len(a) - len(b)), len(a) / 100)

    def test_stored_turns_continue_the_last_answer(self):
        w = workloads.generate("agentic", n=60, shape="stored")
        seen = set()
        for r in w.requests:
            obj = json.loads(r.body)
            self.assertIs(obj["store"], True)
            if r.session in seen:
                self.assertEqual(obj["previous_response_id"],
                                 workloads.PREV_PLACEHOLDER)
                self.assertEqual([i["type"] for i in obj["input"]],
                                 ["function_call_output"])
                self.assertNotIn("instructions", obj)
            else:
                # an agent's first turn sent: its whole history
                self.assertNotIn("previous_response_id", obj)
                self.assertIn("instructions", obj)
                self.assertEqual(len(obj["input"]), 1 + 2 * r.turn)
            seen.add(r.session)

    def test_unknown_shape(self):
        with self.assertRaises(ValueError):
            workloads.generate("agentic", n=5, shape="grpc")


# ---------------------------------------------------------------------------
# issue 45's priority bands: the prio workload, its header, bench/prio_report


class TestPrio(unittest.TestCase):
    def test_share_and_stream(self):
        for seed in (9, 10, 11):
            w = workloads.generate("prio", seed=seed)
            n = len(w.requests)
            high = [r for r in w.requests if r.priority == 1]
            self.assertEqual(len(high), round(0.1 * n))
            self.assertEqual(len(high) + sum(
                1 for r in w.requests if r.priority == 0), n)
            # drawn whatever the tenant: every tenant has some
            self.assertEqual(len(set(r.group for r in high)), 8)
            # over the run, not bunched: a tenth in each half, within 3 %
            half = [r for r in high if r.t < w.requests[n // 2].t]
            self.assertAlmostEqual(len(half) / (n / 2.0), 0.1, delta=0.03)
            # noisy_equal's stream, the same requests high at both rates
            eq = workloads.generate("noisy_equal", seed=seed, rate=23.0)
            self.assertEqual([r.body for r in w.requests],
                             [r.body for r in eq.requests])
            fast = workloads.generate("prio", seed=seed, rate=44.0)
            self.assertEqual([r.priority for r in w.requests],
                             [r.priority for r in fast.requests])
            self.assertLess(fast.requests[-1].t, w.requests[-1].t)
        other = workloads.generate("prio", seed=12)
        self.assertNotEqual([r.priority for r in other.requests],
                            [r.priority for r in w.requests])
        share = workloads.generate("prio", n=400, high_share=0.25)
        self.assertEqual(sum(r.priority for r in share.requests),
                         round(0.25 * len(share.requests)))
        # an overload workload: not in make bench's list; the others send
        # no band
        self.assertNotIn("prio", workloads.NAMES)
        self.assertIsNone(workloads.generate("chat", n=3).requests[0]
                          .priority)

    def test_headers(self):
        import run
        from aiohttp import web
        from aiohttp.test_utils import TestServer
        seen = []

        async def handler(request):
            seen.append(dict(request.headers))
            return web.Response(text="data: {}\n\ndata: [DONE]\n\n",
                                content_type="text/event-stream")

        w = workloads.generate("prio", n=40)
        reqs = [next(r for r in w.requests if r.priority == 1),
                next(r for r in w.requests if r.priority == 0),
                workloads.generate("chat", n=1).requests[0]]

        async def go():
            import aiohttp
            app = web.Application()
            app.router.add_post("/{tail:.*}", handler)
            srv = TestServer(app)
            await srv.start_server()
            try:
                async with aiohttp.ClientSession() as s:
                    for i, q in enumerate(reqs):
                        rec = run.Rec(i)
                        await run._do_request(s, str(srv.make_url("")),
                                              q, q.body, rec, 10)
                        self.assertEqual(rec.status, 200)
            finally:
                await srv.close()
        asyncio.run(go())
        self.assertEqual(seen[0]["X-Bench-Priority"], "1")
        self.assertEqual(seen[1]["X-Bench-Priority"], "0")
        self.assertNotIn("X-Bench-Priority", seen[2])
        self.assertEqual(seen[0]["X-Bench-Group"], reqs[0].group)

    def test_trace_band(self):
        import tempfile
        import run
        w = workloads.generate("prio", n=40)
        recs = [run.Rec(i) for i in range(40)]
        for i, r in enumerate(recs):
            r.t_send = 100.0 + w.requests[i].t * 0.5
            r.t_first = r.t_send + 0.1
            r.t_done = r.t_send + 0.5
            r.status = 200

        class O:
            time_scale = 0.5
        with tempfile.TemporaryDirectory() as d:
            run.write_trace(d, "pa_v2", w, w.requests, recs, 100.0, O())
            with open(os.path.join(
                    d, "prio-pa_v2-%s.jsonl" % w.params["seed"])) as f:
                lines = [json.loads(x) for x in f]
        self.assertEqual([x["band"] for x in lines],
                         [r.priority for r in w.requests])
        self.assertIn(1, [x["band"] for x in lines])
        self.assertAlmostEqual(lines[3]["done"], w.requests[3].t + 1.0)


def _prio_trace(path, rows):
    """rows: (band, status, ttft, done); t = the row's index."""
    with open(path, "w") as f:
        for i, (band, status, ttft, done) in enumerate(rows):
            f.write(json.dumps(dict(
                i=i, t=float(i), group="tenant%d" % (i % 8), band=band,
                status=status, ttft=ttft, wait=0.0 if ttft else None,
                queued=None, prompt=None, cached=None, done=done)) + "\n")


class TestPrioReport(unittest.TestCase):
    """bench/prio_report.py on traces whose figures are worked by hand."""

    def setUp(self):
        import tempfile
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.main = os.path.join(d, "main")
        self.base = os.path.join(d, "base")
        os.makedirs(self.main)
        os.makedirs(self.base)
        # overload, seed 1: high answered 1..5 s, one high 429; low
        # answered 0.5..2 s, two 429, one 502; the last answer ends at 12
        rows = [(1, 200, 1.0, 2.0), (1, 200, 2.0, 4.0), (1, 200, 3.0, 6.0),
                (1, 200, 4.0, 8.0), (1, 200, 5.0, 12.0), (1, 429, None, 5.0),
                (0, 200, 0.5, 7.0), (0, 200, 1.0, 8.0), (0, 200, 1.5, 9.0),
                (0, 200, 2.0, 10.0), (0, 429, None, 10.5),
                (0, 429, None, 10.6), (0, 502, None, 11.0)]
        _prio_trace(os.path.join(self.main, "prio-pa_qp-1.jsonl"), rows)
        # seed 2: the high band's TTFT twice seed 1's (2..10 s); done
        # missing: the span ends at the last first token (t + ttft)
        rows2 = [(b, s, (x * 2 if b == 1 and x else x), None)
                 for b, s, x, _ in rows]
        _prio_trace(os.path.join(self.main, "prio-pa_qp-2.jsonl"), rows2)
        # baseline, both seeds: high 1, 1, 2, 2, 2 s, low 0.5 s each
        base = [(1, 200, 1.0, 2.0), (1, 200, 1.0, 2.0), (1, 200, 2.0, 3.0),
                (1, 200, 2.0, 4.0), (1, 200, 2.0, 5.0)] + [
                (0, 200, 0.5, 6.0)] * 4
        for s in (1, 2):
            _prio_trace(os.path.join(self.base, "prio-pa_qp-%d.jsonl" % s),
                        base)

    def tearDown(self):
        self.tmp.cleanup()

    def test_figures(self):
        import prio_report
        f, g = prio_report.figures(
            os.path.join(self.main, "prio-pa_qp-1.jsonl"), 2.0)
        # high 1..5: P50 3, P90 4 + 0.6, P99 4 + 0.96
        self.assertAlmostEqual(f[1]["p50"], 3.0)
        self.assertAlmostEqual(f[1]["p90"], 4.6)
        self.assertAlmostEqual(f[1]["p99"], 4.96)
        # low 0.5..2: P50 1.25, P90 1.85, P99 1.985
        self.assertAlmostEqual(f[0]["p50"], 1.25)
        self.assertAlmostEqual(f[0]["p90"], 1.85)
        self.assertAlmostEqual(f[0]["p99"], 1.985)
        self.assertEqual((f[1]["n"], f[1]["shed"], f[1]["other"]),
                         (5, 1, 0))
        self.assertEqual((f[0]["n"], f[0]["shed"], f[0]["other"]),
                         (4, 2, 1))
        # within 2 s: 1, 2 (high) and the 4 low; 13 offered; span 0..12
        self.assertEqual((g["good"], g["offered"]), (6, 13))
        self.assertAlmostEqual(g["span"], 12.0)
        self.assertAlmostEqual(g["rate"], 0.5)
        self.assertAlmostEqual(g["share"], 6 / 13.0)
        # seed 2: no "done": the last first token, t 4 + ttft 10 = 14
        f2, g2 = prio_report.figures(
            os.path.join(self.main, "prio-pa_qp-2.jsonl"), 2.0)
        self.assertAlmostEqual(g2["span"], 14.0)
        self.assertEqual(g2["good"], 5)      # high: only the 2 s one
        self.assertAlmostEqual(f2[1]["p90"], 9.2)

    def test_report(self):
        import prio_report
        out = prio_report.report(self.main, self.base, 2.0).split("\n")
        row = [c.strip() for c in out[2].split("|")]
        self.assertEqual(row[1:4], ["pa_qp", "1", "3.000 / 4.600 / 4.960"])
        # over the baseline's high 2 / 2 / 2 and low 0.5 / 0.5 / 0.5
        self.assertEqual(row[4], "1.50 / 2.30 / 2.48")
        self.assertEqual(row[5], "1.250 / 1.850 / 1.985")
        self.assertEqual(row[6], "2.50 / 3.70 / 3.97")
        self.assertEqual(row[7:12], ["5 / 4", "1 / 2", "1", "0.50",
                                     "46.2 %"])
        med = out[out.index(next(x for x in out if x.startswith(
            "| arm | seeds |"))) + 2]
        cells = [c.strip() for c in med.split("|")]
        # high P90 x base: 2.30 and 4.60
        self.assertEqual(cells[4], "3.45 (2.30..4.60)")
        self.assertEqual(cells[6], "6.90 (4.60..9.20)")
        self.assertEqual(cells[8], "3.70 (3.70..3.70)")
        self.assertEqual(cells[-2], "0 of 2 seeds")
        base = [x for x in out if x.startswith("| pa_qp |")][-1]
        self.assertIn("2.000 / 2.000 / 2.000", base)
        # another arm's baseline: none in the folder, no ratios
        other = prio_report.report(self.main, self.base, 2.0,
                                   base_arm="pa_v2").split("\n")
        self.assertEqual([c.strip() for c in other[2].split("|")][4], "-")


class TestPairTrace(unittest.TestCase):
    """bench/pair_trace.py: the same requests under two arms, the slowest
    of B said why"""

    def req(self, i, t, inst, prompt, cached, ttft):
        return {"i": i, "t": t, "instance": inst, "prompt": prompt,
                "cached": cached, "ttft": ttft, "wait": 0.0,
                "route": "affinity", "depth": "1", "session": i,
                "done": t + ttft + 0.5}

    def test_why(self):
        import pair_trace
        a, b = {}, {}
        # 20 quick requests on their own servers in both arms
        for i in range(20):
            q = 0.010 + 0.001 * i
            a[i] = self.req(i, float(i), "s%d" % (i % 4), 1000, 900, q)
            b[i] = self.req(i, float(i), "s%d" % (i % 4), 1000, 900, q)
        # 20: B computed it cold (compute)
        a[20] = self.req(20, 20.0, "s0", 8000, 7900, 0.03)
        b[20] = self.req(20, 20.0, "s1", 8000, 0, 1.0)
        # 21: B sent it behind a long prefill on its server (queue)
        a[21] = self.req(21, 20.5, "s2", 1000, 900, 0.02)
        b[21] = self.req(21, 20.5, "s1", 1000, 900, 0.9)
        self.assertEqual(pair_trace.ahead(b)[21], 8000)
        self.assertEqual(pair_trace.ahead(a)[21], 0)
        lines = pair_trace.report(a, b, margin=512, nlist=5)
        text = "\n".join(lines)
        self.assertIn("B's requests at or over its P90", text)
        self.assertRegex(text, r"P90 \([0-9.]+ s\): 3; compute 1, queue 1, "
                               r"slow in A too 1")
        rows = [x for x in lines if x.startswith("| 2")]
        self.assertTrue(rows[0].startswith("| 20 |"))
        self.assertTrue(rows[0].endswith("| compute |"))
        self.assertTrue(rows[1].startswith("| 21 |"))
        self.assertTrue(rows[1].endswith("| queue |"))
        # sessions: turns 1 and 2 of session 100; in B turn 2 moved
        for arm, inst in ((a, "s0"), (b, "s1")):
            for turn, t in enumerate((30.0, 31.0, 32.0)):
                r = self.req(100 + turn, t, "s0", 2000, 1500, 0.02)
                r["session"], r["turn"] = 100, turn
                if turn == 2:
                    r["instance"], r["cached"] = inst, 1500 if arm is a \
                        else 0
                arm[100 + turn] = r
        text = "\n".join(pair_trace.report(a, b))
        self.assertIn("A: of 2 later turns, 0 moved", text)
        self.assertIn("B: of 2 later turns, 1 moved (2000 tokens computed",
                      text)
        # the same trace twice: no extra time, nothing "compute"/"queue"
        same = "\n".join(pair_trace.report(b, b))
        tail = [x for x in same.split("\n") if "at or over its P90" in x]
        self.assertNotIn("compute", tail[0])
        self.assertIn("0.000 s in all", same)

    def test_nginx_queue_and_only(self):
        import pair_trace
        a, b = {}, {}
        for i in range(20):
            q = 0.010 + 0.001 * i
            a[i] = self.req(i, float(i), "s%d" % (i % 4), 1000, 900, q)
            b[i] = dict(self.req(i, float(i), "s%d" % (i % 4), 1000, 900,
                                 q), band=0)
        # 20: B held it 0.8 s in the module's queue, then quick
        a[20] = self.req(20, 20.0, "s0", 1000, 900, 0.02)
        b[20] = dict(self.req(20, 20.0, "s0", 1000, 900, 0.83), band=1,
                     queued=0.8)
        # 21: B behind an 8,000-token prefill that reached the server
        # after it had waited: not ahead of 20 (sent at 20.8)
        a[21] = self.req(21, 20.1, "s2", 1000, 900, 0.02)
        b[21] = dict(self.req(21, 20.1, "s0", 8000, 0, 0.9), band=0)
        text = "\n".join(pair_trace.report(a, b, nlist=5))
        self.assertRegex(text, r"P90 \([0-9.]+ s\): 3; nginx queue 1, "
                               r"compute 1, slow in A too 1")
        self.assertIn("| 1 / 0 | 0.800 / 0.000 | nginx queue |", text)
        self.assertEqual(pair_trace.ahead(b)[20], 8000)
        # in flight on s0 when 20 came (20.8): 21 (sent 20.1, done 21.5)
        self.assertEqual(pair_trace.in_flight(b)[20], 1)
        self.assertEqual(pair_trace.in_flight(a)[20], 0)
        only = pair_trace.parse_only(["band=1"])
        text = "\n".join(pair_trace.report(a, b, only=only))
        self.assertIn("B: 1 requests", text)
        only = pair_trace.parse_only(["band!=1"])
        self.assertIn("B: 21 requests",
                      "\n".join(pair_trace.report(a, b, only=only)))
        self.assertRaises(ValueError, pair_trace.parse_only, ["band"])


class TestKvDemand(unittest.TestCase):
    """bench/kv_demand.py: a server's KV demand when each request came"""

    def req(self, i, t, group, prompt, cached, ttft, done, mt=300,
            inst="s0", queued=0.0):
        return {"i": i, "t": t, "wait": 0.0, "queued": queued,
                "instance": inst, "group": group, "prompt": prompt,
                "cached": cached, "ttft": ttft, "done": done,
                "max_tokens": mt, "status": 200, "band": 0}

    def test_demand(self):
        import kv_demand
        reqs = {
            # two of tenant a (3,000 shared), one of b, on s0
            0: self.req(0, 0.0, "a", 3200, 3000, 0.02, 10.0),
            1: self.req(1, 1.0, "a", 3100, 3000, 0.02, 10.0),
            2: self.req(2, 2.0, "b", 3300, 0, 0.5, 10.0, mt=None),
            # ended before 3 came: not counted
            3: self.req(3, 20.0, "a", 3200, 3000, 0.02, 21.0),
            # another server
            4: self.req(4, 2.5, "b", 3300, 3000, 0.02, 10.0, inst="s1"),
        }
        d = kv_demand.demand(reqs, out_tokens=100)
        self.assertEqual(d[0], 3000 + 200 + 300)
        # a once (3,000), b once (0 cached); own: 200+300, 100+300,
        # 3300+100 (no max_tokens: --out-tokens)
        self.assertEqual(d[2], 3000 + 0 + 500 + 400 + 3400)
        self.assertEqual(d[3], 3000 + 200 + 300)
        self.assertEqual(d[4], 3000 + 300 + 300)
        lines = kv_demand.report(reqs, capacity=6000, out_tokens=100)
        self.assertIn("demand at most 6000 tokens: 4 requests", lines[0])
        self.assertIn("demand over 6000 tokens: 1 requests", lines[1])
        self.assertIn("P50 0.500 P90 0.500 s, 1 over 0.10 s", lines[1])
        # the module's queue is not the engine's: queued comes off
        reqs[2]["queued"] = 0.45
        lines = kv_demand.report(reqs, capacity=6000, out_tokens=100)
        self.assertIn("P50 0.050 P90 0.050 s, 0 over", lines[1])
        only = [("group", "=", "a")]
        lines = kv_demand.report(reqs, capacity=6000, only=only)
        self.assertIn("at most 6000 tokens: 3 requests", lines[0])


class TestNoisyReportTenants(unittest.TestCase):
    """bench/noisy_report.py takes its quiet tenants from the traces
    (8 at 4 instances, 32 with --scale 4), not tenant1..7"""

    def test_any_count(self):
        import contextlib
        import io
        import tempfile
        import noisy_report
        d = tempfile.mkdtemp()
        main, base = os.path.join(d, "main"), os.path.join(d, "base")
        os.makedirs(main)
        os.makedirs(base)

        def write(path, slow):
            with open(path, "w") as f:
                i = 0
                for k in range(12):
                    for j in range(4):
                        ttft = slow if k == 0 else 0.02 * (1 + j)
                        f.write(json.dumps({
                            "i": i, "t": 0.001 * i, "wait": 0.0,
                            "group": "tenant%d" % k, "status": 200,
                            "shed": False, "prompt": 1000, "cached": 500,
                            "ttft": ttft, "done": 0.001 * i + ttft + 1,
                            "queued": 0.0}) + "\n")
                        i += 1

        write(os.path.join(main, "noisy-pa_v2-9.jsonl"), 3.0)
        write(os.path.join(base, "noisy_equal-pa_v2-9.jsonl"), 0.02)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            noisy_report.main([main, base])
        text = out.getvalue()
        # 11 quiet tenants, each as fast as in its baseline: ratios 1
        row = [x for x in text.split("\n") if x.startswith("| pa_v2 | 9 |")]
        self.assertEqual([c.strip() for c in row[0].split("|")][3:7],
                         ["1.00"] * 4)
        # answered: 11 quiet tenants of 4 requests, the noisy one's 4
        self.assertIn("| 44 / 4 |", row[0])
        # Jain's index over all 12 tenants, while all 12 were pending
        jain = row[1:]
        self.assertRegex(jain[0], r"^\| pa_v2 \| 9 \| (0\.\d{3}|1\.000) \| "
                                  r"[1-9]\d* % \|")
        self.assertEqual(noisy_report.quiet_of(
            {"tenant0": [], "tenant10": [], "tenant2": []}),
            ["tenant2", "tenant10"])
