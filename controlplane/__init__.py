"""controlplane: the nfcluster controller.

It owns the P4Runtime switch session, the slot map and its epochs, the NF registry, the
cluster-based load balancer, the failure detection unit, migration and fail-over orchestration, and
the northbound interfaces (CLI, HTTP API, Prometheus metrics).
"""
