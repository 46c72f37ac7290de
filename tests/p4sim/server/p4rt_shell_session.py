"""A scripted p4runtime-shell session against a P4Runtime server; run with the p4rt-shell venv's
Python (it pins an old protobuf, so it cannot share the project venv).

    python p4rt_shell_session.py real|digest ADDR P4INFO DEVICE_CONFIG

Prints one JSON line with what it observed; exits non-zero on any error.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any


def real_session(sh: Any) -> dict[str, object]:
    out: dict[str, object] = {}
    te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.ipv4_forward")
    te.match["dst_addr"] = "10.0.2.0/24"
    te.action["dst_addr"] = "02:00:00:00:00:02"
    te.action["port"] = "2"
    te.insert()
    te.action["port"] = "3"
    te.modify()
    cpu = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.send_to_cpu")
    cpu.match["dst_addr"] = "10.0.9.0/24"
    cpu.insert()
    out["entries"] = sorted(
        (
            e.msg().match[0].lpm.value.hex(),
            e.msg().match[0].lpm.prefix_len,
            [p.value.hex() for p in e.msg().action.action.params],
        )
        for e in sh.TableEntry("MyIngress.ipv4_lpm").read()
    )
    te.delete()
    out["after_delete"] = len(list(sh.TableEntry("MyIngress.ipv4_lpm").read()))
    mc = sh.MulticastGroupEntry(1).add(1, 1).add(2, 1)
    mc.insert()
    out["mcast"] = [
        (g.group_id, sorted((r._msg.egress_port, r._msg.instance) for r in g.replicas))
        for g in sh.MulticastGroupEntry().read()
    ]
    # packet-out on port 7; the test wires port 7 back into port 5, whose packet goes to the CPU
    pin = sh.PacketIn()
    frame = bytes.fromhex(
        "0200000000010200000000090800450000200001000040110000"
        "0a0001010a000909"
        "04d2005000080000" + "00" * 4
    )
    sh.PacketOut(frame, egress_port="7", _pad="0").send()
    msgs = list(pin.sniff(timeout=1.5))
    out["packet_in"] = [
        (m.packet.payload.hex(), {md.metadata_id: md.value.hex() for md in m.packet.metadata})
        for m in msgs
    ]
    c = sh.CounterEntry("MyIngress.port_packets")
    c.index = 5
    out["counter"] = [(e.index, e.packet_count) for e in c.read()]
    return out


def digest_session(sh: Any) -> dict[str, object]:
    de = sh.DigestEntry("learn_t")
    de.max_timeout_ns = 0
    de.max_list_size = 1
    de.ack_timeout_ns = 1000000000
    de.insert()
    dl = sh.DigestList()
    sh.PacketOut(
        bytes.fromhex("ffffffffffff02000000000b0800") + bytes(46), egress_port="7", _pad="0"
    ).send()
    lists = list(dl.sniff(timeout=1.5))
    return {
        "digests": [
            [[m.bitstring.hex() for m in d.struct.members] for d in x.digest.data] for x in lists
        ]
    }


def main() -> None:
    sh: Any = importlib.import_module("p4runtime_sh.shell")

    mode, addr, p4info, blob = sys.argv[1:5]
    sh.setup(
        device_id=1,
        grpc_addr=addr,
        election_id=(0, 1),
        config=sh.FwdPipeConfig(p4info, blob),
        verbose=False,
    )
    try:
        out = real_session(sh) if mode == "real" else digest_session(sh)
        print(json.dumps(out), flush=True)
    finally:
        sh.teardown()


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    os._exit(0)
