"""Match-action tables at run time: entries, lookup structures (exact dict, LPM levels, priority list)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ActionFn = Callable[..., None]


@dataclass
class BoundAction:
    """An action as a table can run it: the generated function and its data parameter widths."""

    name: str
    fn: ActionFn
    widths: list[int]
    scope: str = "TABLE_AND_DEFAULT"  # or TABLE_ONLY, DEFAULT_ONLY


class Entry:
    __slots__ = ("action", "args", "bytes", "fn", "group_id", "key", "match", "member_id", "packets",
                 "priority", "res")

    def __init__(self, match: tuple[Any, ...], priority: int) -> None:
        self.match = match  # normalized per-field specs
        self.priority = priority
        self.key = (match, priority)
        self.action = ""
        self.fn: ActionFn | None = None
        self.args: tuple[int, ...] = ()
        self.res: tuple[bool, str] = (True, "")
        self.member_id: int | None = None
        self.group_id: int | None = None
        self.packets = 0
        self.bytes = 0

    def set_action(self, ba: BoundAction, args: tuple[int, ...]) -> None:
        self.action = ba.name
        self.fn = ba.fn
        self.args = args
        self.res = (True, ba.name)


@dataclass
class Profile:
    """An action profile or selector: members (actions with data) and groups of members."""

    name: str
    size: int
    selector: bool
    members: dict[int, tuple[BoundAction, tuple[int, ...]]] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)
    group_max: dict[int, int] = field(default_factory=dict)


class Table:
    """One table. ``kinds`` are the match kinds of the key fields, ``widths`` their bit widths."""

    def __init__(self, name: str, kinds: list[str], widths: list[int], size: int) -> None:
        self.name = name
        self.kinds = kinds
        self.widths = widths
        self.size = size
        self.actions: dict[str, BoundAction] = {}
        self.entries: dict[Any, Entry] = {}
        self.default: tuple[ActionFn, tuple[int, ...]] = (lambda s: None, ())
        self.default_res: tuple[bool, str] = (False, "")
        self.default_name = ""
        self.default_args: tuple[int, ...] = ()
        self.profile: Profile | None = None
        self.const_entries = False
        self.lookup: Callable[[tuple[Any, ...]], Entry | None] = self._miss
        self._exact: dict[Any, Entry] = {}
        self._levels: list[tuple[int, dict[Any, Entry]]] = []
        self._lpm_index = -1
        self._sorted: list[tuple[Entry, list[tuple[str, int, int]]]] = []
        self.needs_priority = any(k in ("ternary", "range", "optional") for k in kinds)
        self.rebuild()

    # ------------------------------------------------------------- entries
    def set_default(self, ba: BoundAction, args: tuple[int, ...]) -> None:
        self.default = (ba.fn, args)
        self.default_res = (False, ba.name)
        self.default_name = ba.name
        self.default_args = args

    def normalize(self, specs: list[tuple[str, int, int | None]]) -> tuple[Any, ...]:
        """specs per field: (kind, value, mask/prefix_len/high); returns the canonical match."""
        out: list[Any] = []
        for (kind, value, extra), w in zip(specs, self.widths, strict=True):
            full = (1 << w) - 1
            if kind == "exact":
                out.append(value)
            elif kind == "lpm":
                plen = w if extra is None else extra
                mask = full ^ ((1 << (w - plen)) - 1)
                out.append((value & mask, plen))
            elif kind == "ternary":
                mask = full if extra is None else extra
                out.append((value & mask, mask))
            elif kind == "range":
                out.append((value, full if extra is None else extra))
            elif kind == "optional":
                out.append((value, extra != 0))
            else:  # pragma: no cover
                raise ValueError(kind)
        return tuple(out)

    def add(self, e: Entry) -> None:
        self.entries[e.key] = e
        if self.lookup == self._lookup_exact:
            self._exact[e.match] = e
        elif self.lookup in (self._lookup_lpm1, self._lookup_lpm) and self._add_lpm(e):
            pass
        else:
            self.rebuild()

    def remove(self, key: Any) -> Entry:
        e = self.entries.pop(key)
        if self.lookup == self._lookup_exact:
            self._exact.pop(e.match, None)
        else:
            self.rebuild()
        return e

    def _add_lpm(self, e: Entry) -> bool:
        """Add to an existing prefix-length level; False if a new level is needed (rebuild)."""
        i = self._lpm_index
        value, plen = e.match[i]
        w = self.widths[i]
        mask = ((1 << w) - 1) ^ ((1 << (w - plen)) - 1)
        for m, d in self._levels:
            if m == mask:
                key = (*e.match[:i], value, *e.match[i + 1 :])
                d[key[0] if len(self.kinds) == 1 else key] = e
                return True
        self.rebuild()
        return True

    def clear(self) -> None:
        self.entries.clear()
        self.rebuild()

    # ------------------------------------------------------------- lookup structures
    def rebuild(self) -> None:
        kinds = self.kinds
        if not kinds:
            self.lookup = self._miss
            return
        if all(k == "exact" for k in kinds):
            self._exact = {e.match: e for e in self.entries.values()}
            self.lookup = self._lookup_exact
            return
        lpms = [i for i, k in enumerate(kinds) if k == "lpm"]
        if len(lpms) == 1 and all(k in ("exact", "lpm") for k in kinds):
            i = lpms[0]
            self._lpm_index = i
            w = self.widths[i]
            levels: dict[int, dict[Any, Entry]] = {}
            for e in self.entries.values():
                value, plen = e.match[i]
                key = (*e.match[:i], value, *e.match[i + 1 :])
                levels.setdefault(plen, {})[key[0] if len(kinds) == 1 else key] = e
            full = (1 << w) - 1
            self._levels = [(full ^ ((1 << (w - p)) - 1), levels[p]) for p in sorted(levels, reverse=True)]
            self.lookup = self._lookup_lpm1 if len(kinds) == 1 else self._lookup_lpm
            return
        rows = []
        for e in self.entries.values():
            spec: list[tuple[str, int, int]] = []
            for (k, m), w in zip(zip(kinds, e.match, strict=True), self.widths, strict=True):
                full = (1 << w) - 1
                if k == "exact":
                    spec.append(("m", m, full))
                elif k == "lpm":
                    value, plen = m
                    spec.append(("m", value, full ^ ((1 << (w - plen)) - 1)))
                elif k == "ternary":
                    spec.append(("m", m[0], m[1]))
                elif k == "optional":
                    spec.append(("m", m[0], full if m[1] else 0))
                else:
                    spec.append(("r", m[0], m[1]))
            rows.append((e, spec))
        if self.needs_priority:
            rows.sort(key=lambda r: -r[0].priority)
        else:  # lpm combined with other kinds: longest prefix first
            rows.sort(key=lambda r: -sum(bin(x[2]).count("1") for x in r[1]))
        self._sorted = rows
        self.lookup = self._lookup_linear

    def _miss(self, key: tuple[Any, ...]) -> Entry | None:
        return None

    def _lookup_exact(self, key: tuple[Any, ...]) -> Entry | None:
        return self._exact.get(key)

    def _lookup_lpm1(self, key: tuple[Any, ...]) -> Entry | None:
        v = key[0]
        for mask, d in self._levels:
            e = d.get(v & mask)
            if e is not None:
                return e
        return None

    def _lookup_lpm(self, key: tuple[Any, ...]) -> Entry | None:
        i = self._lpm_index
        head, v, tail = key[:i], key[i], key[i + 1 :]
        for mask, d in self._levels:
            e = d.get((*head, v & mask, *tail))
            if e is not None:
                return e
        return None

    def _lookup_linear(self, key: tuple[Any, ...]) -> Entry | None:
        for e, spec in self._sorted:
            for (kind, a, b), k in zip(spec, key, strict=True):
                if kind == "m":
                    if k & b != a:
                        break
                elif not a <= k <= b:
                    break
            else:
                return e
        return None

    # ------------------------------------------------------------- action profiles
    def resolve(self, e: Entry, selkey: tuple[int, ...]) -> tuple[ActionFn | None, tuple[int, ...], tuple[bool, str]]:
        """The action of an entry of a table with an action profile or selector."""
        prof = self.profile
        if prof is None:
            return e.fn, e.args, e.res
        mid = e.member_id
        if e.group_id is not None:
            members = prof.groups.get(e.group_id) or []
            if not members:
                return None, (), (True, "")
            h = hash(selkey) if len(members) > 1 else 0
            mid = members[h % len(members)]
        m = prof.members.get(mid) if mid is not None else None
        if m is None:
            return None, (), (True, "")
        ba, args = m
        return ba.fn, args, (True, ba.name)
