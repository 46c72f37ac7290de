"""Thesis §6.3 (tables A.5-A.7): migration overhead in bytes, per batch, of NF-1, NF-2 and NF-3.

Two clusters of two primaries (NF-1, NF-2 in cluster 1; NF-3, NF-4 in cluster 2), each with its
backup; batch 30, 50 pkt/s. "Flow 1" of the thesis is our unit of migration, a slot; the thesis's
state grows by about 100 bytes with every packet, which we reproduce by sending every packet of the
slot on a 5-tuple of its own (one packet per flow, one way): each packet adds one flow state of the
generic NF (`state_bytes`=64, about 110 bytes with its key on the wire). The slot moves from NF-1 to
NF-2 (same cluster: a delta) after packet 68 and from NF-2 to NF-3 (other cluster: the full state)
after packet 165, through the controller's API; batches close on 30 packets only, as the thesis's.

After each batch (or move) the experiment waits until the replication counters of every NF are
still, then records what each NF sent to and received from the others since the previous point.
The thesis-comparable "state information" of an NF is what it sent to its cluster's other primary
plus what it received from any primary (the thesis's blue, yellow and purple bars); the CSV also has
the bytes to and from the backups and spares, which the thesis does not count.
"""

from __future__ import annotations

import time
from typing import Any

from experiments import plots
from experiments.common import (
    SINK_PORT,
    Bench,
    Check,
    Comparison,
    Context,
    Outcome,
    bring_up,
    make_config,
    ports_in_slots,
    write_csv,
)
from experiments.thesis_data import (
    A5_NF1,
    A6_NF2,
    A7_NF3,
    INTER_MOVE_AT,
    INTRA_MOVE_AT,
    MIGRATION_POINTS,
)

NAME = "migration-bytes"
RATE = 50.0
BATCH = 30
STATE_BYTES = 64
SINK_PORTS = 64  # destination ports: enough 5-tuples in one slot for 225 packets
THESIS_NFS = (1, 2, 3, 4)

Snapshot = dict[int, dict[str, Any]]


def snapshot(bench: Bench, nf_ids: list[int]) -> Snapshot:
    snap: Snapshot = {}
    for nf in nf_ids:
        load = bench.nf_status(nf).load
        snap[nf] = {"tx": dict(load.repl_tx_bytes), "rx": dict(load.repl_rx_bytes),
                    "xtx": load.transfer_tx_bytes, "xrx": load.transfer_rx_bytes,
                    "packets": load.packets}
    return snap


def settled(bench: Bench, nf_ids: list[int], timeout: float = 15.0) -> Snapshot:
    """The counters once they stopped moving (two equal readings 0.4 s apart)."""
    prev = snapshot(bench, nf_ids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.4)
        cur = snapshot(bench, nf_ids)
        if cur == prev:
            return cur
        prev = cur
    return prev


def diff_rows(point: int, event: str, before: Snapshot, after: Snapshot, cluster: dict[int, str]
              ) -> list[dict[str, Any]]:
    rows = []
    for nf in THESIS_NFS:
        def d(kind: str, peers: list[int], nf: int = nf) -> int:
            return sum(after[nf][kind].get(p, 0) - before[nf][kind].get(p, 0) for p in peers)

        own = [p for p in THESIS_NFS if p != nf and cluster[p] == cluster[nf]]
        other = [p for p in THESIS_NFS if cluster[p] != cluster[nf]]
        rest = [p for p in after[nf]["tx"].keys() | after[nf]["rx"].keys() if p not in THESIS_NFS]
        row = {"packet": point, "event": event, "nf": nf,
               "sent_own_cluster": d("tx", own), "received_own_cluster": d("rx", own),
               "received_other_cluster": d("rx", other), "sent_other_cluster": d("tx", other),
               "sent_backups_spares": d("tx", rest), "received_backups_spares": d("rx", rest),
               "transfer_sent": after[nf]["xtx"] - before[nf]["xtx"],
               "transfer_received": after[nf]["xrx"] - before[nf]["xrx"]}
        row["state_bytes"] = (row["sent_own_cluster"] + row["received_own_cluster"]
                              + row["received_other_cluster"])
        rows.append(row)
    return rows


def run(ctx: Context) -> Outcome:
    out = Outcome(NAME)
    out.notes.append(
        "Batch 30 closing on count only, 50 pkt/s, 2 clusters x 2 primaries, each with a backup. "
        "One packet per 5-tuple, all in one slot (the thesis's growing per-flow state); the "
        "generic NF keeps state_bytes=64 per flow. --quick runs the same 225 packets (the run is "
        "short already).")
    cfg = make_config([2, 2], batch=BATCH, batch_timeout_us=60_000_000)
    cluster = {nf["id"]: nf["cluster"] for nf in cfg["nfs"]}
    nf_ids = [nf["id"] for nf in cfg["nfs"]]
    rows: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    with bring_up(ctx, NAME, cfg, {"state_bytes": STATE_BYTES}) as bench:
        rng = ctx.rng(NAME)
        slots = sorted(int(r["slot"]) for r in bench.get("/slots?nf=1"))
        slot = rng.choice(slots)
        pairs = ports_in_slots({slot}, MIGRATION_POINTS[-1], bench.system.cfg.switch.slot_count,
                               rng, dports=range(SINK_PORT, SINK_PORT + SINK_PORTS),
                               sports=range(1024, 65536))
        before = settled(bench, nf_ids)
        sent = 0
        for i, point in enumerate(MIGRATION_POINTS):
            ctx.progress(NAME, i + 1, len(MIGRATION_POINTS), f"packets {sent + 1}..{point}")
            chunk = pairs[sent:point]
            t = bench.traffic(len(chunk), 1, RATE, sports=[p[0] for p in chunk],
                              dports=[p[1] for p in chunk], echo=False, sink_ports=SINK_PORTS,
                              idle=1.0)
            if t.received != len(chunk):
                out.notes.append(f"packets {sent + 1}..{point}: {t.received} of {len(chunk)} "
                                 "reached the sink")
            sent = point
            event = "batch"
            if point in (INTRA_MOVE_AT, INTER_MOVE_AT):
                settled(bench, nf_ids)
                to = 2 if point == INTRA_MOVE_AT else 3
                res = bench.post(f"/slots/{slot}/move?to={to}")
                moves.append({"packet": point, **res})
                event = f"move to NF-{to} ({'delta' if res.get('delta') else 'full'}, " \
                        f"{res.get('bytes_shipped')} B)"
            after = settled(bench, nf_ids)
            rows += diff_rows(point, event, before, after, cluster)
            before = after
    out.csvs.append(write_csv(ctx.out_dir / "migration-bytes.csv", rows))
    out.csvs.append(write_csv(ctx.out_dir / "migration-moves.csv", moves))
    cats = [str(p) for p in MIGRATION_POINTS]
    thesis = {1: A5_NF1, 2: A6_NF2, 3: A7_NF3}
    for nf, table in ((1, "A.5"), (2, "A.6"), (3, "A.7")):
        mine = [r for r in rows if r["nf"] == nf]
        out.plots.append(plots.bars(
            ctx.out_dir / f"migration-bytes-nf{nf}.png", f"State info for NF-{nf}",
            "packet count", "bytes",
            cats, [("sent to own cluster", [r["sent_own_cluster"] for r in mine]),
                   ("received from own cluster", [r["received_own_cluster"] for r in mine]),
                   ("received from other cluster", [r["received_other_cluster"] for r in mine]),
                   (f"thesis {table}", [thesis[nf][p] for p in MIGRATION_POINTS])]))
        out.comparisons.append(Comparison(
            table, f"Migration overhead, NF-{nf} (bytes per batch)", "packet count", "bytes",
            "bytes", [(r["packet"], thesis[nf][r["packet"]], r["state_bytes"]) for r in mine],
            shape=SHAPE))
    by_point = {m["packet"]: m for m in moves}
    intra, inter = by_point.get(INTRA_MOVE_AT, {}), by_point.get(INTER_MOVE_AT, {})
    out.checks.append(Check(
        "both moves succeeded", bool(intra.get("ok")) and bool(inter.get("ok")),
        f"intra: {intra.get('error') or 'ok'}, inter: {inter.get('error') or 'ok'}"))
    out.checks.append(Check(
        "the intra-cluster move ships fewer bytes than the inter-cluster one (a delta against "
        "the full state)",
        0 <= int(intra.get("bytes_shipped", -1)) < int(inter.get("bytes_shipped", 0))
        and bool(intra.get("delta")) and not inter.get("delta"),
        f"{intra.get('bytes_shipped')} B ({intra.get('flows_shipped')} flows) against "
        f"{inter.get('bytes_shipped')} B ({inter.get('flows_shipped')} flows)"))
    nf3 = {r["packet"]: r for r in rows if r["nf"] == 3}
    out.checks.append(Check(
        "NF-3 receives nothing of the slot before the inter-cluster move, then its whole state",
        all(nf3[p]["received_other_cluster"] == 0 for p in MIGRATION_POINTS if p < INTER_MOVE_AT)
        and nf3[INTER_MOVE_AT]["received_other_cluster"] > 10 * max(
            1, max(nf3[p]["received_other_cluster"] for p in MIGRATION_POINTS if p < INTER_MOVE_AT)),
        f"at {INTER_MOVE_AT}: {nf3[INTER_MOVE_AT]['received_other_cluster']} B"))
    return out


SHAPE = ("Same shape: a batch ships about 30 flow states, the intra-cluster move only the flows "
         "changed since the peer's last acknowledged version, the inter-cluster move all of them. "
         "At a move our source also closes its open batch, so the peer gets those few flows "
         "twice (the delta, then the transfer, which does not wait for the delta's "
         "acknowledgement), and NF-1 and NF-2 count the same bytes once as sent and once as "
         "received, as the thesis does.")
