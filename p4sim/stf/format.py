"""The STF test format of p4c's sample programs (``testdata/p4_16_samples/*.stf``), parsed.

An STF file is a list of commands, one a line, run in order against the program beside it
(p4c's ``backends/bmv2/bmv2stf.py`` and ``tools/stf/``); ``#`` starts a comment:

* ``packet PORT HEX...``: inject a packet (hex digits, spaces allowed);
* ``expect PORT HEX...[$]``: the next packet out of PORT; ``*`` matches any hex digit, ``$`` at
  the end says the packet has exactly this length (without it, longer packets match);
  ``expect PORT`` alone: anything (or nothing) may come out of PORT;
* ``add TABLE [PRIORITY] KEY:VALUE... ACTION(PARAM:VALUE, ...)``: a table entry. A value is
  decimal, ``0x`` hex, ``0b`` binary or ``0o`` octal; in a ternary key a ``*`` digit is a
  wildcard, an lpm value is ``VALUE/LEN`` or has the prefix length of its digits;
* ``setdefault TABLE ACTION(...)``, ``remove all``, ``wait``, ``check_counter NAME(INDEX)
  [packets|bytes OP VALUE]``;
* the simple_switch_CLI commands bmv2stf passes through: ``mirroring_add[_mc]``,
  ``mirroring_delete``, ``mc_mgrp_create``, ``mc_node_create``, ``mc_node_update``,
  ``mc_node_associate``, ``counter_write``, ``register_write``, ``register_reset``,
  ``meter_set_rates``, ``meter_array_set_rates`` (and the read-only ``*_read``/``*_get``, which
  check nothing).

The runner is `p4sim.stf.run`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PASSTHROUGH = frozenset({
    "mirroring_add", "mirroring_add_mc", "mirroring_delete", "mirroring_get", "mc_mgrp_create",
    "mc_node_create", "mc_node_update", "mc_node_associate", "counter_read", "counter_write",
    "register_read", "register_write", "register_reset", "meter_get_rates", "meter_set_rates",
    "meter_array_set_rates",
})


class StfError(Exception):
    """A line of an STF file that cannot be parsed (or run)."""


@dataclass(frozen=True)
class Packet:
    line: int
    port: int
    data: bytes


@dataclass(frozen=True)
class Expect:
    line: int
    port: int
    pattern: str | None  # upper-case hex with '*' wildcards; None: anything on this port
    exact: bool = False  # '$': the packet has exactly the pattern's length


@dataclass(frozen=True)
class ActionSpec:
    name: str
    args: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Add:
    line: int
    table: str
    priority: int | None
    keys: tuple[tuple[str, str], ...]  # (key name, value text as written)
    action: ActionSpec


@dataclass(frozen=True)
class SetDefault:
    line: int
    table: str
    action: ActionSpec


@dataclass(frozen=True)
class CheckCounter:
    line: int
    name: str
    index: str
    kind: str | None = None  # "packets" | "bytes"
    op: str = "=="
    value: int = 0


@dataclass(frozen=True)
class Command:
    """``wait``, ``remove all`` and the simple_switch_CLI pass-through commands."""

    line: int
    name: str
    args: tuple[str, ...] = field(default=())


Statement = Packet | Expect | Add | SetDefault | CheckCounter | Command

_HEX = re.compile(r"[0-9a-fA-F]*")
_ACTION = re.compile(r"([A-Za-z_$][\w$.\[\]]*)\s*\((.*)\)\s*(?:=\s*\S+)?\s*$")


def parse_int(text: str) -> int:
    """An STF number (decimal, 0x, 0b, 0o); StfError if it is not one."""
    try:
        return int(text, 0) if not text.isdigit() else int(text, 10)
    except ValueError:
        raise StfError(f"not a number: {text!r}") from None


def parse_stf(text: str) -> list[Statement]:
    """The statements of an STF file, in order; StfError naming the line of a bad one."""
    out: list[Statement] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            out.append(_statement(lineno, line))
        except StfError as exc:
            raise StfError(f"line {lineno}: {exc}") from None
    return out


def _statement(lineno: int, line: str) -> Statement:
    cmd, _, rest = line.partition(" ")
    cmd = cmd.lower()
    rest = rest.strip()
    if cmd == "packet":
        port, data = _port_data(rest)
        if "*" in data or "$" in data:
            raise StfError("a packet cannot have wildcards")
        if len(data) % 2:
            raise StfError("packet data has an odd number of hex digits")
        return Packet(lineno, port, bytes.fromhex(data))
    if cmd == "expect":
        port, data = _port_data(rest)
        if not data:
            return Expect(lineno, port, None)
        exact = data.endswith("$")
        pattern = data[:-1] if exact else data
        if "$" in pattern or not re.fullmatch(r"[0-9A-F*]*", pattern):
            raise StfError(f"bad expected packet {data!r}")
        return Expect(lineno, port, pattern, exact)
    if cmd == "add":
        return _add(lineno, rest)
    if cmd == "setdefault":
        table, _, call = rest.partition(" ")
        return SetDefault(lineno, table, _action(call))
    if cmd == "check_counter":
        m = re.fullmatch(r"([\w$.\[\]]+)\s*\(\s*(\w+)\s*\)\s*(?:(packets|bytes)\s*(==|!=|<=|<|>=|>)\s*(\S+))?", rest)
        if m is None:
            raise StfError(f"bad check_counter {rest!r}")
        if m.group(3) is None:
            return CheckCounter(lineno, m.group(1), m.group(2))
        return CheckCounter(lineno, m.group(1), m.group(2), m.group(3), m.group(4), parse_int(m.group(5)))
    if cmd == "wait":
        return Command(lineno, "wait")
    if cmd == "remove":
        if rest.lower() != "all":
            raise StfError("only 'remove all' is known")
        return Command(lineno, "remove_all")
    if cmd == "no_packet":
        return Command(lineno, "no_packet")
    if cmd in PASSTHROUGH:
        return Command(lineno, cmd, tuple(rest.split()))
    raise StfError(f"unknown command {cmd!r}")


def _port_data(rest: str) -> tuple[int, str]:
    port, _, data = rest.partition(" ")
    if not port.isdigit():
        raise StfError(f"bad port {port!r}")
    return int(port), "".join(data.split()).upper()


def _action(text: str) -> ActionSpec:
    m = _ACTION.fullmatch(text.strip())
    if m is None:
        raise StfError(f"bad action call {text!r}")
    args: list[tuple[str, str]] = []
    body = m.group(2).strip()
    if body:
        for part in body.split(","):
            name, colon, value = part.partition(":")
            if not colon or not name.strip() or not value.strip():
                raise StfError(f"bad action argument {part.strip()!r}")
            args.append((name.strip(), value.strip()))
    return ActionSpec(m.group(1), tuple(args))


def _add(lineno: int, rest: str) -> Add:
    paren = rest.find("(")
    if paren < 0:
        raise StfError("add without an action call")
    head = re.sub(r"\s*:\s*", ":", rest[:paren]).split()
    if len(head) < 2:
        raise StfError("add needs a table and an action")
    call = head[-1] + rest[paren:]
    words = head[:-1]
    table = words.pop(0)
    priority = None
    if words and ":" not in words[0]:
        priority = parse_int(words.pop(0))
    keys: list[tuple[str, str]] = []
    for w in words:
        name, colon, value = w.partition(":")
        if not colon or not name or not value:
            raise StfError(f"bad key {w!r}")
        keys.append((name, value))
    return Add(lineno, table, priority, tuple(keys), _action(call))


def match_packet(pattern: str, exact: bool, got: bytes) -> str | None:
    """None if ``got`` matches the expect pattern (as p4c's ``testutils.compare_pkt``), else why not."""
    hexed = got.hex().upper()
    if exact and len(hexed) > len(pattern):
        return f"packet too long: {len(hexed) // 2} bytes, expected {len(pattern) // 2}"
    if len(hexed) < len(pattern):
        return f"packet too short: {len(hexed) // 2} bytes, expected {(len(pattern) + 1) // 2}"
    for i, want in enumerate(pattern):
        if want != "*" and want != hexed[i]:
            return f"differs at byte {i // 2} (hex digit {i}): expected {pattern} got {hexed}"
    return None
