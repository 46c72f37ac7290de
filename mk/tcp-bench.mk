# Real TCP (iperf3, HTTP downloads) through the service chain while its NFs fail and move.


.PHONY: bench-tcp

bench-tcp: setup build ## TCP through firewall -> NAT -> monitor while the load balancer acts (scale-out, moves), a NAT primary is killed and a slot moved: goodput, stall per event, resets, checksums (results/bench-tcp/; BENCH_ARGS="--quick", "--by-command")
	$(PY) -m bench.tcp_events $(BENCH_ARGS)
