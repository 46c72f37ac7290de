"""A small synchronous P4Runtime client for packet tests (finsy's generated protobufs + grpcio).

PTF test cases are plain `unittest` code, so this client is blocking: one gRPC channel, the
StreamChannel fed from a queue and drained by a reader thread into per-kind queues
(arbitration, packet-in, digest, errors). Names are resolved through the P4Info by any unique
suffix of the fully qualified name (`slot_owner` finds `NfcIngress.slot_map.slot_owner`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from finsy import pbutil
from finsy.proto import p4i, p4r, p4r_grpc


class P4RuntimeError(RuntimeError):
    """A P4Runtime call failed, or the switch did not answer in time."""


def encode_value(value: int, bitwidth: int) -> bytes:
    """The canonical P4Runtime bytestring of an unsigned value (no leading zero bytes)."""
    if value < 0 or value >= (1 << bitwidth):
        raise ValueError(f"value {value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_value(data: bytes) -> int:
    return int.from_bytes(data, "big")


@dataclass(frozen=True)
class PipelineFiles:
    """The compiler output that a pipeline push sends: P4Info (text format) and device config."""

    p4info_path: str
    device_config_path: str

    def load(self) -> tuple[p4i.P4Info, bytes]:
        with open(self.p4info_path, encoding="utf-8") as f:
            info = pbutil.from_text(f.read(), p4i.P4Info)
        with open(self.device_config_path, "rb") as f:
            config = f.read()
        return info, config


class P4Info:
    """Lookups in a P4Info by unique name suffix."""

    def __init__(self, info: p4i.P4Info) -> None:
        self.info = info

    @staticmethod
    def _find(objects: Any, name: str, kind: str) -> Any:
        found = [
            o
            for o in objects
            if o.preamble.name == name
            or o.preamble.name.endswith("." + name)
            or o.preamble.alias == name
        ]
        exact = [o for o in found if o.preamble.name == name]
        if exact:
            return exact[0]
        if len(found) != 1:
            names = [o.preamble.name for o in found]
            raise KeyError(f"{kind} {name!r}: {'no match' if not found else f'ambiguous {names}'}")
        return found[0]

    def table(self, name: str) -> Any:
        return self._find(self.info.tables, name, "table")

    def action(self, name: str) -> Any:
        return self._find(self.info.actions, name, "action")

    def counter(self, name: str) -> Any:
        return self._find(self.info.counters, name, "counter")

    def register(self, name: str) -> Any:
        return self._find(self.info.registers, name, "register")

    def meter(self, name: str) -> Any:
        return self._find(self.info.meters, name, "meter")

    def digest(self, name: str) -> Any:
        return self._find(self.info.digests, name, "digest")

    def packet_metadata(self, name: str) -> Any:
        for meta in self.info.controller_packet_metadata:
            if meta.preamble.name == name:
                return meta
        raise KeyError(f"controller packet metadata {name!r}: no match")

    def match_field(self, table: Any, name: str) -> Any:
        for field in table.match_fields:
            if field.name == name:
                return field
        raise KeyError(f"table {table.preamble.name}: no match field {name!r}")

    def action_param(self, action: Any, name: str) -> Any:
        for param in action.params:
            if param.name == name:
                return param
        raise KeyError(f"action {action.preamble.name}: no parameter {name!r}")


class P4RuntimeClient:
    """One P4Runtime session: arbitration as primary, writes, reads, packet I/O and digests."""

    def __init__(self, address: str, device_id: int, election_id: tuple[int, int] = (0, 1)) -> None:
        self.address = address
        self.device_id = device_id
        self.election_id = p4r.Uint128(high=election_id[0], low=election_id[1])
        self.channel = grpc.insecure_channel(address)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.arbitrations: queue.Queue[p4r.MasterArbitrationUpdate] = queue.Queue()
        self.packet_ins: queue.Queue[p4r.PacketIn] = queue.Queue()
        self.digests: queue.Queue[p4r.DigestList] = queue.Queue()
        self.errors: queue.Queue[p4r.StreamError] = queue.Queue()
        self._stream: Any = None
        self._reader: threading.Thread | None = None

    # -- session ---------------------------------------------------------------------------

    def connect(self, timeout: float = 10.0) -> None:
        """Open the stream and become primary; raise if the switch does not agree in time."""
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError as exc:
            raise P4RuntimeError(f"no P4Runtime server at {self.address}") from exc
        self._stream = self.stub.StreamChannel(self._request_iter())
        self._reader = threading.Thread(target=self._read_stream, name="p4rt-stream", daemon=True)
        self._reader.start()
        self._requests.put(
            p4r.StreamMessageRequest(
                arbitration=p4r.MasterArbitrationUpdate(
                    device_id=self.device_id, election_id=self.election_id
                )
            )
        )
        try:
            update = self.arbitrations.get(timeout=timeout)
        except queue.Empty as exc:
            raise P4RuntimeError("no arbitration answer") from exc
        if update.status.code != 0:
            raise P4RuntimeError(f"not primary: {update.status.message or update.status.code}")

    def close(self) -> None:
        self._requests.put(None)
        if self._stream is not None:
            self._stream.cancel()
        if self._reader is not None:
            self._reader.join(timeout=2.0)
        self.channel.close()

    def _request_iter(self) -> Iterator[p4r.StreamMessageRequest]:
        while True:
            item = self._requests.get()
            if item is None:
                return
            yield item

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    self.arbitrations.put(msg.arbitration)
                elif kind == "packet":
                    self.packet_ins.put(msg.packet)
                elif kind == "digest":
                    self.digests.put(msg.digest)
                elif kind == "error":
                    self.errors.put(msg.error)
        except grpc.RpcError:
            return  # cancelled by close(), or the server went away

    # -- pipeline --------------------------------------------------------------------------

    def pipeline_cookie(self) -> int | None:
        req = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY,
        )
        try:
            resp = self.stub.GetForwardingPipelineConfig(req, timeout=10)
        except grpc.RpcError:
            return None
        if not resp.config.HasField("cookie"):
            return None
        return int(resp.config.cookie.cookie)

    def set_pipeline(self, info: p4i.P4Info, device_config: bytes, cookie: int) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=self.election_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(
                p4info=info,
                p4_device_config=device_config,
                cookie=p4r.ForwardingPipelineConfig.Cookie(cookie=cookie),
            ),
        )
        try:
            self.stub.SetForwardingPipelineConfig(req, timeout=60)
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"pipeline push failed: {exc.details()}") from exc

    # -- writes and reads ------------------------------------------------------------------

    def write(self, updates: list[p4r.Update]) -> None:
        req = p4r.WriteRequest(
            device_id=self.device_id,
            election_id=self.election_id,
            updates=updates,
            atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR,
        )
        try:
            self.stub.Write(req, timeout=10)
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"write failed: {exc.code()} {exc.details()}") from exc

    def write_entity(self, kind: p4r.Update.Type.ValueType, entity: p4r.Entity) -> None:
        self.write([p4r.Update(type=kind, entity=entity)])

    def read(self, entity: p4r.Entity) -> list[p4r.Entity]:
        req = p4r.ReadRequest(device_id=self.device_id, entities=[entity])
        out: list[p4r.Entity] = []
        try:
            for resp in self.stub.Read(req, timeout=10):
                out.extend(resp.entities)
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"read failed: {exc.code()} {exc.details()}") from exc
        return out

    # -- stream ----------------------------------------------------------------------------

    def send_packet_out(self, payload: bytes, metadata: list[p4r.PacketMetadata]) -> None:
        self._requests.put(
            p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=payload, metadata=metadata))
        )

    def ack_digest(self, digest: p4r.DigestList) -> None:
        self._requests.put(
            p4r.StreamMessageRequest(
                digest_ack=p4r.DigestListAck(digest_id=digest.digest_id, list_id=digest.list_id)
            )
        )

    @staticmethod
    def drain(q: queue.Queue[Any]) -> None:
        while True:
            try:
                q.get_nowait()
            except queue.Empty:
                return
