"""The P4Runtime session with the switch, built on finsy (asyncio).

It owns: arbitration with an election id (finsy's Arbitrator; a standby controller with a lower id
stays backup and becomes primary when the primary goes away), the pipeline push from `build/`
(P4Info text + device config bytes; skipped when the switch already runs the same cookie), writes of
the contract's entities by name through P4Info (`EntityBuilder`), reconciliation (read back the
managed tables and multicast groups, write only the differences), digest subscription with
acknowledgement, counter reads, and each slot's numbering base (`seq_bases`: the `seq_base` its
slot_owner entry carries, kept by every write of the entry). It reads and writes no register:
BMv2's P4Runtime server serves none (p4lang/PI#376).

Every time this controller becomes primary (first connect, reconnect, take-over) the `on_primary`
callback runs; the controller reconciles the switch from it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from finsy import (
    GRPCCredentialsTLS,
    P4CounterEntry,
    P4DigestEntry,
    P4MulticastGroupEntry,
    P4Schema,
    P4TableAction,
    P4TableEntry,
    Switch,
    SwitchEvent,
    SwitchOptions,
)
from finsy.p4client import P4ClientError
from finsy.proto import p4r

from contract.seq import SEQ_MASK
from controlplane.config import CHAIN_STAGES, SwitchConfig
from controlplane.config_management import SecurityConfig
from controlplane.p4names import P4Names
from controlplane.pipeline_state import (
    MANAGED_TABLES,
    SLOT_COUNTER,
    DesiredState,
    Diff,
    EntityBuilder,
    diff,
)
from controlplane.slot_map import SlotEntry

LOG = logging.getLogger(__name__)

WRITE_BATCH = 512
NEW_FLOW_DIGEST = "new_flow_t"


@dataclass(frozen=True)
class NewFlow:
    """One member of the `new_flow_t` digest."""

    slot: int
    src_addr: int
    dst_addr: int
    src_port: int
    dst_port: int
    protocol: int


def _as_int(value: Any) -> int:
    """Digest/counter values come back as ints or address objects; make them ints."""
    if isinstance(value, int):
        return value
    return int(value)


def new_flow_from(data: Any) -> NewFlow | None:
    """Decode one digest member (finsy gives a dict for a struct); None if malformed."""
    if not isinstance(data, dict):
        return None
    try:
        return NewFlow(
            slot=_as_int(data["slot"]),
            src_addr=_as_int(data["src_addr"]),
            dst_addr=_as_int(data["dst_addr"]),
            src_port=_as_int(data["src_port"]),
            dst_port=_as_int(data["dst_port"]),
            protocol=_as_int(data["protocol"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


async def counters_from(replies: AsyncIterator[Any]) -> dict[int, tuple[int, int]]:
    """index -> (packets, bytes) from the ReadResponses of a counter read (entities without an
    index, which a wildcard read does not return, are skipped)."""
    out: dict[int, tuple[int, int]] = {}
    async for reply in replies:
        for entity in reply.entities:
            c = entity.counter_entry
            if c.HasField("index"):
                d = c.data
                out[c.index.index] = (d.packet_count, d.byte_count)
    return out


WriteHook = Callable[[str, int], None]



class DeviceConfigError(FileNotFoundError):
    """The device config to push with the P4Info is missing (the path is in the message)."""


class SlotBitsError(ValueError):
    """The configuration's `switch.slot_bits` does not match the program's slot count."""


def check_slot_bits(cfg: SwitchConfig, p4info: Path) -> None:
    """The program sizes `slot_owner` (and every per-slot object) by its SLOT_BITS, with room for
    CHAIN_STAGES stages of it; a controller configured for another slot count would write slots
    the switch cannot hold, or leave slots without an owner. Raises SlotBitsError naming both."""
    table = next((t for t in P4Schema(p4info).tables if t.name.split(".")[-1] == "slot_owner"), None)
    if table is None:
        raise SlotBitsError(f"{p4info} has no slot_owner table: not the nfcluster program")
    if table.size != cfg.slot_count * CHAIN_STAGES:
        raise SlotBitsError(
            f"switch.slot_bits is {cfg.slot_bits} ({cfg.slot_count} slots per stage, "
            f"{cfg.slot_count * CHAIN_STAGES} for {CHAIN_STAGES} stages) but the program in "
            f"{p4info} holds {table.size} in slot_owner (its SLOT_BITS): make them agree")

def switch_credentials(sec: SecurityConfig) -> GRPCCredentialsTLS | None:
    """The controller's P4Runtime credentials (docs/security.md): its certificate, the CA, and
    the switch's certificate checked against the name "switch"; None (plaintext) unless
    `security.tls` and `security.switch_tls`."""
    if not (sec.tls and sec.switch_tls):
        return None
    d = sec.pki_dir
    for path in (d / "ca.crt", d / f"{sec.name}.crt", d / f"{sec.name}.key"):
        if not path.is_file():
            raise DeviceConfigError(f"{path} is missing: create the PKI (`make pki`) or set "
                                    f"security.switch_tls: false (plaintext P4Runtime)")
    return GRPCCredentialsTLS(cacert=d / "ca.crt", cert=d / f"{sec.name}.crt",
                              private_key=d / f"{sec.name}.key", target_name_override="switch")


class SwitchSession:
    """One controller's P4Runtime connection to one switch."""

    def __init__(
        self,
        cfg: SwitchConfig,
        *,
        election_id: int | None = None,
        name: str = "nfc-switch",
        p4info: Path | None = None,
        device_config: Path | bytes | None = None,
        on_primary: Callable[[SwitchSession], Awaitable[None]] | None = None,
        on_write: WriteHook | None = None,
        p4force: bool = False,
        credentials: GRPCCredentialsTLS | None = None,
    ) -> None:
        """`credentials`: P4Runtime over mutual TLS (`switch_credentials`), else plaintext."""
        self.cfg = cfg
        p4info = p4info if p4info is not None else cfg.p4info
        blob: Path | bytes | None = device_config
        if blob is None:
            blob = cfg.device_config_path()
        if isinstance(blob, Path) and not blob.is_file():
            # without it the pipeline cannot be pushed, and a switch started without a program
            # (BMv2 --no-p4) answers every read FAILED_PRECONDITION: fail now, naming the path
            raise DeviceConfigError(
                f"no device config at {blob} (switch.target {cfg.target}): run `make build` "
                f"(BMv2's needs p4c-bm2-ss), or set switch.device_config / --device-config")
        self._on_primary = on_primary
        self._on_write = on_write
        self._primary = asyncio.Event()
        self._names: tuple[int, P4Names, EntityBuilder] | None = None
        # slot index -> the seq_base its slot_owner entry carries (absent: 0); set by the
        # controller before a reconcile (resume_numbering), kept by every later slot write
        self.seq_bases: dict[int, int] = {}
        options = SwitchOptions(
            p4info=p4info,
            p4blob=blob,
            p4force=p4force,
            device_id=cfg.device_id,
            initial_election_id=election_id if election_id is not None else cfg.election_id,
            ready_handler=self._ready,
            channel_credentials=credentials,
        )
        self.switch = Switch(name, cfg.address, options)
        self.switch.ee.on(SwitchEvent.BECOME_BACKUP, self._lost_primary)
        self.switch.ee.on(SwitchEvent.CHANNEL_DOWN, self._lost_primary)

    def set_election_id(self, election_id: int) -> None:
        """The election id to connect with (before `run`): a new leader's, above every earlier one."""
        self.switch.options = dataclasses.replace(self.switch.options, initial_election_id=election_id)

    # -- lifecycle --------------------------------------------------------------------------------
    async def __aenter__(self) -> SwitchSession:
        await self.switch.__aenter__()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.switch.__aexit__(et, e, tb)
        self._primary.clear()

    async def run(self) -> None:
        """Run the session forever: reconnect and re-arbitrate whenever the channel drops."""
        await self.switch.run()

    async def _ready(self, sw: Switch) -> None:
        if not sw.is_primary:
            LOG.info("connected as backup (election id %d)", sw.election_id)
            return
        LOG.info("primary for device %d (election id %d)", sw.device_id, sw.election_id)
        self._primary.set()
        if self._on_primary is not None:
            await self._on_primary(self)

    def _lost_primary(self, *_: Any) -> None:
        self._primary.clear()

    @property
    def is_primary(self) -> bool:
        return self.switch.is_primary

    async def wait_primary(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._primary.wait(), timeout)

    # -- names ------------------------------------------------------------------------------------
    @property
    def schema(self) -> P4Schema:
        return self.switch.p4info

    def _resolved(self) -> tuple[P4Names, EntityBuilder]:
        schema = self.switch.p4info
        if self._names is None or self._names[0] != id(schema.p4info):
            names = P4Names(schema)
            self._names = (id(schema.p4info), names, EntityBuilder(names, self.cfg.slot_count))
        return self._names[1], self._names[2]

    @property
    def names(self) -> P4Names:
        return self._resolved()[0]

    @property
    def builder(self) -> EntityBuilder:
        return self._resolved()[1]

    # -- writes -----------------------------------------------------------------------------------
    def _count(self, kind: str, n: int) -> None:
        if self._on_write is not None and n:
            self._on_write(kind, n)

    async def _batched(self, op: str, entities: Sequence[Any], batch: int = WRITE_BATCH) -> None:
        call = {"insert": self.switch.insert, "modify": self.switch.modify,
                "delete": self.switch.delete}[op]
        for start in range(0, len(entities), batch):
            chunk = entities[start : start + batch]
            await call(chunk)
            self._count(op, len(chunk))

    async def apply(self, changes: Diff) -> None:
        """Write a diff so that no slot ever points at a missing group: groups are added and changed
        first, then table entries inserted, changed and deleted, and unused groups deleted last."""

        def split(items: list[Any]) -> tuple[list[Any], list[Any]]:
            groups = [e for e in items if isinstance(e, P4MulticastGroupEntry)]
            return groups, [e for e in items if not isinstance(e, P4MulticastGroupEntry)]

        ins_groups, ins_tables = split(changes.insert)
        mod_groups, mod_tables = split(changes.modify)
        del_groups, del_tables = split(changes.delete)
        await self._batched("insert", ins_groups)
        await self._batched("modify", mod_groups)
        await self._batched("insert", ins_tables)
        await self._batched("modify", mod_tables)
        await self._batched("delete", del_tables)
        await self._batched("delete", del_groups)

    async def reconcile(self, desired: DesiredState) -> Diff:
        """Read the managed state back, write the differences, return what was written."""
        changes = diff(desired, await self.read_tables(), await self.read_groups(), self.schema)
        if changes:
            LOG.info("reconcile: %s", changes.counts())
        await self.apply(changes)
        return changes

    async def write_slot(self, entry: SlotEntry, group: int | None = None) -> None:
        """An ownership change: one atomic MODIFY of the slot's `slot_owner` entry (pointing at
        replica group `group`, by default the owner's id)."""
        base = self.seq_bases.get(entry.slot, 0)
        await self.switch.modify([self.builder.slot_owner(entry, group, base)])
        self._count("modify", 1)

    async def write_slots(self, entries: Iterable[SlotEntry], insert: bool = False,
                          groups: Mapping[int, int] | None = None) -> None:
        groups = groups or {}
        built = [self.builder.slot_owner(e, groups.get(e.owner, e.owner),
                                         self.seq_bases.get(e.slot, 0)) for e in entries]
        await self._batched("insert" if insert else "modify", built)

    async def set_group(self, primary_id: int, primary_port: int, backup_port: int | None,
                        insert: bool = False) -> None:
        group = self.builder.group(primary_id, primary_port, backup_port)
        await self._batched("insert" if insert else "modify", [group])

    async def delete_group(self, group: int) -> None:
        """Remove a replica group no slot points at any more (a drained primary's)."""
        await self._batched("delete", [P4MulticastGroupEntry(group)])

    # -- reads ------------------------------------------------------------------------------------
    def _read(self, entity: Any) -> AsyncIterator[Any]:
        # finsy's overloads declare `async def read` returning a generator; at run time it is one
        return cast(AsyncIterator[Any], self.switch.read(entity))

    async def read_tables(self, shorts: Iterable[str] = MANAGED_TABLES) -> list[P4TableEntry]:
        out: list[P4TableEntry] = []
        for short in shorts:
            async for entry in self._read(P4TableEntry(self.names.table(short))):
                out.append(entry)
        return out

    async def read_groups(self) -> list[P4MulticastGroupEntry]:
        return [g async for g in self._read(P4MulticastGroupEntry())]

    async def _slot_owner_args(self) -> dict[int, dict[str, int]]:
        """slot index (stage << slot_bits | slot) -> its slot_owner entry's action arguments, by
        their short names (group, epoch, primary, seq_base), as the switch holds them."""
        t = self.builder.slot_owner_t
        out = {}
        for entry in await self.read_tables([t.table]):
            if entry.is_default_action or entry.match is None or entry.action is None:
                continue
            if not isinstance(entry.action, P4TableAction):
                continue
            slot = (_as_int(entry.match[t.fields["stage"]]) * self.cfg.slot_count
                    + _as_int(entry.match[t.fields["slot"]]))
            out[slot] = {short: _as_int(entry.action.args[full]) for short, full in t.params.items()}
        return out

    async def read_slot_owner(self) -> dict[int, SlotEntry]:
        """slot index (stage << slot_bits | slot) -> (owner, epoch) as the switch holds it."""
        return {slot: SlotEntry(slot, args["primary"], args["epoch"])
                for slot, args in (await self._slot_owner_args()).items()}

    async def read_numbering(self) -> tuple[dict[int, int], dict[int, int]]:
        """Where each slot's numbering stands on the switch: (slot index -> the seq_base of its
        slot_owner entry, for the slots that have one; slot index -> the packets stamped in it
        mod 2^32). A packet is stamped seq_base + that count, so the slot's last number is
        their sum. One table read, then one wildcard read of `slot_traffic`, which counts every
        stamped packet: both served by every P4Runtime server, where BMv2's serves no register
        (p4lang/PI#376). On a live switch the count, read second, is the newer: the sum is
        never below what the slot had stamped when the entries were read."""
        bases = {slot: args["seq_base"] for slot, args in (await self._slot_owner_args()).items()}
        return bases, await self.read_stamped()

    async def read_stamped(self) -> dict[int, int]:
        """slot index -> the packets stamped in it mod 2^32 (one wildcard read of slot_traffic)."""
        counted = await self.read_counter(SLOT_COUNTER)
        return {slot: packets & SEQ_MASK for slot, (packets, _) in counted.items()}

    async def read_counter(self, short: str) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes) for every index of counter `short`: one wildcard read,
        decoded straight from the ReadResponse protobuf. finsy's `Switch.read` makes a
        `P4CounterEntry` of each entity through an async generator, four times the CPU of these
        attribute reads (4,096 slots: bench/counter_reads.py); the request goes through finsy's
        P4Runtime client all the same (its role, its error mapping). Without that client (finsy
        changed), finsy's read."""
        client = getattr(self.switch, "_p4client", None)  # finsy 0.30: no public accessor
        if client is None or not hasattr(client, "request_iter"):
            return await self.read_counter_entries(short)
        counter_id = self.schema.counters[self.names.counter(short)].id
        request = p4r.ReadRequest(device_id=self.switch.device_id, entities=[
            p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter_id))])
        return await counters_from(client.request_iter(request))

    async def read_counter_entries(self, short: str) -> dict[int, tuple[int, int]]:
        """`read_counter` through finsy's entities (the fallback, and the old path a benchmark
        compares with)."""
        name = self.names.counter(short)
        out = {}
        async for e in self._read(P4CounterEntry(name)):
            if e.index is not None:
                out[e.index] = (e.packet_count, e.byte_count)
        return out


    # -- digests ----------------------------------------------------------------------------------
    async def enable_new_flow_digest(
        self, max_list_size: int = 64, max_timeout_ns: int = 1_000_000, ack_timeout_ns: int = 100_000_000
    ) -> None:
        entry = P4DigestEntry(
            self.names.digest(NEW_FLOW_DIGEST),
            max_list_size=max_list_size,
            max_timeout_ns=max_timeout_ns,
            ack_timeout_ns=ack_timeout_ns,
        )
        try:
            await self.switch.insert([entry])
        except P4ClientError:  # already configured (reconnect): update the config instead
            await self.switch.modify([entry])
        self._count("insert", 1)

    async def new_flows(self) -> AsyncIterator[list[NewFlow]]:
        """Digest lists of new flows, each acknowledged as soon as it is received."""
        # finsy files incoming lists under the digest's alias
        alias = self.schema.digests[self.names.digest(NEW_FLOW_DIGEST)].alias
        async for digest_list in self.switch.read_digests(alias):
            await self.switch.write([digest_list.ack()])
            flows = [f for f in (new_flow_from(d) for d in digest_list) if f is not None]
            yield flows
