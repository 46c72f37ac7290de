"""Every engine test of tests/p4sim runs on both engines: the Python engine (the reference) and
the native one (the program compiled to C). ``p4sim_engine`` (module-scoped, so module-scoped
switches are built once per engine) sets ``P4SIM_ENGINE``, the engine `load_switch` uses when
none is named; `tests.p4sim.harness.load` skips a native run whose program falls back to the
Python engine, with the reason. The server tests (tests/p4sim/server) run once, on the default
engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

ENGINES = ["python", "native"]


@pytest.fixture(params=ENGINES, autouse=True, scope="module")
def p4sim_engine(request: pytest.FixtureRequest) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("P4SIM_ENGINE", request.param)
        yield request.param
