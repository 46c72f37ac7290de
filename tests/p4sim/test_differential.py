"""Differential fuzz test: the native engine (C) against the Python engine (the reference).

For every conformance program and the nfcluster program, two switches get the same random
control-plane state (table entries of every match kind with random priorities, default actions,
action profile members and groups, multicast groups, clone sessions, register values) through
the same API calls, which must succeed or fail alike; then the same random and mutated packets,
one by one on the Python engine and partly in batches (`process_batch`) on the native one. The
outputs of every packet, the digests, every counter, direct counter and register must be equal.
Seeded: a failure names its seed. ``P4SIM_FUZZ_PACKETS`` raises the packet count
(`make p4sim-fuzz`).

Run one case: .venv/bin/pytest tests/p4sim/test_differential.py -k nfcluster
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether

from p4sim.runtime.api_values import ActionCall, Match, P4simError, TableEntry
from p4sim.runtime.engine_loader import load_switch
from p4sim.runtime.switch import Switch
from tests.p4sim.harness import CPU_PORT, PROGRAMS, Scratch, scratch_packet

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
NFC = ROOT / "p4src" / "v1model" / "nfcluster.p4"
NFC_INCLUDES = [str(ROOT / "p4src" / "shared"), str(ROOT / "p4src" / "v1model")]
PACKETS = int(os.environ.get("P4SIM_FUZZ_PACKETS", "600"))
PORTS = [0, 1, 2, 3, 4, 5, CPU_PORT]


@pytest.fixture(scope="module", autouse=True)
def p4sim_engine() -> str:
    """This test builds both engines itself (overrides the per-engine parametrisation)."""
    return "both"


def small(rng: random.Random, width: int) -> int:
    """A value of ``width`` bits, mostly small (so that packets hit entries)."""
    if rng.random() < 0.7:
        return rng.randrange(min(8, 1 << width))
    return rng.getrandbits(width)


class Pair:
    """The two engines of one program, driven alike."""

    def __init__(self, load: Callable[[str], Switch], seed: int) -> None:
        self.py = load("python")
        self.nat = load("native")
        assert self.nat.engine == "native", self.nat.native_fallback
        self.rng = random.Random(seed)
        self.seed = seed
        self.outputs = self.digests = 0
        self.ports = PORTS
        # random() of both engines: the same xorshift64 sequence (the C engine's generator)
        state = [0x2545F4914F6CDD1D]

        def rnd(lo: int, hi: int) -> int:
            x = state[0]
            x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF
            x ^= x >> 7
            x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
            state[0] = x
            return lo if hi < lo else lo + x % (hi - lo + 1)

        self.py.prog.namespace["_rnd"] = rnd

    def both(self, method: str, *args: Any) -> Any:
        results = []
        for sw in (self.py, self.nat):
            try:
                results.append(("ok", getattr(sw, method)(*args)))
            except P4simError as exc:
                results.append(("error", exc.code))
        assert results[0] == results[1], f"seed {self.seed}: {method}{args}: {results}"
        return results[0][1] if results[0][0] == "ok" else None

    # ------------------------------------------------------------------ random state
    def random_state(self) -> None:
        rng = self.rng
        sw = self.py
        info = sw.p4info
        params = {a.preamble.id: [(p.id, p.bitwidth) for p in a.params] for a in info.actions}

        def call(aid: int) -> ActionCall:
            return ActionCall(aid, {pid: small(rng, w) for pid, w in params[aid]})

        for prof in info.action_profiles:
            tables = [t for t in info.tables if t.preamble.id in set(prof.table_ids)]
            aids = [r.id for t in tables for r in t.action_refs if r.scope != r.DEFAULT_ONLY]
            for mid in range(1, 9):
                self.both("member_insert", prof.preamble.id, mid, call(rng.choice(aids)))
            if prof.with_selector:
                for gid in range(1, 5):
                    self.both("group_insert", prof.preamble.id, gid, rng.sample(range(1, 9), rng.randrange(0, 5)))
        profiles = {t: p for p in info.action_profiles for t in p.table_ids}
        for t in info.tables:
            tid = t.preamble.id
            ti = sw.prog.tables[t.preamble.name]
            if t.is_const_table:
                continue
            aids = [r.id for r in t.action_refs if r.scope != r.DEFAULT_ONLY]
            daids = [r.id for r in t.action_refs if r.scope != r.TABLE_ONLY]
            if not ti.const_default and rng.random() < 0.5:
                self.both("table_set_default", tid, call(rng.choice(daids)))
            if not t.match_fields:
                continue
            entries = []
            for _ in range(rng.randrange(1, 40)):
                match = {}
                for mf, k in zip(t.match_fields, ti.keys, strict=True):
                    w = k.width
                    full = (1 << w) - 1
                    v = small(rng, w)
                    if k.kind == "exact":
                        match[mf.id] = Match("exact", v)
                    elif k.kind == "lpm":
                        plen = rng.randrange(0, w + 1)
                        if plen:
                            match[mf.id] = Match("lpm", v & (full ^ ((1 << (w - plen)) - 1)), prefix_len=plen)
                    elif k.kind == "ternary":
                        mask = rng.choice([full, small(rng, w), rng.getrandbits(w)])
                        if mask:
                            match[mf.id] = Match("ternary", v & mask, mask=mask)
                    elif k.kind == "range":
                        hi = v + small(rng, w)
                        if hi <= full and (v, hi) != (0, full):
                            match[mf.id] = Match("range", v, high=hi)
                    elif rng.random() < 0.7:
                        match[mf.id] = Match("optional", v)
                needs_prio = any(k.kind in ("ternary", "range", "optional") for k in ti.keys)
                prio = rng.randrange(1, 6) if needs_prio else 0
                prof = profiles.get(tid)
                if prof is not None:
                    if prof.with_selector and rng.random() < 0.5:
                        e = TableEntry(tid, match, group_id=rng.randrange(1, 6), priority=prio)
                    else:
                        e = TableEntry(tid, match, member_id=rng.randrange(1, 10), priority=prio)
                else:
                    e = TableEntry(tid, match, call(rng.choice(aids)), priority=prio)
                self.both("table_insert", e)
                entries.append(e)
            for e in rng.sample(entries, len(entries) // 4):  # modify and delete some
                if rng.random() < 0.5:
                    self.both("table_delete", e)
                elif e.action is not None:
                    self.both("table_modify", TableEntry(tid, e.match, call(rng.choice(aids)), priority=e.priority))
        for gid in range(1, 6):
            reps = sorted({(rng.choice(PORTS[:6]), rng.randrange(4)) for _ in range(rng.randrange(0, 4))})
            self.both("mc_group_set", gid, reps)
        for sid in range(1, 6):
            reps = sorted({(rng.choice(PORTS[:6]), rng.randrange(4)) for _ in range(rng.randrange(0, 3))})
            self.both("clone_session_set", sid, reps, 0, rng.choice([0, 0, 20, 60]))
        for r in info.registers:
            size = sw.register_size(r.preamble.id)
            for _ in range(min(size, 16)):
                self.both("register_write", r.preamble.id, rng.randrange(size),
                          small(rng, r.type_spec.bitstring.bit.bitwidth))

    # ------------------------------------------------------------------ packets
    def mutate(self, data: bytes) -> bytes:
        rng = self.rng
        b = bytearray(data)
        r = rng.random()
        if r < 0.3 and b:
            for _ in range(rng.randrange(1, 4)):
                b[rng.randrange(len(b))] = rng.getrandbits(8)
        elif r < 0.45:
            del b[rng.randrange(len(b) + 1):]
        elif r < 0.5:
            b = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(0, 80)))
        return bytes(b)

    def run(self, templates: list[bytes], count: int) -> None:
        rng = self.rng
        pending: list[tuple[int, bytes]] = []
        for _ in range(count):
            pkt = (rng.choice(self.ports), self.mutate(rng.choice(templates)))
            if rng.random() < 0.5:
                pending.append(pkt)
                continue
            self.flush(pending)
            pending = []
            out = self.py.process(*pkt)
            self.outputs += len(out)
            assert out == self.nat.process(*pkt), f"seed {self.seed}: packet {pkt}"
            self.compare_digests()
        self.flush(pending)
        self.compare_state()

    def flush(self, pending: list[tuple[int, bytes]]) -> None:
        if not pending:
            return
        expect = [self.py.process(p, d) for p, d in pending]
        self.outputs += sum(map(len, expect))
        assert expect == self.nat.process_batch(pending), f"seed {self.seed}: batch {pending}"
        self.compare_digests()

    def compare_digests(self) -> None:
        digests = self.py.take_digests()
        self.digests += len(digests)
        assert digests == self.nat.take_digests(), f"seed {self.seed}: digests"

    def compare_state(self) -> None:
        info = self.py.p4info
        for c in info.counters:
            for i in range(self.py.counter_size(c.preamble.id)):
                assert self.py.counter_read(c.preamble.id, i) == self.nat.counter_read(c.preamble.id, i), (
                    f"seed {self.seed}: counter {c.preamble.name}[{i}]")
        for r in info.registers:
            for i in range(self.py.register_size(r.preamble.id)):
                assert self.py.register_read(r.preamble.id, i) == self.nat.register_read(r.preamble.id, i), (
                    f"seed {self.seed}: register {r.preamble.name}[{i}]")
        for t in info.tables:
            a = [(e.match, e.priority, e.packets, e.bytes) for e in self.py.table_entries(t.preamble.id)]
            b = [(e.match, e.priority, e.packets, e.bytes) for e in self.nat.table_entries(t.preamble.id)]
            assert a == b, f"seed {self.seed}: table {t.preamble.name} entries or direct counters"


def generic_templates(rng: random.Random) -> list[bytes]:
    out = [scratch_packet(Scratch(op=op, a=rng.randrange(8), b=rng.randrange(256), r8=rng.randrange(4)))
           for op in range(16) if op != 6]  # op 6 runs meters (timing): unconfigured, but keep them out
    out += [bytes(Ether(type=0x8100) / Dot1Q(vlan=rng.randrange(4), type=0x88B6)) + Scratch(op=3, a=1).pack(),
            bytes(Ether() / IP(dst="10.0.0.1", ttl=64) / UDP(dport=rng.randrange(8)) / b"data"),
            bytes(Ether() / IP(dst="10.1.2.3", ttl=1) / TCP(dport=80) / b"data"),
            bytes(Ether() / ARP())]
    return out


def edgy(rng: random.Random, width: int) -> int:
    """The bits of a ``width``-bit field: often a two's complement edge (0, 1, -1, min, max)."""
    if rng.random() < 0.5:
        return rng.choice([0, 1, (1 << width) - 1, 1 << (width - 1), (1 << (width - 1)) - 1,
                           (1 << (width - 1)) + 1, (1 << width) - 2])
    return rng.getrandbits(width)


SIGNED_FIELDS = [8, 8, 16, 32, 64, 4, 4, 8, 16, 32, 64, 3, 5, 8]  # sgn_t after op (signed.p4)


def signed_templates(rng: random.Random) -> list[bytes]:
    """signed.p4's packets: every op, operands at and around the two's complement edges."""
    out = []
    for op in range(12):
        for _ in range(6):
            v = rng.getrandbits(4) << 4 | op
            for w in SIGNED_FIELDS:
                v = v << w | edgy(rng, w)
            eth = bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x88B7))
            out.append(eth + v.to_bytes(35, "big") + b"payload")
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_native_engine_matches_python_engine_on_signed_values(seed: int) -> None:
    """int<N> in C: header fields, arithmetic, comparisons, shifts, casts, table keys and action
    data, digests and hashes of signed values (tests/p4sim/programs/signed.p4)."""
    def load(engine: str) -> Switch:
        return load_switch(str(PROGRAMS / "signed.p4"), [], cpu_port=CPU_PORT, engine=engine)

    pair = Pair(load, seed)
    pair.random_state()
    info = pair.py.p4info
    tid = next(t.preamble.id for t in info.tables if t.preamble.name.endswith("by_signed"))
    acts = {a.preamble.name.rsplit(".", 1)[-1]: a for a in info.actions}
    for _ in range(24):  # entries whose keys (the bits of int<8> b, int<4> f) the packets hit
        a = acts[pair.rng.choice(["set_r", "scale"])]
        params = {p.id: edgy(pair.rng, p.bitwidth) for p in a.params}
        mask = pair.rng.choice([0xF, 0x8, 0x7])
        e = TableEntry(tid, {1: Match("exact", edgy(pair.rng, 8)), 2: Match("ternary", edgy(pair.rng, 4) & mask, mask=mask)},
                       ActionCall(a.preamble.id, params), priority=pair.rng.randrange(1, 100))
        pair.both("table_insert", e)
    pair.run(signed_templates(pair.rng), PACKETS)
    assert pair.outputs > PACKETS // 2 and pair.digests > 0


WIDE_FIELDS = [128, 128, 128, 100, 72, 128, 100, 64, 8, 8]  # wide_t after op (wide.p4)
SHIFTS = [0, 1, 3, 63, 64, 65, 99, 100, 127, 128, 129, 200, 255]


def wide_pool(rng: random.Random) -> list[int]:
    """128-bit values around the edges: 0, all ones, 2^63, 2^64 +- 1, 2^127, and random ones."""
    return [0, 1, (1 << 128) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, (1 << 64) + 1, 1 << 127, (1 << 127) - 1,
            (1 << 127) + 1, 0x20010DB8 << 96 | 1] + [rng.getrandbits(128) for _ in range(8)]


def wide_templates(rng: random.Random, pool: list[int]) -> list[bytes]:
    """wide.p4's packets: every op, with fields from ``pool`` (the values the table entries use)."""
    out = []
    for op in range(10):
        for _ in range(8):
            v = rng.getrandbits(4) << 4 | op
            for i, w in enumerate(WIDE_FIELDS):
                x = rng.choice(pool) if rng.random() < 0.7 else edgy(rng, w)
                if i == 8:  # r8: a shift amount, a register index
                    x = rng.choice(SHIFTS) if rng.random() < 0.7 else rng.getrandbits(8)
                v = v << w | (x & ((1 << w) - 1))
            eth = bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x88B8))
            out.append(eth + v.to_bytes(109, "big") + b"payload")
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_native_engine_matches_python_engine_on_wide_values(seed: int) -> None:
    """bit<N>/int<N> wider than 64 bits in C: header fields, arithmetic, shifts, slices across bit 64,
    concatenation, casts, comparisons, tables with lpm, ternary, range, exact and optional keys on
    them and wide action data, a register<bit<128>>, digests and hashes (tests/p4sim/programs/wide.p4)."""
    def load(engine: str) -> Switch:
        return load_switch(str(PROGRAMS / "wide.p4"), [], cpu_port=CPU_PORT, engine=engine)

    pair = Pair(load, seed)
    pair.random_state()
    rng = pair.rng
    pool = wide_pool(rng)
    info = pair.py.p4info
    tids = {t.preamble.name.rsplit(".", 1)[-1]: t.preamble.id for t in info.tables}
    acts = {a.preamble.name.rsplit(".", 1)[-1]: a for a in info.actions}

    def call(name: str) -> ActionCall:
        a = acts[name]
        return ActionCall(a.preamble.id, {p.id: edgy(rng, p.bitwidth) for p in a.params})

    full = (1 << 128) - 1
    for _ in range(30):  # longest prefix match on the pool's dst addresses, prefixes either side of 64
        plen = rng.choice([1, 8, 63, 64, 65, 96, 127, 128, rng.randrange(1, 129)])
        v = rng.choice(pool) & (full ^ ((1 << (128 - plen)) - 1))
        pair.both("table_insert", TableEntry(tids["route"], {1: Match("lpm", v, prefix_len=plen)}, call("set_nh")))
    for _ in range(30):  # ternary src, range c (72 bits: across bit 64), optional op
        mask = rng.choice([full, full >> 64, full ^ (full >> 64), (1 << 127) | 1, rng.getrandbits(128)])
        lo = rng.choice(pool) & ((1 << 72) - 1)
        hi = min(lo + rng.choice([0, 1, 1 << 64, 1 << 70, rng.getrandbits(72)]), (1 << 72) - 1)
        match = {1: Match("ternary", rng.choice(pool) & mask, mask=mask), 2: Match("range", lo, high=hi)}
        if rng.random() < 0.5:
            match[3] = Match("optional", rng.randrange(16))
        pair.both("table_insert", TableEntry(tids["acl"], match, call("set_val"), priority=rng.randrange(1, 100)))
    for x in rng.sample(pool, 10):  # exact int<128> keys (their bits)
        pair.both("table_insert", TableEntry(tids["pin"], {1: Match("exact", x)}, call("set_val")))
    pair.both("table_set_default", tids["pin"], call("set_val"))
    reg = info.registers[0].preamble.id
    for i in range(16):
        pair.both("register_write", reg, i, rng.choice(pool))
    pair.run(wide_templates(rng, pool), PACKETS)
    assert pair.outputs > PACKETS // 2 and pair.digests > 0


def nfcluster_templates(rng: random.Random) -> list[bytes]:
    from contract.shim import Kind, Shim

    tcp = Ether() / IP(src="10.0.0.1", dst="10.0.1.1") / TCP(sport=1000, dport=80, flags="S") / (b"x" * 20)
    out = [bytes(tcp), bytes(Ether() / IP(src="10.0.0.2", dst="10.0.1.1") / UDP(sport=5, dport=6) / b"y"),
           bytes(Ether() / IP(src="10.0.0.1", dst="10.0.1.1", flags="MF", id=7) / UDP() / (b"z" * 16)),
           bytes(Ether() / IP(src="10.0.0.1", dst="10.0.1.1", frag=2, id=7) / (b"z" * 16)),
           bytes(Ether() / IP(src="10.0.0.1", dst="10.0.1.1", options=b"\x01" * 8) / TCP()),
           bytes(Ether() / ARP()), (2 << 7).to_bytes(2, "big") + bytes(tcp)]
    for kind in (Kind.OUTPUT, Kind.PRIMARY):
        for seq in (1, 2, 2):
            shim = Shim(kind=kind, flags=rng.randrange(4), stage=0, slot=rng.randrange(4), epoch=1, nf_id=2, seq=seq,
                        ether_type=0x0800)
            eth = bytes(Ether(type=0x88B5))
            out.append(eth[:12] + b"\x88\xb5" + shim.pack() + bytes(IP(dst="10.0.1.1") / UDP() / b"w"))
    return out


PROGRAM_NAMES = ["ipv4_forward.p4", "tables.p4", "profiles.p4", "pre.p4", "externs.p4", "parser.p4",
                 "unions.p4", "clone_meta.p4"]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", PROGRAM_NAMES)
def test_native_engine_matches_python_engine(name: str, seed: int) -> None:
    def load(engine: str) -> Switch:
        return load_switch(str(PROGRAMS / name), [str(PROGRAMS / "include")], cpu_port=CPU_PORT, engine=engine)

    pair = Pair(load, seed)
    pair.random_state()
    pair.run(generic_templates(pair.rng), PACKETS)


@pytest.mark.skipif(not NFC.exists(), reason="p4src/v1model/nfcluster.p4 not present")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_native_engine_matches_python_engine_on_nfcluster(seed: int) -> None:
    def load(engine: str) -> Switch:
        return load_switch(str(NFC), NFC_INCLUDES, cpu_port=CPU_PORT, engine=engine)

    pair = Pair(load, seed)
    pair.ports = [1, 1, 1, 4, 2, 3, 5, 0, CPU_PORT]
    pair.random_state()
    nfcluster_state(pair)
    pair.run(nfcluster_templates(pair.rng), PACKETS * 2)
    assert pair.outputs > PACKETS // 2 and pair.digests > 0, "the configuration lets packets through"


def nfcluster_state(pair: Pair) -> None:
    """A working configuration over the random one (roles, every slot owned, NF targets, replica
    groups, edge ports entering stage 0), so that most packets are stamped, replicated and
    reported."""
    sw, rng = pair.py, pair.rng

    def put(e: TableEntry) -> None:
        if pair.both("table_get", e) is None:
            pair.both("table_insert", e)
        else:
            pair.both("table_modify", e)

    for name in ("handoff_conn", "handoff_route"):  # Prism's tables: random entries would take
        for e in sw.table_entries(sw.table_id(name)):  # edge TCP out of the nfcluster pipeline
            pair.both("table_delete", e)
    chain, enter = sw.table_id("edge_chain"), sw.action_id("enter_chain")
    pair.both("table_set_default", chain, ActionCall(enter, {1: 0, 2: 0}))
    for port in (1, 4):
        put(TableEntry(chain, {1: Match("exact", port)}, ActionCall(enter, {1: 0, 2: rng.randrange(2)})))
    for gid in range(1, 6):
        pair.both("mc_group_set", gid, [(2, 1), (3 if gid % 2 else 5, 2)])
    role, set_role = sw.table_id("port_role"), sw.action_id("set_port_role")
    for port, r in ((1, 1), (4, 1), (2, 2), (3, 2), (5, 2), (CPU_PORT, 3)):
        put(TableEntry(role, {1: Match("exact", port)}, ActionCall(set_role, {1: r})))
    nf, target = sw.table_id("nf_port"), sw.action_id("set_nf_target")
    for port in (2, 3, 5):
        put(TableEntry(nf, {1: Match("exact", port)}, ActionCall(target, {1: port, 2: port})))
    owner, group = sw.table_id("slot_owner"), sw.action_id("set_replica_group")
    for slot in range(4096):
        put(TableEntry(owner, {1: Match("exact", 0), 2: Match("exact", slot)},
                       ActionCall(group, {1: rng.randrange(1, 6), 2: 1, 3: 2,
                                               4: rng.choice((0, rng.getrandbits(32)))})))
    fwd, to_edge = sw.table_id("edge_forward"), sw.action_id("forward_to_edge")
    put(TableEntry(fwd, {1: Match("lpm", 0x0A000000, prefix_len=8)}, ActionCall(to_edge, {1: 4, 2: 0x0A})))
