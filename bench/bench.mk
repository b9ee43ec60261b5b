# bench/bench.mk: benchmark targets, included by the top Makefile.
#
#   make demo          four simulated vLLM instances behind nginx, round robin
#                      vs prefix_aware's default (pa_v2: index=auto, the
#                      simulator's capacity) on a long-context workload
#                      (< 2 min)
#   make bench-smoke   < 40 s: the benchmark's unit tests, then a short run
#                      (round robin, prefix_aware index=off, pa_v2, the
#                      pooled bound; 1 seed) that fails unless every request
#                      is answered and the KV hit rates of both prefix_aware
#                      arms and of the pooled bound beat round robin's
#   make bench         all workloads x all strategies, the arms of
#                      bench/arms.conf and the pooled bound, 3 seeds each,
#                      + rate sweep + router overhead (wrk); about 2 hours;
#                      results in bench/results/
#                      (BENCH_ARGS='--seeds 5 --no-sweep' etc.)
#   make bench-peers   the side-by-side with the routers operators pick
#                      instead (bench/sim/peers.py: SGLang gateway, llm-d
#                      default and precise, Dynamo with and without KV
#                      events, production-stack, AIBrix, DualMap), the
#                      module's default (pa_v2), index=off, round robin,
#                      the oracles and the pooled bound; every workload
#                      (agentic included), 3 seeds, at 4 instances and at
#                      16 (--scale 4: the same load per instance); results
#                      in bench/results/peers4/ and peers16/; hours
#                      (BENCH_PEERS_ARGS='--seeds 5' etc.)
#   make bench-hosts   many routers, one cluster: round robin and pa_v2
#                      with 1, 2 and 4 independent nginx hosts in front of
#                      the same engines (each request to one at random),
#                      and with 30 % of the requests sent straight to the
#                      engines (other clients); every workload, 3 seeds;
#                      results in bench/results/hosts/ (BENCH_HOSTS_ARGS)
#
# Debian's python3 (python3-aiohttp, python3-matplotlib), not a pyenv one.

BENCH_PY   ?= /usr/bin/python3
BENCH_ARGS ?=
BENCH_PEERS_ARGS ?=
BENCH_HOSTS_ARGS ?=

.PHONY: demo bench bench-smoke bench-overhead bench-peers bench-hosts

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

bench-peers: module deps-bench
	$(BENCH_PY) bench/run.py peers $(BENCH_PEERS_ARGS)
	$(BENCH_PY) bench/run.py peers --scale 4 $(BENCH_PEERS_ARGS)

bench-hosts: module deps-bench
	$(BENCH_PY) bench/run.py hosts $(BENCH_HOSTS_ARGS)
