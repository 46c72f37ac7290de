"""topo: the launcher (`topo.launch`) and the fault harness (`topo.faults`) behind `make run`,
`make chaos` and `make up`, around a small shared core: a run as data (`model`), the
controller's HTTP API (`http_api`), numbered traffic and its verdict (`traffic`, `records`,
`verify`), TCP load for the TCP benchmarks (`tcp_load`), private etcd servers (`etcd`) and
processes (`procs`).
"""
