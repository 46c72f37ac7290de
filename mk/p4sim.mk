# p4sim engine: compiler and v1model runtime tests, packets/s benchmark, P4Info golden files.
# (The nfcluster program itself is compiled by `make build`, mk/dataplane.mk.)

.PHONY: p4sim-test p4sim-bench p4sim-fuzz p4sim-golden

p4sim-test: setup ## p4sim engine tests: conformance programs, checker errors, P4Info golden, nfcluster
	$(PY) -m pytest tests/p4sim --ignore=tests/p4sim/server $(PYTEST_ARGS)

p4sim-bench: setup ## packets/s through p4sim in-process, Python and native engine side by side (ipv4_forward, nfcluster)
	$(PY) -m bench.p4sim_pps

P4SIM_FUZZ_PACKETS ?= 20000
p4sim-fuzz: setup ## the native-vs-Python differential fuzz test with P4SIM_FUZZ_PACKETS packets per case (default 20000)
	P4SIM_FUZZ_PACKETS=$(P4SIM_FUZZ_PACKETS) $(PY) -m pytest tests/p4sim/test_differential.py -q $(PYTEST_ARGS)

p4sim-golden: setup ## regenerate the P4Info golden files of tests/p4sim after an intended change
	P4SIM_REGEN_GOLDEN=1 $(PY) -m pytest tests/p4sim/test_p4info.py -q
