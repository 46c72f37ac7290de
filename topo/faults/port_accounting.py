"""Frames the switch dropped before or after its pipeline, per port, from counters on both sides.

A switch port is a veth whose other end is an end host's or an NF's interface. What the switch
side of the veth received (`rx_packets`: what its peer sent) must all enter the P4 pipeline,
which counts every packet in by ingress port (`port_rx`, p4src/*/include/control/port_counters.p4);
what the pipeline sent out of a port (`port_tx`) must all reach the interface (`tx_packets`, or
`tx_dropped` when the peer had no room: the kernel's own count, listed apart). A target that
drops between the two says nothing: BMv2 drops a frame when its input buffer (1,024 packets,
shared by all ports) is full, and libpcap's capture ring may overflow below it, neither counted
where the controller can read it. So over the traffic's window, per port:

    dropped before the pipeline = interface received - port_rx
    dropped after the pipeline  = port_tx - interface sent (tx_packets + tx_dropped)

less what the target's own counters already say about that port (p4sim: `kernel_drops`,
`rx_truncated` before; `tx_errors`, `tx_overflows`, `impair_dropped` after, and the copies its
wire impairment added, `impair_duplicated`), so that nothing is counted twice: on p4sim the
remainder must be 0. The snapshots are read in an order that can only understate a drop (before
the traffic: the P4 counters, then the interfaces; after it: the interfaces, then the P4
counters), and a negative difference (a frame in flight at a snapshot, a frame the kernel itself
sent) is 0. A switch restarted within the window resets its P4 counters: then nothing is
computed (`accounting` returns None and says why).

The parsers and the arithmetic are pure, tested on fake counter values
(`tests/topo/test_port_accounting.py`); `snapshot` reads the live system.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topo.http_api import http_json

# a target's own per-port counters (p4sim's /status ports) of frames lost before the pipeline
# and after it, and of frames it added after it (its impairment's duplicates)
TARGET_BEFORE = ("kernel_drops", "rx_truncated")
TARGET_AFTER = ("tx_errors", "tx_overflows", "impair_dropped")
TARGET_EXTRA = ("impair_duplicated",)


def link_counters(text: str) -> dict[str, dict[str, int]]:
    """`ip -j -s link show`: interface -> its packet counters (`rx_packets`, `tx_packets`,
    `tx_dropped`, `rx_dropped`), every interface but `lo`."""
    out: dict[str, dict[str, int]] = {}
    for link in json.loads(text or "[]"):
        stats = link.get("stats64", {})
        rx, tx = stats.get("rx", {}), stats.get("tx", {})
        if link.get("ifname") != "lo":
            out[str(link["ifname"])] = {"rx_packets": int(rx.get("packets", 0)),
                                        "tx_packets": int(tx.get("packets", 0)),
                                        "rx_dropped": int(rx.get("dropped", 0)),
                                        "tx_dropped": int(tx.get("dropped", 0))}
    return out


@dataclass
class Snapshot:
    """Every counter the accounting needs at one moment: the P4 program's per port ("port" ->
    {"rx", "tx"}), the switch side's interfaces (port -> `link_counters` row), the target's own
    per-port counters when it has them (p4sim's /status "ports"), and when it was taken."""

    p4: dict[str, dict[str, int]]
    interfaces: dict[str, dict[str, int]]
    target: dict[str, dict[str, Any]] = field(default_factory=dict)
    at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "p4": self.p4, "interfaces": self.interfaces,
                "target": self.target}


@dataclass(frozen=True)
class PortAccount:
    """One port over the window. `before`/`after`: frames lost before/after the pipeline by the
    counters on both sides; `*_counted`: the part the target's own counters already count."""

    port: int
    received: int   # the interface received (its peer sent)
    entered: int    # port_rx
    sent: int       # port_tx
    transmitted: int  # the interface sent (tx_packets + tx_dropped)
    before: int
    before_counted: int
    after: int
    after_counted: int

    @property
    def before_uncounted(self) -> int:
        """Dropped before the pipeline and counted nowhere else: the target's silent loss."""
        return max(0, self.before - self.before_counted)

    @property
    def after_uncounted(self) -> int:
        return max(0, self.after - self.after_counted)

    def to_json(self) -> dict[str, int]:
        return {"port": self.port, "received": self.received, "entered": self.entered,
                "sent": self.sent, "transmitted": self.transmitted, "before": self.before,
                "before_counted": self.before_counted, "after": self.after,
                "after_counted": self.after_counted,
                "before_uncounted": self.before_uncounted,
                "after_uncounted": self.after_uncounted}


def _delta(now: Mapping[str, Any], then: Mapping[str, Any], key: str) -> int:
    return int(now.get(key, 0) or 0) - int(then.get(key, 0) or 0)


def accounting(before: Snapshot, after: Snapshot) -> tuple[list[PortAccount] | None, str]:
    """Each switch port's account over the window from `before` to `after` (ports with an
    interface in both), or None and why not (a P4 counter went down: the switch restarted)."""
    out: list[PortAccount] = []
    for port in sorted(set(before.interfaces) & set(after.interfaces), key=int):
        p0, p1 = before.p4.get(port, {}), after.p4.get(port, {})
        i0, i1 = before.interfaces[port], after.interfaces[port]
        t0, t1 = before.target.get(port, {}), after.target.get(port, {})
        entered, sent = _delta(p1, p0, "rx"), _delta(p1, p0, "tx")
        if entered < 0 or sent < 0:
            return None, (f"switch port {port}'s P4 counters went down within the window (the "
                          "switch restarted): not computed")
        received = _delta(i1, i0, "rx_packets")
        transmitted = _delta(i1, i0, "tx_packets") + _delta(i1, i0, "tx_dropped")
        extra = sum(max(0, _delta(t1, t0, k)) for k in TARGET_EXTRA)
        out.append(PortAccount(
            int(port), received, entered, sent, transmitted,
            before=max(0, received - entered),
            before_counted=sum(max(0, _delta(t1, t0, k)) for k in TARGET_BEFORE),
            after=max(0, sent + extra - transmitted),
            after_counted=sum(max(0, _delta(t1, t0, k)) for k in TARGET_AFTER)))
    return out, ""


def summary_line(accounts: list[PortAccount] | None, why: str = "") -> str:
    """The run summary's line: the frames the target dropped before and after its pipeline that
    no counter of its own saw, over every port, and where."""
    if accounts is None:
        return f"switch ports (interfaces against port_rx/port_tx): {why or 'not read'}"
    before = sum(a.before_uncounted for a in accounts)
    after = sum(a.after_uncounted for a in accounts)
    where = ", ".join(f"port {a.port}: {a.before_uncounted} in, {a.after_uncounted} out"
                      for a in accounts if a.before_uncounted or a.after_uncounted)
    counted = sum(a.before_counted + a.after_counted for a in accounts)
    return (f"switch ports (interfaces against port_rx/port_tx): dropped by the target before "
            f"its pipeline {before}, after it {after}, counted by no switch counter"
            + (f" ({where})" if where else "")
            + (f"; {counted} more the target counted itself (listed with its ports)"
               if counted else ""))


# -- reading the live system -------------------------------------------------------------------

def p4_ports(api: str) -> dict[str, dict[str, int]] | None:
    """The P4 program's per-port counters read now through the controller (None: not read)."""
    try:
        doc: dict[str, Any] = http_json(f"{api}/switch/ports?refresh=1")
    except Exception:  # the controller or the switch did not answer: no accounting
        return None
    ports = doc.get("ports")
    return ports if isinstance(ports, dict) else None


def switch_interfaces(switch: Any) -> dict[str, dict[str, int]]:
    """The switch's ports' interface counters, port -> `link_counters` row, read in the
    switch's namespace (Mininet's switches live in the root one)."""
    names = {intf.name: str(port) for port, intf in switch.intfs.items()
             if intf.name != "lo" and port != 0}
    try:
        links = link_counters(switch.cmd("ip -j -s link show"))
    except (ValueError, TypeError):
        return {}
    return {names[n]: c for n, c in links.items() if n in names}


def snapshot(api: str, switch: Any, target_status: Any, first: str) -> Snapshot | None:
    """The counters now; `first` is "p4" before the traffic and "interfaces" after it (the
    order that can only understate a drop); `target_status`: a callable returning p4sim's
    /status document or None. None when the P4 counters cannot be read."""
    if first == "p4":
        p4 = p4_ports(api)
        interfaces = switch_interfaces(switch)
    else:
        interfaces = switch_interfaces(switch)
        p4 = p4_ports(api)
    if p4 is None:
        return None
    doc = target_status()
    return Snapshot(p4, interfaces, dict((doc or {}).get("ports", {})), time.time())
