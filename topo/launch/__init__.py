"""The launcher behind `make run` and `make up`: the system brought up, proven, and kept running.

`bringup.system` starts etcd, the Mininet `network` with its P4 switch (`switches`, laid out by
`topology`), one `nf-host` per NF (`nfs`) and the `controllers`; `scenario` runs `make run`'s
traffic through it and reports (`report`), with the options of `options`; `up` keeps it running
for a user; `hot` and `chain_run` are the `--hot` and `--chain` variants. Faults come from the
fault harness, `topo.faults`.
"""
