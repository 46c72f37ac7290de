"""The simulated network and processes: who is running, who can reach whom, and byte streams
between them with seeded delays.

Each simulated process (an NF, the controller) is a *node*. Code runs "on" a node when the
context variable `CURRENT` names it: a node's tasks are created in its context (they inherit it),
and everything delivered to it (bytes, RPCs, frames) is scheduled in its context. That is how
the network knows who is calling `open_connection`, and which tasks to cancel when a node is
killed.

Streams are the real `asyncio.StreamReader`/`StreamWriter` over an in-memory transport
(`SimTransport`), so the replication code (`nf_host.replication`) runs unchanged behind its
transport seam (`nf_host.replication.TRANSPORT`). Delivery is in order per stream, after a delay
drawn from the run's seeded generator.

Faults a node can suffer:

* `kill`: the process dies. Its tasks are cancelled, its streams end without a goodbye (the peers
  read EOF, as after a crash), and nothing more of it reaches anyone.
* `hang` / `resume`: the process stops (SIGSTOP) and later continues. While hung, what is sent
  to it waits, and what it sends waits too (released on resume, in order): a resumed NF is a
  *zombie* that acts on an old view until it learns better.
* `cut` / `heal`: the management link between two nodes drops everything (TCP retransmits:
  bytes in flight arrive after the heal; new connections time out meanwhile).
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("sim_node", default="")

CONNECT_TIMEOUT = 1.0
"""Seconds a connection attempt to an unreachable (cut or hung) node takes to fail."""


class Unreachable(OSError):
    """A connection or call that cannot reach its destination."""


@dataclass
class Node:
    """One simulated process."""

    name: str
    alive: bool = True
    hung: bool = False
    context: contextvars.Context = field(default_factory=contextvars.copy_context)
    # (dicts, not sets: iterated in insertion order, never in the order of object addresses,
    # which differ from run to run and would make a seed's replay differ)
    tasks: dict[asyncio.Task[Any], None] = field(default_factory=dict)
    transports: dict[SimTransport, None] = field(default_factory=dict)
    held_in: list[Callable[[], None]] = field(default_factory=list)   # deliveries while hung
    held_out: list[Callable[[], None]] = field(default_factory=list)  # sends while hung

    def __post_init__(self) -> None:
        self.context.run(CURRENT.set, self.name)


class SimTransport(asyncio.Transport):
    """One direction's sender of an in-memory stream (see the module docstring)."""

    def __init__(self, net: SimNet, src: str, dst: str, peer: asyncio.StreamReaderProtocol,
                 peername: tuple[str, int]) -> None:
        super().__init__()
        self.net, self.src, self.dst, self.peer = net, src, dst, peer
        self.peername = peername
        self.closing = False
        self.local: asyncio.StreamReaderProtocol | None = None  # our own side's protocol
        self.other: SimTransport | None = None  # the reverse direction
        self._last = 0.0  # when the last byte we sent is delivered (order per stream)
        self._pending: dict[asyncio.TimerHandle, None] = {}

    # -- asyncio.Transport --------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closing or not data:
            return
        chunk = bytes(data)
        self.net.send(self.src, lambda: self._deliver(chunk))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        """An orderly close: what was written arrives, then EOF."""
        if self.closing:
            return
        self.closing = True
        self.net.send(self.src, lambda: self._deliver(None))
        self._local_lost()

    def abort(self) -> None:
        """A reset: nothing more arrives; the peer sees its connection end."""
        if self.closing:
            return
        self.closing = True
        for h in self._pending:
            h.cancel()
        self._pending.clear()
        self._deliver(None, now=True)
        self._local_lost()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peername if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    # -- delivery -----------------------------------------------------------------------------
    def _deliver(self, data: bytes | None, now: bool = False) -> None:
        loop = asyncio.get_running_loop()
        if not now:
            at = max(self._last + 1e-9, loop.time() + self.net.delay())  # (in order: see PortQueue)
            self._last = at
        else:
            at = loop.time()

        def arrive(handle: list[asyncio.TimerHandle]) -> None:
            self._pending.pop(handle[0], None)
            self.net.deliver(self.src, self.dst, lambda: self._arrive(data), always=data is None)

        box: list[asyncio.TimerHandle] = []
        box.append(loop.call_at(at, arrive, box))
        self._pending[box[0]] = None

    def _arrive(self, data: bytes | None) -> None:
        if data is None:
            self.peer.eof_received()
            self.peer.connection_lost(None)
            self.net.forget(self)
        else:
            self.peer.data_received(data)

    def _local_lost(self) -> None:
        local = self.local
        if local is not None:
            asyncio.get_running_loop().call_soon(local.connection_lost, None)
            self.local = None


@dataclass
class _Listener:
    node: str
    callback: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
    host: str
    port: int


class SimServer:
    """What `start_server` returns: closes its listener."""

    def __init__(self, net: SimNet, key: tuple[str, int]) -> None:
        self.net, self.key = net, key

    def close(self) -> None:
        self.net.listeners.pop(self.key, None)

    async def wait_closed(self) -> None:
        return None


class SimNet:
    """Nodes, listeners and links of one simulated run."""

    def __init__(self, rng: random.Random, delay: tuple[float, float] = (0.0002, 0.002)) -> None:
        self.rng = rng
        self.delay_range = delay
        self.nodes: dict[str, Node] = {}
        self.listeners: dict[tuple[str, int], _Listener] = {}
        self.cuts: dict[frozenset[str], None] = {}  # (ordered: see Node)
        self.held_cut: dict[frozenset[str], list[Callable[[], None]]] = {}
        self.dropped = 0  # deliveries to dead nodes

    # -- nodes --------------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        if name not in self.nodes:
            self.nodes[name] = Node(name)
        return self.nodes[name]

    def spawn(self, name: str, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """Start `coro` as a task of node `name` (its context, cancelled when it is killed)."""
        node = self.node(name)
        task: asyncio.Task[Any] = node.context.run(asyncio.ensure_future, coro)
        return task

    def track(self, task: asyncio.Task[Any], context: contextvars.Context | None = None) -> None:
        """The loop's task factory calls this for every task: it belongs to the node of its
        context (given, else the current one)."""
        name = context.get(CURRENT, "") if context is not None else CURRENT.get()
        if name and name in self.nodes:
            node = self.nodes[name]
            node.tasks[task] = None
            task.add_done_callback(lambda t: node.tasks.pop(t, None))

    def call(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` now, on node `name`."""
        return self.node(name).context.run(fn, *args)

    def kill(self, name: str) -> None:
        node = self.node(name)
        if not node.alive:
            return
        node.alive, node.hung = False, False
        node.held_in.clear()
        node.held_out.clear()
        for key in [k for k, v in self.listeners.items() if v.node == name]:
            del self.listeners[key]
        for t in list(node.transports):
            # a crash closes every socket: the peers read EOF (no goodbye was written)
            if t.src == name:
                t.abort()
            elif t.other is not None:
                t.other.abort()
        for task in list(node.tasks):
            task.cancel()

    def revive(self, name: str) -> Node:
        """A fresh process under the same name (a restart): a new context, nothing carried over."""
        self.nodes[name] = Node(name)
        return self.nodes[name]

    def hang(self, name: str) -> None:
        self.node(name).hung = True

    def resume(self, name: str) -> None:
        node = self.node(name)
        if not node.alive or not node.hung:
            return
        node.hung = False
        held_out, node.held_out = node.held_out, []
        held_in, node.held_in = node.held_in, []
        for fn in held_out + held_in:
            node.context.run(fn)

    def cut(self, a: str, b: str) -> None:
        self.cuts[frozenset((a, b))] = None

    def heal(self, a: str, b: str) -> None:
        key = frozenset((a, b))
        self.cuts.pop(key, None)
        for fn in self.held_cut.pop(key, []):
            fn()

    def reachable(self, a: str, b: str) -> bool:
        nb = self.nodes.get(b)
        return (nb is not None and nb.alive and not nb.hung
                and frozenset((a, b)) not in self.cuts)

    def delay(self) -> float:
        lo, hi = self.delay_range
        return self.rng.uniform(lo, hi)

    # -- sending and delivering ---------------------------------------------------------------
    def send(self, src: str, fn: Callable[[], None]) -> None:
        """`fn` sends something from `src`: now, later if `src` is hung, never if it is dead."""
        node = self.nodes.get(src)
        if node is None or not node.alive:
            return
        if node.hung:
            node.held_out.append(fn)
            return
        fn()

    def deliver(self, src: str, dst: str, fn: Callable[[], None], always: bool = False) -> None:
        """`fn` takes effect on `dst`: now, after a heal if the link is cut, after a resume if
        `dst` is hung; dropped (counted) if `dst` is dead."""
        node = self.nodes.get(dst)
        if node is None or not node.alive:
            self.dropped += 1
            if always:
                fn()  # (an EOF still ends the dead side's reader: no one reads it)
            return
        key = frozenset((src, dst))
        if key in self.cuts:
            self.held_cut.setdefault(key, []).append(lambda: self.deliver(src, dst, fn, always))
            return
        if node.hung:
            node.held_in.append(fn)
            return
        node.context.run(fn)

    def forget(self, t: SimTransport) -> None:
        for name in (t.src, t.dst):
            node = self.nodes.get(name)
            if node is not None:
                node.transports.pop(t, None)

    # -- the transport seam of nf_host.replication ---------------------------------------------
    async def start_server(
        self, callback: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        host: str, port: int,
    ) -> SimServer:
        name = CURRENT.get()
        key = (host, port)
        if key in self.listeners:
            raise OSError(f"address {host}:{port} already in use")
        self.listeners[key] = _Listener(name, callback, host, port)
        return SimServer(self, key)

    async def open_connection(self, host: str, port: int) -> tuple[asyncio.StreamReader,
                                                                   asyncio.StreamWriter]:
        src = CURRENT.get()
        lst = self.listeners.get((host, port))
        await asyncio.sleep(self.delay())
        if lst is None:
            raise ConnectionRefusedError(f"nothing listens on {host}:{port}")
        if not self.reachable(src, lst.node):
            await asyncio.sleep(CONNECT_TIMEOUT)
            raise Unreachable(f"{host}:{port} did not answer")
        loop = asyncio.get_running_loop()
        c_reader, s_reader = asyncio.StreamReader(), asyncio.StreamReader()
        c_proto = asyncio.StreamReaderProtocol(c_reader)
        s_proto = asyncio.StreamReaderProtocol(s_reader)
        to_server = SimTransport(self, src, lst.node, s_proto, (host, port))
        # the client's address as a real server sees it: its node's host (where it listens), so
        # the replication server's peer policy checks hosts as it does on a real network
        host_of_src = next((h for (h, _p), other in self.listeners.items() if other.node == src),
                           "client:" + src)
        to_client = SimTransport(self, lst.node, src, c_proto, (host_of_src, 0))
        to_server.other, to_client.other = to_client, to_server
        to_server.local, to_client.local = c_proto, s_proto
        c_proto.connection_made(to_server)
        for t in (to_server, to_client):
            self.node(t.src).transports[t] = None
            self.node(t.dst).transports[t] = None
        c_writer = asyncio.StreamWriter(to_server, c_proto, c_reader, loop)

        def accept() -> None:
            s_proto.connection_made(to_client)
            s_writer = asyncio.StreamWriter(to_client, s_proto, s_reader, loop)
            task = asyncio.ensure_future(lst.callback(s_reader, s_writer))
            node = self.node(lst.node)
            node.tasks[task] = None
            task.add_done_callback(lambda t: node.tasks.pop(t, None))

        self.deliver(src, lst.node, accept)
        return c_reader, c_writer
