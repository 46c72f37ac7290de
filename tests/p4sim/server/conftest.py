"""Fixtures of the P4Runtime server tests: an in-process server on a free loopback port."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from finsy import pbutil
from finsy.proto import U128, p4i, p4r, p4r_grpc

from p4sim.server.device import Device, EngineFactory
from p4sim.server.service import Server, serve
from tests.p4sim.server.entity_builders import enc
from tests.p4sim.server.fake_switch import DEVICE_CONFIG, FakeSwitch, load_p4info
from tests.p4sim.server.netns import VethTopology
from tests.p4sim.server.p4rt_client import StreamClient
from tests.support.procs import free_port

COMMIT = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT


@dataclass
class Harness:
    """A running server, a channel and stub to it, and helpers for the usual first steps."""

    server: Server
    channel: grpc.Channel
    stub: p4r_grpc.P4RuntimeStub
    streams: list[StreamClient] = field(default_factory=list)
    p4info: p4i.P4Info = field(default_factory=load_p4info)
    device_config: bytes = DEVICE_CONFIG

    @property
    def device(self) -> Device:
        return self.server.device

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def stream(self, election_id: int | None, role: str = "") -> StreamClient:
        s = StreamClient(self.channel)
        self.streams.append(s)
        s.arbitrate(election_id, role=role)
        return s

    def push(
        self,
        election_id: int,
        config: bytes | None = None,
        action: p4r.SetForwardingPipelineConfigRequest.Action.ValueType = COMMIT,
    ) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(device_id=1, action=action)
        req.election_id.CopyFrom(U128.encode(election_id))
        req.config.p4info.CopyFrom(self.p4info)
        req.config.p4_device_config = self.device_config if config is None else config
        req.config.cookie.cookie = 0xC00C1E
        self.stub.SetForwardingPipelineConfig(req)

    def write(
        self,
        election_id: int,
        *updates: p4r.Update,
        atomicity: p4r.WriteRequest.Atomicity.ValueType = p4r.WriteRequest.CONTINUE_ON_ERROR,
    ) -> None:
        req = p4r.WriteRequest(device_id=1, updates=list(updates), atomicity=atomicity)
        req.election_id.CopyFrom(U128.encode(election_id))
        self.stub.Write(req)

    def read(self, *entities: p4r.Entity) -> list[p4r.Entity]:
        out: list[p4r.Entity] = []
        for resp in self.stub.Read(p4r.ReadRequest(device_id=1, entities=list(entities))):
            out.extend(resp.entities)
        return out


def start_harness(
    engine_factory: EngineFactory = FakeSwitch.factory, program: RealProgram | None = None
) -> Harness:
    device = Device(device_id=1, cpu_port=510, engine_factory=engine_factory)
    server = serve(device, f"127.0.0.1:{free_port()}")
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    h = Harness(server, channel, p4r_grpc.P4RuntimeStub(channel))
    if program is not None:
        h.p4info, h.device_config = program.p4info, program.device_config
    return h


def stop_harness(h: Harness) -> None:
    for s in h.streams:
        s.close()
    h.channel.close()
    h.server.stop(0)


@pytest.fixture
def harness() -> Iterator[Harness]:
    """A server with the fake engine, no pipeline, no controller."""
    h = start_harness()
    yield h
    stop_harness(h)


@pytest.fixture
def primary(harness: Harness) -> Iterator[tuple[Harness, StreamClient]]:
    """The fake pipeline pushed by a primary controller with election id 10."""
    s = harness.stream(10)
    assert s.receive("arbitration").arbitration.status.code == 0
    harness.push(10)
    yield harness, s


# ----------------------------------------------------------------------------- the real engine
PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "ipv4_forward.p4"


@dataclass
class RealProgram:
    """tests/p4sim/programs/ipv4_forward.p4 compiled by the engine, and its files on disk."""

    p4info: p4i.P4Info
    device_config: bytes
    p4info_path: Path
    device_config_path: Path

    def id_of(self, kind: str, suffix: str) -> int:
        """The id of the P4Info object of `kind` (tables, actions, counters...) named *suffix."""
        for obj in getattr(self.p4info, kind):
            if obj.preamble.name == suffix or obj.preamble.name.endswith("." + suffix):
                return int(obj.preamble.id)
        raise KeyError(f"{kind} {suffix}")

    def action(self, name: str, **params: int) -> p4r.Action:
        """A call of action *name with its parameters given by name."""
        aid = self.id_of("actions", name)
        [info] = [a for a in self.p4info.actions if a.preamble.id == aid]
        by_name = {pi.name: pi.id for pi in info.params}
        return p4r.Action(
            action_id=aid,
            params=[p4r.Action.Param(param_id=by_name[k], value=enc(v)) for k, v in params.items()],
        )

    def route(self, prefix: int, plen: int, action: str, **params: int) -> p4r.TableEntry:
        """An ipv4_lpm entry: `prefix/plen` -> `action(**params)`."""
        table_id = self.id_of("tables", "ipv4_lpm")
        [table] = [t for t in self.p4info.tables if t.preamble.id == table_id]
        te = p4r.TableEntry(
            table_id=table_id,
            match=[
                p4r.FieldMatch(
                    field_id=table.match_fields[0].id,
                    lpm=p4r.FieldMatch.LPM(value=enc(prefix), prefix_len=plen),
                )
            ],
        )
        te.action.action.CopyFrom(self.action(action, **params))
        return te

    def name_of(self, kind: str, suffix: str) -> str:
        for obj in getattr(self.p4info, kind):
            if obj.preamble.name == suffix or obj.preamble.name.endswith("." + suffix):
                return str(obj.preamble.name)
        raise KeyError(f"{kind} {suffix}")


@pytest.fixture(scope="session")
def real_program(tmp_path_factory: pytest.TempPathFactory) -> RealProgram:
    from p4sim.runtime.engine_loader import load_switch

    sw = load_switch(str(PROGRAM), cpu_port=510)
    d = tmp_path_factory.mktemp("ipv4_forward")
    info_path, cfg_path = d / "p4info.txtpb", d / "device_config.bin"
    info_path.write_text(pbutil.to_text(sw.p4info))
    cfg = sw.device_config()
    cfg_path.write_bytes(cfg)
    return RealProgram(sw.p4info, cfg, info_path, cfg_path)


@contextmanager
def pushed_program(program: Path, tmp_path: Path) -> Iterator[tuple[Harness, RealProgram]]:
    """A server on the real engine with `program` (a test program, its includes beside it)
    compiled and pushed by a primary (election id 10)."""
    from p4sim.runtime.engine_loader import load_switch
    from p4sim.server.device import real_engine

    sw = load_switch(str(program), [str(program.parent / "include")], cpu_port=510)
    prog = RealProgram(sw.p4info, sw.device_config(), tmp_path / "p4info", tmp_path / "cfg")
    h = start_harness(real_engine, prog)
    try:
        s = h.stream(10)
        assert s.receive("arbitration").arbitration.status.code == 0
        h.push(10)
        yield h, prog
    finally:
        stop_harness(h)


@pytest.fixture
def real(real_program: RealProgram) -> Iterator[tuple[Harness, StreamClient, RealProgram]]:
    """A server on the real engine with ipv4_forward.p4 pushed by a primary (election id 10)."""
    from p4sim.server.device import real_engine

    h = start_harness(real_engine, real_program)
    s = h.stream(10)
    assert s.receive("arbitration").arbitration.status.code == 0
    h.push(10)
    yield h, s, real_program
    stop_harness(h)


@pytest.fixture
def p4sim_engine() -> str:
    """The server tests run once, on the default engine (the parent conftest runs the engine
    tests on both)."""
    return "default"


@pytest.fixture
def topo() -> Iterator[VethTopology]:
    """Two hosts, each in a network namespace of its own, wired by veth pairs to interfaces a
    `p4sim run` process attaches to (root); removed afterwards."""
    t = VethTopology.create(2)
    yield t
    t.teardown()


@pytest.fixture
def veth() -> Iterator[tuple[str, str]]:
    """A veth pair in the root namespace, both ends up, for tests of p4sim's ports on one end
    (the other end sends); removed afterwards."""
    a, b = f"p4va{os.getpid() % 100000}", f"p4vb{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    for dev in (a, b):
        subprocess.run(["ip", "link", "set", dev, "up"], check=True)
    try:
        yield a, b
    finally:
        subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)
