"""Numbered traffic for end-to-end proofs: a sender on the client host, an echoing sink on the server.

The sender opens one UDP socket per flow and sends packets carrying a `Record` (flow id, packet
number per flow and direction, count 0). The sink records each arrival and answers it with a packet
of its own numbering in the reverse direction, so both directions of every connection cross the
switch and the NFs. Each side writes what it sent and received to a JSON file; `topo.verify` judges.

    python -m topo.traffic sink --listen 10.0.0.2:9000 --out server.json --idle 3
    python -m topo.traffic send --dst 10.0.0.2:9000 --flows 16 --packets 200 --rate 2000 --out client.json

`--ports N` makes the sink listen on N consecutive ports and `--dports` sends each flow to its own
port (more 5-tuples per slot than source ports alone give); `--no-echo` makes the traffic one-way.
"""

from __future__ import annotations

import argparse
import json
import selectors
import signal
import socket
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract.checker_record import RECORD_LEN, Record

MAX_DATAGRAM = 2048
# receive buffers large enough to ride out a few seconds of a starved process (a 2-core machine
# running the whole system): a full buffer drops packets in the kernel, which is not nfcluster
RCVBUF_BYTES = 16 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)  # ancillary data: the socket's drop counter
_ANC = socket.CMSG_SPACE(4)


def open_for_receiving(sock: socket.socket) -> None:
    """A large receive buffer (forced: we run as root), and the kernel's count of what it had
    to drop anyway delivered with every datagram (SO_RXQ_OVFL)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    sock.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)


def receive(sock: socket.socket) -> tuple[bytes, Any, int | None]:
    """One datagram, its sender, and the socket's drop counter when it was queued (None while
    the socket has dropped nothing: the kernel only sends a non-zero count)."""
    payload, anc, _flags, peer = sock.recvmsg(MAX_DATAGRAM, _ANC)
    dropped = None
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SO_RXQ_OVFL and len(data) >= 4:
            dropped = int.from_bytes(data[:4], sys.byteorder)
    return payload, peer, dropped


@dataclass
class SideReport:
    """What one end sent and received, per flow; `received` keeps arrival order."""

    sent: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    received: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    malformed: int = 0
    # wall-clock times (time.time(), one clock for every namespace of the machine), per flow, of
    # each packet sent and of each arrival (parallel to `received`): fail-over measurements
    sent_at: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    received_at: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    ports: dict[int, int] = field(default_factory=dict)  # the sender's UDP port of each flow
    # sender only: per flow, (Unix time packet n was sent, ms until the n-th reply arrived)
    rtt: dict[int, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    # datagrams the kernel dropped at this end's sockets (full receive buffer), per socket
    socket_drops: dict[int, int] = field(default_factory=dict)
    # sink only: per flow, the distinct "ip:port" it came from (one, unless a NAT is inconsistent)
    peers: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def host_drops(self) -> int:
        """Datagrams lost at this end's own sockets: the host's loss, not nfcluster's."""
        return sum(self.socket_drops.values())

    def to_json(self) -> dict[str, object]:
        return {
            "sent": {str(k): v for k, v in self.sent.items()},
            "received": {str(k): v for k, v in self.received.items()},
            "malformed": self.malformed,
            "sent_at": {str(k): v for k, v in self.sent_at.items()},
            "received_at": {str(k): v for k, v in self.received_at.items()},
            "ports": {str(k): v for k, v in self.ports.items()},
            "socket_drops": {str(k): v for k, v in self.socket_drops.items()},
            **({"peers": {str(k): v for k, v in self.peers.items()}} if self.peers else {}),
            **({"rtt": {str(k): v for k, v in self.rtt.items()}} if self.rtt else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> SideReport:
        rep = cls()
        sent = data.get("sent", {})
        received = data.get("received", {})
        assert isinstance(sent, dict) and isinstance(received, dict)
        for k, v in sent.items():
            rep.sent[int(k)] = int(v)
        for k, arrivals in received.items():
            rep.received[int(k)] = [(int(n), int(c)) for n, c in arrivals]
        malformed = data.get("malformed", 0)
        rep.malformed = int(malformed) if isinstance(malformed, int) else 0
        ports = data.get("ports", {})
        assert isinstance(ports, dict)
        rep.ports = {int(k): int(v) for k, v in ports.items()}
        for name, times in (("sent_at", rep.sent_at), ("received_at", rep.received_at)):
            raw = data.get(name, {})
            assert isinstance(raw, dict)
            for k, v in raw.items():
                times[int(k)] = [float(t) for t in v]
        drops = data.get("socket_drops", {})
        assert isinstance(drops, dict)
        rep.socket_drops = {int(k): int(v) for k, v in drops.items()}
        peers = data.get("peers", {})
        assert isinstance(peers, dict)
        for k, addrs in peers.items():
            rep.peers[int(k)] = [str(a) for a in addrs]
        rtt = data.get("rtt", {})
        assert isinstance(rtt, dict)
        for k, samples in rtt.items():
            rep.rtt[int(k)] = [(float(t), float(ms)) for t, ms in samples]
        return rep


def _parse_addr(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"address {text!r} is not HOST:PORT")
    return host, int(port)


def _record_arrival(report: SideReport, payload: bytes) -> Record | None:
    try:
        rec = Record.unpack(payload)
    except ValueError:
        report.malformed += 1
        return None
    report.received[rec.flow_id].append((rec.pkt_no, rec.count))
    report.received_at[rec.flow_id].append(time.time())
    return rec


def run_sink(listen: tuple[str, int], idle: float, size: int, out: Path, ports: int = 1,
             echo: bool = True) -> SideReport:
    """Receive, record and (with `echo`) answer until nothing arrived for `idle` seconds after the
    first packet (never, with `idle` 0: then only SIGTERM or SIGINT stops it); listens on `ports`
    consecutive ports from `listen`'s."""
    report = SideReport()
    stop = False

    def _stop(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    try:
        for i in range(ports):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(sock)
            open_for_receiving(sock)
            sock.bind((listen[0], listen[1] + i))
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ, i)
        last = None
        while not stop and (last is None or idle <= 0 or time.monotonic() - last < idle):
            for key, _ in sel.select(0.1):
                ready = socks[key.data]
                while True:
                    try:
                        payload, peer, dropped = receive(ready)
                    except BlockingIOError:
                        break
                    if dropped is not None:
                        report.socket_drops[key.data] = dropped
                    last = time.monotonic()
                    rec = _record_arrival(report, payload)
                    if rec is None:
                        continue
                    source = f"{peer[0]}:{peer[1]}"
                    if source not in report.peers[rec.flow_id]:
                        report.peers[rec.flow_id].append(source)
                    if not echo:
                        continue
                    report.sent[rec.flow_id] += 1
                    reply = Record(rec.flow_id, report.sent[rec.flow_id]).pack(size)
                    ready.sendto(reply, peer)
                    report.sent_at[rec.flow_id].append(time.time())
    finally:
        for sock in socks:
            sock.close()
    out.write_text(json.dumps(report.to_json()))
    return report


def run_sender(
    dst: tuple[str, int], flows: int, packets: int, rate: float, size: int, wait: float, out: Path,
    sports: Sequence[int] = (), dports: Sequence[int] = (),
) -> SideReport:
    """Send `packets` per flow round-robin at `rate` packets/s in all, then collect the replies.
    `sports`: the source port of each flow (which slot a flow hashes to); default: ephemeral.
    `dports`: the destination port of each flow (default: `dst`'s), for a sink on several ports.
    The round trip of packet n of a flow is taken to its n-th reply (the sink answers each packet
    it receives, in order: exact when nothing is lost or reordered, which the verdict checks)."""
    report = SideReport()
    sent_at: dict[int, list[tuple[float, float]]] = defaultdict(list)  # (monotonic, Unix time)
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    for flow_id in range(flows):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        open_for_receiving(s)
        s.setblocking(False)
        if flow_id < len(sports):
            s.bind(("", sports[flow_id]))
        s.connect((dst[0], dports[flow_id]) if flow_id < len(dports) else dst)
        report.ports[flow_id] = s.getsockname()[1]
        sel.register(s, selectors.EVENT_READ, flow_id)
        socks.append(s)

    def drain(timeout: float) -> None:
        for key, _ in sel.select(timeout):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            while True:
                try:
                    payload, _peer, dropped = receive(sock)
                except BlockingIOError:
                    break
                except ConnectionRefusedError:
                    report.malformed += 1
                    break
                if dropped is not None:
                    report.socket_drops[key.data] = dropped
                now = time.monotonic()
                rec = _record_arrival(report, payload)
                if rec is not None and 0 < rec.pkt_no <= len(sent_at[rec.flow_id]):
                    mono, wall = sent_at[rec.flow_id][rec.pkt_no - 1]
                    report.rtt[rec.flow_id].append((round(wall, 4), round((now - mono) * 1000, 3)))

    interval = 1.0 / rate if rate > 0 else 0.0
    start = time.monotonic()
    total = flows * packets
    try:
        for i in range(total):
            flow_id, pkt_no = i % flows, i // flows + 1
            due = start + i * interval
            while (now := time.monotonic()) < due:
                drain(due - now)
            sent_at[flow_id].append((time.monotonic(), time.time()))
            socks[flow_id].send(Record(flow_id, pkt_no).pack(size))
            report.sent[flow_id] += 1
            report.sent_at[flow_id].append(time.time())
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            got = sum(len(v) for v in report.received.values())
            if got >= total:
                break
            drain(0.05)
    finally:
        for s in socks:
            sel.unregister(s)
            s.close()
    out.write_text(json.dumps(report.to_json()))
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m topo.traffic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sink = sub.add_parser("sink", help="receive, record and answer numbered packets")
    sink.add_argument("--listen", type=_parse_addr, required=True, help="HOST:PORT to bind")
    sink.add_argument("--idle", type=float, default=3.0,
                      help="stop after this many idle seconds (0: only on SIGTERM or SIGINT)")
    sink.add_argument("--out", type=Path, required=True, help="JSON report to write")
    sink.add_argument("--size", type=int, default=64, help="reply payload size in bytes")
    sink.add_argument("--ports", type=int, default=1,
                      help="listen on this many consecutive ports from --listen's (default 1)")
    sink.add_argument("--no-echo", action="store_false", dest="echo",
                      help="record arrivals without answering them (one-way traffic)")
    send = sub.add_parser("send", help="send numbered packets on many flows and collect replies")
    send.add_argument("--dst", type=_parse_addr, required=True, help="the sink's HOST:PORT")
    send.add_argument("--flows", type=int, default=16, help="number of flows (UDP sockets)")
    send.add_argument("--packets", type=int, default=100, help="packets per flow")
    send.add_argument("--rate", type=float, default=2000.0, help="packets/s over all flows (0: flat out)")
    send.add_argument("--size", type=int, default=64, help="payload size in bytes")
    send.add_argument("--wait", type=float, default=5.0, help="seconds to wait for the last replies")
    send.add_argument("--out", type=Path, required=True, help="JSON report to write")
    send.add_argument("--sports", type=_ports, default=[],
                      help="comma-separated source port of each flow (default: ephemeral ports)")
    send.add_argument("--dports", type=_ports, default=[],
                      help="comma-separated destination port of each flow (default: --dst's)")
    return parser


def _ports(text: str) -> list[int]:
    try:
        ports = [int(p) for p in text.split(",") if p]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sports {text!r} is not a comma-separated port list") from None
    if any(not 0 < p < 65536 for p in ports):
        raise argparse.ArgumentTypeError(f"--sports {text!r}: ports are 1..65535")
    return ports


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.size < RECORD_LEN:
        print(f"--size must be at least {RECORD_LEN} bytes (the record)", file=sys.stderr)
        return 2
    if args.command == "sink":
        if args.ports < 1:
            print("--ports must be at least 1", file=sys.stderr)
            return 2
        run_sink(args.listen, args.idle, args.size, args.out, args.ports, args.echo)
    else:
        if args.flows < 1 or args.packets < 1:
            print("--flows and --packets must be at least 1", file=sys.stderr)
            return 2
        if len(args.sports) > args.flows or len(args.dports) > args.flows:
            print("--sports or --dports lists more ports than --flows", file=sys.stderr)
            return 2
        run_sender(args.dst, args.flows, args.packets, args.rate, args.size, args.wait, args.out,
                   args.sports, args.dports)
    return 0


if __name__ == "__main__":
    sys.exit(main())
