# pbox build. `make` builds pboxd, pboxctl, libpbox.{a,so} and pbox-perf
# into build/; `make test` runs unit and integration tests; `make demo` runs
# the demo; `make SAN=1 ...` builds with ASan+UBSan into build-san/.

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
PKGS_BOX    = libdpdk jansson hwloc
PKGS_CLIENT = jansson
VERSION     = 0.1.0

WARN    = -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS  ?= -O2 -g
BASEFLAGS = -std=gnu11 -fPIC $(WARN) $(SANFLAGS) -Iinclude -Idataplane -Icontrol -Iclient -Inic \
	    -D_GNU_SOURCE -DPBOX_VERSION=\"$(VERSION)\"
DPDK_CFLAGS = $(shell pkg-config --cflags libdpdk 2>/dev/null)
DPDK_LIBS   = $(shell pkg-config --libs libdpdk 2>/dev/null)
LIBS_CLIENT = $(shell pkg-config --libs jansson 2>/dev/null) -lpthread -lm
LIBS_BOX    = $(DPDK_LIBS) $(shell pkg-config --libs jansson hwloc 2>/dev/null) -lpthread -lm

# Sources. Files that include DPDK headers are listed in DPDK_SRC; all
# others build without DPDK so unit tests, benchmarks and fuzzers can use them.
SHARED_SRC = dataplane/wire.c dataplane/drops.c dataplane/sum.c dataplane/sum_scalar.c control/secret.c \
	     dataplane/sum_avx2.c dataplane/sum_avx512.c control/jsonl.c control/rpc_client.c
ENGINE_SRC = dataplane/engine.c $(filter-out nic/port%.c, $(wildcard nic/*.c))
DPDK_SRC   = $(wildcard dataplane/lcore*.c nic/port*.c) control/pboxd.c
CONTROL_SRC = $(filter-out control/pboxd.c control/pboxctl.c control/jsonl.c control/rpc_client.c control/secret.c, $(wildcard control/*.c))
CLIENT_SRC = $(filter-out client/pbox_perf.c client/perf_blast.c, $(wildcard client/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

SHARED_OBJ  = $(call obj,$(SHARED_SRC))
ENGINE_OBJ  = $(call obj,$(ENGINE_SRC))
DPDK_OBJ    = $(call obj,$(DPDK_SRC))
CONTROL_OBJ = $(call obj,$(CONTROL_SRC))
CLIENT_OBJ  = $(call obj,$(CLIENT_SRC))

BINS = $(BUILD)/pboxd $(BUILD)/pboxctl $(BUILD)/pbox-perf
LIBS = $(BUILD)/libpbox.a $(BUILD)/libpbox.so
UNIT_TESTS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
BENCHES = $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))

.PHONY: all deps install test unit integration demo clean fuzz soak
all: $(BINS) $(LIBS) $(BENCHES)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# DPDK translation units need DPDK's flags (-march etc.).
$(DPDK_OBJ): $(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(DPDK_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# SIMD kernels: each variant compiled for its ISA, picked at run time.
$(BUILD)/obj/dataplane/sum_avx2.o: CFLAGS += -mavx2 -mf16c
$(BUILD)/obj/dataplane/sum_avx512.o: CFLAGS += -mavx512f -mavx512bw -mavx512vl -mf16c

# Box core (no DPDK): engine + control plane, for pboxd and unit tests.
$(BUILD)/libboxcore.a: $(SHARED_OBJ) $(ENGINE_OBJ) $(CONTROL_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libpbox.a: $(CLIENT_OBJ) $(SHARED_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libpbox.so: $(CLIENT_OBJ) $(SHARED_OBJ)
	$(CC) -shared -Wl,-soname,libpbox.so.0 $(SANFLAGS) -o $@ $^ $(LIBS_CLIENT)

$(BUILD)/pboxd: $(DPDK_OBJ) $(BUILD)/libboxcore.a
	$(CC) $(SANFLAGS) -o $@ $(DPDK_OBJ) $(BUILD)/libboxcore.a $(LIBS_BOX)

$(BUILD)/pboxctl: $(call obj,control/pboxctl.c) $(BUILD)/libpbox.a
	$(CC) $(SANFLAGS) -o $@ $^ $(LIBS_CLIENT)

$(BUILD)/pbox-perf: $(call obj,client/pbox_perf.c client/perf_blast.c) $(BUILD)/libpbox.a
	$(CC) $(SANFLAGS) -o $@ $^ $(LIBS_CLIENT)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libboxcore.a $(BUILD)/libpbox.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/libboxcore.a $(BUILD)/libpbox.a \
		$(shell pkg-config --libs cmocka hwloc) $(LIBS_CLIENT)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libboxcore.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/libboxcore.a $(LIBS_CLIENT)

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
	install -m 644 include/pbox.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libpbox.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libpbox.so $(DESTDIR)$(PREFIX)/lib/libpbox.so.0
	ln -sf libpbox.so.0 $(DESTDIR)$(PREFIX)/lib/libpbox.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' deploy/pbox.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/pbox.pc
	install -d $(DESTDIR)$(PYDIR)/pbox
	install -m 644 client/python/pbox/*.py $(DESTDIR)$(PYDIR)/pbox/

unit: $(UNIT_TESTS)
	@bash tests/run-unit.sh $(UNIT_TESTS)

integration: all
	@BUILD=$(BUILD) bash tests/integration/run.sh

# Unit tests run under ASan+UBSan; integration against the normal build.
test:
	@[ "$$(id -u)" = 0 ] || { echo "make test needs root (integration tests use network namespaces, veth and DPDK): sudo make test"; exit 1; }
	@bash deploy/install-deps.sh
	$(MAKE) SAN=1 unit
	$(MAKE) all
	$(MAKE) integration
	$(MAKE) fuzz-brief

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
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# libFuzzer targets: make fuzz (FUZZ_SECONDS each), fuzz-quick (10 s), fuzz-brief (5 s, in make test).
include tests/fuzz/Makefile.inc

# Side-by-side allreduce benchmark: make compare (pbox vs OpenMPI vs Gloo).
include bench/compare/Makefile.inc
