"""The native engine behind the in-process API: `NativeSwitch`, a `Switch` whose packets run in C.

The Python `Switch` keeps doing what the control plane sees (validation, error codes, the entries
as written, P4Info ids); every write is then mirrored into the C engine's own tables, profiles
and PRE through its C API (cffi, ABI mode: the library is a plain shared object), and every read
of state the packets change (counters, direct counters, registers, digests) comes from C.
`NativeSwitch.ring_run` is the C loop of `--io ring` (ringloop.c; driven by p4sim/native/rings.py).
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from finsy.proto import p4i

from p4sim.native.ccompiler import CProgram
from p4sim.runtime.api_values import ActionCall, PackedOutputs, TableEntry, TableRef
from p4sim.runtime.meters import MeterConfig
from p4sim.runtime.model import Program
from p4sim.runtime.switch import Switch
from p4sim.runtime.tables import Entry

LOG = logging.getLogger("p4sim.native")

CDEF = """
void *p4n_new(uint64_t seed);
void p4n_free(void *c);
uint32_t p4n_process(void *c, const char *data, const uint32_t *offs, const uint32_t *ports, uint32_t n,
                     const uint8_t **odata, const uint32_t **ometa);
int32_t p4n_table_insert(void *c, uint32_t t, const uint64_t *key, const uint64_t *mask, int64_t prio,
                         uint32_t action, const uint64_t *args, int64_t member, int64_t group);
void p4n_table_modify(void *c, uint32_t t, int32_t idx, uint32_t action, const uint64_t *args,
                      int64_t member, int64_t group);
void p4n_table_delete(void *c, uint32_t t, int32_t idx);
void p4n_table_set_default(void *c, uint32_t t, uint32_t action, const uint64_t *args);
void p4n_direct_counter(void *c, uint32_t t, int32_t idx, int write, uint64_t *pb);
void p4n_member_set(void *c, uint32_t p, uint64_t mid, uint32_t action, const uint64_t *args);
void p4n_member_delete(void *c, uint32_t p, uint64_t mid);
void p4n_group_set(void *c, uint32_t p, uint64_t gid, const uint64_t *mids, uint32_t n);
void p4n_group_delete(void *c, uint32_t p, uint64_t gid);
void p4n_counter(void *c, uint32_t i, uint32_t index, int write, uint64_t *pb);
uint64_t p4n_register_read(void *c, uint32_t r, uint32_t index);
void p4n_register_write(void *c, uint32_t r, uint32_t index, uint64_t v);
void p4n_meter_set(void *c, uint32_t m, uint32_t index, int on, double cir, double cburst, double pir,
                   double pburst);
void p4n_pre_set(void *c, int kind, uint64_t id, const uint32_t *ports, const uint32_t *rids, uint32_t n,
                 uint64_t trunc);
void p4n_pre_delete(void *c, int kind, uint64_t id);
void p4n_set_time(void *c, double now);
uint32_t p4n_digests(void *c, const uint32_t **ids, const uint64_t **vals, uint64_t *dropped);
void p4n_digests_clear(void *c);
uint32_t p4n_dmax(void);
uint32_t p4n_amax(void);
typedef struct p4n_ring {
    uint8_t *rxm; uint8_t *txm; int32_t fd; uint32_t port; uint32_t active;
    uint32_t block_size, nblocks, rx_next; uint32_t tx_frame_size, tx_frames, tx_next; int64_t tx_last;
    int64_t rx, rx_truncated, tx, tx_errors, tx_overflows; int32_t last_errno; uint32_t unsent;
    uint32_t tx_python;
} p4n_ring;
uint32_t p4n_ring_run(void *c, p4n_ring *rings, uint32_t n, uint32_t max_frames, int64_t cpu_port,
                      uint64_t *nsent, const uint32_t **defer, uint32_t *ndefer, const uint8_t **odata,
                      const uint32_t **ometa);
"""

_FFI: Any = None
_LIBS: dict[str, Any] = {}


_M64 = (1 << 64) - 1


def _split(values: Sequence[int], widths: Sequence[int]) -> list[int]:
    """C words of values of the given widths: one wider than 64 bits is two, its low 64 bits first."""
    out: list[int] = []
    for v, w in zip(values, widths, strict=False):
        out += [v & _M64, v >> 64] if w > 64 else [v]
    return out


def _join(words: Sequence[int], widths: Sequence[int]) -> list[int]:
    """The values of the given widths in C words (`_split`'s inverse)."""
    out: list[int] = []
    i = 0
    for w in widths:
        if w > 64:
            out.append(int(words[i]) | int(words[i + 1]) << 64)
            i += 2
        else:
            out.append(int(words[i]))
            i += 1
    return out


def ffi() -> Any:
    global _FFI
    if _FFI is None:
        import cffi

        _FFI = cffi.FFI()
        _FFI.cdef(CDEF)
    return _FFI


def open_library(path: Path) -> Any:
    lib = _LIBS.get(str(path))
    if lib is None:
        lib = _LIBS[str(path)] = ffi().dlopen(str(path))
    return lib


Packets = Sequence[tuple[int, bytes]]


class NativeSwitch(Switch):
    """A `Switch` whose packets run through the compiled C program at ``lib_path``."""

    engine = "native"

    def __init__(self, prog: Program, config: bytes, p4info: p4i.P4Info | None, cpu_port: int | None,
                 cprog: CProgram, lib_path: Path) -> None:
        self._ffi = f = ffi()
        self._lib = lib = open_library(lib_path)
        self._cprog = cprog
        self._c = f.gc(lib.p4n_new(0), lib.p4n_free)
        self._amax = int(lib.p4n_amax())
        self._dmax = int(lib.p4n_dmax())
        self._pwidths = {name: [p.width for p in ai.params] for name, ai in prog.actions.items()}
        self._handles: dict[str, dict[object, int]] = {name: {} for name in cprog.tables}
        self._tindex = {name: i for i, name in enumerate(cprog.tables)}
        self._odata = f.new("const uint8_t **")
        self._ometa = f.new("const uint32_t **")
        self._offs1 = f.new("uint32_t[2]")
        self._port1 = f.new("uint32_t[1]")
        self._pb = f.new("uint64_t[2]")
        self._warned_trace = False
        self.lib_path = lib_path
        self.c_source = cprog.source
        super().__init__(prog, config, p4info, cpu_port)
        self._meter_infos = [prog.meters[name] for name in cprog.meters]
        for ref in self._tables.values():
            self._c_default(ref)

    # ------------------------------------------------------------------ packets
    def _meter_clock(self) -> None:
        """Meters run on `MeterArray.clock`, as in the Python engine (tests inject a clock)."""
        for mi in self._meter_infos:
            if mi.meters.clock is not time.monotonic:
                self._lib.p4n_set_time(self._c, mi.meters.clock())
                return

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        data = bytes(data)
        with self._lock:
            if self._meter_infos:
                self._meter_clock()
            self._offs1[1] = len(data)
            self._port1[0] = port
            n = self._lib.p4n_process(self._c, data, self._offs1, self._port1, 1, self._odata, self._ometa)
            return [out for _, out in self._outputs(n)]

    def process_batch(self, packets: Packets) -> list[list[tuple[int, bytes]]]:
        """Many packets in one C call: the outputs of each input packet, in order."""
        result: list[list[tuple[int, bytes]]] = [[] for _ in packets]
        for i, out in self.process_batch_flat(packets):
            result[i].append(out)
        return result

    def process_batch_flat(self, packets: Packets) -> list[tuple[int, tuple[int, bytes]]]:
        """Many packets in one C call: (input index, (port, bytes)) of every output, in order."""
        with self._lock:
            return self._outputs(self._run(packets))

    def process_packed(self, packets: Packets) -> PackedOutputs:
        """Many packets in one C call; the outputs copied out in two flat buffers."""
        f = self._ffi
        with self._lock:
            n = self._run(packets)
            if n == 0:
                return PackedOutputs(b"", array("I"))
            meta = array("I")
            meta.frombytes(f.buffer(self._ometa[0], 16 * n))
            return PackedOutputs(f.buffer(self._odata[0], meta[-2] + meta[-1])[:], meta)

    def _run(self, packets: Packets) -> int:
        f = self._ffi
        offs = array("I", [0])
        total = 0
        for _, d in packets:
            total += len(d)
            offs.append(total)
        ports = array("I", [p for p, _ in packets])
        data = b"".join([bytes(d) for _, d in packets])
        if self._meter_infos:
            self._meter_clock()
        return int(self._lib.p4n_process(self._c, data, f.from_buffer("uint32_t[]", offs),
                                         f.from_buffer("uint32_t[]", ports), len(packets), self._odata, self._ometa))

    def _outputs(self, n: int) -> list[tuple[int, tuple[int, bytes]]]:
        if n == 0:
            return []
        f = self._ffi
        meta = f.unpack(self._ometa[0], 4 * n)
        end = meta[-2] + meta[-1]
        buf = f.buffer(self._odata[0], end)[:]
        return [(meta[i], (meta[i + 1], buf[meta[i + 2]:meta[i + 2] + meta[i + 3]])) for i in range(0, 4 * n, 4)]

    def ring_run(self, rings: Any, n: int, max_frames: int, cpu_port: int | None
                 ) -> tuple[int, int, list[tuple[int, bytes]]]:
        """One wake-up of the ring fast path (`p4n_ring_run`, ringloop.c) on `n` `p4n_ring`s:
        (frames received, outputs written into transmit rings, the outputs left to the caller as
        (port, bytes)). The caller holds the transmit rings (p4sim/native/rings.py)."""
        f = self._ffi
        nsent = self._pb
        defer = f.new("const uint32_t **")
        ndefer = f.new("uint32_t *")
        with self._lock:
            if self._meter_infos:
                self._meter_clock()
            got = int(self._lib.p4n_ring_run(self._c, rings, n, max_frames,
                                             -1 if cpu_port is None else cpu_port, nsent, defer,
                                             ndefer, self._odata, self._ometa))
            nd = int(ndefer[0])
            left: list[tuple[int, bytes]] = []
            if nd:
                meta = self._ometa[0]
                for i in f.unpack(defer[0], nd):
                    port, off, length = meta[4 * i + 1], meta[4 * i + 2], meta[4 * i + 3]
                    left.append((int(port), f.buffer(self._odata[0] + off, length)[:]))
            return got, int(nsent[0]), left

    def take_digests(self) -> list[tuple[int, list[bytes]]]:
        f = self._ffi
        with self._lock:
            ids = f.new("const uint32_t **")
            vals = f.new("const uint64_t **")
            dropped = f.new("uint64_t *")
            n = self._lib.p4n_digests(self._c, ids, vals, dropped)
            self.prog.ctx.digests_dropped = int(dropped[0])
            if n == 0:
                return []
            idl = f.unpack(ids[0], n)
            vl = f.unpack(vals[0], n * self._dmax)
            self._lib.p4n_digests_clear(self._c)
            out = []
            for k, di in enumerate(idl):
                name = self._cprog.digests[di]
                widths = self._digest_widths[name]
                row = _join(vl[k * self._dmax:(k + 1) * self._dmax], widths)
                out.append((self._digest_ids[name],
                            [int(v).to_bytes((w + 7) // 8, "big") for v, w in zip(row, widths, strict=True)]))
            return out

    def set_trace(self, callback: Callable[[str], None] | None) -> None:
        if callback is not None and not self._warned_trace:
            self._warned_trace = True
            LOG.warning("the native engine does not trace packets; run with --engine python to trace them")

    # ------------------------------------------------------------------ tables
    def _args(self, action: str, args: Sequence[int]) -> Any:
        words = _split(args, self._pwidths.get(action, [64] * len(args)))
        return self._ffi.new("uint64_t[]", words + [0] * (self._amax - len(words)))

    def _anum(self, name: str) -> int:
        return self._cprog.actions.get(name, 0)

    def _entry_action(self, ent: Entry) -> tuple[int, Any, int, int]:
        mid = -1 if ent.member_id is None else ent.member_id
        gid = -1 if ent.group_id is None else ent.group_id
        if ent.member_id is not None or ent.group_id is not None:
            return 0, self._args("", ()), mid, gid
        return self._anum(ent.action), self._args(ent.action, ent.args), mid, gid

    def _c_default(self, ref: TableRef) -> None:
        t = ref.table
        self._lib.p4n_table_set_default(self._c, self._tindex[ref.name], self._anum(t.default_name),
                                        self._args(t.default_name, t.default_args))

    def _insert(self, ref: TableRef, e: TableEntry, check_const: bool = True) -> None:
        super()._insert(ref, e, check_const)
        key = (self._specs(ref, e), e.priority)
        ent = ref.table.entries[key]
        keys, masks = [], []
        for kind, m, w in zip(ref.table.kinds, ent.match, ref.table.widths, strict=True):
            full = (1 << w) - 1
            if kind == "exact":
                kv, mv = m, full
            elif kind == "lpm":
                kv, mv = m[0], full ^ ((1 << (w - m[1])) - 1)
            elif kind == "optional":
                kv, mv = m[0], full if m[1] else 0
            else:  # ternary (value, mask) or range (low, high)
                kv, mv = m[0], m[1]
            if w > 64:  # two columns, the high 64 bits first (runtime.h)
                keys += [kv >> 64, kv & _M64]
                masks += [mv >> 64, mv & _M64]
            else:
                keys.append(kv)
                masks.append(mv)
        f = self._ffi
        action, args, mid, gid = self._entry_action(ent)
        handle = self._lib.p4n_table_insert(
            self._c, self._tindex[ref.name], f.new("uint64_t[]", keys or [0]), f.new("uint64_t[]", masks or [0]),
            ent.priority, action, args, mid, gid)
        self._handles[ref.name][key] = handle

    def table_modify(self, e: TableEntry) -> None:
        with self._lock:
            super().table_modify(e)
            ref = self._table(e.table_id)
            key = (self._specs(ref, e), e.priority)
            action, args, mid, gid = self._entry_action(ref.table.entries[key])
            self._lib.p4n_table_modify(self._c, self._tindex[ref.name], self._handles[ref.name][key],
                                       action, args, mid, gid)

    def table_delete(self, e: TableEntry) -> None:
        with self._lock:
            super().table_delete(e)
            ref = self._table(e.table_id)
            key = (self._specs(ref, e), e.priority)
            handle = self._handles[ref.name].pop(key)
            self._lib.p4n_table_delete(self._c, self._tindex[ref.name], handle)

    def table_set_default(self, table_id: int, action: ActionCall | None) -> None:
        with self._lock:
            super().table_set_default(table_id, action)
            self._c_default(self._table(table_id))

    def _sync_direct(self, ref: TableRef) -> None:
        """Direct counter values from C into the Python entries (read by the base class)."""
        if ref.info.direct_counter is None:
            return
        t = self._tindex[ref.name]
        for key, handle in self._handles[ref.name].items():
            self._lib.p4n_direct_counter(self._c, t, handle, 0, self._pb)
            ent = ref.table.entries[key]
            ent.packets, ent.bytes = int(self._pb[0]), int(self._pb[1])

    def table_get(self, e: TableEntry) -> TableEntry | None:
        with self._lock:
            self._sync_direct(self._table(e.table_id))
            return super().table_get(e)

    def table_entries(self, table_id: int) -> list[TableEntry]:
        with self._lock:
            self._sync_direct(self._table(table_id))
            return super().table_entries(table_id)

    def direct_counter_read(self, table_id: int, e: TableEntry) -> tuple[int, int]:
        with self._lock:
            self._sync_direct(self._table(table_id))
            return super().direct_counter_read(table_id, e)

    def direct_counter_write(self, table_id: int, e: TableEntry, packets: int, bytes_: int) -> None:
        with self._lock:
            super().direct_counter_write(table_id, e, packets, bytes_)
            ref = self._table(table_id)
            handle = self._handles[ref.name][(self._specs(ref, e), e.priority)]
            self._pb[0], self._pb[1] = packets, bytes_
            self._lib.p4n_direct_counter(self._c, self._tindex[ref.name], handle, 1, self._pb)

    # ------------------------------------------------------------------ action profiles
    def _pindex(self, profile_id: int) -> int:
        return self._cprog.profiles.index(self._profiles[profile_id].fqname)

    def _c_member(self, profile_id: int, member_id: int) -> None:
        ba, args = self._profiles[profile_id].profile.members[member_id]
        self._lib.p4n_member_set(self._c, self._pindex(profile_id), member_id, self._anum(ba.name), self._args(ba.name, args))

    def member_insert(self, profile_id: int, member_id: int, action: ActionCall) -> None:
        with self._lock:
            super().member_insert(profile_id, member_id, action)
            self._c_member(profile_id, member_id)

    def member_modify(self, profile_id: int, member_id: int, action: ActionCall) -> None:
        with self._lock:
            super().member_modify(profile_id, member_id, action)
            self._c_member(profile_id, member_id)

    def member_delete(self, profile_id: int, member_id: int, action: ActionCall | None = None) -> None:
        with self._lock:
            super().member_delete(profile_id, member_id, action)
            self._lib.p4n_member_delete(self._c, self._pindex(profile_id), member_id)

    def _c_group(self, profile_id: int, group_id: int) -> None:
        mids = self._profiles[profile_id].profile.groups[group_id]
        self._lib.p4n_group_set(self._c, self._pindex(profile_id), group_id,
                                self._ffi.new("uint64_t[]", list(mids) or [0]), len(mids))

    def group_insert(self, profile_id: int, group_id: int, member_ids: list[int], max_size: int = 0) -> None:
        with self._lock:
            super().group_insert(profile_id, group_id, member_ids, max_size)
            self._c_group(profile_id, group_id)

    def group_modify(self, profile_id: int, group_id: int, member_ids: list[int], max_size: int = 0) -> None:
        with self._lock:
            super().group_modify(profile_id, group_id, member_ids, max_size)
            self._c_group(profile_id, group_id)

    def group_delete(self, profile_id: int, group_id: int, member_ids: list[int] | None = None,
                     max_size: int = 0) -> None:
        with self._lock:
            super().group_delete(profile_id, group_id, member_ids, max_size)
            self._lib.p4n_group_delete(self._c, self._pindex(profile_id), group_id)

    # ------------------------------------------------------------------ counters, registers, meters
    def counter_read(self, counter_id: int, index: int) -> tuple[int, int]:
        with self._lock:
            self._counter(counter_id, index)
            ci = self._cprog.counters.index(self._counters[counter_id].fqname)
            self._lib.p4n_counter(self._c, ci, index, 0, self._pb)
            return int(self._pb[0]), int(self._pb[1])

    def counter_write(self, counter_id: int, index: int, packets: int, bytes_: int) -> None:
        with self._lock:
            super().counter_write(counter_id, index, packets, bytes_)
            ci = self._cprog.counters.index(self._counters[counter_id].fqname)
            self._pb[0], self._pb[1] = packets, bytes_
            self._lib.p4n_counter(self._c, ci, index, 1, self._pb)

    def register_read(self, register_id: int, index: int) -> int:
        with self._lock:
            super().register_read(register_id, index)  # validates the id and index
            info = self._registers[register_id]
            ri = self._cprog.registers.index(info.fqname)
            if info.width > 64:  # two words a cell, the low 64 bits first
                lo, hi = (int(self._lib.p4n_register_read(self._c, ri, 2 * index + j)) for j in (0, 1))
                return hi << 64 | lo
            return int(self._lib.p4n_register_read(self._c, ri, index))

    def register_write(self, register_id: int, index: int, value: int) -> None:
        with self._lock:
            super().register_write(register_id, index, value)
            info = self._registers[register_id]
            ri = self._cprog.registers.index(info.fqname)
            if info.width > 64:
                self._lib.p4n_register_write(self._c, ri, 2 * index, value & _M64)
                self._lib.p4n_register_write(self._c, ri, 2 * index + 1, value >> 64)
            else:
                self._lib.p4n_register_write(self._c, ri, index, value)

    def meter_write(self, meter_id: int, index: int, config: MeterConfig | None) -> None:
        with self._lock:
            super().meter_write(meter_id, index, config)
            mi = self._cprog.meters.index(self._meters[meter_id].fqname)
            self._meter_clock()
            if config is None:
                self._lib.p4n_meter_set(self._c, mi, index, 0, 0.0, 0.0, 0.0, 0.0)
            else:
                self._lib.p4n_meter_set(self._c, mi, index, 1, float(config.cir), float(config.cburst),
                                        float(config.pir), float(config.pburst))

    # ------------------------------------------------------------------ packet replication engine
    def _c_pre(self, kind: int, ident: int, replicas: list[tuple[int, int]], trunc: int = 0) -> None:
        f = self._ffi
        self._lib.p4n_pre_set(self._c, kind, ident, f.new("uint32_t[]", [p for p, _ in replicas] or [0]),
                              f.new("uint32_t[]", [r for _, r in replicas] or [0]), len(replicas), trunc)

    def mc_group_set(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        with self._lock:
            super().mc_group_set(group_id, replicas)
            self._c_pre(0, group_id, self.v1.pre.mc_groups[group_id])

    def mc_group_delete(self, group_id: int) -> None:
        with self._lock:
            super().mc_group_delete(group_id)
            self._lib.p4n_pre_delete(self._c, 0, group_id)

    def clone_session_set(self, session_id: int, replicas: list[tuple[int, int]], class_of_service: int = 0,
                          truncate: int = 0) -> None:
        with self._lock:
            super().clone_session_set(session_id, replicas, class_of_service, truncate)
            reps, _cos, trunc = self.v1.pre.clone_sessions[session_id]
            self._c_pre(1, session_id, reps, trunc)

    def clone_session_delete(self, session_id: int) -> None:
        with self._lock:
            super().clone_session_delete(session_id)
            self._lib.p4n_pre_delete(self._c, 1, session_id)
