"""The move protocol's time limits, in one place: the NF runtime waits by them, and the
controller derives its own deadlines from them (docs/protocols.md §5).

A release waits: for an adoption of the slot here that still waits for its marker (at most
`2 * MARKER_WAIT`), then, each at most `TRANSFER_TIMEOUT`, for the link to the adopter, for the
old owner's output of the slot to leave (its backup's ack) and for the adopter's answer to the
transfer. Its command may also wait behind others in the worker's queue, which no limit here
bounds. So the controller's deadline is an estimate, not a guarantee, and correctness does not
depend on it: a `Release` that fails or does not answer in time is decided by the adopter's
fence (`CancelAdopt`: the adoption is cancelled, or the adopter says it started the slot), and
the runtime never takes a released slot back by itself while the adopter's answer is missing
(the slot stays released, undecided, until the answer or the controller decides it).
"""

from __future__ import annotations

SWITCH_QUEUE_BOUND = 2.0
"""Seconds an output frame an NF hands to its data socket may wait, at most, before it has been
through the switch's ingress pipeline (its socket, the wire, the switch's receive queue for the
NF's port). The backup keeps a primary's released output this long after it learns of the
release (`OutputLog.retain`, `--output-retain-ms`; docs/protocols.md §2 "The output log"): a
frame still queued when its primary dies could otherwise be overtaken by the promoted backup's
newer output and dropped by the switch as a duplicate. A hardware switch's queues are
microseconds long; p4sim's receive ring for a port (`--ring-mb`, 2048 blocks, each handed over
at the latest 1 ms after it opened: docs/p4sim.md "Port I/O") holds about 2 s of frames at low
rates, and under overload held a second (docs/protocols.md, Known limits). A deployment whose
switch queues can hold longer must raise it."""

TRANSFER_TIMEOUT = 5.0
"""Seconds a releasing NF waits at each of its three steps."""

MARKER_WAIT = SWITCH_QUEUE_BOUND
"""Seconds an adopter that has the transfer waits for the old owner's move marker (which follows
the old owner's last output through the switch) before it starts on the slot anyway, counted in
`marker_timeouts`: the old owner died mid-move, or the switch's queues are longer than they may
be. As long as the queues the output log allows for: it was 0.5 s, and the simulation with port
queues of up to a second (`tests/sim/test_sim.py`'s `LONG_QUEUES`) failed 17 of 200 seeds,
mostly adopters that started before the old owner's last outputs had been through the switch,
whose flows then showed packets out of order or lost and checker counts off; with it equal to
the bound, 1 (docs/simulation.md, "Port queues of up to a second"). The cost
is latency only: an adopter whose old owner died mid-move holds the slot's packets that long."""

RELEASE_WORST_CASE = 2 * MARKER_WAIT + 3 * TRANSFER_TIMEOUT
"""The longest a `Release` can take inside a worker once it runs (queueing not counted)."""

CONTROL_REPLY_TIMEOUT = RELEASE_WORST_CASE + 1.0
"""How long the NF's control server waits for a worker's answer to a release."""

RELEASE_RPC_TIMEOUT = CONTROL_REPLY_TIMEOUT + 2.0
"""The controller's deadline for the `Release` RPC: after the runtime's own limits, so that a
release that merely takes long is usually answered; one that is not is decided by the fence."""

ADOPT_RPC_TIMEOUT = 2.0
"""The controller's deadline for `Adopt`, `CancelAdopt` and the backup's `AssignSlots`."""

GIVE_BACK_WAIT = 1.0
"""How long a dead adopter's backup waits for its link to the old owner before it gives up the
copies it held of an adoption never started (counted in `cancelled`; docs/protocols.md §5, M14);
the controller's `CancelAdopt` to it waits `ADOPT_RPC_TIMEOUT` beyond that."""

