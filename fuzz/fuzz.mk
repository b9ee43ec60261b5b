# fuzz/fuzz.mk, included by the top Makefile
#
#   make fuzz            libFuzzer on the OpenAI key (src/pa_json.c,
#                        src/pa_openai*.c) for FUZZ_SECONDS (60)
#   make fuzz-smoke      the same for 10 seconds; fails on a crash
#   make fuzz-diff       libFuzzer on the OpenAI key against the yajl-based
#                        extractor it replaced (from git, FUZZ_REF), for
#                        FUZZ_SECONDS: both must give the same key
#   make bench-extract   throughput and memory of the OpenAI extractor
#   make fuzz-models     libFuzzer on src/pa_models.c (/v1/models answers,
#                        read whole and in pieces) for FUZZ_SECONDS
#   make fuzz-models-diff  the streaming /v1/models scanner against the
#                        whole-answer reader it replaced (from git,
#                        FUZZ_MODELS_REF), for FUZZ_SECONDS
#
# The seed corpus fuzz/corpus/openai is only read: new inputs go to
# $(BUILD)/fuzz/corpus.  A crash is written to fuzz/corpus/openai/crash-*
# and so becomes a regression input, replayed by every later fuzz run and
# by t/unit/test_openai.c (make unit).

FUZZ_SECONDS   ?= 60
FUZZ_CC        ?= clang
FUZZ_CFLAGS     = -std=c99 -O1 -g -fno-omit-frame-pointer -It/unit \
                  -fsanitize=fuzzer,address,undefined \
                  -fno-sanitize-recover=all \
                  -D_POSIX_C_SOURCE=200809L -Isrc
FUZZ_SRC        = src/pa_json.c src/pa_json_avx2.c src/pa_openai.c \
                  src/pa_openai_rules.c src/pa_openai_items.c \
                  src/pa_openai_text.c src/pa_xxh_avx2.c
FUZZ_HDR        = src/pa_openai.h src/pa_openai_int.h src/pa_xxhash.h \
                  src/pa_xxh.h src/pa_json_plain.h src/pa_cpu.h \
                  src/pa_utf8.h t/unit/arena.h
FUZZ_BIN        = $(BUILD)/fuzz/fuzz_openai
FUZZ_SEEDS      = fuzz/corpus/openai
FUZZ_WORK       = $(BUILD)/fuzz/corpus
FUZZ_RUN        = $(FUZZ_BIN) -dict=fuzz/openai.dict -max_len=8192 \
                  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
                  -artifact_prefix=$(FUZZ_SEEDS)/ $(FUZZ_WORK) $(FUZZ_SEEDS)

# the last commit with the yajl-based extractor, and its functions renamed
FUZZ_REF        = 73fd41b635bf36d949324227864bd32bbe282e6d
FUZZ_REF_DIR    = $(BUILD)/fuzz/ref
FUZZ_REF_NAMES  = -Dpa_oai_create=ref_oai_create -Dpa_oai_feed=ref_oai_feed \
                  -Dpa_oai_finish=ref_oai_finish \
                  -Dpa_oai_status_name=ref_oai_status_name \
                  -Dpa_yajl_funcs=ref_yajl_funcs
FUZZ_DIFF_BIN   = $(BUILD)/fuzz/fuzz_openai_diff
FUZZ_DIFF_WORK  = $(BUILD)/fuzz/corpus-diff

BENCH_EXTRACT_BIN = $(BUILD)/bench/bench_extract

.PHONY: fuzz fuzz-smoke fuzz-deps fuzz-diff bench-extract

fuzz-deps:
	@$(call deps,clang libclang-rt-14-dev libyajl-dev libxxhash-dev)

$(FUZZ_BIN): fuzz/fuzz_openai.c $(FUZZ_SRC) $(FUZZ_HDR) | fuzz-deps
	@mkdir -p $(BUILD)/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_openai.c $(FUZZ_SRC)

fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_WORK)
	$(FUZZ_RUN) -max_total_time=$(FUZZ_SECONDS)

# $(call fuzz_smoke,TARGET,RUN,SECONDS): a fuzzer's run for SECONDS, its
# log in $(BUILD)/fuzz/TARGET.log: the final stats if it passed, the whole
# log if not
fuzz_smoke = @echo "$(1): for $(3) s"; \
	if $(2) -max_total_time=$(3) >$(BUILD)/fuzz/$(1).log 2>&1; then \
	    grep -E '^(Done|stat::)' $(BUILD)/fuzz/$(1).log; \
	else \
	    cat $(BUILD)/fuzz/$(1).log; echo "$(1): failed"; exit 1; \
	fi

fuzz-smoke: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_WORK)
	$(call fuzz_smoke,fuzz-smoke,$(FUZZ_RUN),10)

# its own header comes first: the files are in one directory (and the
# shim that copies its result is given that directory before src/)
$(FUZZ_REF_DIR)/ref.o: fuzz/ref_shim.c fuzz/fuzz_fields.h | fuzz-deps
	@mkdir -p $(FUZZ_REF_DIR)
	for f in pa_openai.c pa_openai.h pa_yajl.c pa_yajl.h; do \
	    git show $(FUZZ_REF):src/$$f >$(FUZZ_REF_DIR)/$$f || exit 1; \
	done
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_REF_NAMES) -c \
	    -o $(FUZZ_REF_DIR)/openai.o $(FUZZ_REF_DIR)/pa_openai.c
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_REF_NAMES) -c \
	    -o $(FUZZ_REF_DIR)/yajl.o $(FUZZ_REF_DIR)/pa_yajl.c
	$(FUZZ_CC) -I$(FUZZ_REF_DIR) $(FUZZ_CFLAGS) $(FUZZ_REF_NAMES) -c \
	    -o $(FUZZ_REF_DIR)/shim.o fuzz/ref_shim.c
	ld -r -o $@ $(FUZZ_REF_DIR)/openai.o $(FUZZ_REF_DIR)/yajl.o \
	    $(FUZZ_REF_DIR)/shim.o

$(FUZZ_DIFF_BIN): fuzz/fuzz_openai_diff.c fuzz/fuzz_fields.h $(FUZZ_SRC) $(FUZZ_HDR) \
                  $(FUZZ_REF_DIR)/ref.o | fuzz-deps
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_openai_diff.c $(FUZZ_SRC) \
	    $(FUZZ_REF_DIR)/ref.o -lyajl

fuzz-diff: $(FUZZ_DIFF_BIN)
	@mkdir -p $(FUZZ_DIFF_WORK)
	$(FUZZ_DIFF_BIN) -dict=fuzz/openai.dict -max_len=8192 -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_SEEDS)/ -max_total_time=$(FUZZ_SECONDS) \
	    $(FUZZ_DIFF_WORK) $(FUZZ_SEEDS)

$(BENCH_EXTRACT_BIN): bench/bench_extract.c $(FUZZ_SRC) $(FUZZ_HDR) | deps
	@mkdir -p $(BUILD)/bench
	$(CC) $(CFLAGS_SRC) -o $@ bench/bench_extract.c $(FUZZ_SRC) $(LIBS_SRC)

bench-extract: $(BENCH_EXTRACT_BIN)
	$(BENCH_EXTRACT_BIN)

# libFuzzer on src/pa_models.c (the /v1/models reader of models=discover)
# for FUZZ_SECONDS; new inputs in $(BUILD)/fuzz/corpus-models
FUZZ_MODELS_BIN  = $(BUILD)/fuzz/fuzz_models
FUZZ_MODELS_WORK = $(BUILD)/fuzz/corpus-models

.PHONY: fuzz-models fuzz-models-diff

$(FUZZ_MODELS_BIN): fuzz/fuzz_models.c src/pa_models.c src/pa_models.h \
                    src/pa_xxhash.h | fuzz-deps
	@mkdir -p $(BUILD)/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_models.c src/pa_models.c

fuzz-models: $(FUZZ_MODELS_BIN)
	@mkdir -p $(FUZZ_MODELS_WORK)
	@printf '{"object":"list","data":[{"id":"a"},{"id":"b\\u00e9","x":[1,{}]}]}' \
	    > $(FUZZ_MODELS_WORK)/seed-vllm.json
	$(FUZZ_MODELS_BIN) -dict=fuzz/models.dict -max_len=4096 -timeout=10 \
	    -print_final_stats=1 -max_total_time=$(FUZZ_SECONDS) \
	    $(FUZZ_MODELS_WORK) fuzz/corpus/models

# the last commit with the whole-answer reader of /v1/models
FUZZ_MODELS_REF      = 6da205b2548eadff441faba7c2a800860bb13348
FUZZ_MODELS_DIFF_BIN = $(BUILD)/fuzz/fuzz_models_diff
FUZZ_MODELS_DIFF_WORK = $(BUILD)/fuzz/corpus-models-diff

$(BUILD)/fuzz/ref_models.o: | fuzz-deps
	@mkdir -p $(BUILD)/fuzz
	git show $(FUZZ_MODELS_REF):src/pa_models.c >$(BUILD)/fuzz/ref_models.c
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Dpa_models_parse=ref_models_parse \
	    -Dpa_models_hash=ref_models_hash -c -o $@ $(BUILD)/fuzz/ref_models.c

$(FUZZ_MODELS_DIFF_BIN): fuzz/fuzz_models_diff.c src/pa_models.c \
                         src/pa_models.h $(BUILD)/fuzz/ref_models.o | fuzz-deps
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_models_diff.c \
	    src/pa_models.c $(BUILD)/fuzz/ref_models.o

fuzz-models-diff: $(FUZZ_MODELS_DIFF_BIN)
	@mkdir -p $(FUZZ_MODELS_DIFF_WORK)
	@printf '{"object":"list","data":[{"id":"a"},{"id":"b\\u00e9","x":[1,{}]}]}' \
	    > $(FUZZ_MODELS_DIFF_WORK)/seed-vllm.json
	$(FUZZ_MODELS_DIFF_BIN) -dict=fuzz/models.dict -max_len=4096 -timeout=10 \
	    -print_final_stats=1 	    -max_total_time=$(FUZZ_SECONDS) $(FUZZ_MODELS_DIFF_WORK) fuzz/corpus/models

# libFuzzer on src/pa_prom.c (the /metrics reader of the engines' reports)
# for FUZZ_SECONDS; new inputs in $(BUILD)/fuzz/corpus-prom; fuzz-smoke
# runs it for 5 seconds.  A page must cost what its bytes cost: inputs of
# up to 1 MB (pages of many lines, as an 8 MB one is), each given 1 s,
# where it takes milliseconds (a 1 MB page of "0e-9999" took 1.3 s before
# its numbers were bounded, more under ASan); the target checks the
# parse's steps against the bytes too
FUZZ_PROM_BIN  = $(BUILD)/fuzz/fuzz_prom
FUZZ_PROM_WORK = $(BUILD)/fuzz/corpus-prom
FUZZ_PROM_RUN  = $(FUZZ_PROM_BIN) -dict=fuzz/prom.dict -max_len=1048576 \
                 -timeout=1 -rss_limit_mb=2048 -print_final_stats=1 \
                 $(FUZZ_PROM_WORK) fuzz/corpus/prom

.PHONY: fuzz-prom fuzz-prom-smoke

$(FUZZ_PROM_BIN): fuzz/fuzz_prom.c src/pa_prom.c src/pa_prom.h \
                  fuzz/prom.dict | fuzz-deps
	@mkdir -p $(BUILD)/fuzz $(FUZZ_PROM_WORK)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_prom.c src/pa_prom.c

fuzz-prom: $(FUZZ_PROM_BIN)
	$(FUZZ_PROM_RUN) -max_total_time=$(FUZZ_SECONDS)

fuzz-prom-smoke: $(FUZZ_PROM_BIN)
	$(call fuzz_smoke,fuzz-prom-smoke,$(FUZZ_PROM_RUN),5)

# libFuzzer on src/pa_usage.c (cached_tokens in the engines' answers) for
# FUZZ_SECONDS; new inputs in $(BUILD)/fuzz/corpus-usage; make test runs
# it for 5 seconds (fuzz-usage-smoke)
FUZZ_USAGE_BIN  = $(BUILD)/fuzz/fuzz_usage
FUZZ_USAGE_WORK = $(BUILD)/fuzz/corpus-usage
FUZZ_USAGE_RUN  = $(FUZZ_USAGE_BIN) -max_len=4096 -timeout=10 \
                  -print_final_stats=1 $(FUZZ_USAGE_WORK) fuzz/corpus/usage

.PHONY: fuzz-usage fuzz-usage-smoke

$(FUZZ_USAGE_BIN): fuzz/fuzz_usage.c src/pa_usage.c src/pa_usage.h | fuzz-deps
	@mkdir -p $(BUILD)/fuzz $(FUZZ_USAGE_WORK)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_usage.c src/pa_usage.c

fuzz-usage: $(FUZZ_USAGE_BIN)
	$(FUZZ_USAGE_RUN) -max_total_time=$(FUZZ_SECONDS)

fuzz-usage-smoke: $(FUZZ_USAGE_BIN)
	$(call fuzz_smoke,fuzz-usage-smoke,$(FUZZ_USAGE_RUN),5)

# libFuzzer on src/pa_sync.c (the datagrams hosts send each other,
# prefix_aware_sync) for FUZZ_SECONDS; new inputs in
# $(BUILD)/fuzz/corpus-sync; make test runs it for 5 seconds
# (fuzz-sync-smoke)
FUZZ_SYNC_BIN   = $(BUILD)/fuzz/fuzz_sync
FUZZ_SYNC_WORK  = $(BUILD)/fuzz/corpus-sync
FUZZ_SYNC_RUN   = $(FUZZ_SYNC_BIN) -max_len=1400 -timeout=10 \
                  -print_final_stats=1 $(FUZZ_SYNC_WORK) fuzz/corpus/sync

.PHONY: fuzz-sync fuzz-sync-smoke

$(FUZZ_SYNC_BIN): fuzz/fuzz_sync.c src/pa_sync.c src/pa_sync.h src/pa_time.h \
                  | fuzz-deps
	@mkdir -p $(BUILD)/fuzz $(FUZZ_SYNC_WORK)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_sync.c src/pa_sync.c

fuzz-sync: $(FUZZ_SYNC_BIN)
	$(FUZZ_SYNC_RUN) -max_total_time=$(FUZZ_SECONDS)

fuzz-sync-smoke: $(FUZZ_SYNC_BIN)
	$(call fuzz_smoke,fuzz-sync-smoke,$(FUZZ_SYNC_RUN),5)

# libFuzzer on src/pa_respid.c and src/pa_store.c (the id of a stored
# response in an answer, and the table of ids) for FUZZ_SECONDS; new
# inputs in $(BUILD)/fuzz/corpus-respid; make test runs it for 5 seconds
# (fuzz-respid-smoke)
FUZZ_RESPID_BIN  = $(BUILD)/fuzz/fuzz_respid
FUZZ_RESPID_WORK = $(BUILD)/fuzz/corpus-respid
FUZZ_RESPID_RUN  = $(FUZZ_RESPID_BIN) -max_len=4096 -timeout=10 \
                   -print_final_stats=1 $(FUZZ_RESPID_WORK) fuzz/corpus/respid

.PHONY: fuzz-respid fuzz-respid-smoke

$(FUZZ_RESPID_BIN): fuzz/fuzz_respid.c src/pa_respid.c src/pa_respid.h \
                    src/pa_store.c src/pa_store.h | fuzz-deps
	@mkdir -p $(BUILD)/fuzz $(FUZZ_RESPID_WORK)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_respid.c src/pa_respid.c \
	    src/pa_store.c src/pa_xxh_avx2.c

fuzz-respid: $(FUZZ_RESPID_BIN)
	$(FUZZ_RESPID_RUN) -max_total_time=$(FUZZ_SECONDS)

fuzz-respid-smoke: $(FUZZ_RESPID_BIN)
	$(call fuzz_smoke,fuzz-respid-smoke,$(FUZZ_RESPID_RUN),5)
