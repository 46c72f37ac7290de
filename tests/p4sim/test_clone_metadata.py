"""What a clone's egress sees of the metadata on p4sim, as BMv2's simple_switch (simple_switch.cpp):

* I2E (`copy_field_list_and_set_type`): the packet as received is parsed again with its
  ingress_port, then every metadata field, user and standard, is reset (what the parser wrote,
  ingress_port too) but for the @field_list fields of clone_preserving_field_list;
* E2E (`clone_with_phv_reset_metadata_ptr`): the headers as egress left them, every metadata
  field reset but for the preserved @field_list fields (plain `clone` preserves none);
* every egress starts with egress_spec = drop port + 1 (0 in the 9-bit field) and packet_length =
  the length of the packet ingress received.

Run one case: .venv/bin/pytest tests/p4sim/test_clone_metadata.py -k e2e
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest

from p4sim.runtime.v1model import DROP_PORT
from tests.p4sim.harness import ETH_TEST, load

pytestmark = pytest.mark.unit

NORMAL, I2E, E2E = 0, 1, 2
CLONE_PORT = 9
PAYLOAD = b"0123456789"
PROBE = "!BBHHHBBHHH"
# BMv2 egress starts with egress_spec = drop_port + 1, written to a 9-bit field (Field::set masks)
EGRESS_SPEC_AT_EGRESS_START = (DROP_PORT + 1) & 0x1FF


@dataclass
class Seen:
    """What one egress pass saw (the probe header as egress wrote it)."""

    ingress_port: int
    egress_spec: int
    packet_length: int
    instance_type: int
    pass_: int
    from_parser: int
    from_ingress: int
    from_egress: int


def probe_packet(op: int, session: int = 5) -> bytes:
    eth = b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + ETH_TEST.to_bytes(2, "big")
    return eth + struct.pack(PROBE, op, session, 0, 0, 0, 0, 0, 0, 0, 0) + PAYLOAD


def seen(out: list[tuple[int, bytes]]) -> dict[int, Seen]:
    got = {}
    for port, data in out:
        _op, _session, *fields = struct.unpack(PROBE, data[14:14 + struct.calcsize(PROBE)])
        got[port] = Seen(*fields)
    return got


@pytest.fixture
def sw():
    s = load("clone_meta.p4")
    s.clone_session_set(5, [(CLONE_PORT, 0)])
    return s


def test_the_original_sees_its_metadata_and_egress_spec_of_drop_port_plus_one(sw):
    pkt = probe_packet(op=0)
    got = seen(sw.process(1, pkt))
    assert got == {2: Seen(ingress_port=1, egress_spec=EGRESS_SPEC_AT_EGRESS_START, packet_length=len(pkt),
                           instance_type=NORMAL, pass_=0x11, from_parser=0xAAAA, from_ingress=0x1111,
                           from_egress=0)}
    assert EGRESS_SPEC_AT_EGRESS_START == 0


def test_i2e_clone_has_every_metadata_field_reset(sw):
    pkt = probe_packet(op=1)
    got = seen(sw.process(1, pkt))
    assert set(got) == {2, CLONE_PORT}
    # parsed again on port 1 (the probe is only parsed there), then ingress_port reset too
    assert got[CLONE_PORT] == Seen(ingress_port=0, egress_spec=EGRESS_SPEC_AT_EGRESS_START,
                                   packet_length=len(pkt), instance_type=I2E, pass_=0, from_parser=0,
                                   from_ingress=0, from_egress=0)


def test_i2e_clone_preserving_field_list_keeps_only_its_fields(sw):
    got = seen(sw.process(1, probe_packet(op=2)))
    clone = got[CLONE_PORT]
    assert clone.instance_type == I2E
    assert clone.pass_ == 0x11  # @field_list(1), as ingress left it
    assert (clone.from_parser, clone.from_ingress, clone.ingress_port) == (0, 0, 0)


def test_e2e_clone_preserves_no_metadata(sw):
    pkt = probe_packet(op=3)
    got = seen(sw.process(1, pkt))
    assert set(got) == {2, CLONE_PORT}
    assert got[2].instance_type == NORMAL and got[2].pass_ == 0x11
    assert got[CLONE_PORT] == Seen(ingress_port=0, egress_spec=EGRESS_SPEC_AT_EGRESS_START,
                                   packet_length=len(pkt), instance_type=E2E, pass_=0, from_parser=0,
                                   from_ingress=0, from_egress=0)


def test_e2e_clone_preserving_field_list_keeps_only_its_fields_as_egress_left_them(sw):
    pkt = probe_packet(op=4)
    got = seen(sw.process(1, pkt))
    assert got[CLONE_PORT] == Seen(ingress_port=0, egress_spec=EGRESS_SPEC_AT_EGRESS_START,
                                   packet_length=len(pkt), instance_type=E2E, pass_=0x77, from_parser=0,
                                   from_ingress=0, from_egress=0)


def test_egress_packet_length_is_the_received_length_whatever_ingress_wrote(sw):
    pkt = probe_packet(op=5)
    got = seen(sw.process(1, pkt))
    assert got[2].packet_length == len(pkt)


def test_clone_to_an_unconfigured_session_sends_only_the_original(sw):
    for op in (1, 3):
        assert set(seen(sw.process(1, probe_packet(op=op, session=6)))) == {2}
