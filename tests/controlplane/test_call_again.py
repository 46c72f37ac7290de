"""`NfRegistry.call_again`: an idempotent call whose reply is lost is asked again, not taken as
done or as failed (the simulation's seeds 18 and 68); an NF's own refusal ends it at once, and
so does the NF being declared down."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.nf_registry import NfControlError, NfRegistry
from sim.system import config

pytestmark = pytest.mark.unit


class Scripted(NfRegistry):
    """A registry whose calls answer from a script: an exception to raise, or a reply."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(config(3))
        self.script = script
        self.calls: list[float] = []

    async def _call(self, nf_id: int, name: str, request: Any, timeout: float = 2.0) -> Any:
        self.calls.append(timeout)
        step = self.script.pop(0)
        if step == "silent":
            await asyncio.sleep(timeout)
            raise NfControlError(nf_id, name, "DEADLINE_EXCEEDED")
        if isinstance(step, BaseException):
            raise step
        return step


def run(reg: Scripted, total: float = 5.0) -> Any:
    return asyncio.run(reg.call_again(1, "Release", None, attempt=0.05, total=total))


def test_an_unanswered_call_is_asked_again_until_it_is_answered() -> None:
    reg = Scripted([NfControlError(1, "Release", "UNAVAILABLE: connection reset"), "silent",
                    "the answer"])
    assert run(reg) == "the answer"
    assert len(reg.calls) == 3 and all(t <= 0.05 for t in reg.calls)


def test_an_answer_that_refuses_ends_it_at_once() -> None:
    reg = Scripted([NfControlError(1, "Release", "the slot stays owned here"), "never asked"])
    with pytest.raises(NfControlError, match="stays owned"):
        run(reg)
    assert len(reg.calls) == 1


def test_it_gives_up_at_its_total_and_when_the_nf_is_declared_down() -> None:
    reg = Scripted(["silent"] * 100)
    with pytest.raises(NfControlError, match="DEADLINE"):
        run(reg, total=0.2)
    assert 3 <= len(reg.calls) <= 5
    down = Scripted(["silent"] * 100)
    down.nfs[1].declared_down = True
    with pytest.raises(NfControlError):
        run(down)
    assert len(down.calls) == 1


def test_a_slow_nf_declared_down_is_asked_again_when_told_so_a_dead_one_is_not() -> None:
    """`slow_while_down` (a `Promote`): an NF declared down whose attempts time out is only
    slow (starved: it may be carrying the call out) and is asked again; one whose connection
    fails is dead, and the call gives up at once as before."""
    slow = Scripted(["silent", "silent", "the answer"])
    slow.nfs[1].declared_down = True
    assert asyncio.run(slow.call_again(1, "Promote", None, attempt=0.05, total=5.0,
                                       slow_while_down=True)) == "the answer"
    assert len(slow.calls) == 3
    dead = Scripted([NfControlError(1, "Promote", "UNAVAILABLE: connection refused"), "never"])
    dead.nfs[1].declared_down = True
    with pytest.raises(NfControlError, match="UNAVAILABLE"):
        asyncio.run(dead.call_again(1, "Promote", None, attempt=0.05, total=5.0,
                                    slow_while_down=True))
    assert len(dead.calls) == 1


def test_a_call_made_moot_is_not_asked_again() -> None:
    """`moot` (a `Release` whose adopter was declared down meanwhile: the fence decides, the
    move lock is not held for the old owner's timeouts; simulation `ADOPTER_KILLS` seed 11)."""
    gone = False
    reg = Scripted(["silent", "silent", "the answer"])

    async def body() -> Any:
        nonlocal gone
        call = asyncio.ensure_future(reg.call_again(1, "Release", None, attempt=0.05, total=5.0,
                                                    moot=lambda: gone))
        await asyncio.sleep(0.01)
        gone = True  # (the adopter is declared down during the first attempt)
        return await call

    with pytest.raises(NfControlError, match="DEADLINE"):
        asyncio.run(body())
    assert len(reg.calls) == 1
    # not moot: asked again until answered, as before
    assert asyncio.run(Scripted(["silent", "the answer"]).call_again(
        1, "Release", None, attempt=0.05, total=5.0, moot=lambda: False)) == "the answer"
