"""The switch's own loss counters: p4sim's port and device counters, read over HTTP.

p4sim serves them at `http://<switch.stats>/status` (`p4sim run --metrics-addr`; docs/p4sim.md);
the P4 program's drop and per-port packet counters are read over P4Runtime (`read_drops`,
`read_port_packets`, through the controller's switch session).
What the controller keeps is "port/reason" -> packets: per port the frames the kernel dropped
before p4sim read them, transmit errors, frames lost to a full transmit ring, frames too long
for a ring block, the interfaces' own drops and the frames a port's wire impairment dropped on
purpose (`impair_dropped`: p4sim's stand-in for `tc netem`, docs/p4sim.md);
and "device/reason" for the engine's failures and packets that came before a program.
"""

from __future__ import annotations

from typing import Any, Protocol

import aiohttp

from controlplane.p4names import P4NameError

# Counters of the switch indexed by a drop reason, and the reasons in index order
# (OUTPUT_DROP_*, SLOT_MAP_DROP_*, PUNT_DROP_* in p4src/shared/define.p4).
SWITCH_DROP_REASONS: dict[str, tuple[str, ...]] = {
    "nf_output_drops": ("duplicate", "stale_epoch", "bad_slot", "wrong_stage", "watermark"),
    "slot_map_drops": ("orphan_fragment",),
    "punt_drops": ("no_handler", "over_rate"),
}
# the P4 program's per-port packet counters (p4src/*/include/control/port_counters.p4)
PORT_COUNTERS = {"port_rx": "rx", "port_tx": "tx"}

PORT_REASONS = ("kernel_drops", "tx_errors", "tx_overflows", "rx_truncated", "if_tx_dropped",
                "if_rx_dropped", "impair_dropped")
DEVICE_REASONS = ("engine_errors", "no_pipeline")


async def read_status(address: str, timeout: float = 1.0) -> dict[str, Any]:
    """p4sim's /status document (raises OSError, aiohttp.ClientError or TimeoutError)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, \
            session.get(f"http://{address}/status") as resp:
        resp.raise_for_status()
        doc: dict[str, Any] = await resp.json()
        return doc


def port_losses(doc: dict[str, Any]) -> dict[str, int]:
    """"<port>/<reason>" and "device/<reason>" -> packets lost, only the non-zero ones; ring
    freezes are occasions, not packets (shown as "<port>/ring_freezes" when any)."""
    out: dict[str, int] = {}
    for port, c in doc.get("ports", {}).items():
        for reason in (*PORT_REASONS, "ring_freezes"):
            if c.get(reason):
                out[f"{port}/{reason}"] = int(c[reason])
    for reason in DEVICE_REASONS:
        if doc.get("device", {}).get(reason):
            out[f"device/{reason}"] = int(doc["device"][reason])
    return out


def total_lost(losses: dict[str, int]) -> int:
    """Packets lost in all (ring freezes are not packets)."""
    return sum(v for k, v in losses.items() if not k.endswith("/ring_freezes"))


class CounterReader(Protocol):
    """What the counter reads need of the switch session: one wildcard read of a counter."""

    async def read_counter(self, short: str) -> dict[int, tuple[int, int]]: ...


async def read_drops(session: CounterReader) -> dict[str, int]:
    """What the switch dropped and counted: NF output the dedup dropped, edge packets dropped
    before a slot (orphan fragments), non-IPv4 edge packets not punted (each by reason), edge
    packets of unowned slots, anything unroutable from NF ports (one wildcard read per counter;
    reasons as in p4src/shared/define.p4)."""
    out: dict[str, int] = {}
    for name, reasons in SWITCH_DROP_REASONS.items():
        cells = await session.read_counter(name)
        for index, reason in enumerate(reasons):
            out[f"{name}/{reason}"] = cells.get(index, (0, 0))[0]
    for name in ("unowned_drops", "nf_port_drops", "no_route_drops"):
        out[f"{name}/all"] = sum(p for p, _ in (await session.read_counter(name)).values())
    return out


async def read_port_packets(session: CounterReader) -> dict[str, dict[str, int]]:
    """The P4 program's per-port packet counters: "port" -> {"rx": packets that entered the
    pipeline on it, "tx": packets the pipeline sent out of it}, non-zero ports only (one
    wildcard read of `port_rx` and one of `port_tx`; {} for a program without them)."""
    out: dict[str, dict[str, int]] = {}
    for name, key in PORT_COUNTERS.items():
        try:
            cells = await session.read_counter(name)
        except P4NameError:  # a program of before the port counters
            return {}
        for port, (packets, _bytes) in sorted(cells.items()):
            if packets:
                out.setdefault(str(port), {})[key] = packets
    return out
