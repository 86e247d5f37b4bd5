# wgpt: GPT training in C on WebGPU (Dawn).
#   make run    fetch pinned dependencies, build, check the GPU driver, run the main job
#   make test   the same setup, then every test
#   make bench  the same setup, then wgpt beside PyTorch on this machine's GPU (bench/compare.sh;
#               LLMC=DIR: and beside llm.c's CUDA trainer, built from your llm.c clone DIR)
#   make        build only (needs `scripts/setup.sh` once)
CC ?= cc
OPT ?= -O2 -g
CFLAGS_ALL = -std=c11 $(OPT) -Wall -Wextra -Wshadow -D_POSIX_C_SOURCE=200809L -Isrc $(EXTRA_CFLAGS)
BUILD ?= build
DAWN_DIR = third_party/dawn
# Dawn is not linked: src/gpu/dawn_loader.c loads $(DAWN_DIR)/dawn.node (found
# relative to the executable) at run time. The addon's napi_* imports are bound
# to do-nothing functions every executable exports (src/gpu/napi_imports.c); libcrypto hashes the file against its pin.
LDLIBS_DAWN = -ldl -Wl,--export-dynamic-symbol='napi_*' -lcrypto -lpcre2-8 -lcjson -lmicrohttpd -lpthread -lz -lm $(MPI_LIBS)
DAWN_NODE_SHA256 := $(shell . scripts/pins.sh && echo $$WGPT_DAWN_NODE_SHA256)

LIB_SRC = $(wildcard src/gpu/*.c) $(wildcard src/model/*.c) $(wildcard src/data/*.c) $(wildcard src/train/*.c) \
          $(wildcard src/util/*.c)
LIB_SRC += $(wildcard src/weights/*.c)
# `wgpt serve` (libmicrohttpd).
LIB_SRC += $(wildcard src/serve/*.c)
# The communication layer (src/dist/comm.h): Open MPI where mpicc is found
# (WGPT_MPI=1), else one process (WGPT_MPI=0: make BUILD=build-nompi WGPT_MPI=0 all).
WGPT_MPI ?= $(shell command -v mpicc >/dev/null 2>&1 && echo 1 || echo 0)
ifeq ($(WGPT_MPI),1)
LIB_SRC += src/dist/comm_mpi.c
MPI_CFLAGS := $(shell mpicc --showme:compile)
MPI_LIBS := $(shell mpicc --showme:link)
else
LIB_SRC += src/dist/comm_single.c
endif
CLI_SRC = $(wildcard src/cli/*.c)
# The benchmarks (`wgpt bench`): above the library, beside the commands.
BENCH_SRC = $(wildcard src/bench/*.c)
KERNELS = $(sort $(wildcard kernels/*.wgsl))
TEST_SRC = $(wildcard tests/test_*.c)
# The plain C reference of the math every kernel is tested against.
REF_SRC = $(wildcard tests/ref/*.c)
REF_OBJ = $(patsubst tests/%.c,$(BUILD)/obj/tests/%.o,$(REF_SRC))
# The op-test registry: one file per kernel family (tests/ops/ops.h), run by
# test_ops; the per-kernel tests reuse a family's cases for their special ones.
OPS_SRC = $(wildcard tests/ops/*.c)
OPS_OBJ = $(patsubst tests/%.c,$(BUILD)/obj/tests/%.o,$(OPS_SRC))
TESTS = $(patsubst tests/%.c,$(BUILD)/%,$(TEST_SRC))
VK_LAYER = $(BUILD)/vk/libVkLayer_wgpt_select.so $(BUILD)/vk/VkLayer_wgpt_select.json \
           $(BUILD)/vk/libVkLayer_wgpt_stats.so $(BUILD)/vk/VkLayer_wgpt_stats.json

LIB_OBJ = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC)) $(BUILD)/obj/kernels_embedded.o
CLI_OBJ = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRC))
BENCH_OBJ = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(BENCH_SRC))

.PHONY: all setup run test bench sanitize sanitize-build valgrind clean fuzz fuzz-build fuzz-corpus install lavapipe
all: $(BUILD)/wgpt $(TESTS) $(BUILD)/bench_ref_step $(BUILD)/bench_hf_logits $(VK_LAYER)

setup:
	@scripts/setup.sh

# wgpt's tuned lavapipe (3-8 min on 2 cores): third_party/lavapipe/. make run uses it
# where it is built; make test builds it and runs the tests on it where the adapter
# is a CPU. By hand: VK_ICD_FILENAMES=$(CURDIR)/third_party/lavapipe/lvp_icd.json
lavapipe:
	@scripts/build-lavapipe.sh

run: setup
	@$(MAKE) --no-print-directory all
	@scripts/ensure-driver.sh $(BUILD)/wgpt
	@scripts/demo.sh $(ARGS)

bench: setup
	@$(MAKE) --no-print-directory all
	@scripts/ensure-driver.sh $(BUILD)/wgpt
	@bench/compare.sh --wgpt $(BUILD)/wgpt $(if $(LLMC),--llmc $(LLMC)) $(ARGS)

# The test programs run twice: as built, on the default device (Debian's
# lavapipe on a CPU), and sanitized (below), on wgpt's tuned lavapipe where the
# adapter is a CPU (else on the default device again). TEST_JOBS programs run at a time.
TEST_JOBS ?= 2
# (The builds use TEST_JOBS compilers too, unless make was given -j itself.)
TEST_MAKE = $(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(TEST_JOBS))
test: setup
	@$(TEST_MAKE) all
	@scripts/ensure-driver.sh $(BUILD)/wgpt
	@WGPT_TEST_JOBS=$(TEST_JOBS) scripts/run-tests.sh $(TESTS)
	@$(TEST_MAKE) web
	@scripts/browser-tests.sh
	@$(TEST_MAKE) sanitize-build
	@ASAN_OPTIONS=detect_leaks=0 TEST_LABEL=sanitized WGPT_TEST_JOBS=$(TEST_JOBS) \
	  scripts/test-tuned-lavapipe.sh build-asan/wgpt $(SAN_TESTS)
	@$(TEST_MAKE) valgrind
	@$(TEST_MAKE) fuzz

# Every test again with AddressSanitizer and UndefinedBehaviorSanitizer on our
# host code. Leak checks are off: Dawn is not instrumented and keeps
# process-lifetime allocations that LeakSanitizer would report.
SAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_TESTS = $(patsubst $(BUILD)/%,build-asan/%,$(TESTS))
sanitize: sanitize-build
	@ASAN_OPTIONS=detect_leaks=0 TEST_LABEL=sanitized scripts/run-tests.sh $(SAN_TESTS)
sanitize-build:
	@$(MAKE) --no-print-directory BUILD=build-asan EXTRA_CFLAGS="$(SAN_FLAGS)" all

# The programs that need no GPU, under valgrind's memcheck (WGPT_TEST_QUICK
# skips the speed measurements, which valgrind slows 50x).
VALGRIND_TESTS = $(addprefix $(BUILD)/test_,kernel_source kernel_docs ref shard loader checkpoint tokenizer train_host weights generate_host serve_host)
valgrind: all
	@WGPT_TEST_QUICK=1 TEST_LABEL=valgrind \
	  TEST_RUNNER="valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite" \
	  scripts/run-tests.sh $(VALGRIND_TESTS)

# Header dependencies come from the compiler: each compile writes FILE.d beside
# its output (-MMD: the headers it included; -MP: a rule for each, so a deleted
# header does not stop the build), read back by the -include below.
DEPFLAGS = -MMD -MP -MF $@.d -MT $@
$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -c $< -o $@

$(BUILD)/obj/gpu/dawn_loader.o: scripts/pins.sh
$(BUILD)/obj/dist/comm_mpi.o: CFLAGS_ALL += $(MPI_CFLAGS)
$(BUILD)/obj/gpu/dawn_loader.o $(BUILD)/test_dawn_loader: CFLAGS_ALL += -DWGPT_DAWN_NODE_SHA256='"$(DAWN_NODE_SHA256)"'
$(BUILD)/test_dawn_loader: scripts/pins.sh

# wgpt's Vulkan layers, found at run time in vk/ beside the executable:
# VK_LAYER_WGPT_select (src/gpu/vk_select/), through which wgpt opens one of
# several identical GPUs (Dawn offers them as one adapter), and
# VK_LAYER_WGPT_stats (src/gpu/vk_stats/), the driver's statistics of each
# compute pipeline (registers, memory), on when $WGPT_KERNEL_STATS names a file.
$(BUILD)/vk/libVkLayer_wgpt_%.so: src/gpu/vk_%/layer.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -fPIC -shared -fvisibility=hidden $< -lpthread -o $@
$(BUILD)/vk/VkLayer_wgpt_%.json: src/gpu/vk_%/layer.json
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/embed_kernels: tools/embed_kernels.c
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_ALL) $< -o $@

$(BUILD)/kernels_embedded.c: $(BUILD)/embed_kernels $(KERNELS)
	$(BUILD)/embed_kernels $@ $(KERNELS)

$(BUILD)/obj/kernels_embedded.o: $(BUILD)/kernels_embedded.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -c $< -o $@

$(BUILD)/libwgpt.a: $(LIB_OBJ)
	ar rcs $@ $^

# The commands without main() and the benchmarks, for tests that check what a
# command prints and returns (test_train) or time ops (test_microbench).
$(BUILD)/libwgptcli.a: $(filter-out $(BUILD)/obj/cli/main.o,$(CLI_OBJ)) $(BENCH_OBJ)
	ar rcs $@ $^

$(BUILD)/wgpt: $(CLI_OBJ) $(BENCH_OBJ) $(BUILD)/libwgpt.a
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_DAWN) -o $@

$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -Itests -c $< -o $@

$(BUILD)/libref.a: $(REF_OBJ)
	ar rcs $@ $^

$(BUILD)/libops.a: $(OPS_OBJ)
	ar rcs $@ $^
$(BUILD)/obj/tests/ops/%.o: CFLAGS_ALL += -DWGPT_SOURCE_DIR='"$(CURDIR)"'

$(BUILD)/test_%: tests/test_%.c $(BUILD)/libops.a $(BUILD)/libwgptcli.a $(BUILD)/libwgpt.a $(BUILD)/libref.a
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -Itests -DWGPT_SOURCE_DIR='"$(CURDIR)"' $< $(BUILD)/libops.a $(BUILD)/libwgptcli.a $(BUILD)/libwgpt.a $(BUILD)/libref.a $(LDLIBS_DAWN) -lcmocka -o $@

# wgpt bench's step in the plain C reference, for bench/cpu_compare.sh (no Dawn).
$(BUILD)/bench_ref_step: bench/ref_step.c $(BUILD)/obj/model/gpt2_init.o $(BUILD)/obj/cli/options.o $(BUILD)/libref.a
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -Itests -DREF_STEP_CFLAGS='"$(strip $(CC) $(CFLAGS_ALL))"' $< $(filter %.o %.a,$^) -lm -o $@

# make install PREFIX=DIR: the binary and the files it finds next to itself
# (PREFIX/lib/wgpt/dawn.node, PREFIX/share/wgpt/gpt2-bpe/), so that it runs
# from any folder. DESTDIR is prepended for packaging.
PREFIX ?= /usr/local
INSTALL_FILES = $(DAWN_DIR)/dawn.node third_party/gpt2-bpe/encoder.json third_party/gpt2-bpe/vocab.bpe
install: $(BUILD)/wgpt $(VK_LAYER)
	@for f in $(INSTALL_FILES); do [ -f $$f ] || { echo "install: $$f is missing: run scripts/setup.sh" >&2; exit 1; }; done
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/wgpt $(DESTDIR)$(PREFIX)/share/wgpt/gpt2-bpe
	install -m 755 $(BUILD)/wgpt $(DESTDIR)$(PREFIX)/bin/wgpt
	install -m 644 $(DAWN_DIR)/dawn.node $(DESTDIR)$(PREFIX)/lib/wgpt/dawn.node
	install -d $(DESTDIR)$(PREFIX)/lib/wgpt/vk
	install -m 644 $(VK_LAYER) $(DESTDIR)$(PREFIX)/lib/wgpt/vk/
	install -m 644 third_party/gpt2-bpe/encoder.json third_party/gpt2-bpe/vocab.bpe $(DESTDIR)$(PREFIX)/share/wgpt/gpt2-bpe/

# Logits of any model file on a batch, for bench/hf_roundtrip.py (wgpt beside transformers).
$(BUILD)/bench_hf_logits: bench/hf_logits.c $(BUILD)/obj/cli/options.o $(BUILD)/obj/cli/cache_dir.o $(BUILD)/obj/cli/gpu_env.o \
                          $(BUILD)/libwgpt.a
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) $(filter %.c %.o %.a,$^) $(LDLIBS_DAWN) -o $@

clean:
	rm -rf $(BUILD) build-asan $(FUZZ_BUILD) build-web

# ---- fuzzing: libFuzzer targets in fuzz/ (clang), host code only ----------
#   make fuzz        build every target, run each WGPT_FUZZ_SECONDS (default 30)
#   make fuzz-build  build only; run one by hand: build-fuzz/fuzz_shard [-help=1]
FUZZ_CC ?= clang-14
FUZZ_BUILD ?= build-fuzz
FUZZ_SAN = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS = -std=c11 -g -O1 $(FUZZ_SAN) \
	-Wall -Wextra -Wshadow -D_POSIX_C_SOURCE=200809L -Isrc -ffunction-sections -fdata-sections
FUZZ_TARGETS = shard checkpoint options tokenizer_encode tokenizer_files safetensors serve_request
# The host sources each target links. --gc-sections drops what the fuzzed code
# never calls, so model/gpt2_layout.c's GPU half needs no Dawn; it only lends
# the checkpoint its parameter count, and is built without coverage tables
# (they would keep every function alive).
FUZZ_SRC_shard = src/data/shard.c src/data/loader.c src/util/bus_guard.c src/data/shard_set.c src/util/fs.c src/util/err.c
FUZZ_SRC_checkpoint = src/train/checkpoint.c src/model/gpt2_layout.c src/util/fs.c src/util/err.c
FUZZ_SRC_options = src/cli/options.c
FUZZ_SRC_tokenizer_encode = $(wildcard src/data/tokenizer*.c) src/util/fs.c src/util/err.c
FUZZ_SRC_tokenizer_files = $(FUZZ_SRC_tokenizer_encode)
FUZZ_SRC_safetensors = $(wildcard src/weights/*.c) src/util/bus_guard.c src/model/gpt2_layout.c src/util/err.c
FUZZ_SRC_serve_request = src/serve/request.c src/serve/text.c
FUZZ_LDLIBS = -Wl,--gc-sections -lpcre2-8 -lcjson -lz -lm
# (a function: a literal % in a pattern rule's prerequisites would become the stem)
fuzz_objs = $(patsubst src/%.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_SRC_$(1)))

fuzz: fuzz-build
	@WGPT_FUZZ_BUILD=$(FUZZ_BUILD) WGPT_FUZZ_JOBS=$${WGPT_FUZZ_JOBS:-2} scripts/fuzz.sh $(FUZZ_TARGETS)

fuzz-build: $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))

# Seeds for shard, checkpoint and safetensors, written with wgpt's own writers (checked in).
fuzz-corpus: $(FUZZ_BUILD)/make_corpus
	$(FUZZ_BUILD)/make_corpus fuzz/corpus

$(FUZZ_BUILD)/make_corpus: fuzz/make_corpus.c src/data/shard.c src/util/bus_guard.c src/train/checkpoint.c \
		src/model/gpt2_layout.c src/util/fs.c src/util/err.c

$(FUZZ_BUILD)/make_corpus: fuzz/make_corpus.c src/data/shard.c src/train/checkpoint.c src/model/gpt2_layout.c \
		$(wildcard src/weights/*.c)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -g -Wall -Wextra -Wshadow -D_POSIX_C_SOURCE=200809L -Isrc -ffunction-sections $^ \
		$(FUZZ_LDLIBS) -o $@

$(FUZZ_BUILD)/obj/model/%.o: FUZZ_SAN = -fsanitize=address,undefined -fno-sanitize-recover=undefined
# Kept between builds (make would delete them as intermediate files).
.PRECIOUS: $(FUZZ_BUILD)/obj/%.o
$(FUZZ_BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -c $< -o $@

.SECONDEXPANSION:
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $$(call fuzz_objs,$$*)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -Ifuzz -DWGPT_SOURCE_DIR='"$(CURDIR)"' $< $(filter %.o,$^) $(FUZZ_LDLIBS) -o $@

# ---- the browser build (make web): web/web.mk ------------------------------
include web/web.mk

# The header dependencies the compiler wrote (see DEPFLAGS).
-include $(wildcard $(BUILD)/*.d $(BUILD)/*/*.d $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d \
                    $(FUZZ_BUILD)/*.d $(FUZZ_BUILD)/obj/*/*.d)
