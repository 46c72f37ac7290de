"""The controller made of parts (issue #35; docs/controller.md, "The controller made of parts"):
no class hierarchy, the parts wired at construction, and a registry given to the controller
(the simulation's seam) delivering the failure detector's events to the NF lifecycle and to the
timeline without anything assigned afterwards."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from controlplane.config import load_config
from controlplane.controller import Controller
from controlplane.nf_registry import NfRegistry
from controlplane.nf_state import NfEvent

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
P4INFO = Path(__file__).parent / "data" / "nfcluster.p4info.txtpb"


def test_the_controller_is_no_class_hierarchy_and_no_part_is_abstract() -> None:
    assert Controller.__mro__ == (Controller, object)
    c = Controller(load_config(ROOT / "topo" / "nfcluster.yaml"), use_etcd=False,
                   p4info=P4INFO, device_config=b"x")
    for part in (c, c.core, c.lifecycle, c.slot_moves, c.counters, c.history, c.tasks):
        assert not inspect.isabstract(type(part)), type(part)
        assert type(part).__mro__ == (type(part), object), type(part)
    # the parts share one state, one registry and one session, the core's
    assert c.lifecycle.state is c.core.state is c.state
    assert c.lifecycle.registry is c.core.registry is c.registry
    assert c.counters.host is c.core and c.slot_moves.host is c.core


def _controller(primary: bool) -> tuple[Controller, NfRegistry]:
    cfg = load_config(ROOT / "topo" / "nfcluster.yaml")
    registry = NfRegistry(cfg)
    session = SimpleNamespace(is_primary=primary, switch=SimpleNamespace(election_id=10))
    c = Controller(cfg, use_etcd=False, session=session,  # type: ignore[arg-type]
                   registry=registry)
    return c, registry


def test_a_given_registrys_down_event_starts_a_fail_over_and_reaches_the_timeline() -> None:
    async def body() -> None:
        c, registry = _controller(primary=True)
        dead = min(c.pairs)
        c.state.nfs.holds_state([dead])  # (as a resumed map's primaries do)
        registry.nfs[dead].declared_down = True
        await registry.emit(NfEvent("down", dead, 3))
        # the fail-over waits for the switch to be ready: it is under way, not run yet
        assert c.background_tasks() == ["NfLifecycle._fail_over"]
        assert [e.kind for e in c.timeline.since(0)] == ["nf_down"]
        assert f"NF {dead}" in c.timeline.since(0)[0].text
        c.tasks.cancel()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.gather(*others, return_exceptions=True)
        assert c.background_tasks() == []

    asyncio.run(body())


def test_a_standby_records_a_down_event_but_does_not_act_on_it() -> None:
    async def body() -> None:
        c, registry = _controller(primary=False)
        dead = min(c.pairs)
        c.state.nfs.holds_state([dead])
        registry.nfs[dead].declared_down = True
        await registry.emit(NfEvent("down", dead, 3))
        assert c.background_tasks() == []
        assert [e.kind for e in c.timeline.since(0)] == ["nf_down"]

    asyncio.run(body())
