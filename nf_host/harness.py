"""A test harness that plays the switch in front of real `nf-host run` processes.

Tests and benchmarks use it to run NF instances in a private network namespace, each attached to
one end of a veth pair whose other end the harness holds:

* `Netns` creates a uniquely named namespace (loopback up) and veth pairs inside it, and deletes
  it (and everything in it) on exit.
* `RawPort` is the switch side of one veth: an AF_PACKET socket opened inside the namespace, with a
  receiver thread collecting what the NF sends back (its output).
* `Switch` numbers packets per slot like the P4 program (`slot_seq`, starting at 1) and builds the
  two copies of each packet: kind PRIMARY for the primary, kind BACKUP for the backup.
* `NfProcess` starts `python -m nf_host run` inside the namespace with its control API on a Unix
  socket (reachable from outside the namespace) and gives a gRPC stub; `pause`/`resume` stop and
  continue all its processes (an unresponsive backup), `kill` kills them (a crash).
* `checker_frame`/`read_checker` build and read the checker NF's `!IIQ` records; `CheckerSink`
  verifies per flow that pkt_no runs 1, 2, 3... and the checker's count rises by exactly one.

Frames are built with `struct` rather than scapy so benchmarks can generate them fast; the tests
check the layout against scapy.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from contract.checker_record import RECORD
from contract.proto import nf_control_pb2 as pb
from contract.proto import nf_control_pb2_grpc as pb_grpc
from contract.shim import ETH_HDR_LEN, FLAG_WATERMARK, SHIM_LEN, Kind, Shim, ShimError, encap
from mgmt.pki import local_pki
from mgmt.tls import control_channel
from nf_host.port import in_netns

_IP = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
SWITCH_MAC = bytes.fromhex("020000000001")
NF_MAC = bytes.fromhex("020000000002")


def _ip_checksum(hdr: bytes) -> int:
    s = int(sum(struct.unpack(f"!{len(hdr) // 2}H", hdr)))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(src: str, dst: str, sport: int, dport: int, payload: bytes) -> bytes:
    """An Ethernet/IPv4/UDP frame (UDP checksum 0: none) without the shim."""
    total = 20 + 8 + len(payload)
    ip = _IP.pack(0x45, 0, total, 0, 0, 64, 17, 0, socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + _ip_checksum(ip).to_bytes(2, "big") + ip[12:]
    return NF_MAC + SWITCH_MAC + b"\x08\x00" + ip + _UDP.pack(sport, dport, 8 + len(payload), 0) + payload


def checker_frame(flow_id: int, pkt_no: int, reverse: bool = False, pad: int = 0) -> bytes:
    """A UDP packet of checker flow `flow_id` (10.0.x.y:1000+ <-> 10.1.x.y:80), record zeroed."""
    a = f"10.0.{(flow_id >> 8) & 0xFF}.{flow_id & 0xFF}"
    b = f"10.1.{(flow_id >> 8) & 0xFF}.{flow_id & 0xFF}"
    sport = 1000 + (flow_id & 0x7FFF)
    payload = RECORD.pack(flow_id, pkt_no, 0) + bytes(pad)
    if reverse:
        return udp_frame(b, a, 80, sport, payload)
    return udp_frame(a, b, sport, 80, payload)


def read_checker(frame: bytes | bytearray) -> tuple[int, int, int] | None:
    """(flow_id, pkt_no, checker_count) of an Ethernet/IPv4/UDP frame without shim, if any."""
    if len(frame) < 14 + 20 + 8 + RECORD.size or frame[12:14] != b"\x08\x00":
        return None
    ihl = (frame[14] & 0x0F) * 4
    off = 14 + ihl + 8
    if frame[14 + 9] != 17 or len(frame) < off + RECORD.size:
        return None
    flow, no, count = RECORD.unpack_from(frame, off)
    return int(flow), int(no), int(count)


def strip_shim(frame: bytes | bytearray) -> tuple[Shim, bytes]:
    shim = Shim.unpack(frame, ETH_HDR_LEN)
    return shim, bytes(frame[:12]) + bytes(frame[ETH_HDR_LEN + SHIM_LEN - 2 :])


@dataclass
class CheckerSink:
    """Per-flow verification of the checker's end-to-end proof."""

    last_no: dict[int, int] = field(default_factory=dict)
    last_count: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    received: int = 0

    def feed(self, frame: bytes | bytearray) -> None:
        try:
            _shim, inner = strip_shim(frame)
        except ShimError as exc:
            self.errors.append(f"output without shim: {exc}")
            return
        rec = read_checker(inner)
        if rec is None:
            self.errors.append("output without checker record")
            return
        flow, no, count = rec
        self.received += 1
        exp_no = self.last_no.get(flow, 0) + 1
        exp_count = self.last_count.get(flow, 0) + 1
        if no != exp_no:
            self.errors.append(f"flow {flow}: pkt_no {no}, expected {exp_no}")
        if count != exp_count:
            self.errors.append(f"flow {flow}: checker count {count}, expected {exp_count}")
        self.last_no[flow] = no
        self.last_count[flow] = count


class Netns:
    """A private network namespace with veth pairs; deleted (with its veths) on exit."""

    def __init__(self, prefix: str = "nfct") -> None:
        self.name = f"{prefix}{uuid.uuid4().hex[:8]}"
        self._veths = itertools.count()

    def __enter__(self) -> Netns:
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        try:
            self.ip("link", "set", "lo", "up")
            # no IPv6 autoconfiguration chatter on the veths: every frame a test sees is its own
            subprocess.run(
                ["ip", "netns", "exec", self.name, "sysctl", "-qw",
                 "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"],
                check=False, capture_output=True,
            )
        except BaseException:
            self.delete()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.delete()

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", "-n", self.name, *args], check=True, capture_output=True)

    def delete(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], check=False, capture_output=True)

    def veth(self) -> tuple[str, str]:
        """A new veth pair inside the namespace: (NF side, switch side), both up."""
        n = next(self._veths)
        nf_side, sw_side = f"nf{n}", f"sw{n}"
        self.ip("link", "add", nf_side, "type", "veth", "peer", "name", sw_side)
        for dev in (nf_side, sw_side):
            self.ip("link", "set", dev, "mtu", "9000")
            self.ip("link", "set", dev, "up")
        return nf_side, sw_side


class RawPort:
    """The switch's end of one veth: send frames, collect what arrives in a background thread."""

    def __init__(self, netns: str, iface: str) -> None:
        def make() -> socket.socket:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
            s.bind((iface, 0))
            return s

        self.sock = in_netns(netns, make)
        self.sock.settimeout(0.1)
        self.received: list[bytes] = []
        self.times: list[float] = []
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._recv, daemon=True)
        self._thread.start()

    def _recv(self) -> None:
        while not self._stop:
            try:
                data, addr = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            t = time.perf_counter()
            with self._lock:
                self.received.append(data)
                self.times.append(t)

    def send(self, frame: bytes) -> None:
        while True:
            try:
                self.sock.send(frame)
                return
            except (BlockingIOError, TimeoutError):  # veth queue full: let the NF catch up
                time.sleep(0.0001)

    def outputs(self) -> list[bytes]:
        """Every received frame that is NF output (shim kind OUTPUT)."""
        with self._lock:
            frames = list(self.received)
        return [f for f in frames if len(f) >= 30 and f[12:14] == b"\x88\xb5" and f[14] == Kind.OUTPUT]

    def timed_outputs(self) -> list[tuple[float, bytes]]:
        """`outputs()` with their arrival times (time.perf_counter)."""
        with self._lock:
            pairs = list(zip(self.times, self.received, strict=True))
        return [(t, f) for t, f in pairs if len(f) >= 30 and f[12:14] == b"\x88\xb5" and f[14] == Kind.OUTPUT]

    def count(self) -> int:
        return len(self.outputs())

    def clear(self) -> None:
        with self._lock:
            self.received.clear()
            self.times.clear()

    def close(self) -> None:
        self._stop = True
        self._thread.join(1)
        self.sock.close()


class SendPort:
    """A send-only socket on the switch's end of a veth (protocol 0: the kernel delivers nothing to
    it), for load generation without the cost of receiving."""

    def __init__(self, netns: str, iface: str) -> None:
        def make() -> socket.socket:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
            s.bind((iface, 0))
            return s

        self.sock = in_netns(netns, make)

    def send(self, frame: bytes) -> None:
        while True:
            try:
                self.sock.send(frame)
                return
            except BlockingIOError:
                time.sleep(0.0001)

    def close(self) -> None:
        self.sock.close()


@dataclass
class Switch:
    """Numbers packets per slot and builds the primary and backup copies."""

    next_seq: dict[int, int] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)

    def stamp(self, slot: int, inner: bytes, primary_id: int, backup_id: int = 0) -> tuple[bytes, bytes | None]:
        seq = self.next_seq.get(slot, 1)
        self.next_seq[slot] = (seq + 1) & 0xFFFFFFFF  # the switch register wraps around
        return self.copies(slot, seq, inner, primary_id, backup_id)

    def copies(
        self, slot: int, seq: int, inner: bytes, primary_id: int, backup_id: int = 0
    ) -> tuple[bytes, bytes | None]:
        epoch = self.epochs.get(slot, 1)
        etype = int.from_bytes(inner[12:14], "big")
        prim = encap(Shim(Kind.PRIMARY, 0, slot, epoch, primary_id, seq, etype), inner)
        back = encap(Shim(Kind.BACKUP, 0, slot, epoch, backup_id, seq, etype), inner) if backup_id else None
        return prim, back


@dataclass
class OutputDedup:
    """The switch's output dedup, modelled for tests (the P4 rule is in p4src/*/include/control/
    output.p4 and docs/dataplane.md): per slot and epoch parity, the (epoch, seq) of the last
    output forwarded. An output of a newer epoch than its parity's, or of the same epoch and a
    later seq, is forwarded; the rest is dropped. A watermark frame (nf_host/watermark.py) is
    judged the same way and moves the watermark, but is never forwarded. `offer` says whether
    the switch would forward a frame; `dropped` counts the others."""

    last: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    dropped: int = 0
    watermarks: int = 0  # watermark frames that moved the watermark (never forwarded)

    def offer(self, frame: bytes | bytearray) -> bool:
        shim = Shim.unpack(frame, ETH_HDR_LEN)
        key = (shim.slot, shim.epoch & 1)
        last = self.last.get(key)
        if (last is None or (last[0] != shim.epoch and (shim.epoch - last[0]) & 0xFFFF < 0x8000)
                or (last[0] == shim.epoch and 0 < (shim.seq - last[1]) & 0xFFFFFFFF < 0x80000000)):
            self.last[key] = (shim.epoch, shim.seq)
            if shim.flags & FLAG_WATERMARK:  # (nf_host/watermark.py) it moved the watermark
                self.watermarks += 1
                return False
            return True
        self.dropped += 1
        return False


def through_switch(ports: dict[int, RawPort]) -> list[tuple[int, bytes]]:
    """What the switch would forward of the NF output arriving on `ports` (name -> port), as
    (name, frame) in arrival order: every port's frames merged by time through `OutputDedup`."""
    arrivals = sorted((t, name, f) for name, port in ports.items() for t, f in port.timed_outputs())
    dedup = OutputDedup()
    return [(name, frame) for _t, name, frame in arrivals if dedup.offer(frame)]


class NfProcess:
    """One `nf-host run` inside a namespace, controlled over a Unix-socket gRPC channel."""

    def __init__(
        self, netns: str, nf_id: int, interface: str, repl_port: int, nf: str = "checker",
        workers: int = 1, batch_size: int = 8, batch_time_us: int = 500, extra: list[str] | None = None,
        log_dir: str | None = None,
    ) -> None:
        self.nf_id = nf_id
        self.repl = f"127.0.0.1:{repl_port}"
        pki_dir = local_pki()
        self._dir = tempfile.mkdtemp(prefix=f"nfh{nf_id}-")
        self.control_path = os.path.join(self._dir, "control.sock")
        self.log_path = Path(log_dir or self._dir) / f"nf{nf_id}.log"
        cmd = [
            "ip", "netns", "exec", netns, sys.executable, "-m", "nf_host", "run",
            "--nf-id", str(nf_id), "--interface", interface, "--nf", nf,
            "--control", f"unix:{self.control_path}", "--replication", self.repl,
            "--workers", str(workers), "--batch-size", str(batch_size),
            "--batch-time-us", str(batch_time_us), "--pki-dir", str(pki_dir), *(extra or []),
        ]
        self._log = open(self.log_path, "wb")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=str(Path(__file__).resolve().parent.parent),
        )
        self.last_log: str | None = None
        self.channel = control_channel(f"unix:{self.control_path}", nf_id, pki_dir)
        self.stub = pb_grpc.NfControlStub(self.channel)  # type: ignore[no-untyped-call]

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nf-host {self.nf_id} exited: {self.log()}")
            try:
                self.stub.Heartbeat(pb.HeartbeatRequest(counter=1), timeout=1)
                return
            except grpc.RpcError:
                time.sleep(0.05)
        raise TimeoutError(f"nf-host {self.nf_id} not ready in {timeout} s: {self.log()}")

    def log(self) -> str:
        """The last 3000 characters of the process's output (kept after `stop`)."""
        if self.last_log is not None:
            return self.last_log
        try:
            return self.log_path.read_text()[-3000:]
        except OSError:
            return ""

    def status(self) -> pb.StatusReply:
        reply: pb.StatusReply = self.stub.Status(pb.StatusRequest(), timeout=5)
        return reply

    def slot(self, slot: int) -> Any:
        for s in self.status().slots:
            if s.slot == slot:
                return s
        return None

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        self.proc.wait(5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(5)
        self.channel.close()
        self._log.close()
        self.last_log = self.log()
        shutil.rmtree(self._dir, ignore_errors=True)  # the socket, and the log unless log_dir


def assign(nf: NfProcess, slots: list[int], epoch: int = 1, next_seq: int = 1, as_backup: bool = False,
           primary: int = 0) -> None:
    """AssignSlots; a backup must be told its primary (whose replication links it then admits)."""
    res = nf.stub.AssignSlots(pb.AssignSlotsRequest(
        slots=[pb.SlotEpoch(slot=s, epoch=epoch, next_seq=next_seq) for s in slots], as_backup=as_backup,
        primary_nf_id=primary,
    ), timeout=5)
    if not res.ok:
        raise RuntimeError(res.error)


def pair(primary: NfProcess, backup: NfProcess, slots: list[int]) -> None:
    """Make `backup` the backup of `primary` for `slots` (slot numbering from 1)."""
    assign(primary, slots)
    assign(backup, slots, as_backup=True, primary=primary.nf_id)
    res = primary.stub.SetBackup(pb.SetBackupRequest(backup_nf_id=backup.nf_id, address=backup.repl), timeout=5)
    if not res.ok:
        raise RuntimeError(res.error)


@contextlib.contextmanager
def running(*procs: NfProcess) -> Iterator[None]:
    try:
        for p in procs:
            p.wait_ready()
        yield
    finally:
        for p in procs:
            p.stop()
