"""The run's `nfc-controller` processes by name: each one's process and API, how to start one,
which one leads, and starting again those that stopped by themselves."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from topo.http_api import api_status, http_json
from topo.procs import wait_for

MIN_LIFE_S = 5.0  # a controller started again that stops sooner is not started a third time


@dataclass
class Controllers:
    """The run's `nfc-controller` processes by name: process, API, and how to start one."""

    start: Callable[[str], subprocess.Popen[bytes]]
    apis: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    revived: list[str] = field(default_factory=list)  # started again after stopping by themselves
    # `revive` runs from the fault thread (between faults) and the run's display loop (as a
    # supervisor would, also when no fault comes any more): one at a time, or both start one
    _reviving: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # when `revive` last started each one; one that stops again within `MIN_LIFE_S` is broken
    # (its log says why), not starved: it is left stopped (`given_up`), not restarted in a loop
    _revived_at: dict[str, float] = field(default_factory=dict, repr=False)
    given_up: set[str] = field(default_factory=set)
    # controllers a fault stopped on purpose (`held`): not revived behind its back (it starts
    # them again itself; revived meanwhile, two processes would have contended for one API port)
    _held: set[str] = field(default_factory=set, repr=False)

    def leader(self) -> str | None:
        """The name of the controller that leads and is the switch's primary, if any."""
        for name, api in self.apis.items():
            st = api_status(api)
            if st is not None and st["leadership"]["elected"] and st["switch"]["primary"]:
                return name
        return None

    def leader_api(self, default: str) -> str:
        name = self.leader()
        return self.apis[name] if name is not None else default

    def revive(self) -> list[str]:
        """Start again every controller that stopped (a leader that lost its lease exits, as
        designed, to stand by once started again); returns their names."""
        with self._reviving:
            now = time.monotonic()
            stopped = [n for n, p in self.procs.items()
                       if p.poll() is not None and n not in self.given_up | self._held]
            for name in list(stopped):
                if now - self._revived_at.get(name, -MIN_LIFE_S) < MIN_LIFE_S:
                    self.given_up.add(name)
                    stopped.remove(name)
                    print(f"controller {name} stopped again {now - self._revived_at[name]:.1f} s "
                          "after it was started: not started again (see its log)")
                    continue
                self.procs[name] = self.start(name)
                self._revived_at[name] = now
            self.revived += stopped
            return stopped

    @contextlib.contextmanager
    def held(self, name: str) -> Iterator[None]:
        """While a fault stops controller `name` on purpose, and until it is started again at
        the end of the block (as a standby), `revive` leaves it alone."""
        with self._reviving:
            self._held.add(name)
        try:
            yield
        finally:
            with self._reviving:
                self.procs[name] = self.start(name)
                self._held.discard(name)

    def settled_leader_api(self, default: str, timeout: float = 30.0) -> str:
        """The API of the controller leading now, for the final counts: controllers that
        stopped by themselves (a lease lost on a starved machine) are started again and one is
        waited for, up to `timeout` s; `default` if none leads by then (its reads then fail,
        naming the controller that does not answer)."""
        name = self.leader()
        if name is None:
            for stopped in self.revive():
                print(f"controller {stopped} had stopped (its lease lost): started again to lead")
            with contextlib.suppress(TimeoutError):
                name = wait_for(self.leader, timeout=timeout, interval=0.2,
                                what="a leading controller")
        return self.apis[name] if name is not None else default

    def read(self, path: str, default: str, attempts: int = 4) -> Any:
        """GET `path` (e.g. "/nfs?refresh=1") from the controller leading now. The leader found
        may lose its lease before it answers (seen at the end of a 10-minute soak on a busy
        host: the read was refused), so a refused or timed-out read looks for the leader again,
        `attempts` times in all; the last error is raised, naming the API."""
        last: OSError | None = None
        for _ in range(attempts):
            api = self.settled_leader_api(default)
            try:
                return http_json(f"{api}{path}")
            except OSError as exc:
                last = exc
                print(f"reading {api}{path} failed ({exc}): looking for the leader again")
        raise OSError(f"no controller answered {path} in {attempts} attempts: {last}")
