# t/newer/newer.mk, included by the top Makefile
#
#   make test-nginx-new   builds the module against the nginx that Debian's
#                         unstable suite (sid) carries (1.30.x at the time of
#                         writing), with -Werror, and runs every nginx suite
#                         with sid's own nginx binary and the module.
#
# The same source must compile warning-free and pass the suites against
# Debian 12's nginx 1.22.1 (make test) and this one; version differences go
# through the nginx_version guards in src/ngx_http_prefix_aware.h.
# t/090-resolve.t (server ... resolve, nginx 1.27.3+) runs only here: it
# skips on 1.22.1.  The module is built here with NGX_HTTP_PREFIX_AWARE_TEST
# (config): the faults t/091-resolve-retry.t injects, in no other build.
#
# Only sid's binary packages can be fetched here (its source package cannot),
# so this is the setup of an operator on a current Debian: the module built
# from sid's nginx-dev (headers, configure and Debian's configure flags,
# --with-compat) and loaded with load_module into sid's /usr/sbin/nginx.
# sid's nginx needs sid's libssl and glibc: they are unpacked next to it and
# the binary's interpreter and RPATH (which, unlike RUNPATH, also serves
# the libraries' own dependencies) point there (patchelf), so it runs
# on Debian 12 and re-executes itself (binary upgrade) without environment.
# (With NEW_NGINX_SRC=/path/to/nginx, a given source tree is built
# statically with --add-module instead; see the end of this file.)
# Everything comes through apt with a private source list, as in
# t/asan/asan.mk (the machine's apt configuration is not changed), into
# $(BUILD)/newer; nothing of it is kept in the repository.

NEW_DIR     = $(BUILD)/newer
NEW_ROOT    = $(NEW_DIR)/root
NEW_LIB     = $(CURDIR)/$(NEW_ROOT)/usr/lib/x86_64-linux-gnu
NEW_SRC     = $(NEW_DIR)/nginx
NEW_NGINX   = $(NEW_DIR)/sbin/nginx
NEW_MODULE  = $(NEW_DIR)/ngx_http_prefix_aware_module.so
NEW_SUITE  ?= sid
NEW_DEBS    = nginx nginx-dev libc6 libssl3t64 libzstd1 libpcre2-8-0 \
              libcrypt1 zlib1g
NEW_APT     = -o Dir::Etc::SourceList=$(CURDIR)/$(NEW_DIR)/sources.list \
              -o Dir::Etc::SourceParts=/nonexistent \
              -o Dir::State::Lists=$(CURDIR)/$(NEW_DIR)/lists \
              -o Dir::Cache=$(CURDIR)/$(NEW_DIR)/cache \
              -o APT::Architecture=amd64

.PHONY: test-nginx-new nginx-new

$(NEW_DIR)/stamp: | deps
	@$(call deps,dpkg-dev patchelf)
	rm -rf $(NEW_DIR)/debs $(NEW_ROOT) $(NEW_DIR)/lists $(NEW_DIR)/cache
	mkdir -p $(NEW_DIR)/lists/partial $(NEW_DIR)/cache/archives/partial \
	    $(NEW_DIR)/debs $(NEW_ROOT)
	echo 'deb http://deb.debian.org/debian $(NEW_SUITE) main' \
	    > $(NEW_DIR)/sources.list
	apt-get -qq $(NEW_APT) update
	cd $(NEW_DIR)/debs && apt-get -qq $(NEW_APT) download $(NEW_DEBS) \
	    2>../download.log || { cat ../download.log; exit 1; }
	for d in $(NEW_DIR)/debs/*.deb; do dpkg-deb -x $$d $(NEW_ROOT); done
	@test -x $(NEW_ROOT)/usr/sbin/nginx
	@test -x $(NEW_LIB)/ld-linux-x86-64.so.2
	@touch $@

$(NEW_NGINX): $(NEW_DIR)/stamp
	mkdir -p $(NEW_DIR)/sbin
	cp $(NEW_ROOT)/usr/sbin/nginx $@
	patchelf --force-rpath --set-interpreter $(NEW_LIB)/ld-linux-x86-64.so.2 \
	    --set-rpath $(NEW_LIB) $@
	$@ -V 2>&1 | head -n 1

# nginx's configure writes into its tree: configure a private copy of sid's
# nginx-dev with Debian's own flags (conf_flags), as dh_nginx would
$(NEW_SRC)/objs/Makefile: $(NEW_DIR)/stamp config
	rm -rf $(NEW_SRC)
	cp -r $(NEW_ROOT)/usr/share/nginx/src $(NEW_SRC)
	cd $(NEW_SRC) && . ./conf_flags && \
	    NGX_HTTP_PREFIX_AWARE_TEST=1 ./configure "$${NGX_CONF_FLAGS[@]}" \
	        --add-dynamic-module=$(CURDIR) >configure.log

# nginx's gcc flags include -Werror: a warning fails the build
$(NEW_MODULE): $(NEW_SRC)/objs/Makefile ngx_http_prefix_aware_module.c \
               $(SRC_C) $(SRC_H) $(GLUE)
	$(MAKE) -C $(NEW_SRC) -f objs/Makefile modules >$(NEW_DIR)/make.log
	cp $(NEW_SRC)/objs/ngx_http_prefix_aware_module.so $@

nginx-new: $(NEW_NGINX) $(NEW_MODULE)

ifeq ($(NEW_NGINX_SRC),)

test-nginx-new: nginx-new deps-test
	TEST_NGINX_BINARY=$(CURDIR)/$(NEW_NGINX) \
	TEST_NGINX_LOAD_MODULES=$(CURDIR)/$(NEW_MODULE) \
	    prove -I t/lib -r t/

else

# make test-nginx-new NEW_NGINX_SRC=/path/to/nginx: any nginx source tree (a
# release tarball, or a checkout, whose configure is auto/configure) built
# statically with the module, then every suite with that binary (no
# load_module line; t/050-linkage.t skips)
NEW_STATIC  = $(NEW_DIR)/static

$(NEW_STATIC)/objs/Makefile: config | deps
	@$(call deps,libpcre2-dev libssl-dev zlib1g-dev)
	rm -rf $(NEW_STATIC)
	mkdir -p $(NEW_DIR)
	cp -r $(NEW_NGINX_SRC) $(NEW_STATIC)
	cd $(NEW_STATIC) && \
	    if [ -x configure ]; then c=./configure; else c=auto/configure; fi; \
	    NGX_HTTP_PREFIX_AWARE_TEST=1 $$c --with-debug --with-threads \
	        --with-http_v2_module --with-http_ssl_module \
	        --add-module=$(CURDIR) >configure.log

$(NEW_STATIC)/objs/nginx: $(NEW_STATIC)/objs/Makefile \
                          ngx_http_prefix_aware_module.c $(SRC_C) $(SRC_H) \
                          $(GLUE)
	$(MAKE) -C $(NEW_STATIC) -f objs/Makefile -j2 >$(NEW_DIR)/static.log

test-nginx-new: $(NEW_STATIC)/objs/nginx deps-test
	$(NEW_STATIC)/objs/nginx -v
	TEST_NGINX_BINARY=$(CURDIR)/$(NEW_STATIC)/objs/nginx \
	TEST_NGINX_LOAD_MODULES= \
	    prove -I t/lib -r t/

endif
