"""The hand-off's switch entries: the P4Runtime writes of each step of a hand-off, by name.

A connection (client C, frontend F) handed to backend B is two handoff_conn entries (docs/prism.md):
    forward  key (C, F, c_port, f_port): handoff_lock, or handoff_to_backend(B)
    return   key (B, C, b_port, c_port): handoff_to_client (source back to F)
and the steps, each ONE P4Runtime Write (a batch; P4Runtime may apply a Write's updates in any
order, so a step never depends on an order inside it):
    begin    +forward(lock), +return        the old owner may now dump: nothing reaches it
    commit   ~forward(to_backend B)          the new owner has restored: let the client in
    lock     ~forward(lock)                  a hand-back begins (the backend will dump)
    release  -forward, -return               the connection is the frontend's again
    handover -return(previous), +return      a handed-back connection goes straight to the next
                                             backend; the forward entry stays locked
Names resolve by suffix through the P4Info (controlplane.p4names), as the controller's do.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finsy import P4Schema, P4TableAction, P4TableEntry, P4TableMatch

from controlplane.p4names import P4Names, TableNames

ROLE_EDGE = 1
STEPS = ("begin", "commit", "lock", "release", "handover")


@dataclass(frozen=True)
class HostPort:
    """A Prism host as the switch sees it: its address, MAC and switch port."""

    addr: str
    mac: str
    port: int


@dataclass(frozen=True)
class Endpoint:
    addr: str
    port: int

    @classmethod
    def parse(cls, value: Any) -> Endpoint:
        addr, port = value
        ipaddress.IPv4Address(addr)
        if not 0 < int(port) < 65536:
            raise ValueError(f"bad port {port}")
        return cls(str(addr), int(port))


@dataclass(frozen=True)
class HandOffStep:
    """One step of one connection's hand-off: client, frontend, backend (addr, port) each, and
    for a `handover` the backend it comes from (`previous`)."""

    step: str
    client: Endpoint
    frontend: Endpoint
    backend: Endpoint
    previous: Endpoint | None = None

    def __post_init__(self) -> None:
        if (self.step == "handover") != (self.previous is not None):
            raise ValueError("a handover, and only a handover, names its previous backend")

    @classmethod
    def parse(cls, data: Any) -> HandOffStep:
        step = str(data["step"])
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r} (one of {', '.join(STEPS)})")
        previous = Endpoint.parse(data["previous"]) if "previous" in data else None
        return cls(step, Endpoint.parse(data["client"]), Endpoint.parse(data["frontend"]),
                   Endpoint.parse(data["backend"]), previous)

    def as_json(self) -> dict[str, Any]:
        out = {"step": self.step, "client": [self.client.addr, self.client.port],
               "frontend": [self.frontend.addr, self.frontend.port],
               "backend": [self.backend.addr, self.backend.port]}
        if self.previous is not None:
            out["previous"] = [self.previous.addr, self.previous.port]
        return out


def load_hosts(path: Path) -> dict[str, HostPort]:
    """{addr: HostPort} from a JSON file {"name": {"addr", "mac", "port"}, ...} (the one
    prism.testbed writes)."""
    data = json.loads(path.read_text())
    return {h["addr"]: HostPort(h["addr"], h["mac"], int(h["port"])) for h in data.values()}


def _ip(addr: str) -> int:
    return int(ipaddress.IPv4Address(addr))


def _mac(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


class HandOffEntries:
    """Builds the entries of each step for hosts known by address."""

    def __init__(self, schema: P4Schema, hosts: dict[str, HostPort]) -> None:
        names = P4Names(schema)
        key = ["src_addr", "dst_addr", "src_port", "dst_port"]
        self.hosts = hosts
        self.to_backend_t = names.table_action("handoff_conn", key, "handoff_to_backend",
                                               ["port", "dst_mac", "dst_addr", "dst_port"])
        self.to_client_t = names.table_action("handoff_conn", key, "handoff_to_client",
                                              ["port", "dst_mac", "src_addr", "src_port"])
        self.lock_t = names.table_action("handoff_conn", key, "handoff_lock", [])
        self.route_t = names.table_action("handoff_route", ["dst_addr"], "handoff_forward",
                                          ["port", "dst_mac"])
        self.role_t = names.table_action("port_role", ["port"], "set_port_role", ["role"])

    def host(self, addr: str) -> HostPort:
        try:
            return self.hosts[addr]
        except KeyError:
            raise ValueError(f"{addr} is not a Prism host") from None

    @staticmethod
    def _match(t: TableNames, src: Endpoint, dst: Endpoint) -> P4TableMatch:
        f = t.fields
        return P4TableMatch({f["src_addr"]: _ip(src.addr), f["dst_addr"]: _ip(dst.addr),
                             f["src_port"]: src.port, f["dst_port"]: dst.port})

    def forward(self, s: HandOffStep, locked: bool) -> P4TableEntry:
        t = self.lock_t if locked else self.to_backend_t
        match = self._match(t, s.client, s.frontend)
        if locked:
            return P4TableEntry(t.table, match=match, action=P4TableAction(t.action))
        b = self.host(s.backend.addr)
        p = t.params
        return P4TableEntry(t.table, match=match, action=P4TableAction(
            t.action, **{p["port"]: b.port, p["dst_mac"]: _mac(b.mac),
                         p["dst_addr"]: _ip(b.addr), p["dst_port"]: s.backend.port}))

    def ret(self, s: HandOffStep) -> P4TableEntry:
        t = self.to_client_t
        c = self.host(s.client.addr)
        p = t.params
        return P4TableEntry(t.table, match=self._match(t, s.backend, s.client), action=P4TableAction(
            t.action, **{p["port"]: c.port, p["dst_mac"]: _mac(c.mac),
                         p["src_addr"]: _ip(s.frontend.addr), p["src_port"]: s.frontend.port}))

    def key_only(self, entry: P4TableEntry) -> P4TableEntry:
        return P4TableEntry(entry.table_id, match=entry.match)

    def updates(self, s: HandOffStep) -> list[P4TableEntry]:
        """The step's updates (finsy's +insert, ~modify, -delete)."""
        if s.step == "begin":
            return [+self.forward(s, locked=True), +self.ret(s)]
        if s.step == "commit":
            return [~self.forward(s, locked=False)]
        if s.step == "lock":
            return [~self.forward(s, locked=True)]
        if s.step == "handover":
            assert s.previous is not None
            old = HandOffStep("release", s.client, s.frontend, s.previous)
            return [-self.key_only(self.ret(old)), +self.ret(s)]
        return [-self.key_only(self.forward(s, locked=True)), -self.key_only(self.ret(s))]

    def routes(self) -> list[P4TableEntry]:
        """A /32 handoff_route entry to every host (entries, not updates)."""
        t = self.route_t
        return [P4TableEntry(t.table, match=P4TableMatch({t.fields["dst_addr"]: f"{h.addr}/32"}),
                             action=P4TableAction(t.action, **{t.params["port"]: h.port,
                                                               t.params["dst_mac"]: _mac(h.mac)}))
                for h in self.hosts.values()]

    def setup(self) -> list[P4TableEntry]:
        """Every host's port as an edge port, and a /32 route to every host."""
        out: list[P4TableEntry] = []
        r = self.role_t
        for h in self.hosts.values():
            out.append(+P4TableEntry(r.table, match=P4TableMatch({r.fields["port"]: h.port}),
                                     action=P4TableAction(r.action, **{r.params["role"]: ROLE_EDGE})))
        return out + [+e for e in self.routes()]
