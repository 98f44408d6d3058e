# flit — build, test, demo.   `make help` lists the targets.
#
#   make [V=1] [SAN=1] [BUILD=dir] [CC=clang]
#   make check [SAN=1] [TESTS="test_codec ..."] [TEST_TIMEOUT=s]
#   make demo | fuzz | install PREFIX=/usr/local DESTDIR= | deb | deps | clean

VERSION      := 0.1.0
SOVERSION    := 0
PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
BINDIR       ?= $(PREFIX)/bin
MANDIR       ?= $(PREFIX)/share/man
UNITDIR      ?= $(PREFIX)/lib/systemd/system

SAN          ?= 0
ifeq ($(SAN),1)
BUILD        ?= build-san
SANFLAGS     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD        ?= build
SANFLAGS     :=
endif

CC           ?= gcc
CLANG        ?= clang
BPFTOOL      ?= $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)
PKG_CONFIG   ?= pkg-config

OPTFLAGS     ?= -O2 -g
WARNFLAGS    := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes \
                -Wmissing-prototypes -Wformat=2 -Werror
CPPFLAGS     += -D_GNU_SOURCE -Iinclude -Iuserspace -Itransports -Ibpf -I$(BUILD)/bpf
CFLAGS_ALL   := -std=gnu11 $(OPTFLAGS) $(WARNFLAGS) $(SANFLAGS) -pthread $(CFLAGS)
LDFLAGS_ALL  := $(SANFLAGS) -pthread $(LDFLAGS)

LIBBPF_CFLAGS := $(shell $(PKG_CONFIG) --cflags libbpf 2>/dev/null)
LIBBPF_LIBS   := $(shell $(PKG_CONFIG) --libs libbpf 2>/dev/null)
CMOCKA_LIBS   := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)
URING_LIBS    := $(shell $(PKG_CONFIG) --libs liburing 2>/dev/null || echo -luring)
XDP_LIBS      := $(shell $(PKG_CONFIG) --libs libxdp libbpf 2>/dev/null || echo -lxdp -lbpf)
# RDMA (transports/rdma) only when libibverbs and librdmacm are installed
HAVE_RDMA     := $(shell $(PKG_CONFIG) --exists libibverbs librdmacm 2>/dev/null && echo 1)
RDMA_LIBS     := $(if $(HAVE_RDMA),$(strip $(shell $(PKG_CONFIG) --libs libibverbs librdmacm 2>/dev/null)))
# what the library itself needs at link time (also Libs.private of flit.pc)
LIB_LIBS      := $(URING_LIBS) $(XDP_LIBS) $(RDMA_LIBS)
ifeq ($(HAVE_RDMA),1)
CPPFLAGS      += -DFLIT_HAVE_RDMA
endif

ifeq ($(V),1)
Q :=
msg =
else
Q := @
msg = @printf '  %-6s %s\n' "$(1)" "$(2)";
endif

# ---- sources -------------------------------------------------------------
LIB_SRCS   := $(wildcard userspace/*.c) $(wildcard transports/*/*.c)
ifneq ($(HAVE_RDMA),1)
LIB_SRCS   := $(filter-out transports/rdma/%.c,$(LIB_SRCS))
$(info flit: libibverbs/librdmacm not found: building without the rdma transport (make deps installs them))
endif
LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB_HDRS   := $(wildcard include/flit/*.h userspace/*.h transports/*/*.h bpf/*.h)
TOOL_NAMES := $(patsubst tools/%.c,%,$(wildcard tools/flit-*.c))
TOOL_LIB   := $(filter-out $(wildcard tools/flit-*.c),$(wildcard tools/*.c))
TOOL_OBJS  := $(TOOL_LIB:%.c=$(BUILD)/%.o)
TOOLS      := $(TOOL_NAMES:%=$(BUILD)/tools/%)
LOADER     := $(patsubst loader/%.c,$(BUILD)/loader/%,$(wildcard loader/flit-*.c))
BPF_SRCS   := $(wildcard bpf/*.bpf.c)
BPF_OBJS   := $(BPF_SRCS:%.c=$(BUILD)/%.o)
BPF_SKELS  := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/bpf/%.skel.h)
TEST_NAMES := $(patsubst tests/%.c,%,$(wildcard tests/test_*.c))
TEST_BINS  := $(TEST_NAMES:%=$(BUILD)/tests/%)
TEST_SCRIPTS := $(wildcard tests/test_*.sh)
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))

SHLIB      := $(BUILD)/libflit.so.$(VERSION)
SONAME     := libflit.so.$(SOVERSION)
STLIB      := $(BUILD)/libflit.a

.SECONDARY: $(BPF_OBJS) $(TOOL_NAMES:%=$(BUILD)/tools/%.o) $(TOOL_OBJS)
.PHONY: all lib tools loader tests bpf check demo bench fuzz fuzz-build install deb deps clean help
.DEFAULT_GOAL := all

all: lib tools loader bpf tests $(BUILD)/flit.pc

help:
	@sed -n '1,8p' Makefile

deps:
	$(Q)tools/deps.sh

lib: $(SHLIB) $(STLIB)
tools: $(TOOLS)
loader: $(LOADER)
bpf: $(BPF_SKELS)
tests: $(TEST_BINS)

$(BUILD)/%.o: %.c $(LIB_HDRS) $(wildcard tools/*.h) $(BPF_SKELS)
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS_ALL) -fPIC -fvisibility=hidden -c $< -o $@

$(SHLIB): $(LIB_OBJS) userspace/libflit.map
	$(call msg,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=userspace/libflit.map \
		-Wl,-z,defs $(LDFLAGS_ALL) -o $@ $(LIB_OBJS) $(LIB_LIBS)
	$(Q)ln -sf libflit.so.$(VERSION) $(BUILD)/$(SONAME)
	$(Q)ln -sf $(SONAME) $(BUILD)/libflit.so

$(STLIB): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
	$(if $(RDMA_LIBS),-e '/^Libs.private:/s|$$| $(RDMA_LIBS)|')
$(BUILD)/flit.pc: flit.pc.in Makefile
	$(call msg,GEN,$@)
	@mkdir -p $(@D)
	$(Q)$(PC_SED) $< > $@

# Tools link the static library: no PLT on the hot path, run from the tree.
$(BUILD)/tools/%: $(BUILD)/tools/%.o $(TOOL_OBJS) $(STLIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $< $(TOOL_OBJS) $(STLIB) $(LIB_LIBS) -lm

$(BUILD)/loader/%: loader/%.c $(TOOL_OBJS) $(STLIB) $(LIB_HDRS) $(wildcard tools/*.h) $(BPF_SKELS)
	$(call msg,LINK,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -Itools $(CFLAGS_ALL) $(LIBBPF_CFLAGS) $(LDFLAGS_ALL) -o $@ $< \
		$(TOOL_OBJS) $(STLIB) $(LIB_LIBS) -lm

# ---- BPF: vmlinux.h from the running kernel's BTF, objects, skeletons -----
$(BUILD)/bpf/vmlinux.h:
	$(call msg,GEN,$@)
	@mkdir -p $(@D)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(BUILD)/bpf/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)$(CLANG) --target=bpf -O2 -g -Wall -Werror -D__TARGET_ARCH_x86 \
		-I$(BUILD)/bpf -Ibpf $(LIBBPF_CFLAGS) -c $< -o $@

$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*) > $@.tmp && mv $@.tmp $@

# ---- tests ---------------------------------------------------------------
$(BUILD)/tests/%: tests/%.c $(STLIB) $(wildcard tests/*.h) $(BPF_SKELS)
	$(call msg,TEST,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) $(LIBBPF_CFLAGS) $< -o $@ \
		$(LDFLAGS_ALL) $(STLIB) $(LIB_LIBS) $(CMOCKA_LIBS) $(LIBBPF_LIBS) -lm

TEST_TIMEOUT ?= 120
check: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory fuzz-build >/dev/null 2>&1 || true
	$(Q)BUILD=$(BUILD) SAN=$(SAN) TEST_TIMEOUT=$(TEST_TIMEOUT) \
		tests/run-tests.sh $(or $(TESTS),$(TEST_NAMES) $(notdir $(TEST_SCRIPTS:.sh=)) $(FUZZ_NAMES:%=fuzz:%))

# ---- fuzzing (libFuzzer, needs clang's fuzzer runtime) --------------------
FUZZ_TIME ?= 60
FUZZ_BINS := $(FUZZ_NAMES:%=$(BUILD)/fuzz/%)
fuzz-build: $(FUZZ_BINS)
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(LIB_SRCS) $(LIB_HDRS)
	$(call msg,FUZZ,$@)
	@mkdir -p $(@D)
	$(Q)$(CLANG) $(CPPFLAGS) -g -O1 -fsanitize=fuzzer,address,undefined $< \
		$(filter userspace/%,$(LIB_SRCS)) $(filter transports/%,$(LIB_SRCS)) -pthread $(LIB_LIBS) -o $@
fuzz: $(FUZZ_BINS)
	$(Q)for f in $(FUZZ_NAMES); do \
		mkdir -p $(BUILD)/fuzz/corpus-$$f; \
		echo "  FUZZ   $$f for $(FUZZ_TIME)s"; \
		$(BUILD)/fuzz/$$f -max_total_time=$(FUZZ_TIME) -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/ \
			$(BUILD)/fuzz/corpus-$$f tests/fuzz/corpus/$${f#fuzz_} || exit 1; \
	done

# ---- demo and benchmarks -------------------------------------------------
demo: deps
	$(Q)$(MAKE) --no-print-directory lib tools
	$(Q)BUILD=$(BUILD) tools/demo.sh

bench: deps
	$(Q)$(MAKE) --no-print-directory lib tools
	$(Q)BUILD=$(BUILD) ROUNDS=$${ROUNDS:-5} tools/demo.sh
	$(Q)BUILD=$(BUILD) tools/bench-shm.sh
	$(Q)BUILD=$(BUILD) tools/bench-topics.sh
	$(Q)if [ "$$(id -u)" -eq 0 ]; then BUILD=$(BUILD) tools/bench-udp.sh --backend all --rounds 3 --sizes "32 256"; \
	else echo "bench-udp: skipped (needs root: network namespaces for its testbed)"; fi

# ---- Python package (python/, ctypes over libflit.so.0): a wheel, offline.
# Debian's python3 by default: its setuptools and wheel are what deps installs.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
.PHONY: python
python:
	$(call msg,WHEEL,$(BUILD)/python)
	@mkdir -p $(BUILD)/python
	$(Q)$(PYTHON) -m pip wheel -q --no-build-isolation --no-index --no-deps -w $(BUILD)/python ./python

# ---- install -------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(INCLUDEDIR)/flit $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR)
	install -m 644 include/flit/*.h include/flit/*.hpp $(DESTDIR)$(INCLUDEDIR)/flit/
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libflit.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libflit.so
	install -m 644 $(STLIB) $(DESTDIR)$(LIBDIR)/
	$(PC_SED) flit.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/flit.pc
	install -m 755 $(TOOLS) $(LOADER) tools/flit-plot $(DESTDIR)$(BINDIR)/
	install -d $(DESTDIR)$(PREFIX)/share/flit/wireshark
	install -m 644 tools/wireshark/flit.lua $(DESTDIR)$(PREFIX)/share/flit/wireshark/
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g' loader/flit-loader@.service.in > $(DESTDIR)$(UNITDIR)/flit-loader@.service
	chmod 644 $(DESTDIR)$(UNITDIR)/flit-loader@.service
	for s in 1 3 7 8; do \
		ls docs/man/*.$$s >/dev/null 2>&1 || continue; \
		install -d $(DESTDIR)$(MANDIR)/man$$s; \
		install -m 644 docs/man/*.$$s $(DESTDIR)$(MANDIR)/man$$s/; \
	done

# Debian packages libflit0, libflit-dev, flit-tools in $(BUILD)/deb/
# (tools/mkdeb.sh: a staged `make install` split by package; dpkg-deb)
deb: all
	$(Q)BUILD=$(BUILD) VERSION=$(VERSION) SOVERSION=$(SOVERSION) tools/mkdeb.sh

clean:
	rm -rf build build-san

-include $(wildcard $(BUILD)/*.d)
