"""`python -m prism` (make prism-demo): the Prism testbed on p4sim, one client run per mode.

    python -m prism [--backends 2] [--modes proxy,once,every] [--size 65536] [--connections 4]
                    [--duration 3] [--rate-mbit 8] [--log-dir DIR]

Builds the testbed (prism.testbed) in a private network namespace of its own, runs the verifying
client against each mode and prints one JSON line per mode; exit status 1 when any response
failed its check. Needs root and `make build`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from prism.private_netns import run_in_private_netns
from prism.testbed import TARGETS, Testbed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m prism", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", type=int, default=2, help="number of backends")
    p.add_argument("--modes", default="proxy,once,every", help="comma-separated modes to run")
    p.add_argument("--size", type=int, default=65536, help="object size in bytes")
    p.add_argument("--connections", type=int, default=4, help="client connections")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per mode")
    p.add_argument("--rate-mbit", type=float, help="servers' link rate (tc tbf); client's is 5x")
    p.add_argument("--target", choices=TARGETS, default="p4sim", help="switch target")
    p.add_argument("--log-dir", type=Path, help="logs and hand-off records (default: a temp dir)")
    args = p.parse_args(argv)
    logdir = args.log_dir or Path(tempfile.mkdtemp(prefix="prism-"))

    def body() -> list[dict[str, object]]:
        tb = Testbed(backends=args.backends, logdir=logdir, rate_mbit=args.rate_mbit,
                     target=args.target)
        out = []
        try:
            for mode in args.modes.split(","):
                tb.start_servers(mode, stats=logdir / f"{mode}.jsonl")
                result = tb.run_client("--connections", str(args.connections), "--size",
                                       str(args.size), "--duration", str(args.duration))
                tb.stop_servers()
                out.append({"mode": mode, **result})
        finally:
            tb.close()
        return out

    results = run_in_private_netns(body, timeout=600, on_interrupt=Testbed.close_all)
    for r in results:
        print(json.dumps(r))
    print(f"logs: {logdir}", file=sys.stderr)
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
