# bench/micro.mk, included by the top Makefile
#
#   make bench-route   the module's own work per request (body key, id mix,
#                      ring walk), in nanoseconds, apart from nginx
#   make bench-micro   bench-extract and bench-route

BENCH_ROUTE_BIN = $(BUILD)/bench/bench_route

.PHONY: bench-route bench-micro

$(BENCH_ROUTE_BIN): bench/bench_route.c src/pa_key.c src/pa_ring.c \
                    src/pa_key.h src/pa_ring.h | deps
	@mkdir -p $(BUILD)/bench
	$(CC) $(CFLAGS_SRC) -o $@ bench/bench_route.c src/pa_key.c \
	    src/pa_ring.c $(LIBS_SRC)

bench-route: $(BENCH_ROUTE_BIN)
	$(BENCH_ROUTE_BIN)

bench-micro: bench-extract bench-route
