# bench/soak.mk: the soak test, included by the top Makefile.
#
#   make soak          nginx + prefix_aware (2 workers) in front of four
#                      aiohttp backends, 64 connections of mixed good and
#                      bad requests for SOAK_SECONDS (180); fails on an
#                      unexpected answer, a worker crash, RSS growth over
#                      20 %, fd growth, or requests left in flight.
#                      Summary in build/soak/summary.md.
#   make soak-smoke    the same for 20 seconds
#
# Loopback only; backends on 127.0.0.1:2016-2019 (SOAK_PORTS).  Debian's
# python3 with python3-aiohttp (make deps-test installs it).

SOAK_PY      ?= /usr/bin/python3
SOAK_SECONDS ?= 180

.PHONY: soak soak-smoke

soak: module deps-test
	SOAK_SECONDS=$(SOAK_SECONDS) $(SOAK_PY) bench/soak.py

soak-smoke: module deps-test
	SOAK_SECONDS=20 $(SOAK_PY) bench/soak.py

# Worker memory per held stream, prefix_aware against nginx's random
# (bench/stream_memory.py): the key's memory must be freed once the key
# is known, since a stream keeps its request for minutes.
#
#   make bench-memory        2000 streams, 3 rounds, report in
#                            build/stream_memory.md
#   make bench-memory-smoke  400 streams, 1 round, fails above +4 kB

.PHONY: bench-memory bench-memory-smoke

bench-memory: module deps-test
	$(SOAK_PY) bench/stream_memory.py --check

bench-memory-smoke: module deps-test
	STREAMS=400 ROUNDS=1 $(SOAK_PY) bench/stream_memory.py --check

# Issue 45's "Nothing lost" at scale (bench/queue_lost.py): 600 clients,
# 500+ waiting in the queue (threshold=4 queue=2000, four backends that
# answer after 0.5 s), through client aborts (10 %), nginx -s reload (same
# and changed configuration), kill -9 of a worker (and of an old one after
# a reload), a queue that fills and times out, and HTTP/2 streams; fails when a request is lost (reset, closed, timed out,
# a 429/503 without Retry-After), a shed.* count differs from what the
# clients saw, or waiting / in flight do not return to 0.
#
#   make bench-queue-lost   report in build/queue_lost.md (about 2 min)
#   QUEUE_LOST_NGINX=build/asan/nginx/objs/nginx QUEUE_LOST_MODULE= \
#   make bench-queue-lost   the same under the ASan nginx (module built in;
#                           fails on a sanitizer report in
#                           build/queue_lost_san but nginx's own at start)

QUEUE_LOST_NGINX  ?= /usr/sbin/nginx
QUEUE_LOST_MODULE ?= objs/ngx_http_prefix_aware_module.so

.PHONY: bench-queue-lost

QUEUE_LOST_SAN     = $(CURDIR)/build/queue_lost_san

bench-queue-lost: module deps-test
	rm -rf $(QUEUE_LOST_SAN) && mkdir -p $(QUEUE_LOST_SAN)
	NGINX=$(QUEUE_LOST_NGINX) BENCH_MODULE_SO=$(QUEUE_LOST_MODULE) \
	SAN_LOGS=$(QUEUE_LOST_SAN) \
	ASAN_OPTIONS=detect_leaks=0:log_path=$(QUEUE_LOST_SAN)/asan \
	UBSAN_OPTIONS=print_stacktrace=1:log_path=$(QUEUE_LOST_SAN)/ubsan \
	$(SOAK_PY) bench/queue_lost.py
