"""Client arbitration (P4Runtime spec 5.3-5.4): primary and backups per role, by election id.

For each role the primary is the connected stream whose election id equals the highest election id
the server has seen for that role. When a stream with a higher id arbitrates, it becomes primary and
every stream of the role is told (OK to the primary, ALREADY_EXISTS to the others). When the primary
goes away, the remaining streams are told NOT_FOUND with the highest id seen, so that one of them
can claim it again. Two live streams may not share an election id (INVALID_ARGUMENT). Writes
without an election id are accepted only while no controller of the role is connected (as BMv2).
"""

from __future__ import annotations

import threading

from finsy.proto import U128, p4r, rpc_code, rpc_status

from p4sim.server.errors import P4RuntimeError, invalid
from p4sim.server.stream import ControllerStream


class Arbiter:
    """Which stream is primary for each role; thread-safe."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._lock = threading.Lock()
        self._streams: dict[str, list[ControllerStream]] = {}
        self._max_seen: dict[str, int] = {}

    def _primary(self, role: str) -> ControllerStream | None:
        top = self._max_seen.get(role)
        for s in self._streams.get(role, []):
            if s.election_id is not None and s.election_id == top:
                return s
        return None

    def arbitrate(self, stream: ControllerStream, update: p4r.MasterArbitrationUpdate) -> None:
        """Handle a MasterArbitrationUpdate from `stream` and send the responses it causes."""
        role = update.role.name
        eid = U128.decode(update.election_id) if update.HasField("election_id") else None
        with self._lock:
            if stream.arbitrated and role != stream.role:
                raise invalid("a stream cannot change its role")
            peers = self._streams.setdefault(role, [])
            for s in peers:
                if s is not stream and eid is not None and s.election_id == eid:
                    raise invalid(f"Election id {eid} already exists for role '{role}'")
            before = self._primary(role)
            stream.role = role
            stream.election_id = eid
            stream.arbitrated = True
            if stream not in peers:
                peers.append(stream)
            if eid is not None and eid > self._max_seen.get(role, -1):
                self._max_seen[role] = eid
            after = self._primary(role)
            targets = peers if before is not after else [stream]
            for s in targets:
                s.send(self._update_for(s, role, after))

    def remove(self, stream: ControllerStream) -> None:
        """`stream` ended: if it was primary, tell the others that there is no primary now."""
        with self._lock:
            peers = self._streams.get(stream.role, [])
            if stream not in peers:
                return
            was_primary = self._primary(stream.role) is stream
            peers.remove(stream)
            if was_primary:
                for s in peers:
                    s.send(self._update_for(s, stream.role, None))

    def is_primary(self, role: str, election_id: int | None) -> bool:
        with self._lock:
            p = self._primary(role)
            return p is not None and election_id is not None and p.election_id == election_id

    def check_primary(self, role: str, election_id: int | None) -> None:
        """PERMISSION_DENIED unless `election_id` is the primary's for `role`.

        As in BMv2, a request without an election id is accepted while no controller at all is
        connected for the role (handy for scripts and debugging).
        """
        with self._lock:
            if election_id is None and not self._streams.get(role):
                return
        if not self.is_primary(role, election_id):
            raise P4RuntimeError(
                "PERMISSION_DENIED",
                f"election id {election_id} is not the primary's for role '{role}'",
            )

    def primaries(self) -> list[ControllerStream]:
        with self._lock:
            out = []
            for role in self._streams:
                p = self._primary(role)
                if p is not None:
                    out.append(p)
            return out

    def _update_for(
        self, s: ControllerStream, role: str, primary: ControllerStream | None
    ) -> p4r.StreamMessageResponse:
        top = self._max_seen.get(role, 0)
        if primary is None:
            code, msg = rpc_code.NOT_FOUND, "no primary controller"
        elif primary is s:
            code, msg = rpc_code.OK, "you are the primary controller"
        else:
            code, msg = rpc_code.ALREADY_EXISTS, "you are a backup controller"
        update = p4r.MasterArbitrationUpdate(
            device_id=self.device_id,
            election_id=U128.encode(top),
            status=rpc_status.Status(code=code, message=msg),
        )
        if role:
            update.role.name = role
        return p4r.StreamMessageResponse(arbitration=update)
