# packaging/deb.mk, included by the top Makefile
#
#   make deb        builds build/deb/libnginx-mod-http-prefix-aware_*.deb for
#                   Debian 12's nginx, with the tooling that nginx-dev ships
#                   for Debian's own libnginx-mod-* packages (dh-sequence-nginx:
#                   the nginx_mod build system and dh_nginx)
#   make test-deb   installs that package on this machine, proves that
#                   Debian's /usr/sbin/nginx loads it through the package's
#                   modules-enabled link and routes with it, then purges it
#
# The repository's top level stays as it is: packaging/debian/ is laid out
# with a copy of the module's source in $(DEB_DIR), and dpkg-buildpackage
# runs there. make test does not use the package.

DEB_DIR     = $(BUILD)/deb
DEB_PKG     = libnginx-mod-http-prefix-aware
DEB_BASE    = 0.1.0
# a native version that names the commit it was built from
DEB_COMMIT := $(shell git log -1 --format=%cd.%h --date=format:%Y%m%d \
                  2>/dev/null)
DEB_VERSION = $(DEB_BASE)$(if $(DEB_COMMIT),+git$(DEB_COMMIT))
DEB_TREE    = $(DEB_DIR)/$(DEB_PKG)-$(DEB_VERSION)
DEB_TOOLS   = dpkg-dev debhelper nginx-dev

.PHONY: deb test-deb

# nginx_mod configures in /usr/share/nginx/src, which leaves a top-level
# Makefile there: it is removed again unless it was there before
deb: deps
	@$(call deps,$(DEB_TOOLS))
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_TREE)
	cp -r config ngx_http_prefix_aware_module.c src README.md docs \
	    $(DEB_TREE)/
	cp -r packaging/debian $(DEB_TREE)/debian
	sed -e 's/@VERSION@/$(DEB_VERSION)/' \
	    -e 's/@COMMIT@/$(if $(DEB_COMMIT),$(DEB_COMMIT),no git commit)/' \
	    -e "s/@DATE@/$$(date -R)/" \
	    $(DEB_TREE)/debian/changelog.in > $(DEB_TREE)/debian/changelog
	rm $(DEB_TREE)/debian/changelog.in
	src_mk=$(NGINX_SRC)/Makefile; \
	    if [ -e $$src_mk ]; then keep=1; else keep=0; fi; \
	    cd $(DEB_TREE) && dpkg-buildpackage -b -us -uc \
	        >../dpkg-buildpackage.log 2>&1; rc=$$?; \
	    [ $$keep = 1 ] || rm -f $$src_mk; \
	    if [ $$rc != 0 ]; then tail -n 40 ../dpkg-buildpackage.log; \
	        exit $$rc; fi
	@ls $(DEB_DIR)/*.deb
	@dpkg-deb -I $(DEB_DIR)/$(DEB_PKG)_$(DEB_VERSION)_*.deb \
	    | sed -n '/Package:/,$$p'
	@dpkg-deb -c $(DEB_DIR)/$(DEB_PKG)_$(DEB_VERSION)_*.deb \
	    | awk '{ print $$6 }' | grep -E 'modules|\.conf$$'

test-deb: deps-test
	packaging/test-deb.sh $(DEB_DIR)/$(DEB_PKG)_*.deb
