"""Run p4c's STF tests on p4sim, in process: ``p4sim stf PATH...``.

Each test is a ``.p4`` program with an ``.stf`` file of the same stem beside it (`p4sim.stf.format`).
The program is compiled by p4sim (its own ``core.p4``/``v1model.p4`` first on the include path,
then the program's directory) and the STF commands run in order on the `Switch`, with the
semantics of p4c's BMv2 runner (``backends/bmv2/bmv2stf.py``):

* the switch has an interface for every port named by a ``packet`` or ``expect``; packets sent to
  other ports are lost, as BMv2 drops them;
* at the end, every interface's output is compared with its ``expect`` list in order: the same
  number of packets, each matching its pattern; an ``expect PORT`` without data accepts anything;
* table names, key names and action names may be given by their full name or a suffix
  (``ingress.t`` or ``t``), ``h$0`` stands for ``h[0]``, ``hdr.h.$valid$``/``hdr.h.valid`` for
  the key ``hdr.h.isValid()``; an STF priority P becomes the P4Runtime priority P + 1 (the higher
  wins, as bmv2stf's ``10000 - P`` for BMv2); bmv2 meter rates are units per microsecond.

A directory argument runs every ``.p4`` under it (recursively) that has an ``.stf`` and includes
``v1model.p4``. Verdicts: PASS, FAIL (the program loaded but the run differs, or an STF command
could not be applied) and REFUSED (p4sim's front end refused the program; the message names the
construct and line).
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from finsy.proto import p4i

from p4sim.frontend.diagnostics import CompileError
from p4sim.runtime.api_values import ActionCall, Match, P4simError, TableEntry
from p4sim.runtime.engine_loader import load_switch
from p4sim.runtime.meters import MeterConfig
from p4sim.runtime.switch import Switch
from p4sim.stf.format import (
    Add,
    CheckCounter,
    Command,
    Expect,
    Packet,
    SetDefault,
    Statement,
    StfError,
    match_packet,
    parse_int,
    parse_stf,
)

_MATCH_KIND = {2: "exact", 3: "lpm", 4: "ternary", 5: "range", 6: "optional"}
_OPS = {"==": int.__eq__, "!=": int.__ne__, "<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__}


@dataclass
class Result:
    path: Path
    verdict: str  # "PASS" | "FAIL" | "REFUSED"
    reason: str = ""
    seconds: float = 0.0


def _pick(names: Sequence[str], want: str, what: str) -> int:
    """Index of ``want`` among ``names``: the same name, else the one ending in ``.want``, else in ``want``."""
    tests: list[Callable[[str], bool]] = [
        lambda n: n == want, lambda n: n.endswith("." + want), lambda n: n.endswith(want)]
    for test in tests:
        hits = [i for i, n in enumerate(names) if test(n)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise StfError(f"{what} {want} is ambiguous: {', '.join(names[i] for i in hits)}")
    raise StfError(f"no {what} {want} (known: {', '.join(names) or 'none'})")


def _key_names(want: str) -> list[str]:
    """The P4Info key names an STF key name may stand for, most literal first."""
    name = re.sub(r"\$(\d+)", r"[\1]", want.replace("$valid$", "isValid()"))
    out = [want, name]
    if name.endswith(".valid"):
        out.append(name[:-len("valid")] + "isValid()")
    out.append(name + ".isValid()")
    return out


def _number(text: str, width: int) -> tuple[int, int]:
    """Value and mask of an STF key value; a '*' digit is a wildcard (mask 0 there)."""
    if "*" not in text:
        return parse_int(text) & ((1 << width) - 1), (1 << width) - 1
    base = {"0x": 16, "0b": 2, "0o": 8}.get(text[:2].lower())
    if base is None:
        raise StfError(f"a wildcard needs a 0x/0b/0o value: {text!r}")
    digits = text[2:]
    bits = {16: 4, 2: 1, 8: 3}[base]
    full = (1 << bits) - 1
    value = int(digits.replace("*", "0"), base)
    mask = 0
    for d in digits:
        mask = (mask << bits) | (0 if d == "*" else full)
    return value, mask


def _lpm(text: str, width: int) -> tuple[int, int]:
    if "/" in text:
        v, _, plen = text.partition("/")
        value, length = parse_int(v), parse_int(plen)
    else:
        lower = text.lower()
        bits = 4 if lower.startswith("0x") else 1 if lower.startswith("0b") else 3 if lower.startswith("0o") else 0
        if bits == 0:
            text, bits = hex(parse_int(text)), 4
        value = int(text[2:].replace("*", "0"), {4: 16, 1: 2, 3: 8}[bits])
        length = (len(text) - 2 - text.count("*")) * bits
    length = min(length, width)
    value &= ((1 << width) - 1) & ~((1 << (width - length)) - 1)
    return value, length


class StfRunner:
    """One STF test on one loaded switch."""

    def __init__(self, sw: Switch) -> None:
        self.sw = sw
        self.info = sw.p4info
        self.outputs: dict[int, list[bytes]] = {}
        self.expects: dict[int, list[Expect]] = {}
        self.any_ports: set[int] = set()
        self.ports: set[int] = set()
        self.nodes: list[tuple[int, list[int]]] = []  # mc node handle -> (rid, ports)
        self.groups: dict[int, list[int]] = {}  # mc group -> node handles
        self.mc_mirrors: dict[int, int] = {}  # clone session -> mc group
        self.failures: list[str] = []

    # ------------------------------------------------------------------ naming
    def _table(self, name: str) -> p4i.Table:
        tables = list(self.info.tables)
        table: p4i.Table = tables[_pick([t.preamble.name for t in tables], name, "table")]
        return table

    def _action(self, table: p4i.Table, name: str) -> p4i.Action:
        ids = {r.id for r in table.action_refs}
        acts = [a for a in self.info.actions if a.preamble.id in ids]
        act: p4i.Action = acts[_pick([a.preamble.name for a in acts], name, f"action of table {table.preamble.name}:")]
        return act

    def _call(self, table: p4i.Table, spec_name: str, args: Sequence[tuple[str, str]]) -> ActionCall:
        act = self._action(table, spec_name)
        params: dict[int, int] = {}
        by_name = {p.name: p for p in act.params}
        for pname, text in args:
            p = by_name.get(pname)
            if p is None:
                raise StfError(f"action {act.preamble.name} has no parameter {pname}")
            params[p.id] = parse_int(text) & ((1 << p.bitwidth) - 1)
        return ActionCall(act.preamble.id, params)

    # ------------------------------------------------------------------ commands
    def add(self, st: Add) -> None:
        table = self._table(st.table)
        fields = list(table.match_fields)
        names = [f.name for f in fields]
        match: dict[int, Match] = {}
        for kname, text in st.keys:
            idx = None
            for cand in _key_names(kname):
                if cand in names:
                    idx = names.index(cand)
                    break
            if idx is None:
                idx = _pick(names, _key_names(kname)[1], f"key of table {table.preamble.name}:")
            f = fields[idx]
            kind = _MATCH_KIND.get(f.match_type, "exact")
            if kind == "ternary":
                value, mask = _number(text, f.bitwidth)
                match[f.id] = Match("ternary", value & mask, mask=mask)
            elif kind == "lpm":
                value, plen = _lpm(text, f.bitwidth)
                match[f.id] = Match("lpm", value, prefix_len=plen)
            elif kind == "range":
                lo, _, hi = text.partition("->")
                match[f.id] = Match("range", parse_int(lo), high=parse_int(hi or lo))
            else:
                value, mask = _number(text, f.bitwidth)
                if mask != (1 << f.bitwidth) - 1:
                    raise StfError(f"key {f.name} is {kind}: no wildcards")
                match[f.id] = Match(kind, value)
        needs_priority = any(_MATCH_KIND.get(f.match_type) in ("ternary", "range", "optional") for f in fields)
        priority = ((st.priority or 0) + 1) if needs_priority else 0
        call = self._call(table, st.action.name, st.action.args)
        self.sw.table_insert(TableEntry(table.preamble.id, match, call, priority=priority))

    def setdefault(self, st: SetDefault) -> None:
        table = self._table(st.table)
        self.sw.table_set_default(table.preamble.id, self._call(table, st.action.name, st.action.args))

    def check_counter(self, st: CheckCounter) -> None:
        index = parse_int(st.index)
        packets, bytes_ = self.sw.counter_read(self.sw.entity_id("counter", st.name), index)
        if st.kind is None:
            return
        got = packets if st.kind == "packets" else bytes_
        if not _OPS[st.op](got, st.value):
            self.failures.append(f"line {st.line}: counter {st.name}[{index}] {st.kind} is {got}, "
                                 f"expected {st.op} {st.value}")

    def _sync_mc(self) -> None:
        for g, handles in self.groups.items():
            self.sw.mc_group_set(g, self._replicas(handles))
        for session, g in self.mc_mirrors.items():
            self.sw.clone_session_set(session, self._replicas(self.groups.get(g, [])))

    def _replicas(self, handles: Iterable[int]) -> list[tuple[int, int]]:
        return [(port, rid) for h in handles for rid, ports in [self.nodes[h]] for port in ports]

    def command(self, st: Command) -> None:
        a = list(st.args)
        n = st.name
        if n in ("wait", "no_packet") or n.endswith(("_read", "_get", "_get_rates")):
            return
        if n == "remove_all":
            for t in self.info.tables:
                for e in self.sw.table_entries(t.preamble.id):
                    self.sw.table_delete(e)
        elif n == "mirroring_add":
            self.mc_mirrors.pop(parse_int(a[0]), None)
            self.sw.clone_session_set(parse_int(a[0]), [(parse_int(a[1]), 0)])
        elif n == "mirroring_add_mc":
            self.mc_mirrors[parse_int(a[0])] = parse_int(a[1])
            self._sync_mc()
        elif n == "mirroring_delete":
            self.mc_mirrors.pop(parse_int(a[0]), None)
            self.sw.clone_session_delete(parse_int(a[0]))
        elif n == "mc_mgrp_create":
            self.groups[parse_int(a[0])] = []
            self._sync_mc()
        elif n == "mc_node_create":
            self.nodes.append((parse_int(a[0]), [parse_int(x) for x in a[1:]]))
        elif n == "mc_node_update":
            h = parse_int(a[0])
            self.nodes[h] = (self.nodes[h][0], [parse_int(x) for x in a[1:]])
            self._sync_mc()
        elif n == "mc_node_associate":
            self.groups.setdefault(parse_int(a[0]), []).append(parse_int(a[1]))
            self._sync_mc()
        elif n == "counter_write":
            self.sw.counter_write(self.sw.entity_id("counter", a[0]), parse_int(a[1]), parse_int(a[2]),
                                  parse_int(a[3]))
        elif n == "register_write":
            self.sw.register_write(self.sw.entity_id("register", a[0]), parse_int(a[1]), parse_int(a[2]))
        elif n == "register_reset":
            rid = self.sw.entity_id("register", a[0])
            for i in range(self.sw.register_size(rid)):
                self.sw.register_write(rid, i, 0)
        elif n in ("meter_set_rates", "meter_array_set_rates"):
            mid = self.sw.entity_id("meter", a[0])
            rates = a[2:] if n == "meter_set_rates" else a[1:]
            conf = _meter_config(rates)
            indexes = [parse_int(a[1])] if n == "meter_set_rates" else range(_meter_size(self.info, mid))
            for i in indexes:
                self.sw.meter_write(mid, i, conf)
        else:
            raise StfError(f"command {n} is not run by p4sim's STF runner")

    def packet(self, st: Packet) -> None:
        self.ports.add(st.port)
        for port, data in self.sw.process(st.port, st.data):
            self.outputs.setdefault(port, []).append(data)

    def expect(self, st: Expect) -> None:
        self.ports.add(st.port)
        if st.pattern is None:
            self.any_ports.add(st.port)
        else:
            self.any_ports.discard(st.port)
            self.expects.setdefault(st.port, []).append(st)

    def run(self, statements: Sequence[Statement]) -> None:
        for st in statements:
            try:
                if isinstance(st, Packet):
                    self.packet(st)
                elif isinstance(st, Expect):
                    self.expect(st)
                elif isinstance(st, Add):
                    self.add(st)
                elif isinstance(st, SetDefault):
                    self.setdefault(st)
                elif isinstance(st, CheckCounter):
                    self.check_counter(st)
                else:
                    self.command(st)
            except (StfError, P4simError) as exc:
                raise StfError(f"line {st.line}: {exc}") from None

    def verdict(self) -> list[str]:
        """Why the outputs differ from the expectations (empty: they match)."""
        errors = list(self.failures)
        for port in sorted(self.ports):
            if port in self.any_ports:
                continue
            want = self.expects.get(port, [])
            got = self.outputs.get(port, [])
            if len(want) != len(got):
                errors.append(f"port {port}: expected {len(want)} packets, got {len(got)}"
                              + (f" (first: {got[0].hex().upper()})" if got and not want else ""))
                continue
            for i, (exp, data) in enumerate(zip(want, got, strict=True)):
                assert exp.pattern is not None
                why = match_packet(exp.pattern, exp.exact, data)
                if why is not None:
                    errors.append(f"port {port} packet {i} (expect at line {exp.line}): {why}")
                    break
        return errors


def _meter_config(rates: Sequence[str]) -> MeterConfig:
    """bmv2 ``RATE:BURST RATE:BURST`` (committed, peak; rate in units per microsecond)."""
    pairs = []
    for r in rates:
        rate, _, burst = r.partition(":")
        pairs.append((float(rate) * 1e6, parse_int(burst)))
    if len(pairs) != 2:
        raise StfError("meter rates need two RATE:BURST pairs")
    (cir, cburst), (pir, pburst) = pairs
    return MeterConfig(int(cir), cburst, int(pir), pburst)


def _meter_size(info: p4i.P4Info, meter_id: int) -> int:
    for m in info.meters:
        if m.preamble.id == meter_id:
            return int(m.size)
    raise StfError(f"no meter {meter_id}")


def run_test(p4: Path, engine: str = "python") -> Result:
    """Compile ``p4`` and run its ``.stf``."""
    start = time.monotonic()
    try:
        statements = parse_stf(p4.with_suffix(".stf").read_text())
    except (OSError, StfError) as exc:
        return Result(p4, "FAIL", f"stf: {exc}", time.monotonic() - start)
    try:
        sw = load_switch(str(p4), [str(p4.parent)], {}, engine=engine)
    except CompileError as exc:
        return Result(p4, "REFUSED", str(exc).strip().splitlines()[0], time.monotonic() - start)
    except P4simError as exc:
        return Result(p4, "REFUSED", exc.message, time.monotonic() - start)
    runner = StfRunner(sw)
    try:
        runner.run(statements)
    except StfError as exc:
        return Result(p4, "FAIL", f"stf {exc}", time.monotonic() - start)
    errors = runner.verdict()
    return Result(p4, "FAIL" if errors else "PASS", "; ".join(errors), time.monotonic() - start)


def collect(paths: Iterable[str]) -> list[Path]:
    """The tests named by ``paths``: a ``.p4`` or ``.stf`` file, or a directory (its v1model tests)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*.p4") if x.is_file()):
                if f.with_suffix(".stf").exists() and re.search(r"#include\s*[<\"]v1model\.p4[>\"]", f.read_text()):
                    out.append(f)
        else:
            out.append(p.with_suffix(".p4"))
    return out


def stf_cmd(args: argparse.Namespace) -> int:
    tests = collect(args.paths)
    counts = {"PASS": 0, "FAIL": 0, "REFUSED": 0}
    for p in tests:
        r = run_test(p, args.engine)
        counts[r.verdict] += 1
        line = f"{r.verdict:7} {p}" + (f": {r.reason}" if r.reason else "")
        print(line if args.verbose or len(line) < 400 else line[:397] + "...", flush=True)
    failed = counts["FAIL"] + counts["REFUSED"]
    print(f"{counts['PASS']} passed, {failed} failed ({counts['REFUSED']} refused by the front end)")
    return 0 if failed == 0 else 1


def register_stf(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "stf", help="run p4c STF tests (program.p4 + program.stf) on p4sim",
        description="Run STF tests (p4c's testdata/p4_16_samples format) in process on p4sim: "
        "a .p4 with its .stf, or a directory of them (its v1model programs).")
    p.add_argument("paths", nargs="+", metavar="PATH", help="a .p4/.stf file or a directory")
    p.add_argument("--engine", choices=["python", "native"], default="python",
                   help="p4sim engine (default python: no C build per program)")
    p.add_argument("-v", "--verbose", action="store_true", help="print long failure reasons whole")
    p.set_defaults(func=stf_cmd)

