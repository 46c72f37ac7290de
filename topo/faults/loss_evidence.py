"""The evidence a run's verdict weighs its losses against, and the words that report them.

The chaos faults that drop packets on purpose leave windows (`topo.verify.LossWindow`): a switch
restart the outage, from its kill to the leader's reconcile, on every port and both ways, and
the frames queued in the killed switch's sockets (counted just before the kill: sent up to
`HELD_LEAD_S` before it, at most that many; without the count, the outage opens 0.2 s before the
kill); a `netem` fault the impairment of one primary's data link, on the switch's side, that is
its input, for the slots that primary owned when it began, with the number of frames it
dropped. `judge` hands them, with every packet's send and
arrival times from the traffic reports and each flow's slot, to `topo.verify.verify`, which
excuses a loss only by a window tied to it (docs/chaos.md, "What the verdict excuses").

`system_line` is the summary's "lost by the system" line: the losses no window explains, split
into those before any NF processed them and those after (checker-count gaps: state applied, output
lost), with, beside the latter, how many of them the switch's output dedup may have dropped as
"duplicates" (an output dropped as not newer than the last one forwarded, whose input's output
never reached the end host). Every one of those must be 0 for a passing verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topo.traffic import SideReport
from topo.verify import BOTH, INPUT, OUTAGE, WIRE, Evidence, Losses, LossWindow, Verdict, verify

# how long before an impairment began a packet may have been sent and still met it: the queues
# between the sender's socket and the switch's port on a busy 2-core machine (the impairment's
# own count of drops bounds what it excuses, so this only widens where they may be found)
IMPAIR_LEAD_S = 2.0
# how long before a switch's kill a frame still inside it may have been sent (its sockets' queues
# on a busy machine; the count of frames inside, read just before the kill, bounds what it excuses)
HELD_LEAD_S = 2.0
DUPLICATE_DROPS = "nf_output_drops/duplicate"  # the switch's counter of outputs dropped as such


def windows_of(faults: Sequence[Any], chains: bool = False) -> list[LossWindow]:
    """The loss windows of a run's fault records (`topo.faults.chaos.ControlFault`; others have none).
    A netem fault's window crosses the slots its primary owned when it began; with service
    chains a stage's slot is not the flow's, so it crosses every slot (its count still bounds
    it). A fault that did not complete (no window, or not ok for netem) excuses nothing."""
    out: list[LossWindow] = []
    for f in faults:
        window = getattr(f, "window", None)
        if window is None:
            continue
        if f.kind == "switch":
            out.append(LossWindow(OUTAGE, window[0], window[1], BOTH, name=f"switch {f.target}"))
            held = getattr(f, "held", None)
            if held:  # the frames inside the switch at its kill: sent before the outage
                out.append(LossWindow(OUTAGE, window[0], window[0], BOTH, None, held, HELD_LEAD_S,
                                      name=f"switch {f.target}: inside it at its kill"))
        elif f.kind == "netem" and f.ok:
            slots = None if chains else frozenset(f.slots)
            out.append(LossWindow(WIRE, window[0], window[1], INPUT, slots, f.wire_lost,
                                  IMPAIR_LEAD_S, name=f"netem {f.target}"))
    return out


def evidence_of(client: SideReport, server: SideReport, windows: Sequence[LossWindow],
                slots: Mapping[int, int]) -> Evidence:
    """Every packet's times, per direction (forward: sent by the client, received by the server)."""
    return Evidence(windows, slots, client.sent_at, server.sent_at, server.received_at,
                    client.received_at)


def judge(client: SideReport, server: SideReport, faults: Sequence[Any], slots: Mapping[int, int],
          counted: bool = True, chains: bool = False) -> Verdict:
    """The run's verdict, its losses excused only by the windows of `faults` tied to them."""
    ev = evidence_of(client, server, windows_of(faults, chains), slots)
    return verify(server.received, client.received, client.sent, server.sent, ev, counted)


def undelivered_duplicates(losses: Losses, switch_drops: Mapping[str, int]) -> int:
    """How many of the outputs the switch dropped as duplicates may have been ones whose input's
    output never reached the end host: such an output's input was processed (its count spent)
    and is lost, so it is one of the count gaps no window explains; the switch counts its dedup
    drops per reason only, so this is the bound: the fewer of the two."""
    return min(int(switch_drops.get(DUPLICATE_DROPS, 0)), losses.system_after)


def loss_summary(verdict: Verdict, switch_drops: Mapping[str, int]) -> dict[str, int]:
    """The verdict's losses for disturbances.json and the summary (`Losses.to_json`, and the
    switch's duplicate drops: all, and at most how many of them never reached the end host)."""
    return {**verdict.losses.to_json(),
            "switch_duplicate_drops": int(switch_drops.get(DUPLICATE_DROPS, 0)),
            "duplicate_drops_undelivered": undelivered_duplicates(verdict.losses, switch_drops)}


def system_line(losses: Mapping[str, int], host_drops: int = 0) -> str:
    """"lost by the system N (...)": what no window explains, before and after processing, and
    the switch's duplicate drops of output that never reached the end host. The end hosts' own
    socket drops (after the NFs: count gaps) are reported apart, and taken out of it."""
    before = losses.get("lost_by_system_before_processing", 0)
    after = losses.get("lost_after_processing_by_system", 0)
    after_hosts = min(after, host_drops)  # a full socket at an end host: a gap, not the system's
    before_hosts = min(before, host_drops - after_hosts)
    before, after = before - before_hosts, after - after_hosts
    return (f"lost by the system {before + after} (before any NF processed them {before}; "
            f"after, checker counts missing that no wire fault explains {after}, of them output "
            f"the switch dropped as a duplicate and never delivered: at most "
            f"{min(after, losses.get('duplicate_drops_undelivered', 0))})")


def excused_line(losses: Mapping[str, int]) -> str:
    """What the windows excused, and how many checker counts are missing in all."""
    return (f"excused by evidence: {losses.get('lost_in_switch_outages', 0)} in switch outages, "
            f"{losses.get('lost_on_the_wire', 0)} dropped by a wire impairment on the flow's "
            f"port; checker counts missing in all (lost after processing) "
            f"{losses.get('lost_after_processing', 0)}, of them excused "
            f"{losses.get('lost_after_processing_excused', 0)}")
