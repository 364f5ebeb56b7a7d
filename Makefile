# wshard - pre-shard LLM checkpoints for tensor-parallel inference.
#
#   make                 build ./wshard (CUDA round trip when nvcc is found)
#   make CUDA=0          build with the host validation backend only
#   make check           build, run every test, then again under ASan+UBSan,
#                        then the engine oracle (vLLM) suite
#   make engine-test     the engine oracle suite alone: each layout once
#                        (ENGINE_CASES=ARCH:TP ... for chosen cases)
#   make engine-test-full  every engine case (tp 1 and 2): when layouts change
#   make learn-table     rules learned from vLLM for every architecture it
#                        shares with transformers; the README's table (hours)
#   make test            run the tests of the current build only
#   make demo            convert a small generated checkpoint at tp 2
#   make install         install binary, libwshard.so and man pages (PREFIX, DESTDIR)
#   make DEVELOPER=1     add -Wall -Wextra -Werror;  V=1 shows commands

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
MANDIR ?= $(PREFIX)/share/man
DESTDIR ?=

CC := mpicc
PKG_CONFIG ?= pkg-config
PYTHON ?= $(shell if [ -x .venv/bin/python3 ]; then echo .venv/bin/python3; else echo python3; fi)

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
ifeq ($(NVCC),)
CUDA ?= 0
else
CUDA ?= 1
endif

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
# The CUDA runtime and ASan's shadow memory do not mix; the sanitized build
# checks the host backend and everything else.
override CUDA := 0
B := build/san-cuda$(CUDA)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
else
B := build/rel-cuda$(CUDA)
SANFLAGS :=
endif

CFLAGS ?= -O2 -g
# -fPIC: the same objects make libwshard.so (below), which the vLLM plugin loads.
CFLAGS += -std=c11 -D_GNU_SOURCE -pthread -fPIC -MMD -MP $(SANFLAGS)
CFLAGS += -Wall -Wextra -Wno-unused-parameter
ifeq ($(DEVELOPER),1)
CFLAGS += -Werror
endif
CFLAGS += $(shell $(PKG_CONFIG) --cflags jansson libarchive libxxhash 2>/dev/null)
LDFLAGS += -pthread $(SANFLAGS)
LDLIBS += $(shell $(PKG_CONFIG) --libs jansson libarchive libxxhash 2>/dev/null || echo -ljansson -larchive -lxxhash) -lm

NVCCFLAGS ?= -O2 -std=c++17 -Xcompiler -fPIC
ifeq ($(CUDA),1)
# Machine code for Ampere (sm_80; sm_86/sm_89 run it too) and Hopper,
# plus compute_90 PTX that newer GPUs compile when the program loads.
NVCC_GENCODE ?= -gencode arch=compute_80,code=sm_80 \
	-gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
NVCCFLAGS += $(NVCC_GENCODE) -MMD -MP -Xcompiler -Wall,-Wextra
CFLAGS += -DWSHARD_CUDA=1
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/targets/x86_64-linux/lib))
LDLIBS += -L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt -lstdc++
# the suites that read device memory back (test_load.c)
TEST_CUDA_INC := -I$(CUDA_HOME)/include
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

LIB_SRC := \
	lib/base/comm.c \
	lib/base/crc64.c \
	lib/base/dtype.c \
	lib/base/error.c \
	lib/base/fileio.c \
	lib/base/fpconv.c \
	lib/base/hash.c \
	lib/base/hooks.c \
	lib/base/sha256.c \
	lib/source/archive.c \
	lib/source/catalog.c \
	lib/source/catalog_folder.c \
	lib/source/catalog_heads.c \
	lib/source/catalog_made.c \
	lib/source/catalog_mistral.c \
	lib/source/catalog_subdirs.c \
	lib/source/catalog_index.c \
	lib/source/catalog_open.c \
	lib/source/catalog_read.c \
	lib/source/catalog_st.c \
	lib/source/catalog_view.c \
	lib/source/hfcache.c \
	lib/source/safetensors.c \
	lib/source/st_fast.c \
	lib/source/st_header.c \
	lib/source/st_layout.c \
	lib/source/st_read.c \
	lib/rules/expr.c \
	lib/rules/rules.c \
	lib/rules/rules_block.c \
	lib/rules/rules_extra.c \
	lib/rules/rules_load.c \
	lib/rules/rules_op.c \
	lib/rules/rules_parse.c \
	lib/rules/rules_scale.c \
	lib/rules/rules_source.c \
	lib/rules/rules_stage.c \
	lib/rules/rules_tie.c \
	lib/rules/rules_values.c \
	lib/plan/plan_build.c \
	lib/plan/plan_concat.c \
	lib/plan/plan_dequant.c \
	lib/plan/plan_expert.c \
	lib/plan/plan_extra.c \
	lib/plan/plan_fuse.c \
	lib/plan/plan_image_norm.c \
	lib/plan/plan_layout.c \
	lib/plan/plan_match.c \
	lib/plan/plan_piece.c \
	lib/plan/plan_prime.c \
	lib/plan/plan_quant.c \
	lib/plan/plan_quark.c \
	lib/plan/plan_quark_experts.c \
	lib/plan/plan_reorder.c \
	lib/plan/plan_required.c \
	lib/plan/plan_shape.c \
	lib/plan/plan_split.c \
	lib/plan/plan_tie.c \
	lib/plan/plan_unstack.c \
	lib/plan/plan_values.c \
	lib/plan/plan_stage.c \
	lib/plan/plan_view.c \
	lib/stream/exchange.c \
	lib/stream/rows.c \
	lib/stream/stream.c \
	lib/stream/stream_run.c \
	lib/stream/stream_threads.c \
	lib/stream/transpose.c \
	lib/stream/window.c \
	lib/output/archive_out.c \
	lib/output/exec.c \
	lib/output/extras.c \
	lib/output/gather.c \
	lib/output/late.c \
	lib/output/manifest.c \
	lib/output/manifest_entry.c \
	lib/output/manifest_parts.c \
	lib/output/manifest_read.c \
	lib/output/outdir.c \
	lib/output/plan_text.c \
	lib/output/seal.c \
	lib/verify/verify.c \
	lib/verify/verify_diff.c \
	lib/verify/verify_files.c \
	lib/verify/verify_source.c \
	lib/load/load.c \
	lib/load/load_device.c \
	lib/load/load_piece.c \
	cuda/load_host.c \
	cuda/validate_host.c \
	cuda/validate_sum_host.c

CUDA_SRC := \
	cuda/load_cuda.cu \
	cuda/validate_cuda.cu \
	cuda/validate_pool.cu

CMD_SRC := \
	cmd/convert.c \
	cmd/inspect.c \
	cmd/util.c \
	cmd/verify.c \
	cmd/wshard.c

RULE_FILES := $(sort $(wildcard lib/rules/*.json)) $(sort $(wildcard lib/rules/blocks/*.json))

TEST_SUITES := $(patsubst test/%.c,%,$(sort $(wildcard test/test_*.c)))

LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o) $(B)/lib/rules/rules_builtin.o
ifeq ($(CUDA),1)
LIB_OBJ += $(CUDA_SRC:%.cu=$(B)/%.o)
endif
CMD_OBJ := $(CMD_SRC:%.c=$(B)/%.o)
TEST_BIN := $(TEST_SUITES:%=$(B)/test/%)

ifeq ($(SANITIZE),1)
PROGRAM := $(B)/wshard
else
PROGRAM := wshard
endif

all: $(PROGRAM) $(B)/libwshard.so

# libwshard.so, which the vLLM plugin (lib/vllm) loads: the loading API
# (wshard_load_*) and what it calls, taken from libwshard.a, so that no MPI
# is brought into the engine's processes.  A CUDA build links the CUDA
# runtime in statically for the device destinations, its symbols hidden
# (--exclude-libs): the engine's own libcudart neither takes its calls
# nor gives it its own; both use the device's primary context.
LOAD_API := wshard_load_open wshard_load_count wshard_load_info wshard_load_dest \
	wshard_load_dest_device wshard_load_has_device \
	wshard_load_bytes wshard_load_prefetch wshard_load_run wshard_load_free
LOAD_LDLIBS := $(shell $(PKG_CONFIG) --libs jansson libarchive libxxhash 2>/dev/null || \
	echo -ljansson -larchive -lxxhash) -lm
ifeq ($(CUDA),1)
LOAD_LDLIBS += -Wl,--exclude-libs,libcudart_static.a \
	-L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt -lstdc++
endif
$(B)/libwshard.so: $(B)/libwshard.a
	@echo '  LINK   $@'
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -Wl,--as-needed -Wl,-soname,libwshard.so \
		-o $@ $(LOAD_API:%=-Wl,-u,%) $(B)/libwshard.a $(LOAD_LDLIBS)

$(PROGRAM): $(CMD_OBJ) $(B)/libwshard.a
	@echo '  LINK   $@'
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CMD_OBJ) $(B)/libwshard.a $(LDLIBS)

$(B)/libwshard.a: $(LIB_OBJ)
	@echo '  AR     $@'
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo '  CC     $<'
	$(Q)$(CC) $(CFLAGS) -Ilib -c -o $@ $<

$(B)/%.o: %.cu cuda/validate_sum_host.h cuda/validate_cuda.h cuda/validate_pool.h \
		cuda/validate_sum.h cuda/validate_kernel.cuh cuda/load_cuda.h lib/wshard.h lib/base/devload.h
	@mkdir -p $(dir $@)
	@echo '  NVCC   $<'
	$(Q)$(NVCC) $(NVCCFLAGS) -Ilib -c -o $@ $<

# The built-in rule files and blocks, embedded as C strings.
$(B)/lib/rules/rules_builtin.c: $(RULE_FILES) scripts/embed-rules
	@mkdir -p $(dir $@)
	@echo '  EMBED  $@'
	$(Q)sh scripts/embed-rules $(RULE_FILES) >$@.tmp && mv $@.tmp $@

$(B)/lib/rules/rules_builtin.o: $(B)/lib/rules/rules_builtin.c
	@echo '  CC     $<'
	$(Q)$(CC) $(CFLAGS) -Ilib -c -o $@ $<

$(B)/test/%: test/%.c $(B)/libwshard.a
	@mkdir -p $(dir $@)
	@echo '  CC     $@'
	$(Q)$(CC) $(CFLAGS) -Ilib -Icuda $(TEST_CUDA_INC) -o $@ $< $(B)/libwshard.a $(LDFLAGS) $(LDLIBS) -lcriterion

tests: $(TEST_BIN) $(PROGRAM) $(B)/libwshard.so

# Runs every Criterion suite and the shell-level tests against the build.
test: tests
	$(Q)WSHARD=$(abspath $(PROGRAM)) PYTHON=$(PYTHON) B=$(B) CUDA=$(CUDA) \
		sh test/run-all $(TEST_BIN)

check: all
	$(Q)$(MAKE) --no-print-directory test
	$(Q)$(MAKE) --no-print-directory SANITIZE=1 test
	$(Q)$(MAKE) --no-print-directory engine-test

# vLLM loads each architecture's checkpoint and wshard's output of it
# (test/engine/run); skipped when scripts/install-deps --engine has not run.
engine-test: $(PROGRAM) $(B)/libwshard.so
	$(Q)WSHARD=$(abspath $(PROGRAM)) WSHARD_LIB=$(abspath $(B)/libwshard.so) \
		sh test/engine/run $(ENGINE_CASES); \
		rc=$$?; [ $$rc -eq 77 ] || exit $$rc

engine-test-full: $(PROGRAM) $(B)/libwshard.so
	$(Q)WSHARD=$(abspath $(PROGRAM)) WSHARD_LIB=$(abspath $(B)/libwshard.so) \
		sh test/engine/run all; \
		rc=$$?; [ $$rc -eq 77 ] || exit $$rc

# scripts/learn-rules for every text decoder both vLLM and transformers
# provide (LEARN_ARCHS="A B" for some), proven by both oracles; then the
# README's table.  Not part of check: an hour or more of engine runs.
learn-table: $(PROGRAM) $(B)/libwshard.so
	$(Q)test -x build/engine/venv/bin/python || \
		{ echo "learn-table: run scripts/install-deps --engine first"; exit 1; }
	$(Q)WSHARD=$(abspath $(PROGRAM)) WSHARD_LIB=$(abspath $(B)/libwshard.so) \
		build/engine/venv/bin/python scripts/learn-rules --prove --all $(LEARN_ARCHS)
	$(Q)python3 scripts/learn-rules table --readme README.md --man man/wshard-families.7

# The GPU round trip's throughput against the device's copy bandwidth
# (scripts/bench --gpu); CUDA builds only.
bench-roundtrip: $(B)/bench-roundtrip

$(B)/bench-roundtrip: cuda/bench_roundtrip.cu cuda/validate_kernel.cuh $(B)/libwshard.a
ifeq ($(CUDA),1)
	@echo '  NVCC   $@'
	$(Q)$(NVCC) $(NVCCFLAGS) -Ilib -Icuda -o $@ $< $(B)/libwshard.a \
		$(filter-out -lstdc++,$(LDLIBS)) -cudart static
else
	@echo 'bench-roundtrip needs a CUDA build (nvcc not found, or CUDA=0)' >&2; exit 1
endif

demo: $(PROGRAM)
	$(Q)sh scripts/demo

install: $(PROGRAM) $(B)/libwshard.so
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7
	install -m 755 $(PROGRAM) $(DESTDIR)$(BINDIR)/wshard
	install -d $(DESTDIR)$(LIBDIR)
	install -m 755 $(B)/libwshard.so $(DESTDIR)$(LIBDIR)/libwshard.so
	install -m 644 man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 man/*.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 644 man/*.7 $(DESTDIR)$(MANDIR)/man7/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/wshard $(DESTDIR)$(LIBDIR)/libwshard.so
	cd $(DESTDIR)$(MANDIR)/man1 && rm -f wshard.1 wshard-convert.1 wshard-verify.1 wshard-inspect.1
	rm -f $(DESTDIR)$(MANDIR)/man5/wshard-rules.5
	rm -f $(DESTDIR)$(MANDIR)/man7/wshard-families.7 $(DESTDIR)$(MANDIR)/man7/wshard-vllm.7

# build/engine (the engine test environment, several GB) survives a clean.
clean:
	rm -rf wshard
	[ ! -d build ] || find build -mindepth 1 -maxdepth 1 ! -name engine -exec rm -rf {} +

.PHONY: all test tests check engine-test engine-test-full learn-table bench-roundtrip demo install uninstall clean

# ---------------------------------------------------------------------------
# Fuzzing with libFuzzer:  make fuzz [FUZZ_SECONDS=60]
#
# Compiles the library sources with clang (coverage-instrumented, ASan and
# UBSan, every UBSan finding fatal) and links each test/fuzz/fuzz_NAME.c
# harness into build/fuzz/fuzz_NAME.  Each then runs for FUZZ_SECONDS on
# build/fuzz/corpus-NAME, a fresh copy of the committed seeds
# (fixtures/fuzz/NAME) and of the reproducers of crashes already found
# (fixtures/fuzz-crashes/NAME), which replay first; the committed seeds are
# never written.  Fails if any harness crashes: the reproducer is left in
# build/fuzz/NAME-crash-* (or -leak-, -timeout-, -oom-), the log in
# build/fuzz/NAME.log.  scripts/fuzz-ci wraps this for CI.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_B := build/fuzz
FUZZ_NAMES := safetensors catalog rules manifest archive
FUZZ_MPI_INC ?= /usr/lib/x86_64-linux-gnu/openmpi/include
FUZZ_MPI_LIB ?= /usr/lib/x86_64-linux-gnu/openmpi/lib
FUZZ_CFLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -pthread -MMD -MP \
	-fno-omit-frame-pointer -fno-sanitize-recover=all \
	-Ilib -I$(FUZZ_MPI_INC) \
	$(shell $(PKG_CONFIG) --cflags jansson libarchive libxxhash 2>/dev/null)
FUZZ_LDLIBS := -L$(FUZZ_MPI_LIB) -lmpi \
	$(shell $(PKG_CONFIG) --libs jansson libarchive libxxhash 2>/dev/null || echo -ljansson -larchive -lxxhash) -lm
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_B)/obj/%.o) $(FUZZ_B)/obj/lib/rules/rules_builtin.o
FUZZ_BIN := $(FUZZ_NAMES:%=$(FUZZ_B)/fuzz_%)

$(FUZZ_B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo '  FUZZCC $<'
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<

$(FUZZ_B)/obj/lib/rules/rules_builtin.c: $(RULE_FILES) scripts/embed-rules
	@mkdir -p $(dir $@)
	@echo '  EMBED  $@'
	$(Q)sh scripts/embed-rules $(RULE_FILES) >$@.tmp && mv $@.tmp $@

$(FUZZ_B)/obj/lib/rules/rules_builtin.o: $(FUZZ_B)/obj/lib/rules/rules_builtin.c
	@echo '  FUZZCC $<'
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<

$(FUZZ_B)/fuzz_%: test/fuzz/fuzz_%.c $(FUZZ_LIB_OBJ)
	@echo '  FUZZLD $@'
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< \
		$(FUZZ_LIB_OBJ) $(FUZZ_LDLIBS)

fuzz-build: $(FUZZ_BIN)

fuzz: $(FUZZ_BIN)
	$(Q)failed=; for n in $(FUZZ_NAMES); do \
		c=$(FUZZ_B)/corpus-$$n; \
		rm -rf $$c $(FUZZ_B)/$$n-* && mkdir -p $$c && cp fixtures/fuzz/$$n/* $$c/ || exit 1; \
		if [ -d fixtures/fuzz-crashes/$$n ]; then \
			cp fixtures/fuzz-crashes/$$n/* $$c/ 2>/dev/null; fi; \
		echo "  FUZZ   $$n ($(FUZZ_SECONDS) s)"; \
		if $(FUZZ_B)/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -timeout=30 \
			-rss_limit_mb=4096 -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_B)/$$n- $$c >$(FUZZ_B)/$$n.log 2>&1; then \
			grep -h '^stat::number_of_executed_units' $(FUZZ_B)/$$n.log | sed 's/^/         /'; \
		else \
			failed="$$failed $$n"; \
			grep -h -A 12 'ERROR:\|runtime error\|invariant broken\|refused' \
				$(FUZZ_B)/$$n.log | head -n 30 | sed 's/^/         /'; \
			ls $(FUZZ_B)/$$n-* 2>/dev/null | sed 's/^/         artifact: /'; \
		fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: crashes in:$$failed (see $(FUZZ_B)/)"; exit 1; fi

# Objects named only in a pattern rule would be removed as intermediates.
.SECONDARY: $(FUZZ_LIB_OBJ)
.PHONY: fuzz fuzz-build
# ---------------------------------------------------------------------------

-include $(shell find build -name '*.d' 2>/dev/null)
