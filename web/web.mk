# web.mk (included by the Makefile): `make web` builds the engine for a web page
# into $(WEB_BUILD)/: the C library, the CLI and the browser kernel checks
# compiled to WebAssembly (clang-14 --target=wasm32-wasi on Debian's
# wasi-libc), beside web/'s page and JavaScript. The GPU layer there is
# src/gpu/web/ (navigator.gpu through web/wgpt_gpu.js) instead of Dawn.
WEB_BUILD ?= build-web
WEB_CC ?= clang-14
WEB_CFLAGS = --target=wasm32-wasi --sysroot=/usr -std=c11 -O2 -Wall -Wextra -Wshadow -Wno-unused-command-line-argument \
  -D_POSIX_C_SOURCE=200809L -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS \
  -D_WASI_EMULATED_GETPID -I$(WEB_BUILD)/deps/include -Isrc
# An 8 MiB stack (the commands keep some large buffers on it); memory grows as needed.
WEB_LDFLAGS = --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -Wl,-z,stack-size=8388608 \
  -lwasi-emulated-mman -lwasi-emulated-signal -lwasi-emulated-process-clocks -lwasi-emulated-getpid
# The Dawn backend's plain-C parts (kernel files and their table, options, chip table, memory accounting, subgroup-matrix
# choice, 1D dispatch shape, buffer range checks) stay; the rest is src/gpu/web/.
WEB_LIB_SRC = src/gpu/kernel_source.c src/gpu/settings.c src/gpu/chips.c src/gpu/mem_account.c src/gpu/sgm_pick.c src/gpu/dispatch_1d.c \
  src/gpu/buffer_checks.c src/gpu/kernel_table.c \
  $(wildcard src/gpu/web/*.c) \
  $(wildcard src/model/*.c) $(wildcard src/data/*.c) $(wildcard src/train/*.c) $(wildcard src/util/*.c) \
  $(wildcard src/weights/*.c) src/dist/comm_single.c
# cJSON, PCRE2 (no JIT) and zlib's crc32 from their pinned sources (scripts/web-deps.sh), in place of the Debian libraries.
WEB_DEPS = $(WEB_BUILD)/deps
PCRE2_SRC = $(addprefix $(WEB_DEPS)/pcre2/src/pcre2_,auto_possess.c chartables.c compile.c config.c context.c \
  convert.c dfa_match.c error.c extuni.c find_bracket.c jit_compile.c maketables.c match.c match_data.c newline.c \
  ord2utf.c pattern_info.c script_run.c serialize.c string_utils.c study.c substitute.c substring.c tables.c ucd.c \
  valid_utf.c xclass.c)
WEB_DEP_OBJ = $(patsubst $(WEB_DEPS)/%.c,$(WEB_BUILD)/obj/deps/%.o,$(PCRE2_SRC) $(WEB_DEPS)/cjson/cJSON.c \
  $(WEB_DEPS)/zlib/crc32.c)
WEB_LIB_OBJ = $(patsubst %.c,$(WEB_BUILD)/obj/%.o,$(WEB_LIB_SRC)) $(WEB_BUILD)/obj/kernels_embedded.o $(WEB_DEP_OBJ)
# (no HTTP server in a page: web/c/no_serve.c stands in for src/cli/cmd_serve.c)
WEB_CLI_OBJ = $(patsubst %.c,$(WEB_BUILD)/obj/%.o,$(filter-out src/cli/cmd_serve.c,$(CLI_SRC)) $(BENCH_SRC) web/c/entry.c web/c/no_serve.c)
WEB_CHECK_OBJ = $(patsubst %.c,$(WEB_BUILD)/obj/%.o,$(REF_SRC) $(wildcard tests/browser/*.c) web/c/entry.c src/cli/gpu_env.c)
WEB_PAGE = $(addprefix $(WEB_BUILD)/,index.html harness.html app.js wgpt.js wgpt_gpu.js wasi.js sample.txt)

# GPT-2's tokenizer files, where scripts/setup.sh fetched them (the page's gpt2 tokenizer)
WEB_BPE = $(if $(wildcard third_party/gpt2-bpe/vocab.bpe),$(WEB_BUILD)/gpt2-bpe/encoder.json $(WEB_BUILD)/gpt2-bpe/vocab.bpe)

.PHONY: web
web: $(WEB_BUILD)/wgpt.wasm $(WEB_BUILD)/wgpt_checks.wasm $(WEB_PAGE) $(WEB_BPE)

$(WEB_BUILD)/gpt2-bpe/%: third_party/gpt2-bpe/%
	@mkdir -p $(dir $@)
	cp $< $@

$(WEB_DEPS)/.ok: scripts/web-deps.sh scripts/pins.sh
	scripts/web-deps.sh $(WEB_DEPS)
	mkdir -p $(WEB_DEPS)/include/cjson
	cp $(WEB_DEPS)/cjson/cJSON.h $(WEB_DEPS)/include/cjson/
	cp $(WEB_DEPS)/pcre2/src/pcre2.h $(WEB_DEPS)/zlib/zlib.h $(WEB_DEPS)/zlib/zconf.h $(WEB_DEPS)/include/
	touch $@
$(WEB_DEPS)/%.c: $(WEB_DEPS)/.ok ;
# (the unpacked sources are no intermediate files: make must not delete them)
.PRECIOUS: $(WEB_DEPS)/%.c
$(WEB_BUILD)/obj/deps/%.o: $(WEB_DEPS)/%.c
	@mkdir -p $(dir $@)
	$(WEB_CC) $(WEB_CFLAGS) -w -DHAVE_CONFIG_H -DPCRE2_CODE_UNIT_WIDTH=8 -DSUPPORT_UNICODE -DPCRE2_STATIC -c $< -o $@

$(WEB_BUILD)/obj/%.o: %.c $(wildcard src/*/*.h) $(wildcard src/*/*/*.h) $(wildcard tests/ref/*.h) | $(WEB_DEPS)/.ok
	@mkdir -p $(dir $@)
	$(WEB_CC) $(WEB_CFLAGS) -Itests -c $< -o $@

# main() of the CLI and of the checks is called by web/c/entry.c's export.
$(WEB_BUILD)/obj/src/cli/main.o $(WEB_BUILD)/obj/tests/browser/checks.o: WEB_CFLAGS += -Dmain=wgpt_prog_main

$(WEB_BUILD)/kernels_embedded.c: $(BUILD)/embed_kernels $(KERNELS)
	@mkdir -p $(WEB_BUILD)
	$(BUILD)/embed_kernels $@ $(KERNELS)
$(WEB_BUILD)/obj/kernels_embedded.o: $(WEB_BUILD)/kernels_embedded.c src/gpu/embedded.h
	@mkdir -p $(dir $@)
	$(WEB_CC) $(WEB_CFLAGS) -c $< -o $@

$(WEB_BUILD)/wgpt.wasm: $(WEB_CLI_OBJ) $(WEB_LIB_OBJ)
	$(WEB_CC) $^ $(WEB_LDFLAGS) -o $@
$(WEB_BUILD)/wgpt_checks.wasm: $(WEB_CHECK_OBJ) $(WEB_LIB_OBJ)
	$(WEB_CC) $^ $(WEB_LDFLAGS) -o $@

$(WEB_BUILD)/%: web/%
	@mkdir -p $(WEB_BUILD)
	cp $< $@
