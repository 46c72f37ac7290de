# nfcluster controller (controlplane/): configuration check, tests, running it (docs/controller.md).

PY ?= .venv/bin/python
NFC_CONFIG ?= topo/nfcluster.yaml
NFC_ARGS   ?=
LB_BENCH_ARGS ?=

.PHONY: controller-check controller-test controller-test-unit controller bench-lb

controller-check: ## validate the controller configuration NFC_CONFIG (default topo/nfcluster.yaml)
	$(PY) -m controlplane check --config $(NFC_CONFIG)

controller-test-unit: ## controller unit tests (in-process, no etcd)
	$(PY) -m pytest -q -m unit tests/controlplane

controller-test: ## all controller tests (starts a real etcd on loopback)
	$(PY) -m pytest -q tests/controlplane

controller: ## run the controller with NFC_CONFIG (extra flags: NFC_ARGS="--no-etcd ...")
	$(PY) -m controlplane run --config $(NFC_CONFIG) $(NFC_ARGS)

.PHONY: bench-failover
bench-failover: setup build ## fail-over under load, 50 SIGKILLs and 20 SIGSTOPs of a primary: time to the first delivered packet after the fault (BENCH_ARGS="--quick --busy 2")
	$(PY) -m bench.failover $(BENCH_ARGS)

.PHONY: bench-teardown
bench-teardown: ## SIGKILL to the first evidence (EOF, gRPC channel) by process size: a crash's detection floor (BENCH_ARGS="--repeats 5")
	$(PY) -m bench.process_teardown $(BENCH_ARGS)

bench-lb: ## load balancer decision time, 1,000 NFs x 65,536 slots (table; LB_BENCH_ARGS="--repeats 21")
	$(PY) -m bench.load_balancer $(LB_BENCH_ARGS)

.PHONY: bench-counter-reads
bench-counter-reads: build ## controller CPU per second reading slot_traffic (4,096 slots), old two-reader finsy path vs the shared raw read (BENCH_ARGS="--seconds 4 --repeats 3")
	$(PY) -m bench.counter_reads $(BENCH_ARGS)

.PHONY: bench-chain
bench-chain: setup build ## service chains: RTT p50/p99 and delivered pkt/s of 1, 2 and 3 stages (BENCH_ARGS="--quick")
	$(PY) -m bench.chain $(BENCH_ARGS)

.PHONY: web-view-test web-view-screenshot
web-view-test: setup build ## the live web view in headless Chromium on `nfc-topo up`: the NFs shown, a fail-over on the page within 1 s (root)
	$(PY) -m pytest -q -s tests/topo/test_web_view_browser.py

web-view-screenshot: setup build ## the same test, keeping its screenshot as docs/results/web-view.png (shown in docs/getting-started.md)
	NFC_WEB_SCREENSHOT=docs/results/web-view.png $(PY) -m pytest -q -s tests/topo/test_web_view_browser.py
