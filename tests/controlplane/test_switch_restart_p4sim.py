"""A switch restart on the real program, with a switch that serves no register (p4sim's
`--no-register-access`, as BMv2's P4Runtime server): the controller reconnects, reinstalls every
entry, and each slot's numbering goes on after the highest number its NFs received, carried by
the slot_owner entry's seq_base and the `slot_traffic` count, never a register."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from contract.shim import Kind
from mgmt.pki import local_pki
from p4sim.server.device import Device
from p4sim.server.service import Server, serve, tls_credentials
from tests.controlplane.fake_nf import FakeNf
from tests.controlplane.test_controller_p4sim import (
    controller_running,
    flow_frame,
    inject,
    loopback_config,
    wait_until,
)
from tests.controlplane.test_switch_session import compile_program

# P4Runtime over mutual TLS, as the controller connects by default (docs/security.md)
SWITCH_TLS = tls_credentials(local_pki())

pytestmark = pytest.mark.etcd


def switch(address: str, out: list[tuple[int, bytes]]) -> Server:
    """A p4sim P4Runtime server without a program and without register access."""
    server = serve(Device(device_id=1, cpu_port=510, serve_registers=False), address,
                   tls=SWITCH_TLS)
    server.device.port_sender = lambda port, data: out.append((port, data))
    return server


def test_after_a_restart_without_registers_each_slot_numbers_on_from_its_nfs(
        etcd_server: Any, tmp_path: Path) -> None:
    p4info, blob = compile_program(tmp_path)
    out: list[tuple[int, bytes]] = []
    servers = [switch("127.0.0.1:0", out)]
    cfg, ports = loopback_config(servers[0].port, etcd_server.endpoint, slot_bits=12)
    fakes = {i: FakeNf(i) for i in ports}
    frame = flow_frame()

    def send() -> dict[int, Any]:
        """One frame of the flow in, on the switch running now; the shims of its copies."""
        return inject(servers[-1], out, frame)

    async def run() -> None:
        async with controller_running(cfg, fakes, ports, p4info=p4info, device_config=blob) as c:
            await wait_until(lambda: c.session.is_primary and c.last_reconcile is not None, 30)
            await wait_until(lambda: len(c.nfs_configured) == len(ports), 30)
            seqs = []
            for _ in range(3):
                shims = await asyncio.to_thread(send)
                assert len(shims) == 2, shims
                seqs.append(next(s.seq for s in shims.values() if s.kind == Kind.PRIMARY))
            assert seqs == [1, 2, 3]
            slot = next(iter(shims.values())).slot
            owner = c.slot_map.owner(slot)
            backup = c.pairs[owner]
            assert backup is not None
            # the NFs received up to 700 (the owner) and 703 (copies only its backup holds)
            fakes[owner].seen, fakes[backup].seen = {slot: 700}, {slot: 703}

            reconciled = c.reconciled_at
            servers[-1].stop(grace=None)  # the switch dies, and comes back empty
            servers.append(switch(f"127.0.0.1:{servers[0].port}", out))
            await wait_until(lambda: c.reconciled_at != reconciled and c.session.is_primary, 60)
            assert c.last_reconcile is not None and c.last_reconcile["insert"] > 4096
            assert c.metrics.registry.get_sample_value("nfc_numbering_resumed_total") == 1
            after = []
            for _ in range(2):
                shims = await asyncio.to_thread(send)
                by_kind = {s.kind: s for s in shims.values()}
                assert by_kind[Kind.PRIMARY].seq == by_kind[Kind.BACKUP].seq
                after.append(by_kind[Kind.PRIMARY].seq)
            assert after == [704, 705]  # not 1, 2: the NFs would drop those as duplicates
            # the number the controller hands out for the slot agrees with the switch's
            next_seqs = await c.next_seqs()
            assert next_seqs is not None and next_seqs[slot] == 706

    try:
        asyncio.run(run())
    finally:
        for server in servers:
            server.stop(grace=None)
