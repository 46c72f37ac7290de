"""Parsing of the address parameters the example NFs take (prefixes, address lists, addresses)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


def parse_prefixes(value: object, what: str) -> list[tuple[int, int]]:
    """A prefix or a list of prefixes ("10.0.0.0/8") as (network, mask) integer pairs."""
    if isinstance(value, str):
        items: list[object] = [value]
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        raise ValueError(f"{what} must be a prefix or a list of prefixes, not {value!r}")
    out: list[tuple[int, int]] = []
    for item in items:
        try:
            net = ipaddress.IPv4Network(str(item), strict=False)
        except ValueError as exc:
            raise ValueError(f"{what}: {item!r} is not an IPv4 prefix ({exc})") from None
        out.append((int(net.network_address), int(net.netmask)))
    return out


def in_prefixes(addr: int, prefixes: list[tuple[int, int]]) -> bool:
    return any(addr & mask == net for net, mask in prefixes)


def parse_addr(value: object, what: str) -> int:
    """One IPv4 address ("192.0.2.1") as an integer."""
    try:
        return int(ipaddress.IPv4Address(str(value)))
    except ValueError:
        raise ValueError(f"{what}: {value!r} is not an IPv4 address") from None


def addr_str(addr: int) -> str:
    return str(ipaddress.IPv4Address(addr))
