"""Real TCP through the running system, and what it suffered: iperf3's goodput over time, HTTP
downloads checked byte for byte, and the resets seen on the client's wire.

`IperfRun` runs `iperf3 -c SERVER -R -P N -i STEP --forceflush` in the client host (`-R`: the
server sends, so each interval the client reports is what it *received*: goodput) and reads its
lines as they come, stamping each with this process's monotonic clock; iperf3's own interval
times are then placed on that clock by the smallest delay between an interval's end and the
arrival of its line (`place`). `Downloads` fetches a file of known content from the server's HTTP
server in a loop (curl in the client host) and checks each body's length and sha256. `RstWatch`
counts TCP segments with RST on the client's interface (tcpdump), both directions: a connection
reset by an endpoint or by something in between shows there even when the application retries.

Pure parts (parsing a line, placing intervals) are separate functions, tested without a network
(tests/bench/test_tcp_stalls.py).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from topo.procs import stop_process

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# "[SUM]   1.20-1.30   sec  1.25 MBytes   105 Mbits/sec" (the per-stream "[  5]" lines too)
LINE = re.compile(r"^\[\s*(?P<id>SUM|\d+)\]\s+(?P<start>\d+\.\d+)-(?P<end>\d+\.\d+)\s+sec\s+"
                  r"(?P<num>\d+(?:\.\d+)?)\s+(?P<unit>[KMG]?)Bytes")


@dataclass(frozen=True)
class Interval:
    """Goodput of one iperf3 interval: [start, end) seconds on the caller's clock, bytes received."""

    start: float
    end: float
    nbytes: int

    @property
    def mbps(self) -> float:
        return self.nbytes * 8 / 1e6 / max(self.end - self.start, 1e-9)


def parse_line(line: str, streams: int) -> tuple[float, float, int] | None:
    """(start, end, bytes) of an interval line that counts every stream (the `[SUM]` line, or the
    stream's own line with one stream); None for anything else (headers, the summary)."""
    if "sender" in line or "receiver" in line:
        return None
    m = LINE.match(line.strip())
    if m is None or (m["id"] != "SUM" and streams > 1):
        return None
    return float(m["start"]), float(m["end"]), int(float(m["num"]) * UNITS[m["unit"]])


def after_close(line: str, at: float, downloads: list[Download], client_ip: str) -> bool:
    """The RST tcpdump printed in `line` (seen at `at`) is the client's answer to a late segment
    of a download that had already ended with every byte: the connection was closed at both
    ends (a duplicate of the server's last ACK or FIN after the client's socket was gone)."""
    m = re.search(rf"{re.escape(client_ip)}\.(\d+) > ", line)
    if m is None:
        return False
    port = int(m[1])
    return any(d.ok and d.local_port == port and d.ended <= at for d in downloads)


def place(raw: list[tuple[float, float, float, int]]) -> list[Interval]:
    """Intervals (arrival, start, end, bytes) on the arrival clock: iperf3's time 0 is where the
    line that came soonest after its interval's end puts it (a line never arrives before its
    interval ended; delays only add)."""
    if not raw:
        return []
    t0 = min(arrival - end for arrival, _, end, _ in raw)
    return [Interval(t0 + start, t0 + end, n) for _, start, end, n in raw]


@dataclass
class IperfRun:
    """`iperf3 -R` from `client` to `server_ip` for `seconds`, its intervals read as they come."""

    client: Any
    server_ip: str
    seconds: float
    streams: int = 4
    step: float = 0.1
    raw: list[tuple[float, float, float, int]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    ended_at: float | None = None   # when its summary began: the data connections are done
    proc: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None

    def start(self) -> IperfRun:
        iperf3 = shutil.which("iperf3")
        if iperf3 is None:
            raise FileNotFoundError("iperf3 is not installed (apt-get install iperf3)")
        # --connect-timeout: a control connection that cannot be made fails at once
        self.proc = self.client.popen(
            [iperf3, "-c", self.server_ip, "-R", "-P", str(self.streams), "-t", f"{self.seconds:g}",
             "-i", f"{self.step:g}", "--forceflush", "-f", "k", "--connect-timeout", "5000"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, name="iperf3-reader", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.monotonic()
            self.lines.append(line.rstrip("\n"))
            if line.startswith("- - -") and self.ended_at is None:
                self.ended_at = now
            got = parse_line(line, self.streams)
            if got is not None:
                self.raw.append((now, *got))

    def wait(self, timeout: float) -> int:
        """iperf3's exit code (killed after `timeout` s: its code then says so)."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stop_process(self.proc)
        if self._reader is not None:
            self._reader.join(5)
        return self.proc.returncode

    def intervals(self) -> list[Interval]:
        return place(self.raw)

    def errors(self) -> list[str]:
        """iperf3's error lines ("iperf3: error - ...": a reset connection is one)."""
        return [ln for ln in self.lines if "error" in ln.lower()]


@dataclass
class Download:
    """One HTTP download: curl's exit code, the bytes received, whether they are the file."""

    started: float
    ended: float
    rc: int
    nbytes: int
    ok: bool
    error: str = ""
    local_port: int = 0   # the client's port (an RST on it after `ended` hit a closed connection)


@dataclass
class Downloads:
    """`name` from `url_base` in a loop in `client` until stopped, each body checked against its
    `size` and `sha256`; `rate` ("2M") slows each one so that it spans an event."""

    client: Any
    url: str
    size: int
    sha256: str
    rate: str = ""
    done: list[Download] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Downloads:
        self._thread = threading.Thread(target=self._loop, name="downloads", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        cmd = ["curl", "-sS", "-f", "--max-time", "120", "-o", "-",
               "-w", "%{stderr}local_port=%{local_port}\n"]
        if self.rate:
            cmd += ["--limit-rate", self.rate]
        while not self._stop.is_set():
            t0 = time.monotonic()
            self._proc = self.client.popen([*cmd, self.url], stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE)
            body, err = self._proc.communicate()
            ok = (self._proc.returncode == 0 and len(body) == self.size
                  and hashlib.sha256(body).hexdigest() == self.sha256)
            said = err.decode(errors="replace")
            port = re.search(r"local_port=(\d+)", said)
            self.done.append(Download(t0, time.monotonic(), self._proc.returncode, len(body), ok,
                                      re.sub(r"local_port=\d+\n?", "", said).strip()[-300:],
                                      int(port[1]) if port else 0))

    def stop(self) -> list[Download]:
        """Let the download under way finish (it was started inside the measured window), then
        stop; every download's record."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(180)
        return self.done


@dataclass
class RstWatch:
    """tcpdump on `intf` in `host`, counting TCP segments with RST (either direction)."""

    host: Any
    intf: str
    seen: list[tuple[float, str]] = field(default_factory=list)  # (arrival, tcpdump's line)
    proc: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None

    def start(self) -> RstWatch:
        tcpdump = shutil.which("tcpdump")
        if tcpdump is None:
            raise FileNotFoundError("tcpdump is not installed (apt-get install tcpdump)")
        self.proc = self.host.popen(
            [tcpdump, "-l", "-n", "-i", self.intf, "tcp[tcpflags] & tcp-rst != 0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        assert self.proc.stderr is not None
        # tcpdump says "listening on ..." once it captures: nothing before that is missed
        said = [self.proc.stderr.readline() for _ in range(2)]
        if not any("listening" in line for line in said):
            raise RuntimeError(f"tcpdump on {self.intf} did not start: {' '.join(said).strip()}")
        self._reader = threading.Thread(target=self._read, name="rst-watch", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen.append((time.monotonic(), line.strip()))

    def stop(self) -> list[tuple[float, str]]:
        if self.proc is not None:
            stop_process(self.proc)
        if self._reader is not None:
            self._reader.join(5)
        return self.seen
