#!/usr/bin/python3
"""Unit tests of bench/queue_lost.py's parts: how an answer is classified,
the slow backend's notes (seen, closed before the answer), the counts read
from the status page.

    /usr/bin/python3 -m unittest discover -s bench -p 'test_*.py'
"""

import asyncio
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import queue_lost  # noqa: E402
from queue_memory import counts  # noqa: E402


def answer(status, head, body):
    return (b"HTTP/1.1 %d X\r\n" % status + head
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


class TestClassify(unittest.TestCase):
    def test_200(self):
        self.assertEqual(queue_lost.classify(answer(200, b"", b"{}")),
                         ("200", ""))

    def test_429_with_retry_after_and_one_line(self):
        a = answer(429, b"Retry-After: 1\r\n",
                   b"every server is busy and the queue is full\n")
        self.assertEqual(queue_lost.classify(a), (
            "429", "every server is busy and the queue is full"))

    def test_429_without_retry_after(self):
        a = answer(429, b"", b"every server is busy\n")
        self.assertEqual(queue_lost.classify(a)[0],
                         "429 without Retry-After")

    def test_503_of_two_lines(self):
        a = answer(503, b"retry-after: 1\r\n", b"one\ntwo\n")
        self.assertEqual(queue_lost.classify(a)[0],
                         "503 without a one-line reason")

    def test_empty_and_other(self):
        self.assertEqual(queue_lost.classify(b"")[0], "closed")
        self.assertEqual(queue_lost.classify(answer(502, b"", b"x"))[0],
                         "status 502")
        self.assertEqual(queue_lost.classify(b"garbage")[0], "garbled")


class TestBackend(unittest.TestCase):
    def test_seen_closed_and_answered(self):
        queue_lost.SEEN.clear()
        del queue_lost.CLOSED[:]
        old, queue_lost.DELAY = queue_lost.DELAY, 0.3

        async def go():
            server = await asyncio.start_server(queue_lost.slow,
                                                "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            req = (b"POST / HTTP/1.1\r\nX-Lost-Id: %d\r\nX-Pid: 7\r\n"
                   b"Content-Length: 2\r\n\r\n{}")
            r1, w1 = await asyncio.open_connection("127.0.0.1", port)
            w1.write(req % 1)
            r2, w2 = await asyncio.open_connection("127.0.0.1", port)
            w2.write(req % 2)
            await asyncio.sleep(0.1)
            w2.close()                      # before the answer
            data = await r1.read()
            w1.close()
            stats = await queue_lost.backend_stats(port)
            server.close()
            return data, stats

        try:
            data, stats = asyncio.run(go())
        finally:
            queue_lost.DELAY = old
        self.assertEqual(queue_lost.classify(data)[0], "200")
        self.assertEqual(stats["seen"], {"1": "7", "2": "7"})
        self.assertEqual(stats["closed"], ["2"])


class TestSanitizerReports(unittest.TestCase):
    def test_known_one_left_out(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "ubsan.1"), "w") as f:
                f.write("src/core/ngx_string.c:84:5: runtime error: null\n"
                        "    #0 0x1 in ngx_pstrdup src/core/ngx_string.c:84\n"
                        "    #1 0x2 in ngx_init_cycle src/core/ngx_cycle.c:118"
                        "\n")
            old, queue_lost.SAN_LOGS = queue_lost.SAN_LOGS, d
            try:
                self.assertEqual(queue_lost.sanitizer_reports(), [])
                with open(os.path.join(d, "asan.2"), "w") as f:
                    f.write("==9==ERROR: AddressSanitizer: heap-use-after-"
                            "free\n    #0 0x1 in ngx_http_prefix_aware_x\n")
                self.assertEqual(queue_lost.sanitizer_reports(), [
                    "asan.2: ==9==ERROR: AddressSanitizer: "
                    "heap-use-after-free"])
                self.assertEqual(queue_lost.sanitizer_reports(), [])
            finally:
                queue_lost.SAN_LOGS = old


class TestH2(unittest.TestCase):
    def test_frame(self):
        self.assertEqual(queue_lost.h2_frame(1, 4, 3, b"ab"),
                         b"\x00\x00\x02\x01\x04\x00\x00\x00\x03ab")

    def test_literal(self):
        self.assertEqual(queue_lost.hpack_literal(":path", "/x"),
                         b"\x00\x05:path\x02/x")

    def test_status(self):
        self.assertEqual(queue_lost.h2_status(b"\x88\x0f"), 200)
        self.assertEqual(queue_lost.h2_status(b"\x48\x03429\x0f"), 429)
        self.assertIsNone(queue_lost.h2_status(b"\x48\x82\x00\x00"))


class TestCounts(unittest.TestCase):
    def test_counts(self):
        st = json.loads('{"queue": {"waiting": 3}, "servers": '
                        '[{"inflight": 4}, {"inflight": 1}]}')
        self.assertEqual(counts(st), (3, 5))
        self.assertEqual(counts({"servers": []}), (0, 0))


if __name__ == "__main__":
    unittest.main()
