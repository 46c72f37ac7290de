"""The deterministic simulation of the whole system: the correctness instrument (DESIGN §9).

The real controller (`controlplane`: two processes, each elected by the real leader election and
run by the real `lead_then_run`; migration and its undo, the move journal, fail-over, the
failure detection unit, takeover arming, the reconcile) over an in-memory etcd (`sim.etcd`) and
the real NF runtime (`nf_host.worker.Worker`: ordering, output commit,
replication, moves, promotion, self-takeover, the quiet window) run on one event loop in virtual
time (`sim.loop`), over a simulated network (`sim.network`: seeded delays, crashes, hangs,
management cuts, replies lost after their call took effect; leader deaths at chosen steps,
switch restarts, etcd outages: `sim.controllers`) and a switch model that follows the P4
program (`sim.switch`: stamping, replica groups, output dedup, markers, a FIFO queue per port).
Each seed draws its own overlapping events (`sim.system`); every run is checked (`sim.checks`).
`python -m sim --seeds N` runs many; a failing seed replays exactly with `--seed S --trace`.
"""
