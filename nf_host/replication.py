"""The replication channel between NF runtimes: msgpack messages in length-prefixed TCP frames.

One TCP connection per (sending worker, destination NF) carries everything a worker sends to
another NF, in order: batch deltas (to the backup, which must acknowledge before output is
released, and to cluster peers, asynchronously), slot transfers of a move, and packets forwarded
after a release. Because it is one ordered stream, a transfer always arrives after every delta
sent before it, which is what makes "ship only the delta since the acknowledged version" safe.
`docs/nf_host.md` records why framed TCP was chosen over a gRPC stream (measured).

Frame: 4-byte big-endian length, then a msgpack map; the messages and their one codec are
`contract.replication`'s (hello first on every connection: who is sending; with `watch`, nothing
else follows but a goodbye: nf_host.death_watch). Messages over `CHUNK` bytes leave in fragments
(nf_host.chunked).
The newest connection from a known sender that ends without its goodbye (end of stream or
reset) means the sending process died or lost its socket: the server tells `on_lost(sender)`, which is how a
backup armed for it takes over without waiting for the controller (docs/protocols.md §4.3). So
does the end of the newest *watch* from a sender: a connection its `nf-host`'s heartbeat responder
keeps open for that purpose, which closes before the workers' when the host is killed.
What a receiver accepts (senders, slots, frame size, connections) is `nf_host.peer_policy`'s.
Frames larger than the receiver's limit, that do not decode, or whose message the handler cannot apply are
errors: the receiver counts them and closes the connection (never skips the message: a later
cumulative ack would acknowledge it); it never crashes. The sender reconnects and starts over with
a full snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from contract.replication import (
    LEN,
    Ack,
    Bye,
    Fragment,
    Hello,
    Message,
    ProtocolError,
    TransferAck,
    decode,
    encode,
)
from nf_host.chunked import CHUNK, MAX_MESSAGE, FragmentError, Pacer, Reassembly
from nf_host.peer_policy import HELLO_MAX_FRAME, HELLO_TIMEOUT, PeerPolicy, Refused

log = logging.getLogger(__name__)

MAX_FRAME = 64 * 1024 * 1024
MAX_RETRY = 1.0  # the longest wait before a link reconnects (after connections that did not last)
_LEN = LEN

Reply = Message | asyncio.Future[TransferAck] | None
"""A message's answer: now, later (a future, for a transfer: written when it resolves), or none."""
Handler = Callable[[Message], Reply]
Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Listening(Protocol):
    """A server `StreamTransport.start_server` started (an `asyncio.Server`, or the
    simulation's): what the replication server does with it."""

    def close(self) -> None: ...


class StreamTransport(Protocol):
    """How the channel opens its byte streams: asyncio's TCP by default; the deterministic
    simulation (`sim.network.SimNet`) puts in-memory streams with seeded delays in its place."""

    async def start_server(self, callback: Accept, host: str, port: int) -> Listening: ...

    async def open_connection(self, host: str, port: int) -> tuple[asyncio.StreamReader,
                                                                   asyncio.StreamWriter]: ...


class _Tcp:
    async def start_server(self, callback: Accept, host: str, port: int) -> asyncio.Server:
        return await asyncio.start_server(callback, host, port)

    async def open_connection(self, host: str, port: int) -> tuple[asyncio.StreamReader,
                                                                   asyncio.StreamWriter]:
        return await asyncio.open_connection(host, port)


TCP: StreamTransport = _Tcp()
TRANSPORT: StreamTransport = TCP
"""The transport every server and link of this process uses (the seam the simulation sets)."""


class StaleSender(Exception):
    """A message the receiver must not acknowledge, now or through a later (cumulative) ack (its
    sender lost the slots it speaks for): the server closes the connection, as for any message
    that cannot be applied."""


BYE_FRAME = encode(Bye())


class FrameTooLarge(ProtocolError):
    """A frame over the receiver's size limit (refused before reading its body)."""


async def read_message(reader: asyncio.StreamReader, max_frame: int = MAX_FRAME) -> Message:
    return (await read_sized(reader, max_frame))[0]


async def read_sized(reader: asyncio.StreamReader, max_frame: int = MAX_FRAME) -> tuple[Message, int]:
    """One message and its size on the wire (length prefix included)."""
    head = await reader.readexactly(_LEN.size)
    (n,) = _LEN.unpack(head)
    if n > max_frame:
        raise FrameTooLarge(f"frame of {n} bytes exceeds {max_frame}")
    return decode(await reader.readexactly(n)), _LEN.size + n


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"replication address {address!r} is not host:port")
    return host.strip("[]"), int(port)


def worker_address(address: str, worker: int) -> str:
    """The replication address of worker `worker` of an NF whose worker 0 listens on `address`."""
    host, port = split_address(address)
    return f"{host}:{port + worker}"


class ReplicationServer:
    """Accepts connections from other NFs' workers; each message goes to `handler`, whose
    answer (if any) is written back on the same connection. With a `policy`
    (`nf_host.peer_policy`), connections start with a hello and are bounded in number, frame size,
    senders and slots; refusals are counted in `policy.refused`."""

    def __init__(self, host: str, port: int, handler: Handler, policy: PeerPolicy | None = None,
                 on_lost: Callable[[int], None] | None = None) -> None:
        self.host, self.port, self.handler = host, port, handler
        self.policy = policy
        self.on_lost = on_lost  # a known sender's connection ended without its goodbye
        self.errors = 0
        # bytes received (frames, length prefix included) by sending NF (0: sender unknown, i.e.
        # no hello) and by message type: what the experiments count as replication overhead
        self.bytes_in: dict[tuple[int, str], int] = {}
        self._server: Listening | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        # each known sender's newest connection. A sender has one connection to us at a time
        # (`Link`), so an older one is obsolete: what still arrives on it is stale (frames
        # retransmitted after a network cut, sent before the sender's newer connection and its
        # snapshot) and is not applied, and its end says nothing about the sender's life
        self._newest: dict[int, asyncio.StreamWriter] = {}
        self.superseded = 0  # older connections closed because the sender connected again
        # each known sender's newest watch (nf_host.death_watch), kept apart from its data
        # connection: a watch never supersedes it, nor the other way round
        self._watchers: dict[int, asyncio.StreamWriter] = {}
        self.watch_losses = 0  # watches that ended without their goodbye

    async def start(self) -> None:
        self._server = await TRANSPORT.start_server(self._serve, self.host, self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        policy = self.policy
        if policy is not None and len(self._conns) >= policy.limits.max_connections:
            policy.refuse("connections", None, f"{len(self._conns)} replication connections "
                                               f"open, the limit is {policy.limits.max_connections}")
            writer.close()
            return
        self._conns.add(writer)
        replies: list[Message] = []
        loop = asyncio.get_running_loop()

        def flush() -> None:
            # runs once the messages already received are handled (the task then waits for more):
            # one write per burst, and of consecutive cumulative acks only the last is needed
            out = [
                encode(m) for i, m in enumerate(replies)
                if not (isinstance(m, Ack) and i + 1 < len(replies)
                        and isinstance(replies[i + 1], Ack))
            ]
            replies.clear()
            if not writer.is_closing():
                writer.write(b"".join(out))

        def send_later(reply: Message) -> None:
            if not writer.is_closing():
                if not replies:
                    loop.call_soon(flush)
                replies.append(reply)

        peer = writer.get_extra_info("peername")
        remote = str(peer[0]) if isinstance(peer, tuple) and peer else None
        sender: int | None = None
        parts = Reassembly(policy.limits.max_message if policy is not None else MAX_MESSAGE)
        try:
            if policy is not None:
                sender, msg, watch = await self._hello(reader, policy, remote)
                limit = policy.limits.max_frame
                if watch and sender is not None:
                    await self._watch(sender, reader, writer)
                    return
                if sender is not None:
                    older = self._newest.get(sender)
                    self._newest[sender] = writer
                    if older is not None:
                        self.superseded += 1
                        older.transport.abort()
            else:
                (msg, size), limit = await read_sized(reader), MAX_FRAME
                self._count(None, msg.T, size)
            while True:
                if msg is None:
                    msg, size = await read_sized(reader, limit)
                    self._count(sender, msg.T, size)
                if isinstance(msg, Fragment):  # a part of a large message (nf_host/chunked.py)
                    body = parts.add(msg)
                    msg = None if body is None else decode(body)
                    if msg is None:
                        continue
                if isinstance(msg, Bye):
                    return  # closed on purpose: not a loss
                if sender is not None and self._newest.get(sender) is not writer:
                    return  # superseded by a newer connection: stale, not applied
                if policy is not None:
                    msg = policy.check(sender, msg)
                    if msg is None:
                        continue
                elif isinstance(msg, Hello):
                    msg = None
                    continue
                try:
                    reply = self.handler(msg)
                except Exception as exc:
                    # a message that cannot be applied must not be skipped: acks are cumulative,
                    # so the next delta's ack would acknowledge this one too (and release its
                    # batch's output). Break the link: the sender reconnects and resynchronises
                    # with a full snapshot, as on any reconnection.
                    self.errors += 1
                    log.warning(
                        "closing replication connection: message %r cannot be applied: %r",
                        msg.T, exc,
                    )
                    break
                msg = None
                if isinstance(reply, asyncio.Future):  # answered later (nf_host.adopt_commit)
                    reply.add_done_callback(lambda f: send_later(f.result()))
                elif reply is not None:
                    if not replies:
                        loop.call_soon(flush)
                    replies.append(reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            if sender is not None and self.on_lost is not None \
                    and self._newest.get(sender) is writer:
                self.on_lost(sender)
        except Refused as exc:
            assert policy is not None
            policy.refuse(exc.reason, sender, f"{exc}; closing the connection from {remote}")
        except FrameTooLarge as exc:
            if policy is None:
                self.errors += 1
            else:
                policy.refuse("frame", sender, f"{exc} (from {remote}, NF {sender}); closing")
        except (ProtocolError, FragmentError) as exc:
            self.errors += 1
            log.warning("closing replication connection: %s", exc)
        finally:
            self._conns.discard(writer)
            if sender is not None and self._newest.get(sender) is writer:
                del self._newest[sender]
            writer.close()

    async def _hello(
        self, reader: asyncio.StreamReader, policy: PeerPolicy, remote: str | None
    ) -> tuple[int | None, Message | None, bool]:
        """Admit a connection: (sender, a first message still to handle, if it was no hello,
        whether it is a watch)."""
        if not policy.limits.known_peers_only:  # a hello is optional: note the sender if any
            msg, size = await read_sized(reader, policy.limits.max_frame)
            if isinstance(msg, Hello):
                sender = policy.admit(msg, remote)
                self._count(sender, Hello.T, size)
                return sender, None, msg.watch
            self._count(None, msg.T, size)
            return None, msg, False
        try:
            msg, size = await asyncio.wait_for(read_sized(reader, HELLO_MAX_FRAME), HELLO_TIMEOUT)
        except TimeoutError:
            raise Refused("no_hello", f"no hello within {HELLO_TIMEOUT} s") from None
        sender = policy.admit(msg, remote)
        self._count(sender, Hello.T, size)
        return sender, None, isinstance(msg, Hello) and msg.watch

    async def _watch(self, sender: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        """A watch from `sender`'s heartbeat responder (nf_host.death_watch): nothing comes but a
        goodbye; its end without one is `on_lost(sender)`, if it is the sender's newest watch."""
        older = self._watchers.get(sender)
        self._watchers[sender] = writer
        if older is not None:
            older.transport.abort()
        try:
            msg, _size = await read_sized(reader, HELLO_MAX_FRAME)
            if not isinstance(msg, Bye):
                raise ProtocolError(f"a watch carries nothing but its goodbye, not {msg.T!r}")
        except (asyncio.IncompleteReadError, ConnectionError):
            if self._watchers.get(sender) is writer:
                self.watch_losses += 1
                if self.on_lost is not None:
                    self.on_lost(sender)
        finally:
            if self._watchers.get(sender) is writer:
                del self._watchers[sender]

    def _count(self, sender: int | None, kind: str, size: int) -> None:
        key = (sender or 0, kind)
        self.bytes_in[key] = self.bytes_in.get(key, 0) + size

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._conns):
            w.close()


class Link:
    """A worker's outgoing connection to one other NF (backup, cluster peer or move partner).

    Messages sent while disconnected are dropped: the owner of the link learns of every
    (re)connection through `on_connected` and resynchronises then (a full snapshot). Replies go to
    `on_message`.
    """

    def __init__(
        self,
        nf_id: int,
        address: str,
        on_message: Callable[[Link, Message], None],
        on_connected: Callable[[Link], Awaitable[None] | None] | None = None,
        retry: float = 0.05,
        hello: Message | None = None,
        tally: dict[int, int] | None = None,
        chunk: int = CHUNK,
    ) -> None:
        self.nf_id, self.address = nf_id, address
        self.tally = tally  # bytes sent, by destination NF, kept across links (the owner's)
        self.hello = hello  # the first message on every connection (nf_host.peer_policy.hello)
        self.on_message, self.on_connected = on_message, on_connected
        self.retry = retry
        self.delay = retry  # the wait before the next reconnection (see _run)
        self.writer: asyncio.StreamWriter | None = None
        self.bytes_sent = 0
        self.errors = 0  # handler failures (each dropped the connection)
        self.attempts = 0  # connections tried (refused ones included)
        self.waiting = False  # between two attempts (backing off)
        self.closed = False
        self.connected = asyncio.Event()
        self._wake = asyncio.Event()  # set by `kick`: reconnect now, not after the wait
        self._out: list[bytes] = []
        self.corked = False  # `cork`: messages wait in `_out` until `uncork`
        self.chunk = chunk  # larger messages leave in fragments, paced (nf_host/chunked.py)
        self.pacer: Pacer | None = None  # the connection's, while it is up
        self.streams = 0  # messages sent in fragments (all connections)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def kick(self) -> None:
        """Reconnect at once if disconnected, and forget the back-off of short-lived connections:
        the link has just become needed (named backup, or a peer again) and the other side, which
        refused it, may know this NF by now. Nothing happens to a connected link."""
        self.delay = self.retry
        self._wake.set()

    async def _pause(self, seconds: float) -> None:
        """The wait before a reconnection; `kick` ends it early."""
        self._wake.clear()
        self.waiting = True
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), seconds)
        finally:
            self.waiting = False

    def send(self, msg: Message) -> int:
        """Queue `msg`; return its size in bytes on the wire (0 if the link is down)."""
        if self.writer is None:
            return 0
        return self.send_raw(encode(msg))

    def send_raw(self, data: bytes) -> int:
        """Queue an encoded message. Messages queued in one event-loop step leave in one write."""
        if self.writer is None:
            return 0
        pacer = self.pacer
        if pacer is not None and (pacer.active or pacer.big(data)):
            # a large message, or one behind it: paced, in order (what waits in `_out`, first)
            if pacer.big(data):
                self.streams += 1
            for queued in self._out:
                pacer.push(queued)
            self._out.clear()
            pacer.push(data)
        else:
            if not self._out and not self.corked:
                asyncio.get_running_loop().call_soon(self._flush)
            self._out.append(data)
        self.bytes_sent += len(data)
        if self.tally is not None:
            self.tally[self.nf_id] = self.tally.get(self.nf_id, 0) + len(data)
        return len(data)

    def cork(self) -> None:
        """Hold what is sent from now on (in order, counted in `backlog`) until `uncork`: a
        takeover keeps its peers asleep while its first output waits for the new backup's ack
        (nf_host/ownership.py, the takeover's quiet window). A goodbye still sends it first."""
        self.corked = True

    def uncork(self) -> None:
        """Send what `cork` held, in one write, and stop holding."""
        if self.corked:
            self.corked = False
            if self._out:
                asyncio.get_running_loop().call_soon(self._flush)

    def backlog(self) -> int:
        """Bytes written but not yet taken by the kernel (a slow or stopped receiver)."""
        if self.writer is None:
            return 0
        paced = self.pacer.queued if self.pacer is not None else 0  # (a stream itself is no lag)
        return self.writer.transport.get_write_buffer_size() + sum(len(d) for d in self._out) + paced

    def reset(self) -> None:
        """Drop the connection (and what it still buffers); the link reconnects and resyncs."""
        if self.writer is not None:
            self.writer.transport.abort()

    def _flush(self) -> None:
        if self.corked:  # (corked after this flush was scheduled: `uncork` schedules another)
            return
        data = b"".join(self._out)
        self._out.clear()
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(data)

    async def _run(self) -> None:
        host, port = split_address(self.address)
        loop = asyncio.get_running_loop()
        while not self.closed:
            self.attempts += 1
            try:
                reader, writer = await TRANSPORT.open_connection(host, port)
            except OSError:
                await self._pause(self.retry)
                continue
            since = loop.time()
            self.writer = writer
            self.pacer = Pacer(writer, self.chunk)
            self.connected.set()
            if self.hello is not None:
                self.send(self.hello)
            try:
                if self.on_connected is not None:
                    res = self.on_connected(self)
                    if res is not None:
                        await res
                while True:
                    self.on_message(self, await read_message(reader))
            except (asyncio.IncompleteReadError, ConnectionError, ProtocolError) as exc:
                log.info("link to NF %d (%s) lost: %r", self.nf_id, self.address, exc)
            except Exception:
                # a handler that fails must not end this task (the link would never reconnect):
                # count it, drop the connection, and resynchronise like after any reconnection
                self.errors += 1
                log.exception("link to NF %d (%s): handler failed, reconnecting", self.nf_id,
                              self.address)
            finally:
                self.writer = None
                if self.pacer is not None:
                    self.pacer.cancel()  # a stream cut short: the receiver drops its fragments
                    self.pacer = None
                self._out.clear()  # never delivered: the next connection starts with a full sync
                self.connected.clear()
                self._goodbye(writer)  # (a reconnection on purpose, not this process's death)
            # a connection that did not last (e.g. refused by the receiver's peer policy, whose
            # snapshot would be encoded again each time) is retried ever later, up to MAX_RETRY
            short = loop.time() - since < MAX_RETRY
            self.delay = min(self.delay * 2, MAX_RETRY) if short else self.retry
            await self._pause(self.delay)

    def _goodbye(self, writer: asyncio.StreamWriter) -> None:
        """Close `writer` on purpose: the receiver must not take it for this process's death."""
        if not writer.is_closing():
            self.corked = False
            if self._out:
                self._flush()
            writer.write(BYE_FRAME)
        writer.close()

    async def close(self) -> None:
        self.closed = True
        if self.writer is not None:
            self._goodbye(self.writer)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
