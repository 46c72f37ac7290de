# The deterministic simulation of the whole system (sim/, docs/simulation.md).

SEEDS ?= 200
SIM_ARGS ?=
SIM_JOBS ?= 0

.PHONY: sim

sim: setup pki ## the deterministic simulation over SEEDS seeds (SEEDS=1000; SIM_ARGS="--seed 17 --trace" replays one, SIM_ARGS="--set lost_replies=0.15" adds lost replies, "--set leader_kills=1.0" leader deaths, "--set switch_restarts=0.5", "--set etcd_outages=0.5"; SIM_JOBS processes, 0: one per core)
	$(PY) -m sim --seeds $(SEEDS) --jobs $(SIM_JOBS) $(SIM_ARGS)
