"""Cutting one NF's management link, and restoring it (the chaos harness's `mgmt` fault).

In `make run`'s topology the NFs of a node share the node's one interface on the management
bridge (`<node>-m`), so taking that interface down would cut two or three NFs at once (a primary
and the backup of another primary: a double fault). What is cut instead is the one NF's own
traffic on it, both ways: every NF runtime starts in a cgroup (v2) of its own
(`MgmtCuts.wrap`), and a cut attaches to that cgroup an eBPF `cgroup_skb` program that drops
every IP packet its sockets send or receive; the restore detaches it. All the NF's IP traffic is
management traffic (the controller's gRPC calls and UDP heartbeats, the replication TCP to and
from its backup and peers, the global store's etcd): its data path is an AF_PACKET socket on its
own interface, which the filter does not see, and its runtime talks to its workers over pipes.

What the NF sees is what a cut cable does: nothing arrives, and nothing it sends leaves (a
`sendto` fails with EPERM, TCP retransmits into the void). Connections are not reset: when the
link is restored, TCP retransmissions and the NF's reconnections carry on.

The filter is two eBPF instructions (`r0 = 0; exit`: drop), loaded with the `bpf(2)` syscall
through ctypes, so nothing beyond a kernel with `CONFIG_CGROUP_BPF` and a cgroup v2 mount is
needed (no nftables or iptables). `available()` says whether this machine has both.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import struct
from dataclasses import dataclass, field
from pathlib import Path

from topo.procs import wait_for

# bpf(2): commands, program type and attach types (include/uapi/linux/bpf.h)
BPF_PROG_LOAD, BPF_PROG_ATTACH, BPF_PROG_DETACH = 5, 8, 9
BPF_PROG_TYPE_CGROUP_SKB = 8
BPF_CGROUP_INET_INGRESS, BPF_CGROUP_INET_EGRESS = 0, 1
SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine, 321)
# struct bpf_insn {u8 code; u8 dst:4, src:4; s16 off; s32 imm}: r0 = 0 (BPF_ALU64|BPF_MOV|BPF_K);
# exit (BPF_JMP|BPF_EXIT). A cgroup_skb program's 0 drops the packet.
DROP_ALL = struct.pack("<BBhi", 0xB7, 0, 0, 0) + struct.pack("<BBhi", 0x95, 0, 0, 0)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _bpf(cmd: int, attr: bytes) -> int:
    buf = ctypes.create_string_buffer(attr, 128)
    ret = int(_libc.syscall(SYS_BPF, cmd, buf, 128))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"bpf({cmd}): {os.strerror(err)}")
    return ret


def load_drop_program() -> int:
    """Load the drop-everything `cgroup_skb` program; returns its fd."""
    insns = ctypes.create_string_buffer(DROP_ALL, len(DROP_ALL))
    licence = ctypes.create_string_buffer(b"GPL")
    # prog_type, insn_cnt, insns, license (the rest zero: no verifier log)
    attr = struct.pack("<IIQQ", BPF_PROG_TYPE_CGROUP_SKB, len(DROP_ALL) // 8,
                       ctypes.addressof(insns), ctypes.addressof(licence))
    return _bpf(BPF_PROG_LOAD, attr)


def _attach(cmd: int, cgroup_fd: int, prog_fd: int, attach_type: int) -> None:
    # target_fd, attach_bpf_fd, attach_type, attach_flags
    _bpf(cmd, struct.pack("<IIII", cgroup_fd, prog_fd, attach_type, 0))


def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `.../unified` on a hybrid
    system), if it is."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return Path(parts[1])
    return None


def available() -> bool:
    """Whether an NF's management traffic can be cut here (a cgroup v2 mount, and the kernel
    loads and attaches a cgroup_skb program: root and `CONFIG_CGROUP_BPF`)."""
    mount = cgroup2_mount()
    if mount is None or os.geteuid() != 0:
        return False
    probe = mount / f"nfc-probe-{os.getpid()}"
    try:
        probe.mkdir(exist_ok=True)
        fd = load_drop_program()
        cg = os.open(probe, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _attach(BPF_PROG_ATTACH, cg, fd, BPF_CGROUP_INET_EGRESS)
            _attach(BPF_PROG_DETACH, cg, fd, BPF_CGROUP_INET_EGRESS)
        finally:
            os.close(cg)
            os.close(fd)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


@dataclass
class MgmtCuts:
    """One cgroup per NF under a directory of this run's (`nfc-<pid>` in the cgroup v2 mount);
    `cut(nf)` and `restore(nf)` drop and let through again that NF's IP traffic."""

    root: Path = field(default_factory=lambda: (cgroup2_mount() or Path("/sys/fs/cgroup"))
                       / f"nfc-{os.getpid()}")
    _prog: int | None = None
    _cut: set[int] = field(default_factory=set)

    def cgroup(self, nf: int) -> Path:
        path = self.root / f"nf{nf}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def wrap(self, nf: int, cmd: list[str]) -> list[str]:
        """`cmd` run in NF `nf`'s cgroup: its sockets, created there, are the ones a cut drops
        (a socket keeps the cgroup it was created in, so a process moved later would not do)."""
        # through this process's root: a Mininet host's mount namespace has a sysfs of its own,
        # without the cgroup mounts
        root = Path(f"/proc/{os.getpid()}/root")
        procs = root / self.cgroup(nf).relative_to("/") / "cgroup.procs"
        return ["sh", "-c", f"echo $$ > {shlex.quote(str(procs))} && exec \"$@\"", "sh", *cmd]

    def cut(self, nf: int) -> None:
        """Drop everything NF `nf` sends or receives over IP (its management link), until
        `restore`; raises OSError if the kernel refuses."""
        if self._prog is None:
            self._prog = load_drop_program()
        cg = os.open(self.cgroup(nf), os.O_RDONLY | os.O_DIRECTORY)
        try:
            for kind in (BPF_CGROUP_INET_INGRESS, BPF_CGROUP_INET_EGRESS):
                _attach(BPF_PROG_ATTACH, cg, self._prog, kind)
        finally:
            os.close(cg)
        self._cut.add(nf)

    def restore(self, nf: int) -> None:
        """Let NF `nf`'s traffic through again (nothing happens if it was not cut)."""
        cg = os.open(self.cgroup(nf), os.O_RDONLY | os.O_DIRECTORY)
        try:
            for kind in (BPF_CGROUP_INET_INGRESS, BPF_CGROUP_INET_EGRESS):
                with contextlib.suppress(OSError):  # ENOENT: not attached
                    _attach(BPF_PROG_DETACH, cg, self._prog or 0, kind)
        finally:
            os.close(cg)
        self._cut.discard(nf)

    def close(self, timeout: float = 5.0) -> None:
        """Restore every cut NF and remove this run's cgroups, once the processes in them are
        gone (killed NF processes take a moment to exit); a cgroup still in use after `timeout`
        is left behind, empty of filters."""
        for nf in sorted(self._cut):
            self.restore(nf)
        if self._prog is not None:
            os.close(self._prog)
            self._prog = None
        if not self.root.exists():
            return

        def removed() -> bool:
            for child in [c for c in self.root.iterdir() if c.is_dir()]:
                with contextlib.suppress(OSError):  # EBUSY: a process still in it
                    child.rmdir()
            with contextlib.suppress(OSError):
                self.root.rmdir()
            return not self.root.exists()

        with contextlib.suppress(TimeoutError):
            wait_for(removed, timeout=timeout, interval=0.05, what="the NFs' cgroups removed")
