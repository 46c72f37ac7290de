"""The fault harness of `make run`, `make chaos` and `make soak`: faults injected into a running
system, and what they cost.

`injector` kills, hangs and restarts NFs; `chaos` faults the controller, etcd, the switch and
the wire; `chaos_modes` adds moves and overlapping faults; `mgmt_cut` cuts an NF's management
link; `hogs` makes the machine busy; `disturbances` runs them during the traffic. The accounting
of a run's losses is here too: `loss_evidence` (what excuses a loss), `losses`,
`port_accounting` and `kernel_drops` (where packets were dropped), `memory` (the processes'
RSS). It works on a `topo.model.System`; of the launcher (`topo.launch`) it imports only types,
for type checking.
"""
