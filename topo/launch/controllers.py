"""The run's `nfc-controller` processes by name: each one's process and API, how to start one,
which one leads, and starting again those that stopped by themselves."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

from topo.http_api import api_status


@dataclass
class Controllers:
    """The run's `nfc-controller` processes by name: process, API, and how to start one."""

    start: Callable[[str], subprocess.Popen[bytes]]
    apis: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    revived: list[str] = field(default_factory=list)  # started again after stopping by themselves

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
        stopped = [n for n, p in self.procs.items() if p.poll() is not None]
        for name in stopped:
            self.procs[name] = self.start(name)
        self.revived += stopped
        return stopped
