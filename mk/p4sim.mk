# p4sim engine: compiler and v1model runtime tests, packets/s benchmark, P4Info of the nfcluster program.

P4SIM_P4INFO_OUT ?= build/p4sim

.PHONY: p4sim-test p4sim-bench p4sim-p4info p4sim-golden

p4sim-test: setup ## p4sim engine tests: conformance programs, checker errors, P4Info golden, nfcluster
	$(PY) -m pytest tests/p4sim --ignore=tests/p4sim/server $(PYTEST_ARGS)

p4sim-bench: setup ## packets/s through p4sim in-process (ipv4_forward, nfcluster)
	$(PY) -m bench.p4sim_pps

p4sim-p4info: setup ## compile p4src/v1model/nfcluster.p4 with p4sim: P4Info + device config in build/p4sim
	$(PY) -m p4sim compile p4src/v1model/nfcluster.p4 --arch v1model -I p4src/shared -I p4src/v1model \
		--p4runtime-files $(P4SIM_P4INFO_OUT)/nfcluster.p4info.txtpb -o $(P4SIM_P4INFO_OUT)

p4sim-golden: setup ## regenerate the P4Info golden files of tests/p4sim after an intended change
	P4SIM_REGEN_GOLDEN=1 $(PY) -m pytest tests/p4sim/test_p4info.py -q
