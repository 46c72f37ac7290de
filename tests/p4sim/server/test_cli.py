"""`p4sim run` as a process: it serves P4Runtime with --no-p4, refuses bad flag combinations, and
stops cleanly (exit 0) on SIGINT and SIGTERM.

Run: .venv/bin/pytest tests/p4sim/server/test_cli.py
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc

from tests.support.procs import free_port, stop_process, wait_for

pytestmark = pytest.mark.unit

RUN = [sys.executable, "-m", "p4sim", "run"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_serves_and_stops_cleanly(sig: signal.Signals) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            *RUN,
            "--no-p4",
            "--grpc-addr",
            f"127.0.0.1:{port}",
            "--device-id",
            "3",
            "--cpu-port",
            "510",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = p4r_grpc.P4RuntimeStub(channel)
            wait_for(
                lambda: stub.Capabilities(p4r.CapabilitiesRequest(), timeout=1),
                timeout=30,
                what="p4sim run answers",
            )
            with pytest.raises(grpc.RpcError) as exc:
                stub.GetForwardingPipelineConfig(
                    p4r.GetForwardingPipelineConfigRequest(device_id=3)
                )
            assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        proc.send_signal(sig)
        assert proc.wait(15) == 0
    finally:
        stop_process(proc)


@pytest.mark.parametrize(
    "args",
    [[], ["--no-p4", "x.p4"], ["--no-p4", "-i", "1@a", "-i", "1@b"]],
    ids=["no program", "program and --no-p4", "port twice"],
)
def test_run_refuses_bad_flags(args: list[str]) -> None:
    proc = subprocess.run([*RUN, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr


def test_run_reports_a_bad_interface() -> None:
    proc = subprocess.run(
        [*RUN, "--no-p4", "--grpc-addr", f"127.0.0.1:{free_port()}", "-i", "1@p4sim-no-such-if"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "p4sim-no-such-if" in proc.stderr


def test_run_without_register_access_refuses_registers_as_bmv2() -> None:
    """`--no-register-access`: a program's registers are not served over P4Runtime (as BMv2's
    server: UNIMPLEMENTED), its tables and counters are; the start-up line says so."""
    port = free_port()
    program = Path(__file__).resolve().parents[1] / "programs" / "ipv4_forward.p4"
    proc = subprocess.Popen(
        [*RUN, "--no-register-access", "--grpc-addr", f"127.0.0.1:{port}", "--engine", "python",
         str(program)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = p4r_grpc.P4RuntimeStub(channel)
            wait_for(lambda: stub.Capabilities(p4r.CapabilitiesRequest(), timeout=1),
                     timeout=30, what="p4sim run answers")

            def read(entity: p4r.Entity) -> list[p4r.ReadResponse]:
                return list(stub.Read(p4r.ReadRequest(device_id=1, entities=[entity])))

            with pytest.raises(grpc.RpcError) as exc:
                read(p4r.Entity(register_entry=p4r.RegisterEntry()))
            assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert "Register reads are not supported yet" in str(exc.value.details())
            read(p4r.Entity(table_entry=p4r.TableEntry()))  # served
            read(p4r.Entity(counter_entry=p4r.CounterEntry()))
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert "register entries refused (as BMv2)" in out
    finally:
        stop_process(proc)
