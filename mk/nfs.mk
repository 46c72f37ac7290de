# Example NFs, frame parser and global state (nf_host/nfs/, nf_host/parse.py, nf_host/global_state.py; docs/nfs.md).

PY ?= .venv/bin/python
NFS_BENCH_ARGS ?=
NFS_TESTS := tests/nf_host/nfs tests/nf_host/test_parse.py tests/nf_host/test_shim.py tests/nf_host/test_global_state.py

.PHONY: nfs-test nfs-test-unit nfs-bench

nfs-test-unit: ## Unit tests of the example NFs, the frame parser, the shim layout and MemoryStore
	$(PY) -m pytest -q -m unit $(NFS_TESTS)

nfs-test: ## All NF and global-state tests (starts a real etcd on loopback)
	$(PY) -m pytest -q $(NFS_TESTS)

nfs-bench: ## Packets/s of parse_frame and each example NF without I/O (NFS_BENCH_ARGS="--etcd HOST:PORT" adds etcd)
	$(PY) -m bench.nf_parse $(NFS_BENCH_ARGS)
