"""The IDS finds patterns inside a packet and across packet boundaries when packets are in order."""

from __future__ import annotations

import pytest
from scapy.packet import Packet as ScapyPacket

from nf_host.nf_api import Verdict
from nf_host.nfs import make_nf
from tests.nf_host.nfs.packets import FlowTable, tcp

pytestmark = pytest.mark.unit


def seg(payload: bytes, reverse: bool = False) -> ScapyPacket:
    if reverse:
        return tcp("10.0.0.2", "10.0.0.1", 80, 1234, "PA", payload)
    return tcp("10.0.0.1", "10.0.0.2", 1234, 80, "PA", payload)


def ids(*patterns: object) -> FlowTable:
    return FlowTable(make_nf("ids", {"patterns": list(patterns)}))


def send(table: FlowTable, payload: bytes, reverse: bool = False) -> Verdict:
    return table.send(seg(payload, reverse))[0]


def test_pattern_inside_one_packet() -> None:
    table = ids("ATTACK")
    assert send(table, b"hello") == Verdict.FORWARD
    assert send(table, b"xxATTACKxx") == Verdict.DROP
    assert table.state_of(seg(b""))["alerts"] == 1


def test_pattern_split_over_three_packets_in_order() -> None:
    table = ids("ATTACK", {"hex": "00ff00"})
    assert send(table, b"...AT") == Verdict.FORWARD
    assert send(table, b"TA") == Verdict.FORWARD
    assert send(table, b"CK...") == Verdict.DROP
    assert send(table, b"z\x00") == Verdict.FORWARD
    assert send(table, b"\xff\x00") == Verdict.DROP
    assert table.state_of(seg(b""))["alerts"] == 2


def test_out_of_order_pieces_are_not_joined() -> None:
    table = ids("ATTACK")
    assert send(table, b"CK...") == Verdict.FORWARD
    assert send(table, b"...ATTA") == Verdict.FORWARD
    assert table.state_of(seg(b""))["alerts"] == 0


def test_directions_keep_separate_tails() -> None:
    table = ids("ATTACK")
    assert send(table, b"ATT") == Verdict.FORWARD
    assert send(table, b"ACK", reverse=True) == Verdict.FORWARD
    assert send(table, b"ACK") == Verdict.DROP


def test_tail_is_bounded_and_survives_a_move() -> None:
    table = ids("ATTACK", "XY")
    send(table, b"a" * 1000 + b"ATTA")
    state = table.state_of(seg(b""))
    assert state["tail_fwd"] == b"aATTA" and state["scanned"] == 1004
    table.move_states()
    assert send(table, b"CK") == Verdict.DROP


def test_match_clears_the_tail() -> None:
    table = ids("ATTACK")
    assert send(table, b"ATTACKATT") == Verdict.DROP
    assert send(table, b"ACK") == Verdict.FORWARD


def test_empty_payload_and_bad_parameters() -> None:
    table = ids("A")
    assert table.send(tcp("10.0.0.1", "10.0.0.2", 1, 2, "S"))[0] == Verdict.FORWARD
    with pytest.raises(ValueError, match="patterns"):
        make_nf("ids", {"patterns": []})
    with pytest.raises(ValueError, match="pattern"):
        make_nf("ids", {"patterns": [3]})
