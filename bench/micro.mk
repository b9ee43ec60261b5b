# bench/micro.mk, included by the top Makefile
#
#   make bench-route   the module's own work per request (body key, id mix,
#                      ring walk; routing v2: block keys, prefix index,
#                      choice), in nanoseconds, apart from nginx
#   make bench-micro   bench-extract and bench-route

BENCH_ROUTE_BIN = $(BUILD)/bench/bench_route

.PHONY: bench-route bench-micro

BENCH_ROUTE_SRC = src/pa_key.c src/pa_ring.c src/pa_block.c src/pa_xxh_avx2.c \
                  src/pa_index.c \
                  src/pa_index_match.c src/pa_index_region.c src/pa_choose.c
BENCH_ROUTE_HDR = src/pa_key.h src/pa_ring.h src/pa_block.h src/pa_xxh.h \
                  src/pa_cpu.h \
                  src/pa_utf8.h \
                  src/pa_index.h src/pa_index_int.h src/pa_choose.h

$(BENCH_ROUTE_BIN): bench/bench_route.c $(BENCH_ROUTE_SRC) \
                    $(BENCH_ROUTE_HDR) | deps
	@mkdir -p $(BUILD)/bench
	$(CC) $(CFLAGS_SRC) -o $@ bench/bench_route.c $(BENCH_ROUTE_SRC) \
	    $(LIBS_SRC)

bench-route: $(BENCH_ROUTE_BIN)
	$(BENCH_ROUTE_BIN)

bench-micro: bench-extract bench-route
