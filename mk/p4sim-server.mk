# p4sim P4Runtime server: its tests, the p4runtime-shell venv used by the interop test, benchmarks.

P4RT_SHELL_VENV ?= .venv-p4rt-shell
# p4runtime-shell 0.0.6 pins protobuf 3.20.x, hence a venv of its own (docs/p4sim.md).
P4RT_SHELL_VERSION ?= 0.0.6

.PHONY: p4rt-shell-venv p4sim-server-test p4sim-server-bench

p4rt-shell-venv: $(P4RT_SHELL_VENV)/bin/p4runtime-shell-stamp ## venv with p4runtime-shell for the interop test

$(P4RT_SHELL_VENV)/bin/p4runtime-shell-stamp:
	/usr/bin/python3 -m venv $(P4RT_SHELL_VENV)
	$(P4RT_SHELL_VENV)/bin/pip install -q "p4runtime-shell==$(P4RT_SHELL_VERSION)"
	@touch $@

p4sim-server-test: setup ## P4Runtime server tests (conformance, errors, fuzz, finsy, p4runtime-shell, veth)
	$(PY) -m pytest tests/p4sim/server $(PYTEST_ARGS)

p4sim-server-bench: setup ## packets/s between veths through p4sim, P4Runtime writes/s (root)
	$(PY) -m bench.p4sim_server
