"""The switch's own loss counters: p4sim's port and device counters, read over HTTP.

p4sim serves them at `http://<switch.stats>/status` (`p4sim run --metrics-addr`; docs/p4sim.md);
the P4 program's drop counters are read over P4Runtime instead (`Controller.read_switch_drops`).
What the controller keeps is "port/reason" -> packets: per port the frames the kernel dropped
before p4sim read them, transmit errors, frames lost to a full transmit ring, frames too long
for a ring block, the interfaces' own drops and the frames a port's wire impairment dropped on
purpose (`impair_dropped`: p4sim's stand-in for `tc netem`, docs/p4sim.md);
and "device/reason" for the engine's failures and packets that came before a program.
"""

from __future__ import annotations

from typing import Any

import aiohttp

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
