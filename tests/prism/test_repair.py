"""TCP_REPAIR hand-off on loopback, in a private network namespace: a live connection with data
queued both ways is dumped, closed silently and restored in a new socket while a `blackhole rule
drops the peer's packets (the switch's lock); the peer sees no reset and every byte arrives."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from prism.private_netns import run_in_private_netns
from prism.protocol import Request, object_bytes, recv_exact
from prism.recovery import Held, resumed_state
from prism.repair import (
    RepairError,
    TcpState,
    close_silently,
    dump,
    park,
    probe,
    restore,
    snapshot,
)

pytestmark = pytest.mark.netns

SERVER = ("127.0.0.1", 7000)
CLIENT_ADDR = "127.0.0.2"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def lock() -> None:
    """Drop the client's segments to the server (what handoff_lock does): a blackhole rule for
    them ahead of the local table (moved from preference 0 to 100 for that)."""
    ip("rule", "add", "pref", "10", "from", CLIENT_ADDR, "to", SERVER[0], "blackhole")


def unlock() -> None:
    ip("rule", "del", "pref", "10")


def connected_pair() -> tuple[socket.socket, socket.socket, socket.socket]:
    ip("rule", "add", "pref", "100", "lookup", "local")
    ip("rule", "del", "pref", "0", "lookup", "local")
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(SERVER)
    listener.listen()
    client = socket.create_connection(SERVER, timeout=10, source_address=(CLIENT_ADDR, 0))
    server, _ = listener.accept()
    server.settimeout(10)
    return listener, client, server


def hand_off_with_queues() -> dict[str, object]:
    listener, client, server = connected_pair()
    request = object_bytes(1000, seed=1)
    client.sendall(request)                       # unread: the server's receive queue
    response = object_bytes(4 << 20, seed=2)
    server.setblocking(False)
    sent = 0
    try:                                          # the client reads nothing yet: the server's
        while sent < len(response):               # send queue fills (sent-unacked and unsent)
            sent += server.send(response[sent:sent + 65536])
    except BlockingIOError:
        pass
    server.setblocking(True)
    lock()
    state = dump(server)
    close_silently(server)
    moved = TcpState.decode(state.encode())
    new = restore(moved)
    unlock()
    new.settimeout(10)
    with ThreadPoolExecutor(1) as pool:           # the client reads the whole response
        reader = pool.submit(recv_exact, client, len(response))
        new.sendall(moved.unsent_bytes)           # the never-sent tail, after the unlock
        new.sendall(response[sent:])              # the rest, from the new socket
        got = reader.result(timeout=20)
    seen_request = recv_exact(new, len(request))
    client.sendall(b"after")
    after = recv_exact(new, 5)
    client.close()
    eof = new.recv(1)
    new.close()
    listener.close()
    return {"state": state, "sent": sent, "response_ok": got == response,
            "request_ok": seen_request == request, "after": after, "eof": eof}


def test_hand_off_keeps_both_queues_and_the_connection() -> None:
    out = run_in_private_netns(hand_off_with_queues)
    state = out["state"]
    assert isinstance(state, TcpState)
    assert len(state.recv_queue) == 1000
    assert 0 < len(state.send_queue) <= out["sent"]  # type: ignore[operator]
    assert out["response_ok"], "the client's bytes differ from the response"
    assert out["request_ok"], "the new socket did not get the old socket's unread request"
    assert out["after"] == b"after"
    assert out["eof"] == b"", "the client's FIN did not reach the new socket"


def crash_after_snapshot() -> dict[str, object]:
    """Mode "once" with snapshots, on loopback: the server reads a request, takes a live
    snapshot, goes on answering (1 MiB of 2), then crashes (locked, closed silently); the
    connection is resumed from the snapshot with the whole response as sent, and probed."""
    listener, client, server = connected_pair()
    req = Request(2 << 20, seed=3)
    response = object_bytes(req.size, req.seed)
    client.sendall(req.encode())
    got_req = Request.decode(recv_exact(server, 20))
    state = snapshot(server)                      # left running: the server answers on
    taken = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        reader = pool.submit(recv_exact, client, len(response))
        server.sendall(response[: 1 << 20])
        lock()                                    # the crash: nothing reaches it any more
        close_silently(server)
        held = Held(TcpState.decode(state.encode()), got_req, "once+snapshots", taken)
        new = restore(resumed_state(held))
        unlock()                                  # the switch's release
        probe(new)                                # the client says what it already has
        got = reader.result(timeout=20)
    new.settimeout(10)
    client.sendall(b"after")
    after = recv_exact(new, 5)
    client.close()
    eof = new.recv(1)
    new.close()
    listener.close()
    return {"state": state, "response_ok": got == response, "after": after, "eof": eof}


def test_a_snapshot_leaves_the_connection_running_and_resumes_it_after_a_crash() -> None:
    out = run_in_private_netns(crash_after_snapshot)
    state = out["state"]
    assert isinstance(state, TcpState)
    assert state.recv_queue == b"" and state.send_queue == b""  # the request read, no answer yet
    assert out["response_ok"], "the client's bytes differ from the response"
    assert out["after"] == b"after"
    assert out["eof"] == b"", "the client's FIN did not reach the resumed socket"


def stray_after_dump(keep: str) -> dict[str, int]:
    """A retransmission of the client's request reaches the old owner after its dump: the
    owner's ACKs are blackholed, so the client retransmits; meanwhile the owner dumps and
    either parks its socket (frozen) or closes it silently."""
    listener, client, server = connected_pair()
    ip("rule", "add", "pref", "10", "from", SERVER[0], "to", CLIENT_ADDR, "blackhole")
    client.sendall(b"r" * 20)
    recv_exact(server, 20)
    dump(server)
    park(server) if keep == "park" else close_silently(server)
    ip("rule", "del", "pref", "10")
    retransmitted = wait_for(lambda: tcp_info(client)["total_retrans"] > 0, 10.0)
    # a loopback RST answers the retransmission within milliseconds: half a second bounds it
    wait_for(lambda: bool(client_error(client)), 0.5)
    out = {"retransmitted": int(retransmitted), "error": client_error(client),
           "state": tcp_info(client)["state"]}
    client.close()
    listener.close()
    return out


def wait_for(check: Callable[[], bool], timeout: float) -> bool:
    """Poll the client's socket (no event says a segment arrived) until `check` or `timeout`."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def tcp_info(sock: socket.socket) -> dict[str, int]:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return {"state": raw[0], "total_retrans": int.from_bytes(raw[100:104], "little")}


def client_error(sock: socket.socket) -> int:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) or (tcp_info(sock)["state"] != 1)


@pytest.mark.parametrize("keep", ["park", "close"])
def test_a_parked_socket_absorbs_a_stray_retransmission(keep: str) -> None:
    """Parked: the client's retransmission meets the frozen socket, the client stays connected.
    Closed silently (the control): the host's kernel resets the client's connection."""
    out = run_in_private_netns(lambda: stray_after_dump(keep))
    assert out["retransmitted"]
    if keep == "park":
        assert not out["error"] and out["state"] == 1, out
    else:
        assert out["error"], out


def refuse_listening() -> str:
    listener = socket.socket()
    listener.bind(SERVER)
    listener.listen()
    try:
        dump(listener)
    except RepairError as exc:
        return str(exc)
    finally:
        listener.close()
    return ""


def test_dump_refuses_a_socket_not_established() -> None:
    assert "not ESTABLISHED" in run_in_private_netns(refuse_listening)
