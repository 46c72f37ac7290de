"""The run's controllers (topo/launch/controllers.py): at the end of a run, a leader that stopped
by itself (its lease lost on a starved machine) is started again before the final counts are
read, and the run falls back to the given API, instead of crashing, when none leads; a final
read refused by a leader that just stopped is made again of the next leader."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading

import pytest

from topo.launch.controllers import Controllers
from topo.procs import free_port

pytestmark = pytest.mark.unit


def test_the_final_counts_start_a_stopped_controller_again_and_fall_back_when_none_leads() -> None:
    started: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        started.append(name)
        procs.append(subprocess.Popen(["sleep", "30"]))
        return procs[-1]

    stopped = subprocess.Popen(["true"])
    stopped.wait()
    nobody = f"http://127.0.0.1:{free_port()}"  # no controller answers there
    ctls = Controllers(start, {"controller": nobody}, {"controller": stopped})
    try:
        assert ctls.settled_leader_api("http://fallback", timeout=0.5) == "http://fallback"
        assert started == ["controller"] and ctls.revived == ["controller"]
    finally:
        for p in procs:
            p.kill()
            p.wait()


class _Api:
    """A controller's API in a thread: /status says whether it leads; /nfs answers, or drops
    the connection (a leader that stops between being found and being read)."""

    def __init__(self, leads: bool, drops: bool) -> None:
        self.leads, self.drops, self.reads = leads, drops, 0
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # (the stdlib's name)
                if self.path == "/status":
                    body = {"leadership": {"elected": api.leads}, "switch": {"primary": api.leads}}
                else:
                    api.reads += 1
                    if api.drops:
                        api.leads = False  # it stopped leading as it was read
                        self.close_connection = True
                        return  # no answer at all: the client sees the connection closed
                    body = {"nfs": {"counted": True}}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_final_read_refused_by_a_leader_that_just_stopped_is_made_of_the_next_leader() -> None:
    """The end of a soak crashed: the leader found stopped before its /nfs was read. The read
    now looks for the leader again: the standby that leads by then answers."""
    dying, standby = _Api(leads=True, drops=True), _Api(leads=True, drops=False)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    ctls = Controllers(lambda name: procs[name], {"a": dying.url, "b": standby.url}, procs)
    try:
        assert ctls.leader() == "a"  # (the first of the two that say they lead)
        assert ctls.read("/nfs?refresh=1", dying.url) == {"nfs": {"counted": True}}
        assert dying.reads == 1 and standby.reads == 1
    finally:
        dying.server.shutdown()
        standby.server.shutdown()


def test_a_controller_that_stops_again_at_once_is_not_started_in_a_loop() -> None:
    """The run's display loop revives stopped controllers four times a second, as a supervisor
    would: one that stops again within `MIN_LIFE_S` of its restart (a broken configuration, not
    a starved machine) is left stopped, once said."""
    started: list[str] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        started.append(name)
        proc = subprocess.Popen(["true"])
        proc.wait()
        return proc

    first = subprocess.Popen(["true"])
    first.wait()
    ctls = Controllers(start, {"controller": "http://127.0.0.1:9"}, {"controller": first})
    assert ctls.revive() == ["controller"]  # stopped by itself once: started again
    assert ctls.revive() == [] and ctls.given_up == {"controller"}  # stopped again at once
    assert ctls.revive() == [] and started == ["controller"]


def test_a_controller_a_fault_stopped_on_purpose_is_not_revived_behind_its_back() -> None:
    """The chaos fault that kills the leader starts it again itself, once the standby leads:
    revived meanwhile by the run's loop, two processes contended for one API port (seen in
    the first minute of a soak)."""
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        started.append(subprocess.Popen(["sleep", "30"]))
        return started[-1]

    leader = start("controller")
    ctls = Controllers(start, {"controller": "http://127.0.0.1:9"}, {"controller": leader})
    try:
        with ctls.held("controller"):
            leader.kill()
            leader.wait()
            assert ctls.revive() == [] and len(started) == 1  # the fault's to start again
        assert len(started) == 2 and ctls.procs["controller"] is started[1]
        assert ctls.procs["controller"].poll() is None and ctls.revive() == []
    finally:
        for p in started:
            p.kill()
            p.wait()
