"""Leadership by an etcd lease (controlplane/leader.py) on real etcd, and two whole controllers
(`lead_then_run`, as `nfc-controller run` runs it) against p4sim's P4Runtime service and fake NFs:
one leads, the other stands by without touching the switch or the NFs; when the leader goes, the
standby leads with a higher election id, resumes the slot map from etcd, and fails over an NF that
died while nobody led."""

from __future__ import annotations

import asyncio
import time

import pytest

from controlplane.__main__ import lead_then_run
from controlplane.controller import Controller
from controlplane.leader import Leadership, LeadershipLost
from mgmt.pki import local_pki
from p4sim.server.device import Device
from p4sim.server.service import serve, tls_credentials
from tests.controlplane.fake_engine import FakeEngine, fake_engine_factory
from tests.controlplane.fake_nf import FakeNf, FakeNfServer
from tests.controlplane.test_controller_p4sim import P4INFO, loopback_config, wait_until
from tests.support.etcd import EtcdCluster, EtcdServer
from tests.support.procs import free_port

# P4Runtime over mutual TLS, as the controller connects by default (docs/security.md)
SWITCH_TLS = tls_credentials(local_pki())

pytestmark = [pytest.mark.etcd, pytest.mark.slow]


def test_one_leader_a_standby_takes_over_when_the_lease_expires_or_is_resigned(
        etcd_cluster: EtcdCluster) -> None:
    async def run() -> None:
        prefix = f"/test-leader/{free_port()}"
        a = Leadership(etcd_cluster.endpoints, prefix, "a", ttl_s=1)
        b = Leadership(etcd_cluster.endpoints, prefix, "b", ttl_s=1)
        c = Leadership(etcd_cluster.endpoints, prefix, "c", ttl_s=1)
        try:
            term_a = await a.campaign()
            hold = asyncio.create_task(a.hold())
            waiting = asyncio.create_task(b.campaign())
            await wait_until(lambda: b.leader == "a")
            await asyncio.sleep(3 * a.ttl)  # renewals keep a in office well past its lease
            assert not waiting.done() and not hold.done()
            # a dies (no resign, no renewal): b leads once the lease has expired
            hold.cancel()
            died = time.monotonic()
            term_b = await asyncio.wait_for(waiting, 10)
            assert term_b > term_a and time.monotonic() - died < 6
            # b resigns: c leads at once (no lease to wait out)
            waiting = asyncio.create_task(c.campaign())
            await wait_until(lambda: c.leader == "b")
            await b.resign()
            term_c = await asyncio.wait_for(waiting, 3)
            assert term_c > term_b
            # c cut off from the quorum cannot renew: it loses the leadership within its lease
            hold = asyncio.create_task(c.hold())
            etcd_cluster.kill(0)
            etcd_cluster.kill(1)
            with pytest.raises(LeadershipLost):
                await asyncio.wait_for(hold, 10)
        finally:
            for lead in (a, b, c):
                await lead.close()

    asyncio.run(run())


def test_standby_controller_leads_when_the_leader_goes_and_fails_over_what_died_meanwhile(
        etcd_server: EtcdServer) -> None:
    engines: list[FakeEngine] = []
    server = serve(Device(device_id=1, cpu_port=510, engine_factory=fake_engine_factory(engines)),
                   "127.0.0.1:0", tls=SWITCH_TLS)
    cfg, ports = loopback_config(server.port, etcd_server.endpoint, slot_bits=6)
    fakes = {i: FakeNf(i) for i in ports}

    def controller(name: str) -> tuple[Controller, Leadership]:
        c = Controller(cfg, p4info=P4INFO, device_config=b"blob", counter_interval=0.1,
                       load_interval=0.1)
        c.leadership = Leadership(cfg.etcd.endpoints, cfg.etcd.prefix, name, ttl_s=1)
        return c, c.leadership

    async def run() -> None:
        servers = {i: FakeNfServer(fakes[i], ports[i]) for i in ports}
        for s in servers.values():
            await s.start()
        first, first_lead = controller("first")
        second, second_lead = controller("second")
        t1 = asyncio.create_task(lead_then_run(first, first_lead, 10))
        await wait_until(lambda: first.session.is_primary and len(first.nfs_configured) == 10)
        t2 = asyncio.create_task(lead_then_run(second, second_lead, 10))
        await wait_until(lambda: second_lead.leader == "first")
        assert second.status()["leadership"] == {
            "elected": False, "name": "second", "leader": "first", "term": None}
        assert not second.session.is_primary and not second.nfs_configured  # a standby does nothing
        moved_to = 4 if first.slot_map.owner(3) != 4 else 1
        await first.migrate([3], moved_to)
        calls_before = {i: len(f.calls) for i, f in fakes.items()}
        # while the leader is going, NF 1 (a primary, backup 5) dies
        await servers[1].stop()
        t1.cancel()  # as SIGTERM: it resigns on the way out
        await asyncio.gather(t1, return_exceptions=True)
        await wait_until(lambda: second.session.is_primary and second.last_reconcile is not None,
                         timeout=15)
        assert second.session.switch.election_id > first.session.switch.election_id
        assert second.slot_map.owner(3) == moved_to  # the map the leader left, from etcd
        assert second.last_reconcile == {"insert": 0, "modify": 0, "delete": 0}
        # the NF that died while nobody led is failed over by the new leader
        await wait_until(lambda: any(f.dead == 1 for f in second.failovers), timeout=15)
        assert fakes[5].promoted and 1 not in second.pairs
        assert len(fakes[2].calls) > calls_before[2]  # the new leader speaks to the NFs
        t2.cancel()
        await asyncio.gather(t2, return_exceptions=True)
        for s in servers.values():
            await s.stop()

    try:
        asyncio.run(run())
    finally:
        server.stop(grace=None)
