# SPDX-License-Identifier: BSD-3-Clause
# pbox build. `make` builds pboxd, pboxctl, libpbox.{a,so} and pbox-perf
# into build/, and the GPU library libpbox-gpu.so.1 when nvcc is found
# (`make gpu` insists; gpu/Makefile.inc); `make check` runs the unit
# tests, the layering check, libpbox's rooms by their calls (`make rooms`),
# libpbox's exports against its headers and
# map (`make exports`), the Python binding's check against pbox.h
# (`make pycheck`), the GPU library's check (`make gpucheck`) and a brief
# fuzz (no root, no network, as any user); `make test` is `make check`
# (as nobody, on a fresh copy of the tree) plus the integration tests
# (root); `make demo` runs the demo; `make SAN=1 ...` builds with
# ASan+UBSan into build-san/.
#
# Each folder lists its own sources in its Makefile.inc; the floors and
# what each may include are in docs/architecture.md (checked by
# tests/layering.sh).

PREFIX  ?= /usr/local
CC      ?= gcc
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD   ?= build
SANFLAGS =
endif

PYTHON  ?= /usr/bin/python3
PYDIR   ?= $(PREFIX)/lib/$(shell $(PYTHON) -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null)/dist-packages

# The version is written once, in include/pbox.h; pboxd (which does not
# include it) gets it as PBOX_VERSION_STRING.
version_part = $(shell sed -n 's/^\#define PBOX_VERSION_$(1) *\([0-9]*\).*/\1/p' include/pbox.h)
VERSION_MAJOR := $(call version_part,MAJOR)
VERSION       := $(VERSION_MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)

OBJCOPY ?= objcopy
WARN    = -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS  ?= -O2 -g
# One include directory: the root. Headers are named by path
# ("common/wire.h"); users' header is include/pbox.h.
BASEFLAGS = -std=gnu11 -fPIC $(WARN) $(SANFLAGS) -I. -D_GNU_SOURCE \
	    -DPBOX_VERSION_STRING='"$(VERSION)"'
DPDK_CFLAGS = $(shell pkg-config --cflags libdpdk 2>/dev/null)
DPDK_LIBS   = $(shell pkg-config --libs libdpdk 2>/dev/null)
LIBS_CLIENT = $(shell pkg-config --libs jansson libxdp libbpf 2>/dev/null) -libverbs -lpthread -lm -ldl
LIBS_BOX    = $(DPDK_LIBS) $(shell pkg-config --libs jansson hwloc 2>/dev/null) -lpthread -lm

# The folders' Makefile.inc files may define rules (python's pycheck):
# `make` alone still builds everything.
.DEFAULT_GOAL := all

include common/Makefile.inc
include nic/Makefile.inc
include dataplane/Makefile.inc
include control/Makefile.inc
include client/Makefile.inc
include gpu/Makefile.inc
include tools/Makefile.inc
include python/Makefile.inc

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# Translation units that include DPDK headers get DPDK's flags.
DPDK_OBJ = $(call obj,$(NIC_DPDK_SRC) $(DATAPLANE_DPDK_SRC))
# The box without DPDK: engine and control plane, for pboxd, unit tests,
# benchmarks and fuzzers.
BOXCORE_SRC = $(COMMON_SRC) $(NIC_SRC) $(DATAPLANE_SRC) $(CONTROL_SRC)

SO_NAME = libpbox.so.$(VERSION_MAJOR)
SO_FILE = libpbox.so.$(VERSION)
BINS = $(BUILD)/pboxd $(BUILD)/pboxctl $(BUILD)/pbox-perf
LIBS = $(BUILD)/libpbox.a $(BUILD)/$(SO_FILE) $(BUILD)/$(SO_NAME) $(BUILD)/libpbox.so
UNIT_TESTS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
BENCHES = $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
# the fake GPU library (its rule below): defined before `all`, whose
# prerequisites make expands as it reads them
GPU_FAKE = $(BUILD)/tests/libpbox-gpu-fake.so

.PHONY: all deps install check test unit layering exports rooms integration demo clean fuzz soak
all: $(BINS) $(LIBS) $(BENCHES) $(GPU_BUILT) $(GPU_FAKE)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(ISA_$<) -MMD -MP -c $< -o $@

$(DPDK_OBJ): $(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(DPDK_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# pboxd's box_status reports the version (-DPBOX_VERSION_STRING): rebuild
# it when pbox.h changes.
$(call obj,control/box_rpc.c): include/pbox.h

$(BUILD)/libboxcore.a: $(call obj,$(BOXCORE_SRC))
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libcommon.a: $(call obj,$(COMMON_SRC))
	@rm -f $@
	ar rcs $@ $^

CLIENT_OBJ = $(call obj,$(CLIENT_SRC) $(COMMON_SRC)) $(CLIENT_GEN_OBJ)

# libpbox's own objects are compiled with hidden visibility: only the
# functions include/pbox*.h mark PBOX_API are visible outside the library
# (common/'s objects, shared with pboxd, keep the default; the map and the
# localization below hide them in the libraries).
$(call obj,$(CLIENT_SRC)) $(CLIENT_GEN_OBJ): BASEFLAGS += -fvisibility=hidden

# The exported names, one a line, as client/libpbox.map lists them.
$(BUILD)/libpbox.syms: $(CLIENT_MAP)
	@mkdir -p $(dir $@)
	sed -n 's/^[[:space:]]*\(pbox_[a-z0-9_]*\);[[:space:]]*$$/\1/p' $< > $@.tmp && mv $@.tmp $@

# The installed static library: one object, the partial link of libpbox's
# and common/'s objects, in which every symbol but the exported ones is made
# local, so a program linking it statically may name its own functions
# wire_encode or topk_select (nm -g --defined-only shows only pbox_*;
# checked by tests/exports.sh).
$(BUILD)/libpbox.a: $(CLIENT_OBJ) $(BUILD)/libpbox.syms
	@rm -f $@ $(BUILD)/obj/libpbox.o
	$(LD) -r -o $(BUILD)/obj/libpbox.o $(CLIENT_OBJ)
	$(OBJCOPY) --keep-global-symbols=$(BUILD)/libpbox.syms $(BUILD)/obj/libpbox.o
	ar rcs $@ $(BUILD)/obj/libpbox.o

# The same objects as they are, for the unit tests and benchmarks, which
# call internal functions (seg_*, client_*) and wrap some at link time
# (test_tp_verbs: netpath_resolve, udp_reserve_port). Never installed.
$(BUILD)/libpbox-internal.a: $(CLIENT_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/$(SO_FILE): $(CLIENT_OBJ) $(CLIENT_MAP)
	$(CC) -shared -Wl,-soname,$(SO_NAME) -Wl,--version-script=$(CLIENT_MAP) $(SANFLAGS) $(LDFLAGS) \
		-o $@ $(CLIENT_OBJ) $(LIBS_CLIENT)

$(BUILD)/$(SO_NAME) $(BUILD)/libpbox.so: $(BUILD)/$(SO_FILE)
	ln -sf $(SO_FILE) $@

$(BUILD)/pboxd: $(call obj,$(CONTROL_MAIN)) $(DPDK_OBJ) $(BUILD)/libboxcore.a
	$(CC) $(SANFLAGS) $(LDFLAGS) -o $@ $(call obj,$(CONTROL_MAIN)) $(DPDK_OBJ) $(BUILD)/libboxcore.a $(LIBS_BOX)

$(BUILD)/pboxctl: $(call obj,$(PBOXCTL_SRC)) $(BUILD)/libcommon.a
	$(CC) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_CLIENT)

$(BUILD)/pbox-perf: $(call obj,$(PBOX_PERF_SRC)) $(BUILD)/libpbox.a
	$(CC) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_CLIENT)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a \
		$(shell pkg-config --libs cmocka hwloc) $(LIBS_CLIENT)

# The fake GPU library the device-call tests and bench/gpu_stage load
# through PBOX_GPU_LIB (tests/unit/fake_gpu.h): common/gpu_ops.h on host
# memory, built with common/'s conversions, exporting only its symbols.
$(GPU_FAKE): tests/unit/fake_gpu.c tests/unit/fake_gpu.map $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -MMD -MP -Wl,--version-script=tests/unit/fake_gpu.map \
		-o $@ $< $(BUILD)/libcommon.a -lpthread -lm
$(BUILD)/tests/test_client_gpu $(BUILD)/tests/test_client_hostdev $(BUILD)/tests/test_tp_verbs: \
	| $(GPU_FAKE)

# test_tp_verbs runs the verbs transport on a fake RDMA device: the verbs
# libpbox calls (and its path lookup and port reservation) are wrapped at
# link time (--wrap redirects references between objects: hence
# libpbox-internal.a's separate objects); verbs that rdma-core inlines
# reach the fake through its context.
VERBS_WRAP = ibv_get_device_list ibv_free_device_list ibv_get_device_name ibv_open_device \
	     ibv_close_device ibv_query_device ibv_alloc_pd ibv_dealloc_pd \
	     ibv_create_comp_channel ibv_destroy_comp_channel ibv_create_cq ibv_destroy_cq \
	     ibv_create_qp ibv_modify_qp ibv_destroy_qp ibv_reg_mr ibv_reg_dmabuf_mr ibv_dereg_mr \
	     ibv_get_cq_event ibv_ack_cq_events netpath_resolve udp_reserve_port
VERBS_WRAP_FLAGS = $(foreach f,$(VERBS_WRAP),-Wl,--wrap=$(f))

$(BUILD)/tests/test_tp_verbs: tests/unit/test_tp_verbs.c $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a \
		$(shell pkg-config --libs cmocka hwloc) $(LIBS_CLIENT) $(VERBS_WRAP_FLAGS)

# test_jobs makes the registry's calloc fail on demand (tests/unit/test_jobs.c
# fail_calloc): calloc is wrapped at link time.
$(BUILD)/tests/test_jobs: tests/unit/test_jobs.c $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a \
		$(shell pkg-config --libs cmocka hwloc) $(LIBS_CLIENT) -Wl,--wrap=calloc

# test_ckpt_worker makes the checkpoint files slow: ps_ckpt_write_set is
# wrapped at link time.
$(BUILD)/tests/test_ckpt_worker: tests/unit/test_ckpt_worker.c $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a \
		$(shell pkg-config --libs cmocka hwloc) $(LIBS_CLIENT) -Wl,--wrap=ps_ckpt_write_set

# test_ckpt_restore makes checkpoint reads slow: ckpt_read is wrapped.
$(BUILD)/tests/test_ckpt_restore: tests/unit/test_ckpt_restore.c $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a \
		$(shell pkg-config --libs cmocka hwloc) $(LIBS_CLIENT) -Wl,--wrap=ckpt_read

$(BUILD)/bench/%: bench/%.c $(BUILD)/libboxcore.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/libboxcore.a $(LIBS_CLIENT)

# Benchmarks that run libpbox against the in-process box of the unit tests
# (tests/unit/box_inproc.h) link the client library too.
BENCH_CLIENT = $(BUILD)/bench/client_inproc $(BUILD)/bench/gpu_stage
$(BENCH_CLIENT): $(BUILD)/bench/%: bench/%.c $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libboxcore.a $(BUILD)/libpbox-internal.a \
		$(shell pkg-config --libs hwloc) $(LIBS_CLIENT)

# Benchmarks that build mbufs need DPDK.
$(BUILD)/bench/fanout_bench: bench/fanout_bench.c $(call obj,dataplane/lcore_fanout.c) $(BUILD)/libboxcore.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(DPDK_CFLAGS) $(CFLAGS) -o $@ $< $(call obj,dataplane/lcore_fanout.c) \
		$(BUILD)/libboxcore.a $(LIBS_BOX)

deps:
	bash deploy/install-deps.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 include/pbox.h include/pbox_cuda.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libpbox.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/$(SO_FILE) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(SO_FILE) $(DESTDIR)$(PREFIX)/lib/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(PREFIX)/lib/libpbox.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' deploy/pbox.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/pbox.pc
	install -d $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/man/man3 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 docs/man/pboxd.8 docs/man/pboxctl.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 644 docs/man/libpbox.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	install -m 644 deploy/pboxctl.bash-completion \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/pboxctl
	install -d $(DESTDIR)$(PYDIR)/pbox
	install -m 644 $(PY_SRC) $(DESTDIR)$(PYDIR)/pbox/
	if [ -f $(BUILD)/libpbox-gpu.so.1 ]; then \
		install -m 755 $(BUILD)/libpbox-gpu.so.1 $(DESTDIR)$(PREFIX)/lib/ && \
		ln -sf libpbox-gpu.so.1 $(DESTDIR)$(PREFIX)/lib/libpbox-gpu.so; fi

# make deb: the Debian packages of debian/control (docs/operations.md
# "Debian packages"): dpkg-buildpackage -us -uc -b on a copy of the tree in
# $(DEB_DIR)/src, which builds everything itself (nothing of build/ is
# reused), then lintian, which must find no error. The .deb files land in
# $(DEB_DIR). libpbox-gpu1 is built when nvcc is found (DEB_GPU=0 leaves
# it out: the build profile pkg.pbox.nogpu); DEB_J is dpkg-buildpackage's
# parallel=; DEB_OPTS adds DEB_BUILD_OPTIONS (the package test: nocheck);
# LINTIAN=0 skips lintian.
DEB_DIR  ?= build-deb
DEB_J    ?= 2
DEB_GPU  ?= $(if $(NVCC_BIN),1,0)
DEB_OPTS ?=
LINTIAN  ?= 1
.PHONY: deb
deb:
	@debian/symbols.sh --check
	@v=$$(dpkg-parsechangelog -S Version); [ "$$v" = "$(VERSION)" ] || \
		{ echo "debian/changelog's version is $$v, include/pbox.h's $(VERSION): add a changelog entry (dch -v $(VERSION))"; exit 1; }
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/src
	tar -c --exclude=./build --exclude=./build-san --exclude=./build-fuzz --exclude='./$(DEB_DIR)' \
		--exclude=./.git --exclude=./debian/build --exclude=__pycache__ . | tar -x -C $(DEB_DIR)/src
	cd $(DEB_DIR)/src && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		DEB_BUILD_OPTIONS="parallel=$(DEB_J) $(DEB_OPTS)" \
		DEB_BUILD_PROFILES="$(if $(filter 1,$(DEB_GPU)),,pkg.pbox.nogpu)" \
		dpkg-buildpackage -us -uc -b > ../dpkg-buildpackage.log 2>&1 || \
		{ tail -40 ../dpkg-buildpackage.log; echo "dpkg-buildpackage failed: $(DEB_DIR)/dpkg-buildpackage.log"; exit 1; }
	ls $(DEB_DIR)/*.deb
ifeq ($(LINTIAN),1)
	lintian --fail-on error --tag-display-limit 0 $(DEB_DIR)/*.changes
endif

unit: $(UNIT_TESTS) $(GPU_FAKE)
	@bash tests/run-unit.sh $(UNIT_TESTS)

# bench/gpu_stage on the fake GPU library, a few calls: the benchmark of
# the staging pipeline keeps working where there is no GPU (make check).
.PHONY: bench-smoke
bench-smoke: $(BUILD)/bench/gpu_stage $(GPU_FAKE)
	PBOX_GPU_LIB=$(abspath $(GPU_FAKE)) $(BUILD)/bench/gpu_stage --iters 2 --reps 1 \
		--chunk 64K 256K 1M > $(BUILD)/gpu_stage.out || { cat $(BUILD)/gpu_stage.out; exit 1; }
	@grep -q "FAKE device.*NOT GPU figures" $(BUILD)/gpu_stage.out && \
		echo "bench-smoke: gpu_stage ran on the fake GPU library"

# Fails when a file includes a header of a floor it must not know; the
# second script shows that the check breaks when a floor reaches up.
layering:
	@bash tests/layering.sh
	@bash tests/layering_test.sh

# Fails when include/pbox*.h, client/libpbox.map, libpbox.so's exports and
# libpbox.a's global symbols differ, or when a program that links libpbox.a
# and has functions of libpbox's internal names does not link or run.
exports: $(BUILD)/libpbox.so $(BUILD)/libpbox.a
	@CC='$(CC)' SANFLAGS='$(SANFLAGS)' LIBS='$(LIBS_CLIENT)' bash tests/exports.sh $(BUILD)

# Fails when an object of one of libpbox's rooms refers to a symbol only a
# room above it defines (the include check cannot see a hand-written
# extern); the self-test shows that it breaks when a room calls up.
rooms: $(BUILD)/libpbox-internal.a
	@bash tests/rooms_calls.sh $(BUILD)
	@CC='$(CC)' bash tests/rooms_calls.sh --selftest

# LONG_TESTS run in CI after make test (make integration-long), not in
# it: the training-quality run, the short soak (CI's 20 s of make soak),
# the control-port attacks (100 s alone) and the loss test's xdp pass
# (120 s alone; its udp pass stays), so that make test stays under 15
# minutes on two cores. NAME[xdp] names a test's xdp pass only.
LONG_TESTS = topk_train soak control_abuse loss[xdp]
# Two tests at a time (run.sh runs its SERIAL ones alone): most of them
# wait on timeouts and pauses more than they compute.
INTEGRATION_JOBS ?= 2
integration: all
	@BUILD=$(BUILD) SKIP="$(LONG_TESTS)" JOBS=$(INTEGRATION_JOBS) bash tests/integration/run.sh

# The training-quality suite of sparse gradients (bench/sparse_quality:
# four tasks, dense / top-k / PowerSGD on 4 Gloo ranks, about 10-25
# minutes on two cores): table and plot in build/sparse_quality.
.PHONY: sparse-quality
sparse-quality: all
	@OUT=$(CURDIR)/$(BUILD)/sparse_quality bash bench/sparse_quality/suite.sh

# DASO against DDP, both on pbox, 2 hosts x 2 ranks on 1 Gbit/s host links
# (bench/daso/daso_compare.sh, root, about 10 minutes): table in
# build/daso-compare. Options in DASO_ARGS, e.g. DASO_ARGS="--reps 1".
DASO_ARGS ?=
.PHONY: daso-compare
daso-compare: all
	@BUILD=$(BUILD) bash bench/daso/daso_compare.sh $(DASO_ARGS)

.PHONY: integration-long
integration-long: all
	@for t in $(LONG_TESTS); do case $$t in \
		*'[xdp]') n=$${t%'[xdp]'}; BUILD=$(BUILD) ONLY=test_$$n.sh SKIP=$$n \
			TRANSPORTS=xdp bash tests/integration/run.sh || exit 1 ;; \
		*) BUILD=$(BUILD) ONLY=test_$$t.sh TRANSPORTS=udp \
			bash tests/integration/run.sh || exit 1 ;; esac; done

# No root, no network, no apt, as any user: unit tests under ASan+UBSan,
# the layering check, libpbox's rooms by their calls and its exports
# against its headers and map, the Python binding against pbox.h and the
# (non-ASan) library, the GPU library's architectures and exports (skipped
# without nvcc), and every fuzzer for 3 s. It builds with -j2 unless given
# a -j: on two cores, 2m20s-2m50s from a fresh clone (3m15s at -j1), 1m10s
# built.
CHECK_J = $(if $(filter -j%,$(MAKEFLAGS)),,-j2)
check:
	$(MAKE) $(CHECK_J) layering
	$(MAKE) $(CHECK_J) SAN=0 BUILD=build exports
	$(MAKE) $(CHECK_J) SAN=0 BUILD=build rooms
	$(MAKE) $(CHECK_J) SAN=1 unit
	$(MAKE) $(CHECK_J) SAN=1 bench-smoke
	$(MAKE) $(CHECK_J) SAN=0 BUILD=build pycheck
	$(MAKE) $(CHECK_J) SAN=0 BUILD=build gpucheck
	$(MAKE) $(CHECK_J) fuzz-brief

# make check as CHECK_USER (default nobody), from root, on a copy of the
# tree that it builds from nothing (tests/check-as-user.sh).
CHECK_USER ?= nobody
.PHONY: check-as-user
check-as-user:
	@CHECK_USER=$(CHECK_USER) bash tests/check-as-user.sh

# make check as nobody on a fresh copy (the whole of make check: a second
# run as root would add 1.5-2.5 minutes and nothing root-only), then the
# integration tests against the real pboxd (root).
test:
	@[ "$$(id -u)" = 0 ] || { echo "make test needs root (integration tests use network namespaces, veth and DPDK): sudo make test"; exit 1; }
	@bash deploy/install-deps.sh
	$(MAKE) check-as-user
	$(MAKE) all
	$(MAKE) integration

# Long soak: SOAK_SECONDS (default 600) of jobs under loss, memory checked.
soak: all
	@BUILD=$(BUILD) bash tests/integration/soak.sh

# Both set-up commands install missing Debian packages first (root needed).
demo:
	@[ "$$(id -u)" = 0 ] || { echo "make demo needs root (network namespaces, veth and DPDK): sudo make demo"; exit 1; }
	@bash deploy/install-deps.sh
	$(MAKE) all
	@BUILD=$(BUILD) bash deploy/demo.sh

clean:
	rm -rf build build-san build-fuzz build-deb

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# libFuzzer targets: make fuzz (FUZZ_SECONDS each), fuzz-quick (10 s), fuzz-brief (5 s, in make check).
include tests/fuzz/Makefile.inc

# Side-by-side allreduce benchmark: make compare (pbox vs OpenMPI vs Gloo);
# make compare-cloud: the same where tc-shaped links are the limit.
include bench/compare/Makefile.inc

# The same three under packet loss: make loss runs bench/loss.sh (root;
# options in LOSS_ARGS, e.g. make loss LOSS_ARGS=--quick); builds what
# make compare builds.
LOSS_ARGS ?=
.PHONY: loss
loss: all mpi-allreduce
	@[ "$$(id -u)" = 0 ] || { echo "make loss needs root (network namespaces, veth, nftables and DPDK): sudo make loss"; exit 1; }
	@BUILD=$(BUILD) PYTHON=$(PYTHON) bash bench/loss.sh $(LOSS_ARGS)
