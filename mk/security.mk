# The management plane's PKI (docs/security.md): the local CA, certificates and heartbeat keys.

PKI_DIR ?= build/pki

.PHONY: pki

pki: setup ## the local CA, certificates of the controller, the switch, etcd and every NF of topo/*.yaml (and NFs 1..64), heartbeat keys, into PKI_DIR (build/pki; idempotent)
	$(PY) -m mgmt.pki --dir $(PKI_DIR) --config topo/nfcluster.yaml --config topo/chain.yaml --nfs 64

# `make build` creates it too (what `make run`, `make up` and the tests use)
build: pki

.PHONY: bench-tls

bench-tls: setup ## what mutual TLS costs a replication link: set-up and stream throughput, plaintext against TLS (BENCH_ARGS="--repeats 9 --mib 128")
	$(PY) -m bench.tls_overhead $(BENCH_ARGS)
