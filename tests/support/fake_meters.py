"""Meter cells for the fake switch engines of the tests: configurations kept by (meter, index)."""

from __future__ import annotations

from p4sim.runtime.meters import MeterConfig


class FakeMeters:
    """The engine API's `meter_read`/`meter_write`, remembered in `meters` (no colours)."""

    def __init__(self) -> None:
        self.meters: dict[tuple[int, int], MeterConfig] = {}

    def meter_read(self, meter_id: int, index: int) -> MeterConfig | None:
        return self.meters.get((meter_id, index))

    def meter_write(self, meter_id: int, index: int, config: MeterConfig | None) -> None:
        if config is None:
            self.meters.pop((meter_id, index), None)
        else:
            self.meters[(meter_id, index)] = config
