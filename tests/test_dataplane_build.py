"""The nfcluster P4 program: it compiles, its P4Info names match the shared contract, and the
PTF suite passes on p4sim (in a network namespace, through ptf_tests/run.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from finsy import pbutil
from finsy.proto import p4i

from contract.shim import (
    ETHERTYPE_NFC,
    FLAG_FIRST_OF_EPOCH,
    FLAG_WATERMARK,
    Kind,
    Shim,
    decap,
    encap,
)
from contract.slot_hash import DEFAULT_SLOT_BITS, slot_of
from controlplane.switch_stats import SWITCH_DROP_REASONS
from ptf_tests import run as ptf_run
from ptf_tests.lib import nfc_test
from ptf_tests.lib.packets import udp_packet

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "p4src" / "v1model" / "nfcluster.p4"


def _p4_constants() -> dict[str, int]:
    """`const bit<N> NAME = VALUE;` and `#define NAME NUMBER` of p4src/shared/define.p4."""
    text = (REPO / "p4src" / "shared" / "define.p4").read_text()
    found = {m[1]: int(m[2], 0) for m in re.finditer(r"const\s+\w+(?:<\d+>)?\s+(\w+)\s*=\s*(\w+);", text)}
    found.update({m[1]: int(m[2], 0) for m in re.finditer(r"#define\s+(\w+)\s+(\d+)\s*$", text, re.M)})
    return found


@pytest.mark.unit
def test_python_constants_agree_with_define_p4() -> None:
    c = _p4_constants()
    assert {k.name: int(k) for k in Kind} == {
        n.removeprefix("SHIM_KIND_"): v for n, v in c.items() if n.startswith("SHIM_KIND_")
    }
    assert c["ETHERTYPE_NFC"] == ETHERTYPE_NFC
    assert c["SHIM_FLAG_FIRST_OF_EPOCH"] == FLAG_FIRST_OF_EPOCH
    assert c["SHIM_FLAG_WATERMARK"] == FLAG_WATERMARK
    reasons = SWITCH_DROP_REASONS["nf_output_drops"]
    assert c["OUTPUT_DROP_REASONS"] == len(reasons)
    assert {n: c[f"OUTPUT_DROP_{n.upper()}"] for n in reasons} == {n: i for i, n in enumerate(reasons)}
    assert (c["PORT_ROLE_EDGE"], c["PORT_ROLE_NF"], c["PORT_ROLE_CPU"]) == (
        nfc_test.ROLE_EDGE, nfc_test.ROLE_NF, nfc_test.ROLE_CPU,
    )
    assert (c["REPLICA_RID_PRIMARY"], c["REPLICA_RID_BACKUP"]) == (
        nfc_test.RID_PRIMARY, nfc_test.RID_BACKUP,
    )
    assert c["CPU_PORT"] == ptf_run.CPU_PORT
    assert c["SLOT_BITS"] == DEFAULT_SLOT_BITS


def _compile(out: Path, *defines: str) -> p4i.P4Info:
    cmd = [
        *ptf_run.p4sim_command(), "compile", str(PROGRAM), "--arch", "v1model",
        "-I", str(REPO / "p4src" / "shared"), *defines,
        "--p4runtime-files", str(out / "nfcluster.p4info.txtpb"), "-o", str(out),
    ]
    # every part exists: a p4sim that cannot run or compile is a failure, never a skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"p4sim could not compile the program:\n{text}"
    return pbutil.from_text((out / "nfcluster.p4info.txtpb").read_text(), p4i.P4Info)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build")
    _compile(out)
    return out


@pytest.fixture(scope="module")
def p4info(build_dir: Path) -> p4i.P4Info:
    return pbutil.from_text((build_dir / "nfcluster.p4info.txtpb").read_text(), p4i.P4Info)


def _by_suffix(objects: Sequence[Any], short: str, prefix: str) -> Any:
    """The one object whose last name component is `short`; it must live under `prefix`."""
    found = [o for o in objects if o.preamble.name.split(".")[-1] == short]
    assert len(found) == 1, f"{short}: {[o.preamble.name for o in objects]}"
    assert found[0].preamble.name.startswith(prefix + "."), found[0].preamble.name
    return found[0]


@pytest.mark.slow
def test_tables_match_the_contract(p4info: p4i.P4Info) -> None:
    expected = {
        # table: (pipe, [(field, bitwidth, match type)], [(action, [(param, bitwidth)])])
        "port_role": ("NfcIngress", [("port", 9, p4i.MatchField.EXACT)], [("set_port_role", [("role", 8)])]),
        "slot_owner": (
            "NfcIngress",
            [("stage", 8, p4i.MatchField.EXACT), ("slot", 16, p4i.MatchField.EXACT)],
            [("set_replica_group", [("group", 16), ("epoch", 16), ("primary", 16), ("seq_base", 32)])],
        ),
        "nf_port": (
            "NfcEgress",
            [("port", 9, p4i.MatchField.EXACT)],
            [("set_nf_target", [("nf_id", 16), ("nf_mac", 48)])],
        ),
        "edge_forward": (
            "NfcIngress",
            [("dst_addr", 32, p4i.MatchField.LPM)],
            [("forward_to_edge", [("port", 9), ("dst_mac", 48)])],
        ),
        # Prism hand-off (docs/prism.md): prism/switch_entries.py writes these by name
        "handoff_conn": (
            "NfcIngress",
            [("src_addr", 32, p4i.MatchField.EXACT), ("dst_addr", 32, p4i.MatchField.EXACT),
             ("src_port", 16, p4i.MatchField.EXACT), ("dst_port", 16, p4i.MatchField.EXACT)],
            [("handoff_to_backend", [("port", 9), ("dst_mac", 48), ("dst_addr", 32), ("dst_port", 16)]),
             ("handoff_to_client", [("port", 9), ("dst_mac", 48), ("src_addr", 32), ("src_port", 16)]),
             ("handoff_lock", [])],
        ),
        "handoff_route": (
            "NfcIngress",
            [("dst_addr", 32, p4i.MatchField.LPM)],
            [("handoff_forward", [("port", 9), ("dst_mac", 48)])],
        ),
    }
    actions = {a.preamble.id: a for a in p4info.actions}
    for name, (pipe, fields, acts) in expected.items():
        table = _by_suffix(list(p4info.tables), name, pipe)
        assert isinstance(table, p4i.Table)
        assert [(f.name, f.bitwidth, f.match_type) for f in table.match_fields] == fields
        table_actions = {actions[r.id].preamble.name.split(".")[-1]: actions[r.id] for r in table.action_refs}
        for aname, params in acts:
            assert aname in table_actions, f"{name}: {sorted(table_actions)}"
            assert [(p.name, p.bitwidth) for p in table_actions[aname].params] == params
    owner = _by_suffix(list(p4info.tables), "slot_owner", "NfcIngress")
    assert isinstance(owner, p4i.Table)
    assert actions[owner.const_default_action_id].preamble.name.endswith("drop_unowned")
    # one entry per (stage, slot): CHAIN_STAGES (4) x 2^SLOT_BITS (default 12)
    assert owner.size == 4 * 4096


@pytest.mark.slow
def test_externs_match_the_contract(p4info: p4i.P4Info) -> None:
    # per-(stage, slot) cells at index stage << SLOT_BITS | slot; per-port counters by port
    for name, size in (("slot_traffic", 4 * 4096), ("unowned_drops", 4 * 4096), ("nf_port_drops", 512),
                       ("handoff_drops", 1)):
        c = _by_suffix(list(p4info.counters), name, "NfcIngress")
        assert isinstance(c, p4i.Counter)
        assert c.size == size
        assert c.spec.unit == p4i.CounterSpec.BOTH
    # every packet in and out, by port, at the pipeline's two ends (topo/faults/port_accounting.py)
    for name, control in (("port_rx", "NfcIngress"), ("port_tx", "NfcEgress")):
        c = _by_suffix(list(p4info.counters), name, control)
        assert isinstance(c, p4i.Counter)
        assert (c.size, c.spec.unit) == (512, p4i.CounterSpec.BOTH)
    for name, width in (("slot_seq", 32), ("slot_epoch", 16)):
        r = _by_suffix(list(p4info.registers), name, "NfcIngress")
        assert isinstance(r, p4i.Register)
        assert r.size == 4 * 4096
        assert r.type_spec.bitstring.bit.bitwidth == width
    digests = [d for d in p4info.digests if d.preamble.name == "new_flow_t"]
    assert len(digests) == 1
    struct = p4info.type_info.structs[digests[0].type_spec.struct.name]
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in struct.members] == [
        ("slot", 16), ("src_addr", 32), ("dst_addr", 32), ("src_port", 16), ("dst_port", 16), ("protocol", 8),
    ]
    meta = {m.preamble.name: [(x.name, x.bitwidth) for x in m.metadata] for m in p4info.controller_packet_metadata}
    assert meta == {
        "packet_in": [("ingress_port", 9), ("_pad", 7)],
        "packet_out": [("egress_port", 9), ("_pad", 7)],
    }


@pytest.mark.slow
def test_slot_bits_define_sizes_per_slot_objects(tmp_path: Path) -> None:
    info = _compile(tmp_path, "-D", "SLOT_BITS=8")
    owner = [t for t in info.tables if t.preamble.name.endswith(".slot_owner")]
    assert owner[0].size == 4 * 256
    assert {c.preamble.name.split(".")[-1]: c.size for c in info.counters}["slot_traffic"] == 4 * 256


@pytest.mark.unit
def test_runner_refuses_a_missing_target_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = ptf_run.main(["--target", "bmv2", "--build-dir", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "simple_switch_grpc is not on PATH" in err or "needs root" in err or "missing" in err


@pytest.mark.netns
@pytest.mark.slow
def test_ptf_suite_passes_on_p4sim(build_dir: Path, tmp_path: Path) -> None:
    assert ptf_run.p4sim_run_available() is None, ptf_run.p4sim_run_available()
    proc = subprocess.run(
        [sys.executable, "-m", "ptf_tests.run", "--target", "p4sim", "--build-dir", str(build_dir),
         "--log-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=280, cwd=REPO,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"PTF suite failed:\n{out[-6000:]}"
    assert "FAILED" not in out


# -- behaviour in-process (p4sim.runtime.switch.Switch, no namespace): fast checks of the same rules ----


class _Pipeline:
    """The nfcluster program loaded into an in-process p4sim switch, written to by names."""

    def __init__(self) -> None:
        import p4sim.runtime.api_values as switch_mod
        from p4sim.runtime import engine_loader

        self.mod = switch_mod
        self.sw = engine_loader.load_switch(
            str(PROGRAM), include_dirs=[str(REPO / "p4src" / "shared")], cpu_port=510
        )
        self.info: p4i.P4Info = self.sw.p4info

    def insert(self, table: str, match: dict[str, Any], action: str, params: dict[str, int]) -> None:
        t = _by_suffix(list(self.info.tables), table, table_pipe(table))
        a = _by_suffix(list(self.info.actions), action, table_pipe(table))
        fields = {f.name: f for f in t.match_fields}
        m = {}
        for name, value in match.items():
            f = fields[name]
            if isinstance(value, tuple):
                m[f.id] = self.mod.Match(kind="lpm", value=value[0], prefix_len=value[1])
            else:
                m[f.id] = self.mod.Match(kind="exact", value=value)
        pids = {p.name: p.id for p in a.params}
        call = self.mod.ActionCall(action_id=a.preamble.id, params={pids[k]: v for k, v in params.items()})
        self.sw.table_insert(self.mod.TableEntry(table_id=t.preamble.id, match=m, action=call))

    def counter(self, name: str, index: int) -> tuple[int, int]:
        c = _by_suffix(list(self.info.counters), name,
                       "NfcEgress" if name == "port_tx" else "NfcIngress")
        packets, bytes_ = self.sw.counter_read(c.preamble.id, index)
        return int(packets), int(bytes_)


def table_pipe(table: str) -> str:
    return "NfcEgress" if table in ("nf_port", "set_nf_target", "drop_untargeted") else "NfcIngress"


@pytest.fixture
def pipeline() -> _Pipeline:
    pl = _Pipeline()
    for port, role in ((1, 1), (2, 1), (3, 2), (4, 2)):
        pl.insert("port_role", {"port": port}, "set_port_role", {"role": role})
    pl.insert("nf_port", {"port": 3}, "set_nf_target", {"nf_id": 1, "nf_mac": 0x020000000101})
    pl.insert("nf_port", {"port": 4}, "set_nf_target", {"nf_id": 2, "nf_mac": 0x020000000102})
    pl.insert("edge_forward", {"dst_addr": (0x0A000100, 24)}, "forward_to_edge", {"port": 1, "dst_mac": 1})
    pl.sw.mc_group_set(1, [(3, 1), (4, 2)])
    return pl


@pytest.mark.unit
def test_inprocess_stamps_and_replicates(pipeline: _Pipeline) -> None:
    slot = slot_of("10.0.1.1", "10.0.2.2", 1000, 2000, 17)
    pipeline.insert("slot_owner", {"stage": 0, "slot": slot}, "set_replica_group",
                    {"group": 1, "epoch": 7, "primary": 1, "seq_base": 0})
    request = bytes(udp_packet("10.0.1.1", "10.0.2.2", 1000, 2000))
    reply = bytes(udp_packet("10.0.2.2", "10.0.1.1", 2000, 1000))
    seen = []
    for port, pkt in ((1, request), (2, reply), (1, request)):
        out = sorted(pipeline.sw.process(port, pkt))
        assert [p for p, _ in out] == [3, 4]
        (s1, inner1), (s2, inner2) = decap(out[0][1]), decap(out[1][1])
        assert (s1.kind, s1.nf_id, s2.kind, s2.nf_id) == (Kind.PRIMARY, 1, Kind.BACKUP, 2)
        assert (s1.slot, s1.epoch, s1.seq) == (s2.slot, s2.epoch, s2.seq) == (slot, 7, s1.seq)
        assert inner1[12:] == pkt[12:] and inner1[6:] == inner2[6:]
        assert (inner1[:6].hex(), inner2[:6].hex()) == ("020000000101", "020000000102")
        seen.append((s1.seq, s1.first_of_epoch))
    assert seen == [(1, True), (2, False), (3, False)]
    assert pipeline.counter("slot_traffic", slot) == (3, 2 * len(request) + len(reply))
    # every packet in by ingress port, every copy out by egress port (bytes as received)
    assert pipeline.counter("port_rx", 1) == (2, 2 * len(request))
    assert pipeline.counter("port_rx", 2) == (1, len(reply))
    assert pipeline.counter("port_tx", 3) == pipeline.counter("port_tx", 4) == (
        3, 2 * len(request) + len(reply))


@pytest.mark.unit
def test_inprocess_numbers_from_the_slots_seq_base(pipeline: _Pipeline) -> None:
    """A packet's number is its slot_owner entry's seq_base + the packets stamped in the slot,
    mod 2^32 (how the controller resumes the numbering after a switch restart)."""
    slot = slot_of("10.0.1.3", "10.0.2.3", 1003, 2003, 17)
    pipeline.insert("slot_owner", {"stage": 0, "slot": slot}, "set_replica_group",
                    {"group": 1, "epoch": 7, "primary": 1, "seq_base": 0xFFFFFFFE})
    pkt = bytes(udp_packet("10.0.1.3", "10.0.2.3", 1003, 2003))
    seqs = [decap(sorted(pipeline.sw.process(1, pkt))[0][1])[0].seq for _ in range(3)]
    assert seqs == [0xFFFFFFFF, 0, 1]
    assert pipeline.counter("slot_traffic", slot)[0] == 3


@pytest.mark.unit
def test_inprocess_drops_unowned_and_nf_garbage(pipeline: _Pipeline) -> None:
    pkt = bytes(udp_packet("10.0.1.9", "10.0.2.9", 1, 2))
    assert pipeline.sw.process(1, pkt) == []
    assert pipeline.counter("unowned_drops", slot_of("10.0.1.9", "10.0.2.9", 1, 2, 17)) == (1, len(pkt))
    assert pipeline.counter("port_rx", 1) == (1, len(pkt))  # in, whatever happened after
    assert all(pipeline.counter("port_tx", p) == (0, 0) for p in range(1, 5))  # out: nothing
    assert pipeline.sw.process(3, pkt) == []
    out_pkt = bytes(udp_packet("10.0.2.9", "10.0.1.9", 2, 1))
    shim = Shim(kind=int(Kind.OUTPUT), flags=0, slot=5, epoch=1, nf_id=1, seq=1, ether_type=0x0800)
    out = pipeline.sw.process(3, encap(shim, out_pkt))
    assert out == [(1, bytes.fromhex("000000000001") + out_pkt[6:])]
    assert pipeline.counter("nf_port_drops", 3) == (1, len(pkt))
