"""`python -m topo` (console script `nfc-topo`): the launcher behind `make run`.

`run` brings the whole system up on the chosen target. It first checks what the project cannot
bring itself (etcd and Mininet from Debian, BMv2 for `--target bmv2`) and, when one is missing,
names it and how to get it, and starts nothing.
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


def cmd_run(args: argparse.Namespace) -> int:
    missing = [p for p in prerequisites(args.target) if not p.present]
    if missing:
        for p in missing:
            print(f"nfc-topo: {p.name} is missing: {p.how}", file=sys.stderr)
        print("Nothing was started.", file=sys.stderr)
        return 1
    from topo import scenario

    return scenario.main(args)


def build_parser() -> argparse.ArgumentParser:
    from topo import scenario

    parser = argparse.ArgumentParser(
        prog="nfc-topo", description="Bring the nfcluster system up in Mininet and run its scenario."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the main scenario (what `make run` does)",
                         description=scenario.__doc__)
    run.add_argument(
        "--target", choices=["p4sim", "bmv2"], default="p4sim", help="switch target (default p4sim)"
    )
    scenario.add_arguments(run)
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
    scenario.add_arguments(chaos)
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
    chaos.set_defaults(func=cmd_chaos, rate=1000.0, flows=16, kill_every=1.0,
                       fault_kinds=CHAOS_KINDS)
    return parser


def cmd_chaos(args: argparse.Namespace) -> int:
    """`run` with chaos defaults: the packet count follows the duration."""
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
        from topo.chaos import netem_available

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
        from topo.mgmt_cut import available

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
