# bench/bench.mk: benchmark targets, included by the top Makefile.
#
#   make demo          four simulated vLLM instances behind nginx, round robin
#                      vs prefix_aware on a long-context workload (< 2 min)
#   make bench-smoke   seconds: the benchmark's unit tests, then a short run
#                      that fails unless every request is answered and
#                      prefix_aware's KV hit rate beats round robin's
#   make bench         all workloads x all strategies + rate sweep + router
#                      overhead (wrk); results in bench/results/
#
# Debian's python3 (python3-aiohttp, python3-matplotlib), not a pyenv one.

BENCH_PY   ?= /usr/bin/python3
BENCH_ARGS ?=

.PHONY: demo bench bench-smoke bench-overhead

demo: module deps-bench
	$(BENCH_PY) bench/run.py demo $(BENCH_ARGS)

bench-smoke: module deps-bench
	$(BENCH_PY) -m unittest discover -s bench -p 'test_*.py'
	$(BENCH_PY) bench/run.py smoke $(BENCH_ARGS)

bench-overhead: module deps-bench
	$(BENCH_PY) bench/overhead.py

bench: module deps-bench
	$(BENCH_PY) bench/overhead.py
	$(BENCH_PY) bench/run.py bench $(BENCH_ARGS)
