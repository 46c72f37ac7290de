# Host NF runtime (nf_host/): generated control API, tests and benchmarks.

PY ?= .venv/bin/python
NF_HOST_PROTO := contract/proto/nf_control.proto

.PHONY: proto nf-host-test nf-host-test-unit nf-host-bench

proto: ## Regenerate the NF control API (contract/proto/nf_control_pb2*.py) from its .proto
	$(PY) -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. --pyi_out=. $(NF_HOST_PROTO)

nf-host-test-unit: ## Unit tests of the host NF runtime (no namespaces)
	$(PY) -m pytest -q -m unit tests/nf_host --ignore=tests/nf_host/nfs

nf-host-test: ## All host NF runtime tests (namespaces and veths: needs root)
	$(PY) -m pytest -q tests/nf_host --ignore=tests/nf_host/nfs

nf-host-bench: ## Throughput/latency of the host NF runtime (tables on stdout)
	PYTHONPATH=. $(PY) -m bench.nf_host_throughput

.PHONY: nf-host-bench-channel
nf-host-bench-channel: ## Replication channel: framed TCP against a gRPC stream (the measurement behind the choice)
	$(PY) -m bench.nf_host_repl_channel

.PHONY: nf-host-bench-migration
nf-host-bench-migration: ## Slot migration: bytes and time, intra-cluster delta against inter-cluster full state
	$(PY) -m bench.nf_host_migration

.PHONY: nf-host-bench-sync
nf-host-bench-sync: ## Backup sync: seconds and bytes to sync a new backup at 10k, 100k and 1M flows (SYNC_ARGS="--repeats 1")
	$(PY) -m bench.nf_host_sync $(SYNC_ARGS)

.PHONY: flood flood-short
flood: ## Flood: 1,000,000 distinct 5-tuples at a primary/backup pair, bounded flow state, then a fail-over (FLOOD_ARGS="--max-flows 50000")
	$(PY) -m nf_host.flood --flows 1000000 $(FLOOD_ARGS)

flood-short: ## The flood's CI mode: 100,000 distinct 5-tuples (what tests/nf_host/test_flood.py runs)
	$(PY) -m nf_host.flood --flows 100000 --max-flows 10000 $(FLOOD_ARGS)
