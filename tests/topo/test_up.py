"""`nfc-topo up` / `exec` / `down` (`make up`, `make down`): the system kept up for a user.

The namespace test brings `up` in the background, downloads a file from the server's HTTP server
through the switch and the NFs with `nfc-topo exec client -- curl`, checks its checksum, stops it
with `nfc-topo down` and checks that nothing of it is left: no process, no host (network
namespace), no interface, no state file. Run one case:
`.venv/bin/python -m pytest tests/topo/test_up.py -k down_stops`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from rich.console import Console

from topo import __main__ as launcher
from topo.__main__ import main
from topo.launch import up
from topo.procs import descendants, process_start, still_running, stop_process, wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.unit
def test_web_files_have_the_sizes_and_checksums_they_announce(tmp_path: Path) -> None:
    files = up.web_files(tmp_path)
    assert {n: f["size"] for n, f in files.items()} == {
        "hello.txt": len(up.HELLO), "1M.bin": 1 << 20, "10M.bin": 10 << 20}
    for name, f in files.items():
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == f["sha256"]
    sums = (tmp_path / "SHA256SUMS").read_text().splitlines()
    assert sums == [f"{f['sha256']}  {n}" for n, f in files.items()]
    # seeded: the same bytes in every run
    assert up.web_files(tmp_path / "again") == files


@pytest.mark.unit
def test_down_with_nothing_up_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "up.json"
    assert main(["down", "--state", str(state)]) == 0
    assert "nothing is up" in capsys.readouterr().out
    # a state file whose process is gone (its PID taken by another process, or by none)
    up.UpState(os.getpid(), 1, ready=True).write(state)
    assert main(["down", "--state", str(state)]) == 0
    assert "stale state file was removed" in capsys.readouterr().out and not state.exists()


@pytest.mark.unit
def test_exec_refuses_what_is_not_a_host_of_the_running_up(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "up.json"
    assert main(["exec", "--state", str(state), "client", "--", "true"]) == 1
    assert "nothing is up" in capsys.readouterr().err
    me = process_start(os.getpid())
    assert me is not None
    up.UpState(os.getpid(), me, ready=False).write(state)
    assert main(["exec", "--state", str(state), "client", "--", "true"]) == 1
    assert "still starting" in capsys.readouterr().err
    # a host whose recorded PID is not a child of that `up` (the host is gone, its PID reused)
    up.UpState(os.getpid(), me, ready=True, hosts={"client": 1}).write(state)
    assert main(["exec", "--state", str(state), "server", "--", "true"]) == 1
    assert "no host 'server': choose among client" in capsys.readouterr().err
    assert main(["exec", "--state", str(state), "client", "--", "true"]) == 1
    assert "no longer there" in capsys.readouterr().err


@pytest.mark.unit
def test_kill_refuses_what_is_not_an_nf_of_the_running_up(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "up.json"
    assert main(["kill", "--state", str(state), "1"]) == 1
    assert "nothing is up" in capsys.readouterr().err
    me = process_start(os.getpid())
    assert me is not None
    up.UpState(os.getpid(), me, ready=True, processes={"nf1": 1, "nf2": 1}).write(state)
    assert main(["kill", "--state", str(state), "3"]) == 1
    assert "no NF 3 runs: choose among 1, 2" in capsys.readouterr().err
    # PID 1 is not a child of that `up`: never signalled
    assert main(["kill", "--state", str(state), "1"]) == 1
    assert "no longer running" in capsys.readouterr().err


@pytest.mark.unit
def test_up_refuses_a_second_up_and_a_bad_config(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(launcher, "prerequisites", lambda target: [])
    state = tmp_path / "up.json"
    me = process_start(os.getpid())
    assert me is not None
    up.UpState(os.getpid(), me).write(state)
    assert main(["up", "--state", str(state)]) == 1
    assert f"already up (pid {os.getpid()}" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("switch: {slot_bits: 99}\n")
    assert main(["up", "--config", str(bad), "--state", str(state)]) == 2
    assert str(bad) in capsys.readouterr().err
    assert main(["up", "--chain", "--config", str(bad)]) == 2
    no_server = tmp_path / "no-server.yaml"
    no_server.write_text((REPO / "topo" / "nfcluster.yaml").read_text().replace(
        "name: server", "name: web"))
    assert main(["up", "--config", str(no_server)]) == 2
    assert "no edge host named server" in capsys.readouterr().err


class _FakeSystem:
    """What the supervisor uses of a `System`: NF processes, restart_nf, controllers, etcd, the
    switch. The NFs are real processes (`sleep`) with an `--nf-id` argument."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.nf_procs: list[subprocess.Popen[bytes]] = []
        self.restarted: list[int] = []
        self.ctls = SimpleNamespace(revive=lambda: [], procs={})
        self.etcd = SimpleNamespace(members=[])
        self.topo = SimpleNamespace(switch_name="s1")
        self.net = SimpleNamespace(get=lambda name: SimpleNamespace(proc=None))

    def start(self, nf_id: int, seconds: str = "60") -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sh", "-c", f"exec sleep {seconds}", "--nf-id", str(nf_id)])
        self.nf_procs.append(proc)
        return proc

    def restart_nf(self, nf_id: int) -> subprocess.Popen[bytes]:
        self.restarted.append(nf_id)
        return self.start(nf_id)  # (the test ends it soon after: a configuration it cannot run)


@pytest.mark.unit
def test_the_supervisor_starts_a_killed_nf_again_once(tmp_path: Path) -> None:
    fake = _FakeSystem(tmp_path)
    first = [fake.start(1), fake.start(2)]
    state = up.UpState(os.getpid(), 1)
    sup = up.Supervisor(cast(Any, fake), state, tmp_path / "up.json", Console(file=io.StringIO()))
    try:
        sup.check()
        assert fake.restarted == []  # nothing exited
        first[0].kill()
        first[0].wait()
        sup.check()  # NF 1 ran since the start: started again, the state file has its new PID
        assert fake.restarted == [1]
        new = fake.nf_procs[-1]
        assert up.UpState.read(tmp_path / "up.json").processes == {  # type: ignore[union-attr]
            "nf1": new.pid, "nf2": first[1].pid}
        new.kill()
        new.wait()
        sup.check()  # exited soon after its restart: not again
        assert fake.restarted == [1] and 1 in sup.given_up
        sup.check()
        assert fake.restarted == [1]
    finally:
        for proc in fake.nf_procs:
            stop_process(proc)


def _leftovers(links: list[str]) -> list[str]:
    out = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    names = {line.split()[0].split("@")[0] for line in out.splitlines() if line.strip()}
    return sorted(names & set(links))


@pytest.mark.netns
@pytest.mark.slow
def test_up_serves_curl_through_the_switch_and_down_stops_everything(tmp_path: Path) -> None:
    if not (REPO / "build" / "nfcluster.p4info.txtpb").exists():
        subprocess.run(["make", "-C", str(REPO), "build"], check=True, capture_output=True)
    state_path = tmp_path / "up.json"
    log = tmp_path / "up.log"
    topo = [sys.executable, "-m", "topo"]
    with open(log, "wb") as out:
        proc = subprocess.Popen([*topo, "up", "--out-dir", str(tmp_path / "out"), "--state",
                                 str(state_path)], stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True)
    try:
        def ready() -> up.UpState | None:
            assert proc.poll() is None, log.read_text()[-3000:]
            state = up.UpState.read(state_path)
            return state if state is not None and state.ready else None

        state = wait_for(ready, timeout=150, interval=0.2, what="nfc-topo up ready")
        wait_for(lambda: b"stop " in log.read_bytes(), timeout=10, what="status printed")
        status = log.read_text()
        assert f"controller API  {state.api}" in status and "nfc-topo down" in status
        assert proc.pid == state.pid and set(state.hosts) >= {"client", "server", "n1"}
        assert {"http", "controller", "standby", "switch", "nf1"} <= set(state.processes)
        running = descendants(proc.pid)
        assert set(state.processes.values()) <= set(running)
        # a download through the switch and the NFs, by name (each host's /etc/hosts)
        name = "1M.bin"
        got = subprocess.run([*topo, "exec", "--state", str(state_path), "client", "--", "curl",
                              "-sf", "--max-time", "60", f"http://server/{name}"],
                             capture_output=True, timeout=90, cwd=REPO)
        assert got.returncode == 0, got.stderr.decode()[-2000:] + log.read_text()[-3000:]
        assert len(got.stdout) == state.files[name]["size"]
        assert hashlib.sha256(got.stdout).hexdigest() == state.files[name]["sha256"]
        # the bytes went through the NFs: they counted them (counts as of now, not of the last
        # load report; a primary failed over meanwhile, on a busy machine, counted them too)
        with urllib.request.urlopen(f"{state.api}/nfs?refresh=1", timeout=10) as resp:
            nfs = json.loads(resp.read())
        assert sum(nf["packets"] for nf in nfs) > (1 << 20) // 1500
        # fail-over under a download: the primary that carries it killed (`nfc-topo kill`)
        port = 40000
        slow = subprocess.Popen([*topo, "exec", "--state", str(state_path), "client", "--",
                                 "curl", "-sf", "--max-time", "120", "--local-port", str(port),
                                 "--limit-rate", "1M", "http://server/10M.bin"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)

        def owner() -> int | None:
            flows = json.loads(subprocess.run(
                [sys.executable, "-m", "controlplane.cli", "--api", state.api, "--json", "flows"],
                capture_output=True, text=True, check=True, cwd=REPO).stdout)
            return next((int(f["owner"]) for f in flows if f["src"] == f"10.0.0.1:{port}"), None)

        victim = wait_for(owner, timeout=30, interval=0.2, what="the download's flow learned")
        old_pid = state.processes[f"nf{victim}"]
        kill = subprocess.run([*topo, "kill", "--state", str(state_path), str(victim)],
                              capture_output=True, text=True, timeout=30, cwd=REPO)
        assert kill.returncode == 0, kill.stderr
        body, err = slow.communicate(timeout=150)
        assert slow.returncode == 0, err.decode()[-2000:] + log.read_text()[-3000:]
        assert hashlib.sha256(body).hexdigest() == state.files["10M.bin"]["sha256"]
        status = json.loads(subprocess.run(
            [sys.executable, "-m", "controlplane.cli", "--api", state.api, "--json", "status"],
            capture_output=True, text=True, check=True, cwd=REPO).stdout)
        assert victim in [f["dead"] for f in status["failovers"] if f["ok"]], status["failovers"]
        # started again (idle) by `up`, with its new PID in the state file
        try:
            wait_for(lambda: (up.UpState.read(state_path) or state).processes.get(
                f"nf{victim}", old_pid) != old_pid, timeout=30, what="the killed NF started again")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; nfc-topo up said: {log.read_text()[-1500:]}") from exc
        assert f"NF {victim} exited (-9); started again" in log.read_text()
        running = descendants(proc.pid)
        # exec runs in the host's own network namespace
        ns = subprocess.run([*topo, "exec", "--state", str(state_path), "client", "--", "ip",
                             "-br", "addr"], capture_output=True, text=True, cwd=REPO).stdout
        assert "10.0.0.1/24" in ns and "nfcm0" not in ns
        down = subprocess.run([*topo, "down", "--state", str(state_path)], capture_output=True,
                              text=True, timeout=120, cwd=REPO)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "stopped" in down.stdout
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        stop_process(proc, timeout=60)
    assert "everything started was stopped" in log.read_text()
    assert still_running(running) == [], f"processes left running: {still_running(running)}"
    assert _leftovers(state.links) == []
    assert not state_path.exists()
