"""Replication frames built from any msgpack value, for the tests that send what no message
encodes (`contract.replication.encode` only takes messages): unknown types, missing fields,
fuzzed maps."""

from __future__ import annotations

from typing import Any

import msgpack

from contract.replication import LEN


def raw_frame(obj: Any) -> bytes:
    """A length-prefixed frame whose body is `obj` in msgpack."""
    body: bytes = msgpack.packb(obj, use_bin_type=True)
    return LEN.pack(len(body)) + body
