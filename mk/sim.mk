# The deterministic simulation of the whole system (sim/, docs/simulation.md).

SEEDS ?= 200
SIM_ARGS ?=

.PHONY: sim

sim: setup ## the deterministic simulation over SEEDS seeds (SEEDS=1000; SIM_ARGS="--seed 17 --trace" replays one, SIM_ARGS="--set lost_replies=0.15" adds lost replies)
	$(PY) -m sim --seeds $(SEEDS) $(SIM_ARGS)
