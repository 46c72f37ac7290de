# Prism TCP connection hand-off (prism/, docs/prism.md).

PRISM_ARGS ?=
PRISM_BENCH_ARGS ?=

.PHONY: prism-demo prism-test bench-prism-variants

prism-demo: setup build ## Prism on p4sim: proxy, one hand-off and a hand-off per request, every byte checked (PRISM_ARGS="--backends 4 --size 262144 --rate-mbit 8")
	$(PY) -m prism --target $(TARGET) $(PRISM_ARGS)

prism-test: setup build ## the Prism tests: TCP_REPAIR on loopback, switch writes, the hand-off API on the controller, real hand-offs through p4sim, a backend crashing mid-response (root, ~1 min)
	unshare -n sh -c 'ip link set lo up; $(PY) -m pytest tests/prism -q'
	$(PY) -m ptf_tests.run --target $(TARGET) --build-dir $(P4_BUILD_DIR) handoff

bench-prism-variants: setup build ## Prism's options A/B: every vs every --direct (3 controller steps per request, not 4), or once vs once --snapshots; medians of repeats, load average beside (root; PRISM_BENCH_ARGS="--pair snapshots --quick")
	$(PY) -m bench.prism_variants $(PRISM_BENCH_ARGS)
