"""`nfc-topo up`, `down` and `exec` (`make up`, `make down`): the system kept running for a user.

`up` brings up what `make run` brings up (one switch on the chosen target, the NF runtimes, a
leading and a standby controller, three etcd members, the client and the server) with the chosen
configuration, and adds to it what a user expects to find on the server: an HTTP server
(`python -m http.server` on port 80, serving a few generated files of known sizes and a
`SHA256SUMS` of them) and, when installed, `iperf3 -s`. It prints where everything is and stays
up until Ctrl-C, SIGTERM or `nfc-topo down`; then it stops everything it started, by PID, and
removes the network, as `make run` does. With `--cli` it opens Mininet's CLI instead of waiting
(leaving the CLI stops the system).

The NFs must forward whatever TCP the user sends: without a chain in the configuration every NF
runs `--nf` (default `passthrough`: the checker NF of `make run` writes its count into payloads);
with one (`--chain`, `topo/chain.yaml`) each stage runs its own NF (firewall, NAT, flow monitor).
An NF that exits (killed by the user, to watch a fail-over) is started again, idle: the controller
returns it to the spare pool. A controller that exits is started again, as the standby.

`up` records itself in a state file (`/run/nfcluster/up.json`, or
`/tmp/nfcluster-up.json` where `/run` is not writable; `--state FILE` elsewhere): its PID and
start time, the PID of every Mininet host (a shell in the host's network and mount namespaces),
of every process it started, the interfaces it made in the root namespace, and the addresses
of the APIs. `down` sends that PID SIGTERM and waits until it has exited (everything it started
stopped); `exec HOST -- CMD` runs CMD in HOST's namespaces (`mnexec -a PID`, as Mininet's own
`popen` does), after checking that the PID is still that host of that `up`. Every host's
`/etc/hosts` (bind-mounted in its own mount namespace) names the client, the server and the NF
nodes, so `nfc-topo exec client -- curl http://server/1M.bin` works.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from controlplane.config import load_config
from topo.launch import chain_run
from topo.launch.bringup import system
from topo.launch.nfs import started
from topo.launch.topology import MGMT_BRIDGE
from topo.model import CHAIN_CONFIG, DEFAULT_CONFIG, REPO, RunOptions, System
from topo.procs import parent_of, process_start, wait_for

RUN_DIR = Path("/run/nfcluster")
STATE_FILE = RUN_DIR / "up.json"
FALLBACK_STATE_FILE = Path("/tmp/nfcluster-up.json")
HTTP_PORT = 80
API_PORT = 8080  # the leading controller's API when free: `nfc` finds it without --api
# the files the server's HTTP server offers: name -> size in bytes (content seeded by the name,
# so a file's checksum is the same in every run)
WEB_FILES = {"hello.txt": 0, "1M.bin": 1 << 20, "10M.bin": 10 << 20}
HELLO = b"hello from the nfcluster server\n"
# an NF started again that exits sooner than this after it is not started again (it would only
# exit again: a configuration it cannot run)
RESTART_MIN_LIFE_S = 5.0
SUPERVISE_EVERY_S = 0.5


def default_state_path() -> Path:
    """`/run/nfcluster/up.json` where `/run` is writable (as root), else `/tmp/nfcluster-up.json`."""
    return STATE_FILE if os.access(RUN_DIR.parent, os.W_OK) else FALLBACK_STATE_FILE


# -- the state file --------------------------------------------------------------------------------

@dataclass
class UpState:
    """What a running `up` records for `down` and `exec` (JSON in the state file)."""

    pid: int
    start_ticks: int                        # the process's start time (guards against PID reuse)
    ready: bool = False
    target: str = ""
    config: str = ""
    out_dir: str = ""
    api: str = ""                           # the first leader's HTTP API (and /metrics)
    standby_api: str = ""
    switch_metrics: str | None = None       # p4sim's counters
    hosts: dict[str, int] = field(default_factory=dict)        # Mininet host -> its shell's PID
    addresses: dict[str, str] = field(default_factory=dict)    # Mininet host -> its address
    processes: dict[str, int] = field(default_factory=dict)    # what `up` started -> PID
    links: list[str] = field(default_factory=list)             # interfaces in the root namespace
    http: str = ""                          # the server's HTTP server
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> size, sha256
    iperf3: bool = False

    def write(self, path: Path) -> None:
        """Atomically: a reader sees the old state or the new one, never half of one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)

    @classmethod
    def read(cls, path: Path) -> UpState | None:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        return cls(**data)

    def alive(self) -> bool:
        """The recorded `up` still runs (the same process: its PID and its start time)."""
        return process_start(self.pid) == self.start_ticks


# -- what the server offers ------------------------------------------------------------------------

def web_files(directory: Path) -> dict[str, dict[str, Any]]:
    """Write the server's files into `directory` and a `SHA256SUMS` of them; returns name ->
    {size, sha256}. The content is seeded by the name: the same bytes in every run."""
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, Any]] = {}
    for name, size in WEB_FILES.items():
        data = HELLO if not size else random.Random(f"nfcluster {name}").randbytes(size)
        (directory / name).write_bytes(data)
        files[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (directory / "SHA256SUMS").write_text(
        "".join(f"{f['sha256']}  {name}\n" for name, f in files.items()))
    return files


def hosts_file(sys_: System) -> str:
    """/etc/hosts for every Mininet host: the edge hosts and the NF nodes by name."""
    lines = ["127.0.0.1\tlocalhost"]
    lines += [f"{h.ip.split('/')[0]}\t{h.name}" for h in sys_.topo.edge]
    lines += [f"{n.mgmt_ip}\t{n.name}" for n in sys_.topo.nodes]
    lines.append(f"{sys_.topo.mgmt_gateway}\tcontroller")
    return "\n".join(lines) + "\n"


def _listening(host: Any, port: int, proto: str = "t") -> bool:
    return f":{port} " in host.cmd(f"ss -{proto}ln")


# -- up --------------------------------------------------------------------------------------------

class Stopped(BaseException):
    """SIGTERM (`nfc-topo down`) or Ctrl-C: stop; also out of Mininet's CLI (which catches
    KeyboardInterrupt: a Ctrl-C there interrupts the command it runs)."""


def _ignore_signals() -> None:
    """From now on the teardown runs to its end: another Ctrl-C or SIGTERM does not cut it."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def _stop(_signum: int, _frame: object) -> None:
    _ignore_signals()
    raise Stopped


def _api_port() -> int:
    """API_PORT if nothing listens on it, else 0 (a free port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", API_PORT))
        except OSError:
            return 0
    return API_PORT


def options(args: argparse.Namespace) -> RunOptions:
    config = args.config or (CHAIN_CONFIG if args.chain else DEFAULT_CONFIG)
    return RunOptions(args.target, config, flows=0, packets=0, rate=0.0, workers=args.workers,
                      out_dir=args.out_dir, ready_timeout=args.ready_timeout, nf=args.nf,
                      nf_params=args.nf_params, api_port=_api_port())


@dataclass
class Supervisor:
    """Starts again an NF or a controller that exited (a user killed it to watch a fail-over);
    keeps the state file's PIDs current."""

    sys_: System
    state: UpState
    state_path: Path
    console: Console
    # NF id -> when the supervisor started it again (the first NFs ran until the controller
    # had configured them: they can run)
    started_at: dict[int, float] = field(default_factory=dict)
    given_up: set[int] = field(default_factory=set)

    def check(self) -> None:
        changed = False
        for proc in list(self.sys_.nf_procs):
            nf_id = _nf_id_of(proc)
            if proc.poll() is None or nf_id is None or nf_id in self.given_up:
                continue
            self.sys_.nf_procs.remove(proc)
            restarted = self.started_at.get(nf_id)
            life = time.monotonic() - restarted if restarted is not None else None
            if life is not None and life < RESTART_MIN_LIFE_S:
                self.given_up.add(nf_id)
                self.console.print(f"NF {nf_id} exited ({proc.returncode}) {life:.1f} s after its "
                                   f"start: not started again (see {self.sys_.log_dir}/nf{nf_id}.log)")
                continue
            new = self.sys_.restart_nf(nf_id)
            self.started_at[nf_id] = time.monotonic()
            self.console.print(f"NF {nf_id} exited ({proc.returncode}); started again, idle "
                               f"(pid {new.pid}): the controller returns it to the spare pool")
            changed = True
        for name in self.sys_.ctls.revive():
            self.console.print(f"controller {name} exited; started again (pid "
                               f"{self.sys_.ctls.procs[name].pid}): it stands by")
            changed = True
        if changed:
            self.state.processes = processes(self.sys_, self.state)
            self.state.write(self.state_path)


def processes(sys_: System, state: UpState) -> dict[str, int]:
    """Every process `up` started, by label: the NFs' runtimes (`nf<id>`), the controllers,
    the etcd members, the switch and the server's services; `state` keeps the services."""
    out: dict[str, int] = {}
    for proc in sys_.nf_procs:
        if proc.poll() is None:
            nf_id = _nf_id_of(proc)
            out[f"nf{nf_id}" if nf_id is not None else f"pid{proc.pid}"] = proc.pid
    for name, proc in sys_.ctls.procs.items():
        out[name] = proc.pid
    for member in sys_.etcd.members:
        if member.proc is not None:
            out[f"etcd-{member.name}"] = member.proc.pid
    sw = sys_.net.get(sys_.topo.switch_name)
    if sw.proc is not None:
        out["switch"] = sw.proc.pid
    for label in ("http", "iperf3"):
        if label in state.processes:
            out[label] = state.processes[label]
    return out


def _nf_id_of(proc: subprocess.Popen[bytes]) -> int | None:
    args = [str(a) for a in proc.args] if isinstance(proc.args, list) else []
    with contextlib.suppress(ValueError, IndexError):
        return int(args[args.index("--nf-id") + 1])
    return None


def status_lines(state: UpState, state_path: Path, nf: str) -> list[str]:
    here = "" if state_path == default_state_path() else f" --state {state_path}"
    exe, kill = f"nfc-topo exec{here}", f"nfc-topo kill{here}"
    api_flag = "" if state.api == f"http://127.0.0.1:{API_PORT}" else f" --api {state.api}"
    lines = [
        f"nfcluster is up on {state.target} with {state.config} (NFs: {nf})",
        f"  controller API  {state.api}  (metrics {state.api}/metrics; standby "
        f"{state.standby_api}):  nfc{api_flag} nfs",
        f"  web view        {state.api}/  (live: NFs, slot map, fail-overs, moves; read-only)",
    ]
    if state.switch_metrics:
        lines.append(f"  switch metrics  http://{state.switch_metrics}/metrics")
    lines += [
        f"  server          {state.http}/  ({', '.join(state.files)}, SHA256SUMS)"
        + ("; iperf3 -s" if state.iperf3 else "; no iperf3 (apt-get install iperf3)"),
        f"  hosts           {', '.join(state.hosts)}:  {exe} client -- curl -s "
        f"http://server/1M.bin | sha256sum",
        f"  fail-over       {kill} ID  (SIGKILL an NF; `nfc nfs`, `nfc flows` show who "
        "carries what)",
        f"  logs            {state.out_dir}   state  {state_path}",
        f"  stop            Ctrl-C, or nfc-topo down{here}",
    ]
    return lines


def up(args: argparse.Namespace) -> int:
    """Bring the system up and keep it up until Ctrl-C, SIGTERM or the end of `--cli`."""
    console = Console(width=max(Console().width, 110))
    state_path: Path = args.state or default_state_path()
    old = UpState.read(state_path)
    if old is not None and old.alive():
        console.print(f"[bold red]nfc-topo up:[/] already up (pid {old.pid}, {state_path}): "
                      "`nfc-topo down` first")
        return 1
    if os.geteuid() != 0:
        console.print("[bold red]nfc-topo up:[/] the system lives in network namespaces: run it "
                      "as root")
        return 1
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    opts = options(args)
    ticks = process_start(os.getpid())
    assert ticks is not None
    state = UpState(os.getpid(), ticks, target=opts.target, config=str(opts.config),
                    out_dir=str(opts.out_dir))
    try:
        with ExitStack() as stack:
            state.write(state_path)  # `down` can stop it while it is still starting
            stack.callback(_remove_state, state_path)  # the last to run
            sys_ = stack.enter_context(system(opts, console))
            stack.enter_context(services(sys_, state))
            _record(sys_, state)
            state.write(state_path)
            sup = Supervisor(sys_, state, state_path, console)
            nf = (" -> ".join(f"{st.name} ({sys_.cfg.stage_config(st.id).nf or 'checker'})"
                              for st in sys_.cfg.stages())
                  if sys_.cfg.chains else opts.nf)
            for line in status_lines(state, state_path, nf):
                console.print(line, highlight=False, soft_wrap=True)
            if args.cli:
                _cli(sys_, sup)
            else:
                _wait(sup)
    except Stopped:
        console.print("\nstopped: everything started was stopped")
        return 0
    except (PermissionError, FileNotFoundError, RuntimeError, TimeoutError, OSError) as exc:
        console.print(f"[bold red]nfc-topo up failed:[/] {exc}")
        return 1
    console.print("stopped: everything started was stopped")
    return 0


def _remove_state(path: Path) -> None:
    """The state file, and /run/nfcluster with it if it made that and nothing else is in it."""
    path.unlink(missing_ok=True)
    if path.parent == RUN_DIR:
        with contextlib.suppress(OSError):  # not empty: someone else's
            RUN_DIR.rmdir()


def _wait(sup: Supervisor) -> None:
    """Until a signal: look after the NFs and controllers every SUPERVISE_EVERY_S."""
    never = threading.Event()
    while True:
        sup.check()
        never.wait(SUPERVISE_EVERY_S)  # a supervision period; signals end it with an exception


def _cli(sys_: System, sup: Supervisor) -> None:
    """Mininet's CLI in the foreground, the supervisor in a thread until the CLI ends."""
    from mininet.cli import CLI
    from mininet.log import setLogLevel

    done = threading.Event()

    def supervise() -> None:
        while not done.wait(SUPERVISE_EVERY_S):
            with contextlib.suppress(Exception):
                sup.check()

    worker = threading.Thread(target=supervise, name="supervise", daemon=True)
    worker.start()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the CLI's own Ctrl-C
    setLogLevel("output")  # what the CLI prints (the network was built at "warning")
    try:
        CLI(sys_.net)
    finally:
        setLogLevel("warning")
        _ignore_signals()
        done.set()
        worker.join()


@contextmanager
def services(sys_: System, state: UpState) -> Iterator[None]:
    """The server's HTTP server and iperf3, the hosts' /etc/hosts, the chain's neighbours;
    the services stopped by PID on the way out."""
    net, log_dir = sys_.net, sys_.log_dir
    client, server = net.get("client"), net.get("server")
    hosts = log_dir / "hosts"
    hosts.write_text(hosts_file(sys_))
    for host in net.hosts:  # each host has a mount namespace of its own (mnexec -n)
        host.cmd(f"mount --bind {hosts} /etc/hosts")
    for cmd in chain_run.neighbours(sys_.cfg, client.MAC()):
        server.cmd(f"{cmd} dev {server.defaultIntf()}")
    www = log_dir / "www"
    state.files = web_files(www)
    procs: list[subprocess.Popen[bytes]] = []
    with started(procs):
        with open(log_dir / "http.log", "ab") as log:
            procs.append(server.popen(
                [sys.executable, "-m", "http.server", str(HTTP_PORT), "--bind", server.IP(),
                 "--directory", str(www)], stdout=log, stderr=subprocess.STDOUT))
        state.processes["http"] = procs[-1].pid
        wait_for(lambda: _listening(server, HTTP_PORT) or procs[0].poll() is not None,
                 timeout=10, what="HTTP server bound")
        if procs[0].poll() is not None:
            raise RuntimeError(f"the HTTP server exited; see {log_dir / 'http.log'}")
        state.http = f"http://{server.IP()}"
        iperf3 = shutil.which("iperf3")
        if iperf3 is not None:
            with open(log_dir / "iperf3.log", "ab") as log:
                procs.append(server.popen([iperf3, "-s", "-B", server.IP()], stdout=log,
                                          stderr=subprocess.STDOUT))
            state.processes["iperf3"] = procs[-1].pid
            state.iperf3 = True
        yield


def _record(sys_: System, state: UpState) -> None:
    """The hosts, processes, links and addresses of the system, into `state` (now ready)."""
    net = sys_.net
    state.hosts = {h.name: int(h.pid) for h in net.hosts}
    state.addresses = {h.name: str(h.IP()) for h in net.hosts}
    state.processes = processes(sys_, state)
    state.links = sorted({i.name for sw in net.switches for i in sw.intfList() if i.name != "lo"}
                         | {MGMT_BRIDGE})
    state.api = sys_.api
    state.standby_api = sys_.ctls.apis.get("standby", "")
    state.switch_metrics = sys_.switch_stats
    state.ready = True


# -- down ------------------------------------------------------------------------------------------

def down(state_path: Path, timeout: float = 90.0) -> int:
    """SIGTERM to the recorded `up`, then wait until it has exited (it stops everything it
    started first). Nothing up: says so, and succeeds."""
    state = UpState.read(state_path)
    if state is None:
        print(f"nfc-topo down: nothing is up (no {state_path})")
        return 0
    if not state.alive():
        state_path.unlink(missing_ok=True)
        print(f"nfc-topo down: nothing is up (pid {state.pid} of {state_path} is gone; the "
              "stale state file was removed)")
        return 0
    print(f"nfc-topo down: stopping pid {state.pid} ...")
    os.kill(state.pid, signal.SIGTERM)
    try:
        wait_for(lambda: not state.alive(), timeout=timeout, interval=0.1,
                 what=f"nfc-topo up (pid {state.pid}) stopped")
    except TimeoutError as exc:
        print(f"nfc-topo down: {exc}; see {state.out_dir}", file=sys.stderr)
        return 1
    print("nfc-topo down: stopped")
    return 0


# -- exec ------------------------------------------------------------------------------------------

def host_pid(state_path: Path, host: str) -> int:
    """The PID of `host`'s shell in the running `up`; raises LookupError with what is wrong."""
    state = UpState.read(state_path)
    if state is None or not state.alive():
        raise LookupError(f"nothing is up (state {state_path}): `nfc-topo up` first")
    if not state.ready:
        raise LookupError(f"nfc-topo up (pid {state.pid}) is still starting")
    if host not in state.hosts:
        raise LookupError(f"no host {host!r}: choose among {', '.join(state.hosts)}")
    pid = state.hosts[host]
    # the host's shell is a child of that `up`: not another process that took its PID since
    if parent_of(pid) != state.pid:
        raise LookupError(f"host {host} (pid {pid}) is no longer there")
    return pid


def exec_in(state_path: Path, host: str, cmd: Sequence[str]) -> int:
    """Replace this process with `cmd` in `host`'s network and mount namespaces."""
    try:
        pid = host_pid(state_path, host)
    except LookupError as exc:
        print(f"nfc-topo exec: {exc}", file=sys.stderr)
        return 1
    argv = list(cmd) or [os.environ.get("SHELL", "/bin/bash")]
    mnexec = shutil.which("mnexec")
    if mnexec is None:
        print("nfc-topo exec: mnexec is missing: `make setup` (Debian mininet)", file=sys.stderr)
        return 1
    os.execv(mnexec, [mnexec, "-a", str(pid), *argv])
    return 127  # not reached


# -- kill ------------------------------------------------------------------------------------------

def kill_nf(state_path: Path, nf_id: int) -> int:
    """SIGKILL NF `nf_id`'s runtime and its workers (its process group: `mnexec -d` made it a
    session of its own) by the PID `up` recorded, to watch a fail-over; `up` starts it again,
    idle, once it has exited."""
    state = UpState.read(state_path)
    if state is None or not state.alive():
        print(f"nfc-topo kill: nothing is up (state {state_path})", file=sys.stderr)
        return 1
    pid = state.processes.get(f"nf{nf_id}")
    nfs = sorted(int(k[2:]) for k in state.processes if k.startswith("nf"))
    if pid is None:
        print(f"nfc-topo kill: no NF {nf_id} runs: choose among {', '.join(map(str, nfs))}",
              file=sys.stderr)
        return 1
    if parent_of(pid) != state.pid:  # exited meanwhile (and its PID perhaps taken again)
        print(f"nfc-topo kill: NF {nf_id} (pid {pid}) is no longer running", file=sys.stderr)
        return 1
    os.killpg(pid, signal.SIGKILL)
    print(f"nfc-topo kill: NF {nf_id} (pid {pid} and its workers) got SIGKILL; `nfc nfs` shows "
          "the fail-over; nfc-topo up starts it again, idle (a spare)")
    return 0


# -- arguments -------------------------------------------------------------------------------------

def add_state_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", type=Path, default=None, metavar="FILE",
                        help=f"the state file of the running `up` (default {STATE_FILE}, or "
                             f"{FALLBACK_STATE_FILE} where /run is not writable)")


def add_up_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", choices=["p4sim", "bmv2"], default="p4sim",
                        help="switch target (default p4sim)")
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="controller YAML config (default topo/nfcluster.yaml; with --chain "
                             "topo/chain.yaml)")
    parser.add_argument("--chain", action="store_true",
                        help="the example service chain, firewall -> nat -> flow_monitor "
                             "(topo/chain.yaml)")
    parser.add_argument("--nf", default="passthrough",
                        help="the NF of every nf-host when the config has no chain (default "
                             "passthrough; the checker of `make run` rewrites payloads)")
    parser.add_argument("--nf-params", default="", metavar="JSON",
                        help="its parameters, a JSON object (default: the NF's defaults)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per NF")
    parser.add_argument("--cli", action="store_true",
                        help="open Mininet's CLI; leaving it stops the system")
    parser.add_argument("--out-dir", type=Path, default=REPO / "results" / "up",
                        help="logs, the server's files, /etc/hosts (default results/up)")
    parser.add_argument("--ready-timeout", type=float, default=60.0,
                        help="seconds to wait for the controller to configure everything")
    add_state_argument(parser)


def check_config(args: argparse.Namespace) -> str | None:
    """What is wrong with the configuration `up` would use, or None."""
    if args.chain and args.config:
        return "--chain and --config: choose one"
    path = args.config or (CHAIN_CONFIG if args.chain else DEFAULT_CONFIG)
    try:
        cfg = load_config(path)
    except Exception as exc:
        return f"{path}: {exc}"
    missing = {"client", "server"} - {h.name for h in cfg.edge}
    if missing:  # where `exec`, the HTTP server and iperf3 go
        return f"{path}: no edge host named {' or '.join(sorted(missing))}"
    return None
