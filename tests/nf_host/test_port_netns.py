"""A worker's data socket takes the frames of its own interface only, also those that arrive on
another interface of its node while the socket is being opened (a node holds several NFs' data
interfaces and its management one): such a frame used to be queued before `bind` and read
afterwards as the NF's input, where it counted as a malformed frame."""

from __future__ import annotations

import select
import socket

import pytest

from nf_host import fanout, port
from nf_host.harness import Netns

pytestmark = [pytest.mark.netns]


def frame(tag: bytes) -> bytes:
    return b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02" + b"\x08\x00" + tag.ljust(46)


def raw(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((iface, port.ETH_P_ALL))
    return s


def readable(sock: socket.socket, timeout: float = 5.0) -> bool:
    return bool(select.select([sock], [], [], timeout)[0])


def test_a_frame_on_another_interface_while_the_socket_opens_is_not_taken(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with Netns() as ns:
        a_nf, a_sw = ns.veth()
        b_nf, b_sw = ns.veth()

        def body() -> list[bytes]:
            send_a, send_b, witness = raw(a_sw), raw(b_sw), raw(b_nf)
            attach = fanout.attach

            def attach_then_a_frame_elsewhere(sock: socket.socket, prog: list[fanout.Insn]
                                              ) -> None:
                attach(sock, prog)
                send_b.send(frame(b"another NF's"))
                # the kernel hands a frame to every listening socket in one pass: once the
                # witness on that interface has it, the socket being opened had its chance too
                assert readable(witness), "the frame did not arrive"

            monkeypatch.setattr(fanout, "attach", attach_then_a_frame_elsewhere)
            sock = port.open_port(a_nf)
            try:
                send_a.send(frame(b"ours"))
                assert readable(sock), "our frame did not arrive"
                return list(port.recv_frames(sock))
            finally:
                for s in (sock, send_a, send_b, witness):
                    s.close()

        assert port.in_netns(ns.name, body) == [frame(b"ours")]
