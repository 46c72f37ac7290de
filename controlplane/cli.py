"""`nfc`: the operator's command line, a client of the controller's HTTP API.

    nfc status            the switch session, slot map, NF and flow counts
    nfc nfs               one row per NF: role, liveness, load, slots
    nfc slots [--nf ID] [--all] [--limit N]   per-NF slot summary, or individual slots
    nfc flows [--limit N] flows learned from digests
    nfc move SLOT --to NF migrate a slot to another primary (prints bytes shipped and the time)
    nfc moves             the moves done so far
    nfc scale-out [--cluster C]   a spare becomes a primary;  nfc drain NF   scale-in
    nfc update NF --params JSON   live update: the NF restarted with new parameters
    nfc lb history [--limit N]   the load balancer's decisions: kind, reason, inputs, outcome
    --watch S             refresh every S seconds (a live view); --json prints the raw JSON

State-changing requests (`move`, `scale-out`, `drain`, `update`) carry the header the API requires (X-Nfc-Request) and, when the
environment variable NFC_API_TOKEN is set, `Authorization: Bearer $NFC_API_TOKEN`. `--watch`
repeats a command, so it refuses any command that changes state (before sending anything).
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table

from contract.nf_params import parse_params

DEFAULT_API = "http://127.0.0.1:8080"
TOKEN_ENV = "NFC_API_TOKEN"  # as controlplane.api.TOKEN_ENV (the CLI does not import the server)
# set while --watch repeats a command: a request that changes state is refused, never repeated
_READ_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("nfc_read_only", default=False)


class StateChangeRefused(Exception):
    """A state-changing request asked for where only reads may be repeated (--watch)."""


def fetch(api: str, path: str, params: dict[str, Any] | None = None, timeout: float = 3.0,
          method: str = "GET", body: dict[str, Any] | None = None) -> Any:
    query = {k: v for k, v in (params or {}).items() if v is not None}
    url = api.rstrip("/") + path + (("?" + urllib.parse.urlencode(query)) if query else "")
    headers: dict[str, str] = {}
    data = None
    if method != "GET":
        if _READ_ONLY.get():
            raise StateChangeRefused(f"{method} {path}")
        # what the API's request guard requires of a state-changing request (not a form post)
        headers = {"X-Nfc-Request": "1", "Content-Type": "application/json"}
        data = json.dumps(body or {}).encode()
        token = os.environ.get(TOKEN_ENV)
        if token:
            headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, method=method, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read(16 * 1024 * 1024))
    except urllib.error.HTTPError as exc:
        text = exc.read(65536)
        if exc.code == 409:  # a move that failed and was undone: its result is the answer
            with contextlib.suppress(ValueError):
                return json.loads(text)
        raise ValueError(f"HTTP {exc.code}: {text.decode(errors='replace')}") from None


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def status_table(data: dict[str, Any]) -> RenderableType:
    sw = data["switch"]
    t = Table(title="nfcluster controller", show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("value")
    role = "[green]primary[/]" if sw["primary"] else "[yellow]standby[/]"
    t.add_row("switch", f"{sw['address']} ({sw['target']}, device {sw['device_id']}) {role} "
                        f"election id {sw['election_id']}")
    t.add_row("last reconcile", _fmt(sw.get("last_reconcile")))
    sm = data["slot_map"]
    per_nf = ", ".join(f"{k}:{v}" for k, v in sm["per_nf"].items())
    t.add_row("slots", f"{data['slots']} ({'resumed' if sm['resumed'] else 'new'}"
                       f"{', etcd' if sm['persisted'] else ''}) {per_nf}")
    t.add_row("pairs", ", ".join(f"{p}->{b}" for p, b in data["pairs"].items()))
    n = data["nfs"]
    t.add_row("NFs", f"{n['alive']}/{n['total']} alive, {n['configured']} configured")
    t.add_row("flows", f"{data['flows']['known']} known ({data['flows']['total']} seen)")
    t.add_row("packets", _fmt(data.get("packets")))
    t.add_row("switch drops", drops_line(data))
    nf_drops = data.get("nf_drops") or {}
    t.add_row("NF drops", ", ".join(f"NF {k}: {v}" for k, v in nf_drops.items()) or "none")
    sec = data.get("security") or {}
    if sec:
        t.add_row("security", ("mutual TLS" if sec.get("tls") else "PLAINTEXT (insecure)")
                  + f", heartbeats rejected {sec.get('heartbeats_rejected', 0)}")
    t.add_row("uptime", f"{data['uptime_s']} s")
    return t


def drops_line(data: dict[str, Any]) -> str:
    """The switch's drops in one line: the P4 program's drop counters, then p4sim's port losses
    (kernel drops, transmit errors ...), or why they could not be read."""
    parts = [f"{k} {v}" for k, v in sorted((data.get("switch_drops") or {}).items()) if v]
    ports = data.get("switch_ports")
    parts += [f"port {k} {v}" for k, v in sorted((ports or {}).items())]
    if data.get("switch_stats_error"):
        parts.append(f"(port counters unreadable: {data['switch_stats_error']})")
    elif ports is None:
        parts.append("(no port counters: switch.stats not set)")
    return ", ".join(parts) or "none"


NF_COLUMNS = [("id", "id"), ("name", "name"), ("node", "node"), ("cluster", "cl"),
              ("role", "role"), ("backup", "bkp"), ("alive", "alive"),
              ("slots_owned", "slots"), ("packet_rate", "pkt/s"), ("queue_depth", "queue"),
              ("cpu_percent", "cpu%"), ("drops", "drops"), ("gaps", "gaps"), ("packets", "packets"),
              ("flows", "flows"), ("evicted", "evicted")]
# the columns left out of the table (misses, rtt, mgmt) are in `nfc --json nfs`
TEXT_COLUMNS = {"name", "node", "cl", "role"}


def nfs_table(rows: list[dict[str, Any]]) -> RenderableType:
    t = Table(title="NFs", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
              pad_edge=False, collapse_padding=True)
    for _, head in NF_COLUMNS:
        t.add_column(head, justify="left" if head in TEXT_COLUMNS else "right", no_wrap=True)
    for row in rows:
        cells = [_fmt(row.get(key)) for key, _ in NF_COLUMNS]
        alive = row.get("alive")
        cells[6] = "[green]yes[/]" if alive else "[red]no[/]" if alive is False else "?"
        cells[8] = f"{row.get('packet_rate', 0.0):.0f}"
        ev = row.get("evictions") or {}
        cells[-1] = " ".join(f"{k}:{v}" for k, v in sorted(ev.items())) or "0"
        t.add_row(*cells)
    return t


def slots_summary_table(rows: list[dict[str, Any]]) -> RenderableType:
    per: dict[int, dict[str, Any]] = {}
    for r in rows:
        s = per.setdefault(r["owner"], {"backup": r.get("backup"), "slots": 0, "max_epoch": 0,
                                        "packets": 0, "bytes": 0})
        s["slots"] += 1
        s["max_epoch"] = max(s["max_epoch"], r["epoch"])
        s["packets"] += r.get("packets", 0)
        s["bytes"] += r.get("bytes", 0)
    t = Table(title=f"slots ({len(rows)}) by owner", title_justify="left")
    for head in ("owner", "backup", "slots", "max epoch", "packets", "bytes"):
        t.add_column(head, justify="right")
    for owner in sorted(per):
        s = per[owner]
        t.add_row(str(owner), _fmt(s["backup"]), str(s["slots"]), str(s["max_epoch"]),
                  str(s["packets"]), str(s["bytes"]))
    return t


def slots_table(rows: list[dict[str, Any]]) -> RenderableType:
    t = Table(title=f"slots ({len(rows)})", title_justify="left")
    for head in ("slot", "owner", "backup", "epoch", "packets", "bytes"):
        t.add_column(head, justify="right")
    for r in rows:
        t.add_row(*(_fmt(r.get(k)) for k in ("slot", "owner", "backup", "epoch", "packets", "bytes")))
    return t


def flows_table(rows: list[dict[str, Any]]) -> RenderableType:
    t = Table(title=f"flows ({len(rows)})", title_justify="left")
    for head in ("slot", "src", "dst", "protocol", "owner", "digests", "age s"):
        t.add_column(head, justify="left" if head in ("src", "dst", "protocol") else "right")
    for r in rows:
        t.add_row(*(_fmt(r.get(k)) for k in ("slot", "src", "dst", "protocol", "owner", "digests", "age_s")))
    return t


MOVE_COLUMNS = ("slot", "from_nf", "to_nf", "epoch", "ok", "delta", "bytes_shipped",
                "flows_shipped", "last_seq", "seconds", "undone", "error")


def moves_table(rows: list[dict[str, Any]]) -> RenderableType:
    t = Table(title=f"slot moves ({len(rows)})", title_justify="left")
    for head in MOVE_COLUMNS:
        t.add_column(head.replace("_", " "), justify="left" if head == "error" else "right")
    for r in rows:
        t.add_row(*(_fmt(r.get(k)) for k in MOVE_COLUMNS))
    return t


LB_COLUMNS = ("id", "age", "kind", "what", "outcome", "reason")


def _what(d: dict[str, Any]) -> str:
    a = d["action"]
    if a["action"] == "move":
        return f"slot {a['slot']} {a['src']}->{a['dst']}"
    return f"cluster {a['cluster']}" if a["action"] == "scale_out" else f"NF {a['nf']}"


def lb_table(data: dict[str, Any], now: float | None = None) -> RenderableType:
    now = time.time() if now is None else now
    loads = ", ".join(f"{nf}:{v['load']:.2f}" for nf, v in data.get("loads", {}).items())
    state = "enabled" if data["enabled"] else "disabled"
    t = Table(title=f"load balancer ({state}, every {data['period_s']} s, {data['rounds']} rounds, "
                    f"last decision {data['decision_ms']} ms) loads {loads or '-'}",
              title_justify="left")
    for head in LB_COLUMNS:
        t.add_column(head, justify="right" if head in ("id", "age") else "left",
                     overflow="fold", no_wrap=head != "reason")
    for d in data["decisions"]:
        outcome = d["outcome"]
        style = "green" if d["ok"] else "red" if d["ok"] is False else "yellow"
        t.add_row(str(d["id"]), f"{now - d['at']:.0f}s", d["kind"], _what(d),
                  f"[{style}]{outcome}[/]", d["action"]["reason"])
    return t


def scale_table(data: dict[str, Any]) -> Table:
    t = Table(title="scaling")
    for col in data:
        t.add_column(col)
    t.add_row(*(str(v) for v in data.values()))
    return t


def _json_object(text: str) -> dict[str, Any]:
    """--params: a JSON object, or a usage error naming what is wrong."""
    try:
        return parse_params(text, "--params")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nfc", description="nfcluster operator CLI (talks to the controller's HTTP API)")
    p.add_argument("--api", default=DEFAULT_API, help=f"controller API base URL (default {DEFAULT_API})")
    p.add_argument("--json", action="store_true", help="print the raw JSON instead of tables")
    p.add_argument("--watch", type=float, metavar="S",
                   help="refresh every S seconds until Ctrl-C (read-only commands only)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("status", help="switch session, slot map, NF and flow counts")
    sub.add_parser("nfs", help="one row per NF: role, liveness, load, slots")
    sp = sub.add_parser("slots", help="slot ownership: a summary per NF, or individual slots")
    sp.add_argument("--nf", type=int, help="only slots owned by this NF (lists them)")
    sp.add_argument("--all", action="store_true", help="list every slot instead of the summary")
    sp.add_argument("--limit", type=int, help="at most this many rows")
    fp = sub.add_parser("flows", help="flows learned from new-flow digests")
    fp.add_argument("--limit", type=int, default=50, help="at most this many rows (default 50)")
    mp = sub.add_parser("move", help="migrate a slot to another primary NF")
    mp.add_argument("slot", type=int, help="the slot to move")
    mp.add_argument("--to", type=int, required=True, metavar="NF", help="the target primary's id")
    sub.add_parser("moves", help="the slot moves done so far")
    so = sub.add_parser("scale-out", help="make a spare NF a primary (with a backup from the pool)")
    so.add_argument("--cluster", help="its cluster (default: the one with the fewest primaries)")
    dp = sub.add_parser("drain", help="move every slot of a primary away and return it to the pool")
    dp.add_argument("nf", type=int, help="the primary's id")
    up = sub.add_parser("update", help="live update: run an NF (and its backup) with new parameters, "
                                       "moving its slots to its cluster peers and back")
    up.add_argument("nf", type=int, help="the NF's id")
    up.add_argument("--params", type=_json_object, default={}, metavar="JSON",
                    help='the NF\'s whole new parameters, a JSON object (e.g. \'{"work_us": 20}\')')
    lp = sub.add_parser("lb", help="the load balancer")
    lsub = lp.add_subparsers(dest="lb_command", required=True)
    hp = lsub.add_parser("history", help="its decisions: kind, what, outcome, reason (newest last)")
    hp.add_argument("--limit", type=int, default=50, help="the last N decisions (default 50)")
    return p


def render(args: argparse.Namespace) -> tuple[Any, RenderableType]:
    """Fetch what the command needs; return (JSON, table)."""
    if args.command == "status":
        data = fetch(args.api, "/status")
        return data, status_table(data)
    if args.command == "nfs":
        data = fetch(args.api, "/nfs")
        return data, nfs_table(data)
    if args.command == "slots":
        data = fetch(args.api, "/slots", {"nf": args.nf, "limit": args.limit})
        listing = args.all or args.nf is not None
        return data, slots_table(data) if listing else slots_summary_table(data)
    if args.command == "move":
        data = fetch(args.api, f"/slots/{args.slot}/move", {"to": args.to}, timeout=30.0,
                     method="POST")
        return data, moves_table([data])
    if args.command == "scale-out":
        data = fetch(args.api, "/lb/scale-out", {"cluster": args.cluster}, timeout=30.0,
                     method="POST")
        return data, scale_table(data)
    if args.command == "drain":
        data = fetch(args.api, f"/nfs/{args.nf}/drain", {}, timeout=600.0, method="POST")
        return data, scale_table(data)
    if args.command == "update":
        data = fetch(args.api, f"/nfs/{args.nf}/update", {}, timeout=1200.0, method="POST",
                     body=args.params)
        return data, scale_table(data)
    if args.command == "lb":
        data = fetch(args.api, "/lb/history", {"limit": args.limit})
        return data, lb_table(data)
    if args.command == "moves":
        data = fetch(args.api, "/moves")
        return data, moves_table(data)
    data = fetch(args.api, "/flows", {"limit": args.limit})
    return data, flows_table(data)


def main(argv: Sequence[str] | None = None, console: Console | None = None,
         sleep: Callable[[float], None] = time.sleep) -> int:
    args = build_parser().parse_args(argv)
    # piped output gets 120 columns instead of rich's 80, so the NF table is not squeezed
    console = console or Console(width=None if sys.stdout.isatty() else 120)
    read_only = _READ_ONLY.set(bool(args.watch))
    try:
        if args.watch:
            with Live(console=console, refresh_per_second=4) as live:
                while True:
                    _, table = render(args)
                    live.update(Group(table))
                    sleep(args.watch)
        data, table = render(args)
    except KeyboardInterrupt:
        return 0
    except StateChangeRefused as exc:
        print(f"nfc: --watch repeats the command, and {args.command!r} changes state ({exc}): "
              "run it once, without --watch", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"nfc: the controller refused: {exc}", file=sys.stderr)
        return 2
    except (urllib.error.URLError, OSError) as exc:
        print(f"nfc: cannot reach the controller API at {args.api}: {exc}", file=sys.stderr)
        return 2
    finally:
        _READ_ONLY.reset(read_only)
    if args.json:
        console.print_json(json.dumps(data))
    else:
        console.print(table)
    if args.command in ("move", "update") and not data.get("ok"):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
