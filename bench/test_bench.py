#!/usr/bin/python3
"""Unit tests of the benchmark's own parts: the simulator's tokens, blocks,
KV cache and cost model, the workloads and the offline ideal cache.

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
        async def go():
            inst = llmsim.Instance("t", 0, Args())
            task = asyncio.ensure_future(inst.run())
            data = b"p" * 64 * 20 + b"q"
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
        self.assertEqual(s2.cached, 20 * 16)
        self.assertEqual(inst.m["prefix_cache_hits"], 320)
        self.assertEqual(inst.m["prefix_cache_queries"], 2 * s1.prompt_len)
        self.assertLess(s2.t_first - s2.t_arrival, s1.t_first - s1.t_arrival)

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


class TestIdeal(unittest.TestCase):
    def test_ideal(self):
        import run
        w = workloads.generate("templated", n=100)
        big = run.ideal_hit_rate(w.requests, 10 ** 6)
        small = run.ideal_hit_rate(w.requests, 50)
        self.assertGreater(big, 0.7)
        self.assertLess(small, big)


if __name__ == "__main__":
    unittest.main()
