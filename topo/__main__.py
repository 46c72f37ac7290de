"""`python -m topo` (console script `nfc-topo`): the launcher behind `make run`.

`run` brings the whole system up on the chosen target and runs the scenario; `chaos` runs it
under faults. `up` brings it up and keeps it up for a user (`make up`: an HTTP server and iperf3
on the server host, a status line; topo/launch/up.py) until Ctrl-C or `down` (`make down`); `exec HOST
-- CMD` runs a command in one of its hosts, `kill ID` kills one of its NFs. `run`, `chaos` and
`up` first check what the project cannot bring itself (etcd and Mininet from Debian, BMv2 for
`--target bmv2`) and, when one is missing, name it and how to get it, and start nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

# what `nfc-topo chaos` faults by default (mgmt left out on a kernel without it; netem on a
# kernel without sch_netem is p4sim's wire impairment, and left out on BMv2)
CHAOS_KINDS = "primary,backup,spare,controller,etcd,netem,switch,mgmt"
# `nfc-topo chaos`'s client rate by target when --rate is not given (BMv2's: docs/bmv2.md)
CHAOS_RATES = {"p4sim": 1000.0, "bmv2": 200.0}


@dataclass(frozen=True)
class Prerequisite:
    name: str
    present: bool
    how: str  # how to get it


def prerequisites(target: str) -> list[Prerequisite]:
    """What `make run` needs from the machine beyond this repository."""
    needs = [
        Prerequisite("etcd", shutil.which("etcd") is not None, "`make setup` (Debian etcd-server)"),
        Prerequisite("mininet", importlib.util.find_spec("mininet") is not None,
                     "`make setup` (Debian mininet)"),
    ]
    if target == "bmv2":
        needs.append(Prerequisite("BMv2", shutil.which("simple_switch_grpc") is not None,
                                  "simple_switch_grpc on PATH (built from p4lang/behavioral-model)"))
    return needs


def _missing(target: str) -> bool:
    """Names every missing prerequisite on stderr; True if one is missing."""
    missing = [p for p in prerequisites(target) if not p.present]
    for p in missing:
        print(f"nfc-topo: {p.name} is missing: {p.how}", file=sys.stderr)
    if missing:
        print("Nothing was started.", file=sys.stderr)
    return bool(missing)


def cmd_run(args: argparse.Namespace) -> int:
    if _missing(args.target):
        return 1
    from topo.launch import scenario
    return scenario.main(args)


def cmd_up(args: argparse.Namespace) -> int:
    from topo.launch import up
    problem = up.check_config(args)
    if problem is not None:
        print(f"nfc-topo up: {problem}", file=sys.stderr)
        return 2
    if _missing(args.target):
        return 1
    return up.up(args)


def cmd_down(args: argparse.Namespace) -> int:
    from topo.launch import up
    return up.down(args.state or up.default_state_path())


def cmd_kill(args: argparse.Namespace) -> int:
    from topo.launch import up
    return up.kill_nf(args.state or up.default_state_path(), args.nf)


def cmd_exec(args: argparse.Namespace) -> int:
    from topo.launch import up
    cmd = list(args.cmd)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    return up.exec_in(args.state or up.default_state_path(), args.host, cmd)


def build_parser() -> argparse.ArgumentParser:
    from topo.launch import options, scenario
    parser = argparse.ArgumentParser(
        prog="nfc-topo", description="Bring the nfcluster system up in Mininet: run its scenario, "
                                     "run it under faults, or keep it up for a user."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the main scenario (what `make run` does)",
                         description=scenario.__doc__)
    run.add_argument(
        "--target", choices=["p4sim", "bmv2"], default="p4sim", help="switch target (default p4sim)"
    )
    options.add_arguments(run)
    run.set_defaults(func=cmd_run)
    chaos = sub.add_parser(
        "chaos", help="the system under load for a duration while faults of every kind are "
                      "injected, one at a time (what `make chaos` and `make soak` do)",
        description="Runs the scenario for --duration seconds at --rate packets/s while NFs, the "
                    "leading controller and etcd members are killed (or NFs hung), the switch "
                    "restarted, NF links disturbed (netem) or an NF's management link cut, from a "
                    "seeded schedule; ends with a table per fault kind and every process's memory.")
    chaos.add_argument(
        "--target", choices=["p4sim", "bmv2"], default="p4sim", help="switch target (default p4sim)"
    )
    options.add_arguments(chaos)
    chaos.add_argument("--duration", type=float, default=60.0, metavar="S",
                       help="seconds of traffic with faults (default 60): sets --packets from "
                            "--rate and --flows")
    chaos.add_argument("--settle", type=float, default=0.0, metavar="S",
                       help="seconds of traffic after the faults, with none (default 0): a "
                            "process restarted by a fault is judged for memory over this tail's "
                            "second half (docs/chaos.md; make soak: 300)")
    chaos.add_argument("--moves", type=float, default=0.0, metavar="RATE",
                       help="while the faults run, RATE random moves a second on average "
                            "(seeded): a slot with traffic to another live primary of its stage, "
                            "through the controller's API; each counted (done, undone, failed, "
                            "refused), none excused")
    chaos.add_argument("--overlap", action="store_true",
                       help="faults side by side: one may start while earlier ones are in flight "
                            "(up to 3), never on a pair that a fault in flight has put at risk; "
                            "faults of the controller, etcd, the switch and netem run alone")
    chaos.add_argument("--zombies", type=float, default=0.0, metavar="FRACTION",
                       help="this share of the NF faults hang the NF (SIGSTOP) and, once the "
                            "controller has dealt with it, resume it (SIGCONT) instead of killing "
                            "it: it must be fenced and come back as a spare owning nothing")
    chaos.set_defaults(func=cmd_chaos, rate=None, flows=16, kill_every=1.0,
                       fault_kinds=CHAOS_KINDS)
    from topo.launch import up
    upp = sub.add_parser(
        "up", help="bring the system up and keep it up until Ctrl-C or `nfc-topo down` (what "
                   "`make up` does)",
        description=up.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    up.add_up_arguments(upp)
    upp.set_defaults(func=cmd_up)
    down = sub.add_parser(
        "down", help="stop the system `nfc-topo up` keeps up (what `make down` does)",
        description="Sends SIGTERM to the `nfc-topo up` its state file names and waits until it "
                    "has stopped everything it started. Nothing up: says so, and succeeds.")
    up.add_state_argument(down)
    down.set_defaults(func=cmd_down)
    exe = sub.add_parser(
        "exec", help="run a command in a host of the system `nfc-topo up` keeps up",
        description="Runs CMD (default: a shell) in HOST's network and mount namespaces, with "
                    "the PID `nfc-topo up` recorded for it (mnexec -a PID). Hosts: client, server "
                    "and the NF nodes (n1, ...); their /etc/hosts names each other. Example: "
                    "nfc-topo exec client -- curl -s http://server/1M.bin | sha256sum")
    up.add_state_argument(exe)
    exe.add_argument("host", metavar="HOST", help="client, server, or an NF node (n1, ...)")
    exe.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                     help="the command and its arguments")
    exe.set_defaults(func=cmd_exec)
    kill = sub.add_parser(
        "kill", help="SIGKILL an NF of the system `nfc-topo up` keeps up (watch its fail-over)",
        description="Sends SIGKILL to NF ID's runtime and its workers (its process group), by the "
                    "PID `nfc-topo up` recorded: the controller fails it over (its backup "
                    "takes its slots, a spare becomes the new backup); `nfc-topo up` starts it "
                    "again, idle, and the controller returns it to the spare pool.")
    up.add_state_argument(kill)
    kill.add_argument("nf", type=int, metavar="ID", help="the NF's id (`nfc nfs` lists them)")
    kill.set_defaults(func=cmd_kill)
    return parser


def cmd_chaos(args: argparse.Namespace) -> int:
    """`run` with chaos defaults: the packet count follows the duration."""
    if args.rate is None:
        args.rate = CHAOS_RATES.get(args.target, CHAOS_RATES["p4sim"])
    if args.duration <= 0 or args.rate <= 0:
        print("nfc-topo chaos: --duration and --rate must be positive", file=sys.stderr)
        return 2
    if args.settle < 0:
        print("nfc-topo chaos: --settle must not be negative", file=sys.stderr)
        return 2
    args.packets = max(1, round((args.duration + args.settle) * args.rate / args.flows))
    kinds = [k.strip() for k in args.fault_kinds.split(",") if k.strip()]
    default_kinds = args.fault_kinds == CHAOS_KINDS
    if "netem" in kinds:
        from topo.faults.chaos import netem_available

        if not netem_available():
            if args.target == "p4sim":
                print("nfc-topo chaos: no netem qdisc in this kernel (sch_netem): netem faults "
                      "are p4sim's wire impairment of the NF's switch port", file=sys.stderr)
            elif not default_kinds:
                print("nfc-topo chaos: --fault-kinds netem: this kernel has no netem qdisc "
                      "(sch_netem) and BMv2 has no wire impairment of its own (p4sim has)",
                      file=sys.stderr)
                return 2
            else:
                print("nfc-topo chaos: no netem qdisc in this kernel (sch_netem), and BMv2 has "
                      "no wire impairment of its own: netem faults left out", file=sys.stderr)
                args.fault_kinds = ",".join(k for k in kinds if k != "netem")
    if "mgmt" in kinds and default_kinds:
        from topo.faults.mgmt_cut import available

        if not available():
            print("nfc-topo chaos: an NF's management link cannot be cut here (no cgroup v2 or "
                  "no CONFIG_CGROUP_BPF): mgmt faults left out", file=sys.stderr)
            args.fault_kinds = ",".join(k for k in args.fault_kinds.split(",") if k != "mgmt")
    return cmd_run(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
