"""The packet replication engine part of the in-process API: multicast groups and clone sessions.

`PreApi` is a base of `p4sim.runtime.switch.Switch`; it writes the PRE of the switch's `V1Model`
under the switch's lock.
"""

from __future__ import annotations

import threading

from p4sim.runtime.api_values import P4simError, bad, check_value
from p4sim.runtime.v1model import V1Model


class PreApi:
    """Multicast groups and clone sessions of a switch (`Switch` sets `_lock` and `v1`)."""

    _lock: threading.RLock
    v1: V1Model

    def _replicas(self, what: str, replicas: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out = []
        seen = set()
        for port, rid in replicas:
            check_value(f"{what} port", port, 9 if port < 512 else 32)
            check_value(f"{what} replication id", rid, 16)
            if (port, rid) in seen:
                raise bad(f"{what}: replica ({port}, {rid}) given twice")
            seen.add((port, rid))
            out.append((port, rid))
        return out

    def mc_group_set(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        with self._lock:
            if not 0 < group_id < 1 << 16:
                raise P4simError("OUT_OF_RANGE", f"multicast group id {group_id} out of range")
            self.v1.pre.mc_groups[group_id] = self._replicas(f"multicast group {group_id}", replicas)

    def mc_group_delete(self, group_id: int) -> None:
        with self._lock:
            if self.v1.pre.mc_groups.pop(group_id, None) is None:
                raise P4simError("NOT_FOUND", f"no multicast group {group_id}")

    def mc_groups(self) -> dict[int, list[tuple[int, int]]]:
        with self._lock:
            return {g: list(r) for g, r in self.v1.pre.mc_groups.items()}

    def clone_session_set(self, session_id: int, replicas: list[tuple[int, int]], class_of_service: int = 0,
                          truncate: int = 0) -> None:
        with self._lock:
            if not 0 < session_id < 1 << 32:
                raise P4simError("OUT_OF_RANGE", f"clone session id {session_id} out of range")
            self.v1.pre.clone_sessions[session_id] = (
                self._replicas(f"clone session {session_id}", replicas), class_of_service, truncate)

    def clone_session_delete(self, session_id: int) -> None:
        with self._lock:
            if self.v1.pre.clone_sessions.pop(session_id, None) is None:
                raise P4simError("NOT_FOUND", f"no clone session {session_id}")

    def clone_sessions(self) -> dict[int, list[tuple[int, int]]]:
        with self._lock:
            return {s: list(r[0]) for s, r in self.v1.pre.clone_sessions.items()}
