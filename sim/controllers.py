"""A simulated `nfc-controller` process: the real `Controller`, elected by the real `Leadership`
and run by the real `lead_then_run` (controlplane/__main__.py), on its own node of the simulated
network, with its etcd client (`sim.etcd`), its switch session (`sim.switch.SimSession`) and its
NF registry (`sim.nf.SimRegistry`).

Two processes run in every simulation: one leads, the other stands by and campaigns. A process
that is killed (SIGKILL: its tasks end at their next step, nothing more of it reaches etcd, the
switch or an NF) or that stops because it lost its lease is started again as a new process (a
standby) by the run, as a supervisor would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from controlplane.__main__ import lead_then_run
from controlplane.config import ControllerConfig
from controlplane.controller import Controller
from controlplane.leader import Leadership
from sim.etcd import SimEtcd
from sim.network import SimNet
from sim.nf import SimNf, SimRegistry
from sim.switch import SimSession, SwitchModel

ELECTION_BASE = 10


class SimController:
    """One controller process slot (`name`), restarted as a new `Controller` each time."""

    def __init__(self, name: str, cfg: ControllerConfig, net: SimNet, nfs: dict[int, SimNf],
                 switch: SwitchModel, etcd: SimEtcd, lose_reply: Callable[[int, str], str],
                 step: Callable[[str, str], None],
                 on_exit: Callable[[SimController], None] = lambda c: None) -> None:
        self.name, self.cfg, self.net, self.nfs = name, cfg, net, nfs
        self.on_exit = on_exit  # (the supervisor: starts it again)
        self.switch, self.etcd, self.lose_reply, self.step = switch, etcd, lose_reply, step
        self.ctl: Controller | None = None
        self.session: SimSession | None = None
        self.leadership: Leadership | None = None
        self.task: asyncio.Task[Any] | None = None
        self.incarnation = 0
        self.exit_status: int | None = None
        self.history: list[Controller] = []  # every incarnation's controller (their counts)

    @property
    def alive(self) -> bool:
        node = self.net.nodes.get(self.name)
        return node is not None and node.alive

    def start(self) -> None:
        """Start (again) as a new process: it campaigns, then leads until it dies or loses its
        lease."""
        if self.incarnation:
            self.net.revive(self.name)
        self.incarnation += 1
        self.exit_status = None
        cfg = self.cfg

        def session_of(on_primary: Callable[[Any], Awaitable[None]]) -> SimSession:
            return SimSession(self.switch, lambda nf: cfg.nf(nf).port, alive=lambda: self.alive,
                              node=self.name, on_primary=on_primary)

        registry = SimRegistry(cfg, self.net, self.nfs, self.lose_reply, node=self.name,
                               step=self.step)
        # (the controller builds its session with its callback, and adds its listeners to the
        # registry it is given)
        ctl = Controller(cfg, use_etcd=True, session_factory=session_of,  # type: ignore[arg-type]
                         registry=registry, etcd_client=self.etcd.client(self.name))
        session = ctl.session
        assert isinstance(session, SimSession)
        lead = Leadership(cfg.etcd.endpoints, cfg.etcd.prefix, self.name, cfg.etcd.leader_ttl_s,
                          client=self.etcd.client(self.name))
        ctl.leadership = lead
        self.ctl, self.session, self.leadership = ctl, session, lead
        self.history.append(ctl)
        self.task = self.net.spawn(self.name, self._main(ctl, lead))

    async def _main(self, ctl: Controller, lead: Leadership) -> None:
        status = await lead_then_run(ctl, lead, ELECTION_BASE)
        self.exit_status = status
        self.on_exit(self)
        self.kill()  # (the process exits: lost leadership, crash-only)

    def kill(self) -> None:
        """SIGKILL: the switch sees its stream close; etcd and the NFs hear nothing more."""
        self.net.kill(self.name)
        if self.session is not None:
            self.switch.disconnect(self.session)

    @property
    def leading(self) -> bool:
        """Elected, alive, and the switch's primary with its entries reconciled."""
        ctl = self.ctl
        return (self.alive and ctl is not None and self.leadership is not None
                and self.leadership.term is not None and ctl.switch_ready.is_set()
                and ctl.session.is_primary)
