# Real TCP (iperf3, HTTP downloads) through the service chain while its NFs fail and move.


.PHONY: bench-tcp

bench-tcp: setup build ## TCP through firewall -> NAT -> monitor under a NAT kill, a slot move, a scale-out and a rebalance: goodput, stall per event, resets, checksums (results/bench-tcp/; BENCH_ARGS="--quick")
	$(PY) -m bench.tcp_events $(BENCH_ARGS)
