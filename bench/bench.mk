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
#   make bench-hosts   many routers, one cluster: round robin, pa_v2 and
#                      pa_sync (pa_v2 with prefix_aware_sync between the
#                      hosts) with 1, 2 and 4 nginx hosts in front of
#                      the same engines (each request to one at random),
#                      and with 30 % of the requests sent straight to the
#                      engines (other clients); every workload, 3 seeds;
#                      results in bench/results/hosts/ (BENCH_HOSTS_ARGS)
#   make bench-overhead the router overhead alone (bench/overhead.py): round
#                      robin, prefix_aware index=off, the default and the
#                      default with prefix_aware_sync to 4 peers side
#                      by side, 4 KB and 64 KB bodies; requests per second
#                      and the proxy's CPU per request at one and at 32
#                      connections (wrk, else build/bench/loadgen);
#                      BENCH_OVERHEAD_ARGS='--cases json:65536 --rounds 9'
#                      for one body kind and size, more rounds; '--perf'
#                      adds the CPU per request in the module's own code,
#                      sampled with perf (linux-perf), the steady figure
#   make bench-instructions
#                      instructions per request under callgrind
#                      (bench/instructions.py): round robin, index=off,
#                      the default; deterministic, unlike the timings
#   make bench-lock BENCH_LOCK_OLD=/path/to/an/older/module.so
#                      the work under the upstream's lock (bench/lock.py):
#                      8 workers, 64 servers, 64 KB bodies, with and
#                      without "zone", the older build against this one,
#                      interleaved; requests per second and the share of
#                      the workers' time spinning on the lock (perf)
#
# Debian's python3 (python3-aiohttp, python3-matplotlib), not a pyenv one.

BENCH_PY   ?= /usr/bin/python3
BENCH_ARGS ?=
BENCH_PEERS_ARGS ?=
BENCH_HOSTS_ARGS ?=

.PHONY: demo bench bench-smoke bench-overhead bench-instructions bench-lock \
        bench-peers bench-hosts

LOADGEN_BIN = $(BUILD)/bench/loadgen

# where wrk is not installed: a closed-loop generator with the same bodies
$(LOADGEN_BIN): bench/loadgen.c | deps
	@mkdir -p $(BUILD)/bench
	$(CC) -std=c99 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ \
	    bench/loadgen.c

demo: module deps-bench
	$(BENCH_PY) bench/run.py demo $(BENCH_ARGS)

bench-smoke: module deps-bench
	$(BENCH_PY) -m unittest discover -s bench -p 'test_*.py'
	$(BENCH_PY) bench/run.py smoke $(BENCH_ARGS)

bench-overhead: module deps-bench $(LOADGEN_BIN)
	$(BENCH_PY) bench/overhead.py $(BENCH_OVERHEAD_ARGS)

bench-instructions: module
	$(BENCH_PY) bench/instructions.py --size 4096
	$(BENCH_PY) bench/instructions.py --size 65536 --requests 500

bench-lock: module $(LOADGEN_BIN)
	@test -n "$(BENCH_LOCK_OLD)" || \
	    { echo "BENCH_LOCK_OLD=/path/to/an/older/module.so"; exit 2; }
	$(BENCH_PY) bench/lock.py --module old=$(BENCH_LOCK_OLD) \
	    --module new=$(MODULE)

bench: module deps-bench $(LOADGEN_BIN)
	$(BENCH_PY) bench/overhead.py
	$(BENCH_PY) bench/run.py bench $(BENCH_ARGS)

bench-peers: module deps-bench
	$(BENCH_PY) bench/run.py peers $(BENCH_PEERS_ARGS)
	$(BENCH_PY) bench/run.py peers --scale 4 $(BENCH_PEERS_ARGS)

bench-hosts: module deps-bench
	$(BENCH_PY) bench/run.py hosts $(BENCH_HOSTS_ARGS)
