"""The flows the controller has learned of from `new_flow_t` digests (bookkeeping only).

Bounded: at most `capacity` flows are kept, the least recently seen evicted first, so a flood of
new flows cannot grow the controller's memory.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from controlplane.switch_session import NewFlow

PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp"}


@dataclass
class FlowRecord:
    flow: NewFlow
    first_seen: float
    last_seen: float
    digests: int = 1

    def to_json(self, owner: int | None = None) -> dict[str, Any]:
        f = self.flow
        return {
            "slot": f.slot,
            "src": f"{ipaddress.IPv4Address(f.src_addr)}:{f.src_port}",
            "dst": f"{ipaddress.IPv4Address(f.dst_addr)}:{f.dst_port}",
            "protocol": PROTOCOLS.get(f.protocol, str(f.protocol)),
            "owner": owner,
            "digests": self.digests,
            "age_s": round(time.time() - self.first_seen, 3),
        }


class FlowTable:
    def __init__(self, capacity: int = 10000) -> None:
        self.capacity = capacity
        self._flows: OrderedDict[NewFlow, FlowRecord] = OrderedDict()
        self.total = 0

    def add(self, flows: list[NewFlow]) -> int:
        """Record flows from one digest list; returns how many were new."""
        now = time.time()
        new = 0
        for f in flows:
            rec = self._flows.get(f)
            if rec is None:
                self._flows[f] = FlowRecord(f, now, now)
                new += 1
                self.total += 1
                if len(self._flows) > self.capacity:
                    self._flows.popitem(last=False)
            else:
                rec.last_seen = now
                rec.digests += 1
                self._flows.move_to_end(f)
        return new

    def __len__(self) -> int:
        return len(self._flows)

    def records(self) -> list[FlowRecord]:
        return list(self._flows.values())
