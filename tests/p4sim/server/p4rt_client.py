"""A minimal synchronous P4Runtime client over the raw stubs, for conformance and error tests."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import grpc
from finsy.proto import U128, p4r, p4r_grpc, rpc_status


class StreamClient:
    """One StreamChannel: send requests, receive responses (by kind) with a timeout."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._out: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.responses: queue.Queue[p4r.StreamMessageResponse] = queue.Queue()
        self.error: grpc.RpcError | None = None
        self.done = threading.Event()
        self._call = p4r_grpc.P4RuntimeStub(channel).StreamChannel(self._requests())
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _requests(self) -> Iterator[p4r.StreamMessageRequest]:
        while True:
            msg = self._out.get()
            if msg is None:
                return
            yield msg

    def _receive(self) -> None:
        try:
            for msg in self._call:
                self.responses.put(msg)
        except grpc.RpcError as exc:
            self.error = exc
        finally:
            self.done.set()

    def send(self, msg: p4r.StreamMessageRequest) -> None:
        self._out.put(msg)

    def arbitrate(self, election_id: int | None, device_id: int = 1, role: str = "") -> None:
        upd = p4r.MasterArbitrationUpdate(device_id=device_id)
        if election_id is not None:
            upd.election_id.CopyFrom(U128.encode(election_id))
        if role:
            upd.role.name = role
        self.send(p4r.StreamMessageRequest(arbitration=upd))

    def receive(self, kind: str, timeout: float = 5.0) -> p4r.StreamMessageResponse:
        """The next response of `kind` (arbitration, packet, digest, error); others are skipped."""
        while True:
            msg = self.responses.get(timeout=timeout)
            if msg.WhichOneof("update") == kind:
                return msg

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self.done.wait(5.0)


def status_details(exc: grpc.RpcError) -> list[p4r.Error]:
    """The p4r.Error of each update from a failed Write."""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            st = rpc_status.Status.FromString(value)
            out = []
            for d in st.details:
                e = p4r.Error()
                d.Unpack(e)
                out.append(e)
            return out
    return []
