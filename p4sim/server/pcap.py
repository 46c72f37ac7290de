"""Per-port packet captures (`--pcap DIR`): `<iface>_in.pcap` and `<iface>_out.pcap`, as BMv2 names them.

Written with scapy's `PcapWriter` (imported only when captures are asked for: scapy is slow to load).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class PcapTap:
    """A packet tap for `Device.tap`: one capture file per (port, direction)."""

    def __init__(self, directory: str | Path, names: Mapping[int, str]) -> None:
        from scapy.utils import PcapWriter

        self._writer_cls = PcapWriter
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.names = dict(names)
        self._writers: dict[tuple[str, int], Any] = {}
        self._lock = threading.Lock()

    def path(self, direction: str, port: int) -> Path:
        return self.directory / f"{self.names.get(port, f'port{port}')}_{direction}.pcap"

    def __call__(self, direction: str, port: int, data: bytes) -> None:
        with self._lock:
            w = self._writers.get((direction, port))
            if w is None:
                w = self._writer_cls(str(self.path(direction, port)), linktype=1, sync=True)
                self._writers[(direction, port)] = w
            w.write(data)

    def close(self) -> None:
        with self._lock:
            for w in self._writers.values():
                w.close()
            self._writers.clear()
