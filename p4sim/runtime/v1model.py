"""The v1model architecture at run time: parser -> ingress -> packet replication -> egress -> deparser.

Implements BMv2 simple_switch behaviour for standard_metadata, drops (egress_spec 511), multicast
groups with replication ids, I2E/E2E clone sessions (every metadata field of a clone reset but for
its preserved field list, as simple_switch.cpp), resubmit and recirculate (with preserved field
lists) and truncation. Parser errors set ``standard_metadata.parser_error`` and the packet
continues to ingress, as in v1model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from p4sim.runtime.model import Program
from p4sim.runtime.primitives import ExitBlock, PacketIn, ParserError

DROP_PORT = 511
MAX_PASSES = 16  # resubmit/recirculate/clone generations per input packet
MAX_EGRESS = 4096  # egress passes (replicas, clones) per input packet

NORMAL, I2E, E2E, COALESCED, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 3, 4, 5, 6


@dataclass
class Pre:
    """Packet replication engine configuration."""

    mc_groups: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    clone_sessions: dict[int, tuple[list[tuple[int, int]], int, int]] = field(default_factory=dict)


class V1Model:
    def __init__(self, prog: Program, cpu_port: int | None = None) -> None:
        self.prog = prog
        self.cpu_port = cpu_port
        self.pre = Pre()
        self.trace: Callable[[str], None] | None = None
        sm = prog.sm
        self.s_ingress_port = sm["ingress_port"]
        self.s_egress_spec = sm["egress_spec"]
        self.s_egress_port = sm["egress_port"]
        self.s_instance_type = sm["instance_type"]
        self.s_packet_length = sm["packet_length"]
        self.s_mcast_grp = sm["mcast_grp"]
        self.s_egress_rid = sm["egress_rid"]
        self.s_parser_error = sm["parser_error"]
        # timestamps cost a clock read per packet: only kept if the program reads them
        self.s_igts = self._used(sm.get("ingress_global_timestamp", -1))
        self.s_egts = self._used(sm.get("egress_global_timestamp", -1))
        h = prog.hidden
        self.h = h
        self.h_clone_type = h["clone_type"]
        self.h_resubmit = h["resubmit"]
        self.h_recirc = h["recirculate"]
        self.h_trunc = h["truncate"]
        self.t0 = time.monotonic()
        self._budget = MAX_EGRESS
        # the length of the packet the current ingress pass received: BMv2 keeps it in a packet
        # register and sets standard_metadata.packet_length from it when egress starts, for the
        # packet and for all its copies (replicas, clones)
        self._in_len = 0

    def _used(self, slot: int) -> int:
        return slot if slot >= 0 and f"s[{slot}]" in self.prog.source else -1

    def _log(self, msg: str) -> None:
        if self.trace is not None:
            self.trace(msg)

    def _now_us(self) -> int:
        return int((time.monotonic() - self.t0) * 1e6) & 0xFFFFFFFFFFFF

    def _preserve(self, s: list[object], fl: int) -> list[tuple[int, object]]:
        if fl < 0:
            return []
        return [(i, s[i]) for i in self.prog.field_lists.get(fl, [])]

    # ------------------------------------------------------------------ pipeline
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        self._budget = MAX_EGRESS
        work: list[tuple[int, bytes, int, list[tuple[int, object]], int]] = [(port, data, NORMAL, [], 0)]
        while work:
            in_port, pkt, itype, keep, depth = work.pop(0)
            if depth > MAX_PASSES:
                self._log("dropped: too many resubmit/recirculate passes")
                continue
            self._ingress(in_port, pkt, itype, keep, depth, out, work)
        return out

    def _parse(self, s: list[object], data: bytes) -> PacketIn:
        pk = PacketIn(data)
        prog = self.prog
        try:
            prog.parser(s, pk)
        except ParserError as e:
            s[self.s_parser_error] = e.code
            self._log(f"parser error {prog.errors[e.code] if e.code < len(prog.errors) else e.code}")
        return pk

    def _ingress(self, in_port: int, data: bytes, itype: int, keep: list[tuple[int, object]], depth: int,
                 out: list[tuple[int, bytes]], work: list[tuple[int, bytes, int, list[tuple[int, object]], int]]) -> None:
        prog = self.prog
        s = prog.template[:]
        s[self.s_ingress_port] = in_port
        s[self.s_instance_type] = itype
        s[self.s_packet_length] = self._in_len = len(data)
        if self.s_igts >= 0:
            s[self.s_igts] = self._now_us()
        for i, v in keep:
            s[i] = v
        trace = self.trace
        if trace is not None:
            trace(f"ingress port {in_port}, {len(data)} bytes, instance_type {itype}")
        pk = self._parse(s, data)
        payload = data[pk.off :]
        ctx = prog.ctx
        ctx.payload = payload
        try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
            prog.verify(s)
        except ExitBlock:
            pass
        try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
            prog.ingress(s)
        except ExitBlock:
            pass
        # I2E clone: a copy of the packet as it came in goes to egress
        if s[self.h_clone_type] == 1:
            self._clone(s, data, in_port, I2E, depth, out, work, from_ingress=True)
        # resubmit: the original packet goes through ingress again
        if s[self.h_resubmit]:
            fl = int(s[self.h["resubmit_fl"]])
            work.append((in_port, data, RESUBMIT, self._preserve(s, fl), depth + 1))
            self._log("resubmit")
            return
        grp = s[self.s_mcast_grp]
        if grp:
            reps = self.pre.mc_groups.get(grp)
            if not reps:
                self._log(f"multicast group {grp} has no replicas: dropped")
                return
            for eport, rid in reps:
                c = s[:]
                c[self.s_egress_port] = eport
                c[self.s_egress_rid] = rid
                c[self.s_instance_type] = REPLICATION
                self._egress(c, payload, depth, out, work)
            return
        spec = s[self.s_egress_spec]
        if spec == DROP_PORT:
            self._log("dropped (egress_spec 511)")
            return
        s[self.s_egress_port] = spec
        self._egress(s, payload, depth, out, work)

    def _clone(self, s: list[object], data: bytes, in_port: int, itype: int, depth: int,
               out: list[tuple[int, bytes]], work: list[tuple[int, bytes, int, list[tuple[int, object]], int]],
               from_ingress: bool) -> None:
        session = int(s[self.h["clone_session"]])  # type: ignore[call-overload]
        fl = int(s[self.h["clone_fl"]])  # type: ignore[call-overload]
        sess = self.pre.clone_sessions.get(session)
        if sess is None:
            self._log(f"clone session {session} not configured: no clone")
            return
        reps, _cos, trunc = sess
        keep = self._preserve(s, fl)
        for eport, rid in reps:
            c = self.prog.template[:]
            if from_ingress:
                # BMv2 (copy_field_list_and_set_type): the packet as received is parsed again
                # (with its ingress_port, as the parser may select on it), then every metadata
                # field, user and standard, is reset: what the parser wrote and ingress_port too
                c[self.s_ingress_port] = in_port
                pk = self._parse(c, data)
                payload = data[pk.off :]
            else:
                # BMv2 (clone_with_phv_reset_metadata_ptr): the headers as egress left them,
                # every metadata field (user and standard) reset
                c[len(self.h):] = s[len(self.h):]
                payload = self.prog.ctx.payload
            template = self.prog.template
            for r in self.prog.metadata_slots:
                c[r.start:r.stop] = template[r.start:r.stop]
            for i, v in keep:
                c[i] = v
            c[self.s_instance_type] = itype
            c[self.s_egress_port] = eport
            c[self.s_egress_rid] = rid
            if trunc:
                c[self.h_trunc] = trunc
            self._log(f"clone ({'I2E' if from_ingress else 'E2E'}) session {session} to port {eport}")
            self._egress(c, payload, depth + 1, out, work)

    def _egress(self, s: list[object], payload: bytes, depth: int, out: list[tuple[int, bytes]],
                work: list[tuple[int, bytes, int, list[tuple[int, object]], int]]) -> None:
        prog = self.prog
        self._budget -= 1
        if self._budget < 0:
            self._log("dropped: too many copies of one packet")
            return
        prog.ctx.payload = payload
        if self.s_egts >= 0:
            s[self.s_egts] = self._now_us()
        eport = s[self.s_egress_port]
        s[self.s_packet_length] = self._in_len
        # BMv2 sets egress_spec to drop_port + 1 so that egress does not see a drop: in the 9-bit
        # field that is 0 (511 + 1 wraps); mark_to_drop in egress sets 511 again
        s[self.s_egress_spec] = (DROP_PORT + 1) & 0x1FF
        try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
            prog.egress(s)
        except ExitBlock:
            pass
        if s[self.h_clone_type] == 2 and depth < MAX_PASSES:
            snap = s[:]
            self._clone(snap, b"", 0, E2E, depth, out, work, from_ingress=False)
        if s[self.s_egress_spec] == DROP_PORT:
            self._log(f"dropped in egress (port {eport})")
            return
        try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
            prog.compute(s)
        except ExitBlock:
            pass
        ob: list[bytes] = []
        prog.deparser(s, ob)
        ob.append(payload)
        pkt = b"".join(ob)
        trunc = s[self.h_trunc]
        if trunc:
            pkt = pkt[: int(trunc)]  # type: ignore[call-overload]
        if s[self.h_recirc]:
            fl = int(s[self.h["recirculate_fl"]])  # type: ignore[call-overload]
            work.append((int(eport), pkt, RECIRC, self._preserve(s, fl), depth + 1))  # type: ignore[call-overload]
            self._log("recirculate")
            return
        self._log(f"out port {eport}, {len(pkt)} bytes")
        out.append((int(eport), pkt))  # type: ignore[call-overload]
