# t/asan/asan.mk, included by the top Makefile
#
#   make test-asan   builds nginx 1.22.1 (Debian's source package) as a
#                    static binary with this module, AddressSanitizer,
#                    UndefinedBehaviorSanitizer and NGX_DEBUG_PALLOC (every
#                    pool allocation its own malloc, so ASan sees pool
#                    overruns), runs the nginx suites with it, and fails on
#                    any sanitizer report.
#
# The source comes from Debian's archive through apt with a private source
# list (the machine's apt configuration is not changed); nothing of it is
# kept in the repository.

ASAN_DIR     = $(BUILD)/asan
ASAN_SRC     = $(ASAN_DIR)/nginx
ASAN_NGINX   = $(ASAN_SRC)/objs/nginx
ASAN_REPORTS = $(ASAN_DIR)/reports
ASAN_APT     = -o Dir::Etc::SourceList=$(CURDIR)/$(ASAN_DIR)/sources.list \
               -o Dir::Etc::SourceParts=/nonexistent \
               -o Dir::State::Lists=$(CURDIR)/$(ASAN_DIR)/lists
ASAN_CC_OPT  = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
               -DNGX_DEBUG_PALLOC=1

.PHONY: test-asan

$(ASAN_SRC)/configure: | deps
	@$(call deps,dpkg-dev libpcre2-dev libssl-dev zlib1g-dev)
	rm -rf $(ASAN_DIR)/src $(ASAN_SRC)
	mkdir -p $(ASAN_DIR)/lists/partial $(ASAN_DIR)/src
	echo 'deb-src http://deb.debian.org/debian bookworm main' \
	    > $(ASAN_DIR)/sources.list
	apt-get -qq $(ASAN_APT) update
	cd $(ASAN_DIR)/src && apt-get -qq $(ASAN_APT) source --download-only nginx
	cd $(ASAN_DIR)/src && dpkg-source -x nginx_*.dsc $(CURDIR)/$(ASAN_SRC) \
	    >/dev/null
	@test -x $@

$(ASAN_SRC)/Makefile: $(ASAN_SRC)/configure config
	cd $(ASAN_SRC) && ./configure --with-debug --with-threads \
	    --with-http_v2_module --with-http_ssl_module \
	    --with-cc-opt="$(ASAN_CC_OPT)" \
	    --with-ld-opt="-fsanitize=address,undefined" \
	    --add-module=$(CURDIR) >configure.log

$(ASAN_NGINX): $(ASAN_SRC)/Makefile ngx_http_prefix_aware_module.c \
               $(SRC_C) $(SRC_H) $(GLUE)
	$(MAKE) -C $(ASAN_SRC) -f objs/Makefile -j2 >$(ASAN_DIR)/make.log

# detect_leaks=0: nginx leaves its cycle to the exit; a report of any other
# kind in any process is a failure
test-asan: $(ASAN_NGINX) deps-test
	rm -rf $(ASAN_REPORTS) && mkdir -p $(ASAN_REPORTS)
	ASAN_OPTIONS=detect_leaks=0:log_path=$(CURDIR)/$(ASAN_REPORTS)/asan \
	UBSAN_OPTIONS=print_stacktrace=1:log_path=$(CURDIR)/$(ASAN_REPORTS)/ubsan \
	TEST_NGINX_BINARY=$(CURDIR)/$(ASAN_NGINX) TEST_NGINX_LOAD_MODULES= \
	    prove -I t/lib t/*.t
	@if [ -n "$$(ls $(ASAN_REPORTS))" ]; then \
	    head -n 40 $(ASAN_REPORTS)/*; \
	    echo "test-asan: sanitizer reports in $(ASAN_REPORTS)"; exit 1; \
	fi
	@echo "test-asan: no sanitizer report"
