"""Action profiles and action selectors on p4sim: members, groups, selection by hash.

Run one case: .venv/bin/pytest tests/p4sim/test_profiles.py -k selector
"""

from __future__ import annotations

import pytest

from p4sim.runtime.api_values import ActionCall, Match, P4simError, TableEntry
from tests.p4sim.harness import Scratch, load, scratch_packet

pytestmark = pytest.mark.unit


@pytest.fixture
def sw():
    return load("profiles.p4")


def port_of(sw, h: Scratch) -> list[int]:
    return [p for p, _ in sw.process(1, scratch_packet(h))]


def test_p4info_links_tables_and_profiles(sw):
    profs = {p.preamble.name: p for p in sw.p4info.action_profiles}
    assert set(profs) == {"MyIngress.shared_members", "MyIngress.ecmp"}
    assert not profs["MyIngress.shared_members"].with_selector
    assert profs["MyIngress.ecmp"].with_selector
    tables = {t.preamble.name: t for t in sw.p4info.tables}
    assert tables["MyIngress.by_a"].implementation_id == profs["MyIngress.shared_members"].preamble.id
    assert [mf.name for mf in tables["MyIngress.ecmp"].match_fields] == ["op"]


def test_members_of_an_action_profile(sw):
    pid = sw.entity_id("action_profile", "shared_members")
    set_port = sw.action_id("set_port")
    sw.member_insert(pid, 1, ActionCall(set_port, {1: 4}))
    tid = sw.table_id("by_a")
    sw.table_insert(TableEntry(tid, {1: Match("exact", 9)}, member_id=1))
    assert port_of(sw, Scratch(a=9)) == [4]
    sw.member_modify(pid, 1, ActionCall(set_port, {1: 6}))
    assert port_of(sw, Scratch(a=9)) == [6]
    assert sw.members(pid) == {1: ActionCall(set_port, {1: 6})}
    assert port_of(sw, Scratch(a=8)) == []
    with pytest.raises(P4simError) as ei:
        sw.table_insert(TableEntry(tid, {1: Match("exact", 10)}, member_id=2))
    assert ei.value.code == "NOT_FOUND"
    with pytest.raises(P4simError) as ei:
        sw.table_insert(TableEntry(tid, {1: Match("exact", 10)}, ActionCall(set_port, {1: 1})))
    assert ei.value.code == "INVALID_ARGUMENT"


def test_selector_group_spreads_by_hash_and_is_stable(sw):
    pid = sw.entity_id("action_profile", "ecmp")
    set_port = sw.action_id("set_port")
    for m, port in ((1, 11), (2, 12), (3, 13)):
        sw.member_insert(pid, m, ActionCall(set_port, {1: port}))
    sw.group_insert(pid, 100, [1, 2, 3], max_size=4)
    assert sw.groups(pid) == {100: [1, 2, 3]}
    tid = sw.table_id("ecmp")
    sw.table_insert(TableEntry(tid, {1: Match("exact", 1)}, group_id=100))
    ports = {b: port_of(sw, Scratch(op=1, b=b))[0] for b in range(64)}
    assert set(ports.values()) == {11, 12, 13}
    assert all(port_of(sw, Scratch(op=1, b=b)) == [ports[b]] for b in range(0, 64, 7))
    with pytest.raises(P4simError) as ei:
        sw.member_delete(pid, 1)
    assert ei.value.code == "FAILED_PRECONDITION"
    sw.group_modify(pid, 100, [2])
    assert {port_of(sw, Scratch(op=1, b=b))[0] for b in range(16)} == {12}
    with pytest.raises(P4simError) as ei:
        sw.group_insert(pid, 101, [1, 2, 3], max_size=2)
    assert ei.value.code == "RESOURCE_EXHAUSTED"
