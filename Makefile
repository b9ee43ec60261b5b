# ngx_http_prefix_aware_module
#
#   make                 build objs/ngx_http_prefix_aware_module.so against
#                        Debian's nginx-dev (or NGINX_SRC=/path/to/nginx-x.y.z)
#   make test            unit tests, nginx suites, fuzz, bench and soak
#                        smoke runs (CI also runs make test-asan,
#                        test-nginx-new, deb and test-deb)
#   make deb             the Debian package libnginx-mod-http-prefix-aware
#   make demo            the module in front of simulated LLM instances
#   make bench           the full benchmark, results in bench/results/

SHELL     := /bin/bash

NGINX_SRC ?= /usr/share/nginx/src
NGINX_BIN ?= /usr/sbin/nginx
BUILD     ?= build
CC        ?= cc

MODULE    = objs/ngx_http_prefix_aware_module.so
# src/pa_*: plain C, built alone for the unit tests; src/ngx_http_*: glue
SRC_C     = $(wildcard src/pa_*.c)
SRC_H     = $(wildcard src/pa_*.h)
GLUE      = $(wildcard src/ngx_http_*.c src/ngx_http_*.h)
UNIT_C    = $(wildcard t/unit/test_*.c)
UNIT_BIN  = $(patsubst t/unit/%.c,$(BUILD)/unit/%,$(UNIT_C))

CFLAGS_SRC = -std=c99 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter \
             -D_POSIX_C_SOURCE=200809L -Isrc
LIBS_SRC   = -lpthread

# Debian packages the build, the tests and the benchmarks need
DEB_BUILD = build-essential nginx nginx-dev libxxhash-dev \
            libpcre2-dev libssl-dev zlib1g-dev
DEB_TEST  = libtest-base-perl libwww-perl liburi-perl libipc-run3-perl \
            libtext-diff-perl libtest-longstring-perl liblist-moreutils-perl \
            clang libclang-rt-14-dev python3 python3-aiohttp prometheus \
            curl gdb chromium nodejs
DEB_BENCH = python3-matplotlib wrk haproxy linux-perf

.PHONY: all module deps deps-test deps-bench unit test test-nginx clean \
        demo bench fuzz

all: module

module: $(MODULE)

# apt-get only what is missing, so that a prepared machine stays offline
deps = missing=$$(for p in $(1); do \
           dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
           | grep -q 'ok installed' || echo $$p; done); \
       if [ -n "$$missing" ]; then \
           echo "installing:" $$missing; \
           apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y -qq --no-install-recommends $$missing; \
       fi

deps:
	@$(call deps,$(DEB_BUILD))

# t/095-clients.t runs the official npm clients (t/js/package-lock.json):
# npm ci into t/js/node_modules when the lock changed.  Debian's npm only
# where no npm is installed (a nodejs package of another origin that
# bundles npm conflicts with Debian's npm package)
JS_DIR = t/js

deps-test: deps
	@$(call deps,$(DEB_TEST))
	@command -v npm >/dev/null || { $(call deps,npm); }
	@$(MAKE) --no-print-directory $(JS_DIR)/node_modules/.package-lock.json

$(JS_DIR)/node_modules/.package-lock.json: $(JS_DIR)/package.json \
                                          $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && npm ci --no-audit --no-fund --loglevel=error

deps-bench: deps-test
	@$(call deps,$(DEB_BENCH))

# nginx's configure writes into its tree, so configure a private copy;
# with Debian's flags and compiler options, as the package builds it
# (dh-sequence-nginx's nginx_mod: dpkg-buildflags, -O2), not nginx's -O
DEB_FLAGS = DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get

$(BUILD)/nginx/Makefile: config | deps
	rm -rf $(BUILD)/nginx
	mkdir -p $(BUILD)
	cp -r $(NGINX_SRC) $(BUILD)/nginx
	cd $(BUILD)/nginx && \
	if [ -f conf_flags ]; then \
	    . ./conf_flags && \
	    ./configure "$${NGX_CONF_FLAGS[@]}" \
	        --with-cc-opt="$$($(DEB_FLAGS) CFLAGS) -fPIC \
	                       $$($(DEB_FLAGS) CPPFLAGS)" \
	        --with-ld-opt="$$($(DEB_FLAGS) LDFLAGS) -fPIC" \
	        --add-dynamic-module=$(CURDIR) >configure.log; \
	else \
	    ./configure --with-compat --with-debug \
	        --add-dynamic-module=$(CURDIR) >configure.log; \
	fi
	@touch $@

$(MODULE): $(BUILD)/nginx/Makefile ngx_http_prefix_aware_module.c \
           $(SRC_C) $(SRC_H) $(GLUE)
	$(MAKE) -C $(BUILD)/nginx -f objs/Makefile modules
	mkdir -p objs
	@# a new file, renamed over the old: an nginx running the old one keeps
	@# its mapping (cp into the same file crashes its workers)
	cp $(BUILD)/nginx/objs/ngx_http_prefix_aware_module.so $@.tmp
	mv -f $@.tmp $@

# C unit tests of src/, no nginx involved
$(BUILD)/unit/%: t/unit/%.c $(SRC_C) $(SRC_H) t/unit/unit.h t/unit/arena.h \
                 | deps
	@mkdir -p $(BUILD)/unit
	$(CC) $(CFLAGS_SRC) -It/unit -DT_CORPUS='"$(CURDIR)/fuzz/corpus/openai"' \
	    -o $@ $< $(SRC_C) $(LIBS_SRC)

unit: $(UNIT_BIN)
	@for t in $(UNIT_BIN); do echo "== $$t"; $$t || exit 1; done

test-nginx: module deps-test
	TEST_NGINX_BINARY=$(NGINX_BIN) \
	TEST_NGINX_LOAD_MODULES=$(CURDIR)/$(MODULE) \
	    prove -I t/lib -r t/

test: deps-test unit test-nginx fuzz-smoke fuzz-prom-smoke fuzz-usage-smoke fuzz-sync-smoke fuzz-respid-smoke fuzz-queue-smoke \
      bench-smoke soak-smoke \
      bench-memory-smoke

clean:
	rm -rf $(BUILD) objs

-include fuzz/fuzz.mk
-include bench/bench.mk
-include t/asan/asan.mk
-include t/newer/newer.mk
-include packaging/deb.mk
-include bench/micro.mk
-include bench/soak.mk
