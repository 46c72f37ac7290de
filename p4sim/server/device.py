"""The switch device behind the P4Runtime service: pipeline life cycle, packet path, packet-in/out.

One `Device` holds the committed `Pipeline` (and one saved by VERIFY_AND_SAVE), the arbiter, and the
digest timer. Packets from ports and packet-outs from the controller go through `Device.inject`,
which runs the engine under the device lock (so a Write batch is atomic with respect to packets)
and hands the results to the ports, to the primary controllers (packet-in) and to the digest batcher
(`deliver`; the native ring fast path, p4sim/native/rings.py, runs the engine itself under the same
lock and hands `deliver` only the outputs it did not send).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from finsy.proto import p4i, p4r

from p4sim.server import bytestrings
from p4sim.server.arbitration import Arbiter
from p4sim.server.engine import P4simError, SwitchLike
from p4sim.server.errors import P4RuntimeError, invalid
from p4sim.server.pipeline import Pipeline
from p4sim.server.reconcile import carry_state
from p4sim.server.schema import FieldInfo

LOG = logging.getLogger("p4sim.server")

EngineFactory = Callable[[bytes, p4i.P4Info, int | None], SwitchLike]
PortSender = Callable[[int, bytes], None]
PacketTap = Callable[[str, int, bytes], None]  # ("in" | "out", port, data)


def real_engine(data: bytes, p4info: p4i.P4Info, cpu_port: int | None) -> SwitchLike:
    """Build the p4sim engine from a device config (see docs/p4sim.md, "Device config")."""
    from p4sim.runtime.engine_loader import switch_from_device_config

    return switch_from_device_config(data, p4info, cpu_port=cpu_port)


@dataclass
class DeviceStats:
    packets_in: int = 0
    packets_out: int = 0
    packet_ins: int = 0
    packet_outs: int = 0
    engine_errors: int = 0
    digest_lists: int = 0
    no_pipeline: int = 0  # packets that arrived before any program was loaded (dropped)


def _pack(fields: list[FieldInfo], values: dict[int, int]) -> bytes:
    bits = 0
    total = 0
    for f in fields:
        bits = (bits << f.bitwidth) | values.get(f.id, 0)
        total += f.bitwidth
    pad = (-total) % 8
    return (bits << pad).to_bytes((total + pad) // 8, "big") if total else b""


def _unpack(fields: list[FieldInfo], data: bytes) -> tuple[dict[int, int], bytes]:
    total = sum(f.bitwidth for f in fields)
    nbytes = (total + 7) // 8
    if len(data) < nbytes:
        raise ValueError("packet shorter than the packet_in header")
    bits = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - total)
    values: dict[int, int] = {}
    shift = total
    for f in fields:
        shift -= f.bitwidth
        values[f.id] = (bits >> shift) & ((1 << f.bitwidth) - 1)
    return values, data[nbytes:]


class Device:
    """A P4Runtime device: one id, one CPU port, at most one running program."""

    def __init__(
        self,
        device_id: int = 1,
        cpu_port: int | None = None,
        engine_factory: EngineFactory = real_engine,
        trace: Callable[[str], None] | None = None,
        serve_registers: bool = True,
    ) -> None:
        self.device_id = device_id
        self.serve_registers = serve_registers  # False: refuse register entries, as BMv2 does
        self.cpu_port = cpu_port
        self.engine_factory = engine_factory
        self.trace = trace
        self.lock = threading.RLock()
        self.pipeline: Pipeline | None = None
        self.saved: Pipeline | None = None
        self.arbiter = Arbiter(device_id)
        self.stats = DeviceStats()
        self.port_sender: PortSender | None = None
        self.tap: PacketTap | None = None
        self._wake = threading.Condition(self.lock)
        self._stop = False
        self._timer = threading.Thread(target=self._digest_timer, name="p4sim-digests", daemon=True)
        self._timer.start()

    # -------------------------------------------------------------- pipeline
    def build_pipeline(self, config: p4r.ForwardingPipelineConfig) -> Pipeline:
        """VERIFY: a new Pipeline from a config, or INVALID_ARGUMENT saying why not."""
        if not config.HasField("p4info"):
            raise invalid("the forwarding pipeline config has no P4Info")
        if not config.p4_device_config:
            raise invalid("the forwarding pipeline config has no p4_device_config")
        try:
            switch = self.engine_factory(config.p4_device_config, config.p4info, self.cpu_port)
        except P4simError as exc:
            raise invalid(f"bad p4_device_config: {exc}") from exc
        except Exception as exc:  # any failure to load is the request's fault, not the server's
            raise invalid(f"bad p4_device_config: {exc!r}") from exc
        if self.trace is not None:
            switch.set_trace(self.trace)
        cookie = config.cookie.cookie if config.HasField("cookie") else 0
        return Pipeline(switch, config.p4info, config.p4_device_config, cookie,
                        serve_registers=self.serve_registers)

    def set_pipeline(self, req: p4r.SetForwardingPipelineConfigRequest) -> None:
        A = p4r.SetForwardingPipelineConfigRequest
        action = req.action
        if action == A.UNSPECIFIED:
            raise invalid("SetForwardingPipelineConfig action is UNSPECIFIED")
        if action == A.COMMIT:
            with self.lock:
                if self.saved is None:
                    raise P4RuntimeError("FAILED_PRECONDITION", "COMMIT without a saved config")
                self.pipeline, self.saved = self.saved, None
            return
        if action == A.RECONCILE_AND_COMMIT:
            with self.lock:
                current = self.pipeline
                if (
                    current is not None
                    and current.p4info == req.config.p4info
                    and (current.device_config == req.config.p4_device_config)
                ):
                    # same program: keep every table entry and extern state
                    current.cookie = req.config.cookie.cookie
                    return
            if current is not None:
                new = self.build_pipeline(req.config)
                with self.lock:
                    if self.pipeline is not current:
                        raise P4RuntimeError("ABORTED", "the pipeline changed during the reconcile")
                    carry_state(current, new)
                    self.pipeline, self.saved = new, None
                return
            action = A.VERIFY_AND_COMMIT
        new = self.build_pipeline(req.config)
        if action == A.VERIFY:
            return
        with self.lock:
            if action == A.VERIFY_AND_SAVE:
                self.saved = new
            elif action == A.VERIFY_AND_COMMIT:
                self.pipeline, self.saved = new, None
            else:
                raise invalid(f"unknown SetForwardingPipelineConfig action {action}")

    def require_pipeline(self) -> Pipeline:
        p = self.pipeline
        if p is None:
            raise P4RuntimeError(
                "FAILED_PRECONDITION", "No forwarding pipeline config set for this device"
            )
        return p

    # ----------------------------------------------------------------- packets
    def inject(self, port: int, data: bytes) -> None:
        """One packet into the pipeline on `port`; outputs go to ports and controllers."""
        self.inject_batch([(port, data)])

    def inject_batch(self, packets: list[tuple[int, bytes]]) -> None:
        """Packets into the pipeline back to back under one hold of the lock (a Write waits for
        the whole batch); then their outputs go to ports and controllers, in order."""
        outputs: list[tuple[int, bytes]] = []
        with self.lock:
            pipeline = self.pipeline
            if pipeline is None:
                self.stats.no_pipeline += len(packets)
                return
            switch, tap, process = pipeline.switch, self.tap, pipeline.switch.process
            self.stats.packets_in += len(packets)
            batch = getattr(switch, "process_batch", None)
            if tap is None and batch is not None and getattr(switch, "engine", "") == "native":
                # one C call for the whole batch (the native engine does not raise per packet)
                try:
                    for outs in batch(packets):
                        outputs += outs
                except Exception as exc:
                    self.stats.engine_errors += len(packets)
                    LOG.warning("engine failed on a batch of %d packets: %r", len(packets), exc)
            else:
                for port, data in packets:
                    if tap is not None:
                        tap("in", port, data)
                    try:
                        outputs += process(port, data)
                    except Exception as exc:  # never let one bad packet stop the switch
                        self.stats.engine_errors += 1
                        LOG.warning("engine failed on a packet from port %d: %r", port, exc)
            lists = self._digest_lists(pipeline)
        self.deliver(pipeline, outputs, lists)

    def _digest_lists(self, pipeline: Pipeline) -> list[p4r.DigestList]:
        """The digests the last packets queued in the engine, batched (the caller holds the
        lock); the digest timer is woken when a list waits for its deadline."""
        lists: list[p4r.DigestList] = []
        try:
            digests = pipeline.switch.take_digests()
        except Exception as exc:
            self.stats.engine_errors += 1
            LOG.warning("engine failed taking digests: %r", exc)
            digests = []
        if digests:
            now = time.time_ns()
            for digest_id, members in digests:
                lists.extend(pipeline.digests.add(digest_id, members, now))
        if pipeline.digests.next_deadline_ns() is not None:
            self._wake.notify()
        return lists

    def deliver(self, pipeline: Pipeline, outputs: list[tuple[int, bytes]],
                lists: list[p4r.DigestList]) -> None:
        """Outputs of a batch to the ports (counted in packets_out) or, for the CPU port, to the
        primary controllers; then the digest lists (called without the lock)."""
        for out_port, out_data in outputs:
            if out_port == self.cpu_port:
                self._packet_in(pipeline, out_data)
            else:
                self.stats.packets_out += 1
                if self.tap is not None:
                    self.tap("out", out_port, out_data)
                if self.port_sender is not None:
                    self.port_sender(out_port, out_data)
        self._send_digests(lists)

    def packet_out(self, msg: p4r.PacketOut) -> None:
        pipeline = self.require_pipeline()
        if self.cpu_port is None:
            raise P4RuntimeError("FAILED_PRECONDITION", "packet-out needs a CPU port (--cpu-port)")
        fields = pipeline.schema.packet_out
        known = {f.id: f for f in fields}
        values: dict[int, int] = {}
        for md in msg.metadata:
            f = known.get(md.metadata_id)
            if f is None:
                raise invalid(f"packet-out: unknown metadata id {md.metadata_id}")
            values[f.id] = bytestrings.decode(md.value, f.bitwidth, f"packet-out metadata {f.name}")
        self.stats.packet_outs += 1
        self.inject(self.cpu_port, _pack(fields, values) + msg.payload)

    def _packet_in(self, pipeline: Pipeline, data: bytes) -> None:
        try:
            values, payload = _unpack(pipeline.schema.packet_in, data)
        except ValueError:
            self.stats.engine_errors += 1
            return
        msg = p4r.StreamMessageResponse(
            packet=p4r.PacketIn(
                payload=payload,
                metadata=[
                    p4r.PacketMetadata(metadata_id=fid, value=bytestrings.encode(v))
                    for fid, v in values.items()
                ],
            )
        )
        self.stats.packet_ins += 1
        for s in self.arbiter.primaries():
            s.send(msg, droppable=True)

    # ----------------------------------------------------------------- digests
    def _send_digests(self, lists: list[p4r.DigestList]) -> None:
        for dl in lists:
            self.stats.digest_lists += 1
            msg = p4r.StreamMessageResponse(digest=dl)
            for s in self.arbiter.primaries():
                s.send(msg, droppable=True)

    def digest_ack(self, ack: p4r.DigestListAck) -> None:
        with self.lock:
            if self.pipeline is not None:
                self.pipeline.digests.ack(ack.digest_id, ack.list_id)

    def _digest_timer(self) -> None:
        while True:
            with self.lock:
                if self._stop:
                    return
                pipeline = self.pipeline
                lists: list[p4r.DigestList] = []
                timeout = 0.5
                if pipeline is not None:
                    now = time.time_ns()
                    lists = pipeline.digests.poll(now)
                    deadline = pipeline.digests.next_deadline_ns()
                    if deadline is not None:
                        timeout = min(timeout, max(0.0, (deadline - now) / 1e9))
                if not lists:
                    self._wake.wait(timeout if timeout > 0 else 0.001)
            self._send_digests(lists)

    def close(self) -> None:
        with self.lock:
            self._stop = True
            self._wake.notify()
        self._timer.join(timeout=2.0)
