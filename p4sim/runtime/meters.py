"""Indexed meters (v1model `meter`): a two-rate three-colour marker per index, as BMv2 runs.

RFC 2698 (trTCM), as in behavioral-model `src/bm_sim/meters.cpp`: each index has a committed
bucket (rate `cir`, size `cburst`) and a peak bucket (rate `pir`, size `pburst`), both full when
configured. A packet of size B (1 for a packets meter, its length for a bytes meter), once the
buckets are refilled for the time since the last packet: RED if the peak bucket holds less than
B; otherwise YELLOW if the committed bucket holds less than B (the peak bucket pays); otherwise
GREEN (both pay). An index that was never configured, or was reset, marks every packet GREEN;
an index out of range leaves the result field as it was (BMv2).
Rates are units per second and bursts units, as in P4Runtime's `MeterConfig`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

GREEN, YELLOW, RED = 0, 1, 2
_EPSILON = 1e-6


@dataclass(frozen=True)
class MeterConfig:
    cir: int  # committed rate, units per second
    cburst: int  # committed burst, units
    pir: int  # peak rate, units per second
    pburst: int  # peak burst, units

    def check(self, where: str) -> None:
        """ValueError naming the field when the configuration cannot be run."""
        for name in ("cir", "cburst", "pir", "pburst"):
            if getattr(self, name) < 0:
                raise ValueError(f"{where}: {name} is negative ({getattr(self, name)})")
        if self.pir < self.cir:
            raise ValueError(f"{where}: pir {self.pir} is below cir {self.cir}")


class _Buckets:
    __slots__ = ("at", "config", "tc", "tp")

    def __init__(self, config: MeterConfig, now: float) -> None:
        self.config = config
        self.tc, self.tp, self.at = float(config.cburst), float(config.pburst), now

    def mark(self, units: int, now: float) -> int:
        c = self.config
        elapsed = max(0.0, now - self.at)
        self.at = now
        self.tc = min(float(c.cburst), self.tc + elapsed * c.cir)
        self.tp = min(float(c.pburst), self.tp + elapsed * c.pir)
        if self.tp + _EPSILON < units:  # (a token refilled in floating point may be 0.9999...)
            return RED
        self.tp = max(0.0, self.tp - units)
        if self.tc + _EPSILON < units:
            return YELLOW
        self.tc = max(0.0, self.tc - units)
        return GREEN


class MeterArray:
    """The meters of one `meter(size, type)` instance."""

    def __init__(self, size: int, unit: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self.unit = unit  # "PACKETS" or "BYTES"
        self.clock = clock
        self._cells: dict[int, _Buckets] = {}

    def execute(self, index: int, packet_bytes: int) -> int:
        """The colour of one packet at `index` (GREEN when unconfigured or out of range)."""
        cell = self._cells.get(index)
        if cell is None:
            return GREEN
        return cell.mark(1 if self.unit == "PACKETS" else packet_bytes, self.clock())

    def configure(self, index: int, config: MeterConfig | None) -> None:
        """Set (buckets full) or, with None, reset index `index` to unconfigured."""
        if config is None:
            self._cells.pop(index, None)
        else:
            self._cells[index] = _Buckets(config, self.clock())

    def config(self, index: int) -> MeterConfig | None:
        cell = self._cells.get(index)
        return None if cell is None else cell.config
