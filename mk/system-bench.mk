# The whole system's zero-loss capacity: p4sim's port I/O (and engine) variants side by side.

SYSTEM_BENCH_ARGS ?=

.PHONY: bench-system

bench-system: setup build ## zero-loss capacity of make run's system, p4sim --io socket vs ring on each engine (SYSTEM_BENCH_ARGS="--quick", "--io socket,ring-pyloop,ring")
	$(PY) -m bench.system_capacity $(SYSTEM_BENCH_ARGS)
