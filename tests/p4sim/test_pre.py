"""The v1model packet replication engine on p4sim: multicast groups with replication ids, I2E and
E2E clone sessions, resubmit and recirculate with preserved metadata, drop in egress, truncate.

Run one case: .venv/bin/pytest tests/p4sim/test_pre.py -k clone
"""

from __future__ import annotations

import pytest

from p4sim.runtime.api_values import P4simError
from tests.p4sim.harness import Scratch, load, result, scratch_packet

pytestmark = pytest.mark.unit

NORMAL, I2E, E2E, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6


@pytest.fixture
def sw():
    return load("pre.p4")


def decode(out: list[tuple[int, bytes]]) -> dict[int, Scratch]:
    return {port: Scratch.unpack(data[14:]) for port, data in out}


def test_multicast_replicas_carry_rid_and_egress_can_drop_one(sw):
    sw.mc_group_set(7, [(2, 1), (3, 2), (4, 3)])
    assert sw.mc_groups() == {7: [(2, 1), (3, 2), (4, 3)]}
    got = decode(sw.process(1, scratch_packet(Scratch(op=1, a=7))))
    assert set(got) == {2, 3}
    assert got[2].r16 == 1 and got[3].r16 == 2
    assert got[2].r32 == REPLICATION and got[2].r8 == 1


def test_multicast_unknown_group_drops(sw):
    assert sw.process(1, scratch_packet(Scratch(op=1, a=9))) == []
    sw.mc_group_set(9, [(5, 0)])
    sw.mc_group_delete(9)
    assert sw.process(1, scratch_packet(Scratch(op=1, a=9))) == []
    with pytest.raises(P4simError) as ei:
        sw.mc_group_delete(9)
    assert ei.value.code == "NOT_FOUND"


def test_i2e_clone_is_the_packet_as_received(sw):
    sw.clone_session_set(5, [(9, 0)])
    got = decode(sw.process(1, scratch_packet(Scratch(op=2, a=5))))
    assert set(got) == {2, 9}
    assert got[2].r8 == 1 and got[2].r32 == NORMAL
    assert got[9].r8 == 0 and got[9].r32 == I2E  # ingress changes are not in the I2E copy


def test_e2e_clone_is_the_packet_after_egress(sw):
    sw.clone_session_set(6, [(8, 4)])
    assert sw.clone_sessions() == {6: [(8, 4)]}
    got = decode(sw.process(1, scratch_packet(Scratch(op=3, a=6))))
    assert set(got) == {2, 8}
    assert got[8].r8 == 1 and got[8].r32 == E2E and got[8].r16 == 4


def test_e2e_clone_resets_metadata_but_its_field_list_as_bmv2(sw):
    """BMv2 (simple_switch.cpp, egress cloning): the clone's metadata is reset, then the fields
    of the @field_list passed to clone_preserving_field_list are copied; and egress starts with
    egress_spec = drop port + 1, which is 0 in the 9-bit field, in the original and the clone."""
    sw.clone_session_set(6, [(8, 0)])
    got = decode(sw.process(1, scratch_packet(Scratch(op=7, a=6))))
    assert set(got) == {2, 8}
    assert got[2].b == 0 and got[2].r32 == NORMAL  # egress_spec as egress saw it
    clone = got[8]
    assert clone.r32 == E2E
    assert clone.b == 0x77  # @field_list(1): kept, with the value egress gave it
    assert clone.r16 == 0  # meta.l4_src (0x2222 from ingress) was reset
    assert clone.r8 == 0  # egress_spec at the clone's egress start, too


def test_clone_without_session_sends_only_original(sw):
    got = decode(sw.process(1, scratch_packet(Scratch(op=2, a=77))))
    assert set(got) == {2}


def test_resubmit_preserves_field_list(sw):
    port, r = result(sw.process(1, scratch_packet(Scratch(op=4))))
    assert port == 3
    assert r.b == 0x5A and r.r32 == RESUBMIT and r.r8 == 1


def test_recirculate_reenters_ingress_with_deparsed_packet(sw):
    port, r = result(sw.process(1, scratch_packet(Scratch(op=5))))
    assert port == 6
    assert r.r8 == 2 and r.b == 0x33 and r.r32 == RECIRC


def test_truncate(sw):
    out = sw.process(1, scratch_packet(Scratch(op=6)))
    assert len(out) == 1 and len(out[0][1]) == 16


def test_clone_session_with_truncate(sw):
    sw.clone_session_set(5, [(9, 0)], truncate=20)
    out = dict(sw.process(1, scratch_packet(Scratch(op=2, a=5))))
    assert len(out[9]) == 20 and len(out[2]) > 20
