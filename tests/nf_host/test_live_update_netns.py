"""Live NF update on real `nf-host run` processes (UpdateNf): refused while the NF owns a slot
or for parameters its NF rejects; accepted once the slot has moved away; the slot comes back
and the flow's counts continue unbroken. The controller's orchestration is tested in
tests/controlplane/test_live_update.py.
"""

from __future__ import annotations

import json

import pytest

from contract.proto import nf_control_pb2 as pb
from nf_host.harness import Switch, assign
from tests.nf_host.test_runtime_netns import SLOT, Lab, Node, lab, send, sink_of
from tests.support.procs import wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]
__all__ = ["lab"]  # the fixture, imported for pytest


def update(node: Node, params: object) -> pb.Result:
    reply: pb.Result = node.nf.stub.UpdateNf(
        pb.UpdateNfRequest(params_json=json.dumps(params)), timeout=10)
    return reply


def move(src: Node, dst: Node, epoch: int) -> None:
    assert dst.nf.stub.Adopt(pb.AdoptRequest(
        slot=SLOT, epoch=epoch, from_nf_id=src.nf.nf_id, from_address=src.nf.repl), timeout=5).ok
    rel = src.nf.stub.Release(pb.ReleaseRequest(
        slot=SLOT, to_nf_id=dst.nf.nf_id, to_address=dst.nf.repl), timeout=15)
    assert rel.ok, rel.error


def test_update_is_refused_while_owning_a_slot_and_takes_once_it_moved_away(lab: Lab) -> None:
    a, c = lab.start(1), lab.start(3)
    assign(a.nf, [SLOT])
    sw = Switch()
    send(sw, SLOT, 1, range(1, 11), a, None)
    wait_for(lambda: a.port.count() == 10, 10, what="10 outputs before the update")

    refused = update(a, {"work_us": 1})
    assert not refused.ok and "still owned here" in refused.error
    assert json.loads(a.nf.status().params_json) == {}

    move(a, c, epoch=2)
    sw.epochs[SLOT] = 2
    bad = update(a, {"work_us": -1})  # the checker NF rejects a negative work time
    assert not bad.ok and "refuses these params" in bad.error and "work_us" in bad.error
    assert not update(a, [1, 2]).ok  # not a JSON object
    assert update(a, {"work_us": 1}).ok
    assert json.loads(a.nf.status().params_json) == {"work_us": 1}

    send(sw, SLOT, 1, range(11, 16), c, None)
    wait_for(lambda: c.port.count() == 5, 10, what="the peer's outputs meanwhile")
    move(c, a, epoch=3)
    sw.epochs[SLOT] = 3
    send(sw, SLOT, 1, range(16, 21), a, None)
    wait_for(lambda: a.port.count() == 15, 10, what="the updated NF's outputs")
    sink = sink_of(a, c)
    assert sink.errors == [], sink.errors[:5]
    assert sink.last_count == {1: 20}  # state moved out and back: counts unbroken
