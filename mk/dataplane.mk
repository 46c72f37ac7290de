# nfcluster data plane: compile the P4 program and run its PTF suite (docs/dataplane.md).

P4_BUILD_DIR ?= build
P4_PROGRAM   := p4src/v1model/nfcluster.p4
P4_TNA       := p4src/tna/nfcluster.p4
P4_INCLUDES  := -I p4src/shared
PTF_TESTS    ?=
STF_SAMPLES  ?=

.PHONY: build ptf stf

build: setup ## compile the v1model program into build/ with p4sim (and p4c-bm2-ss into build/bmv2/ when installed); type-check the TNA program
	@mkdir -p $(P4_BUILD_DIR)
	$(VENV)/bin/p4sim compile $(P4_PROGRAM) --arch v1model $(P4_INCLUDES) \
	  --p4runtime-files $(P4_BUILD_DIR)/nfcluster.p4info.txtpb -o $(P4_BUILD_DIR)/
	@if command -v p4c-bm2-ss >/dev/null 2>&1; then \
	  mkdir -p $(P4_BUILD_DIR)/bmv2; \
	  echo "p4c-bm2-ss --arch v1model $(P4_INCLUDES) -o $(P4_BUILD_DIR)/bmv2/nfcluster.json $(P4_PROGRAM)"; \
	  p4c-bm2-ss --arch v1model $(P4_INCLUDES) \
	    --p4runtime-files $(P4_BUILD_DIR)/bmv2/nfcluster.p4info.txtpb \
	    -o $(P4_BUILD_DIR)/bmv2/nfcluster.json $(P4_PROGRAM); \
	else echo "build: p4c-bm2-ss not on PATH: BMv2 output skipped"; fi
	@# TNA: p4sim's front end against its TNA declarations, warnings as errors (docs/tofino.md)
	$(VENV)/bin/p4sim check $(P4_TNA) --arch tna $(P4_INCLUDES) --Werror

ptf: build ## PTF suite on TARGET=p4sim|bmv2 in a network namespace (root); PTF_TESTS=name/group
	$(PY) -m ptf_tests.run --target $(TARGET) --build-dir $(P4_BUILD_DIR) $(PTF_TESTS)

stf: setup ## p4c's STF tests on p4sim: STF_SAMPLES=<p4c>/testdata/p4_16_samples (or a .p4 with its .stf)
	@test -n "$(STF_SAMPLES)" || { echo "stf: give STF_SAMPLES=/path/to/p4c/testdata/p4_16_samples"; exit 2; }
	$(PY) -m p4sim stf $(STF_SAMPLES)
