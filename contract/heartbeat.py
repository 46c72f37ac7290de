"""The UDP heartbeat datagrams between the controller and each NF worker.

A request carries the controller's session (random per controller run) and a counter; the reply
echoes both with the NF's id, the worker's index and its uptime. Each datagram ends with a tag:
HMAC-SHA256 with the NF's heartbeat key, truncated to `TAG` bytes (zeros without a key). The
controller's side is `controlplane/liveness.py`, the NF's `nf_host/liveness.py`.

    request  !4sQQ     magic "NFHB", session, counter                         + tag
    reply    !4sQQHHQ  magic, session, counter, NF id, worker, uptime ms      + tag
"""

from __future__ import annotations

import hashlib
import hmac
import struct

MAGIC = b"NFHB"
TAG = 16  # bytes of HMAC-SHA256 kept
REQUEST = struct.Struct("!4sQQ")  # magic, session, counter (+ tag)
REPLY = struct.Struct("!4sQQHHQ")  # magic, session, counter, NF id, worker, uptime ms (+ tag)
NO_TAG = bytes(TAG)


def mac(key: bytes | None, body: bytes) -> bytes:
    """The tag of a heartbeat datagram: HMAC-SHA256 with the NF's key, truncated to TAG bytes;
    zeros without a key (`tls: false`: heartbeats unauthenticated, docs/security.md)."""
    return hmac.new(key, body, hashlib.sha256).digest()[:TAG] if key is not None else NO_TAG


def authentic(key: bytes | None, body: bytes, tag: bytes) -> bool:
    return key is None or hmac.compare_digest(mac(key, body), tag)


def request(counter: int, key: bytes | None = None, session: int = 0) -> bytes:
    """A heartbeat request: the controller's `session` (random per controller run: a reply
    recorded in another run does not answer this one) and its counter, tagged with the NF's key."""
    body = REQUEST.pack(MAGIC, session & 0xFFFFFFFFFFFFFFFF, counter & 0xFFFFFFFFFFFFFFFF)
    return body + mac(key, body)


def parse_request(data: bytes, key: bytes | None = None) -> tuple[int, int] | None:
    """(session, counter) of a heartbeat request, or None if `data` is not one or its tag is
    not `key`'s."""
    if len(data) != REQUEST.size + TAG:
        return None
    body, tag = data[:REQUEST.size], data[REQUEST.size:]
    magic, session, counter = REQUEST.unpack(body)
    if magic != MAGIC or not authentic(key, body, tag):
        return None
    return int(session), int(counter)


def reply(counter: int, nf_id: int, index: int, uptime_ms: int, key: bytes | None = None,
          session: int = 0) -> bytes:
    body = REPLY.pack(MAGIC, session, counter, nf_id, index, uptime_ms)
    return body + mac(key, body)


def reply_fields(data: bytes) -> tuple[tuple[int, int, int, int, int], bytes, bytes] | None:
    """((session, counter, NF id, worker, uptime ms), body, tag) of a heartbeat reply, its tag not
    yet checked (the key is the NF's, named inside), or None if `data` is not one."""
    if len(data) != REPLY.size + TAG:
        return None
    body, tag = data[:REPLY.size], data[REPLY.size:]
    magic, session, counter, nf_id, index, uptime = REPLY.unpack(body)
    if magic != MAGIC:
        return None
    return (int(session), int(counter), int(nf_id), int(index), int(uptime)), body, tag


def parse_reply(data: bytes, key: bytes | None = None) -> tuple[int, int, int, int] | None:
    """(counter, NF id, worker index, uptime ms) of a heartbeat reply tagged with `key`, or None."""
    parsed = reply_fields(data)
    if parsed is None or not authentic(key, parsed[1], parsed[2]):
        return None
    _session, counter, nf_id, index, uptime = parsed[0]
    return counter, nf_id, index, uptime
