"""`results/experiments/report.md`: the thesis's numbers (tables A.1-A.8) beside ours, with the
ratio, a sentence on any difference of shape, the parameters we changed and why, the sanity checks
and the plots.

Each experiment's outcome is kept as `outcome-<name>.json` in the output directory, so that running
one experiment alone (`make experiments EXP=...`) rewrites the report with every outcome present.
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from experiments.common import Check, Comparison, Outcome
from experiments.thesis_data import TABLES


def save(outcome: Outcome, out_dir: Path, seconds: float, args: dict[str, Any]) -> Path:
    data = asdict(outcome)
    data["csvs"] = [p.name for p in outcome.csvs]
    data["plots"] = [p.name for p in outcome.plots]
    data["seconds"] = round(seconds, 1)
    data["args"] = args
    data["date"] = time.strftime("%Y-%m-%d %H:%M")
    path = out_dir / f"outcome-{outcome.name}.json"
    path.write_text(json.dumps(data, indent=1, default=str))
    return path


def load(out_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(out_dir.glob("outcome-*.json"))]


def ratio(thesis: float | None, ours: float | None) -> float | None:
    """ours / thesis, or None when either is missing or the thesis's value is 0."""
    if thesis is None or ours is None or thesis == 0 or (isinstance(ours, float) and math.isnan(ours)):
        return None
    return ours / thesis


def _num(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def comparison_table(c: Comparison | dict[str, Any]) -> list[str]:
    """A Markdown table: x, thesis, ours, ours/thesis."""
    d = asdict(c) if isinstance(c, Comparison) else c
    lines = [f"**Table {d['table']}** — {d['title']}", "",
             f"| {d['x_label']} | thesis ({d['unit_thesis']}) | ours ({d['unit_ours']}) | ours / thesis |",
             "| ---: | ---: | ---: | ---: |"]
    for x, thesis, ours in d["rows"]:
        r = ratio(thesis, ours)
        lines.append(f"| {x} | {_num(thesis)} | {_num(ours)} | {'-' if r is None else f'{r:.3g}'} |")
    trends = shape_line(d["rows"], d["x_label"])
    if trends or d.get("shape"):
        lines += ["", "Shape: " + " ".join(x for x in (trends, d.get("shape", "")) if x)]
    return [*lines, ""]


def trend(xs: list[Any], ys: list[Any], flat: float = 0.1) -> str | None:
    """How `ys` goes from its first to its last number (None: fewer than two): "rises N %",
    "falls N %" or "stays within N %" when the change is below `flat` (10 %)."""
    pts = [(x, float(y)) for x, y in zip(xs, ys, strict=True)
           if y is not None and not (isinstance(y, float) and math.isnan(y))]
    if len(pts) < 2 or pts[0][1] == 0:
        return None
    change = pts[-1][1] / pts[0][1] - 1
    if abs(change) < flat:
        spread = max(abs(y / pts[0][1] - 1) for _, y in pts)
        return f"stays within {spread:.0%} from {pts[0][0]} to {pts[-1][0]}"
    return f"{'rises' if change > 0 else 'falls'} {abs(change):.0%} from {pts[0][0]} to {pts[-1][0]}"


def shape_line(rows: list[Any], x_label: str) -> str:
    """The measured shapes, thesis and ours, over the points both have (computed, not written)."""
    both = [r for r in rows if r[1] is not None and r[2] is not None]
    thesis = trend([r[0] for r in both], [r[1] for r in both])
    ours = trend([r[0] for r in both], [r[2] for r in both])
    if thesis is None or ours is None:
        return ""
    return f"Over {x_label} the thesis's value {thesis}; ours {ours}."


def check_line(c: Check | dict[str, Any]) -> str:
    d = asdict(c) if isinstance(c, Check) else c
    return f"- {'PASS' if d['ok'] else 'FAIL'}: {d['what']}" + (f" ({d['detail']})" if d.get("detail") else "")


def write(out_dir: Path, outcomes: list[dict[str, Any]] | None = None, plot_prefix: str = "") -> Path:
    """Write report.md from the outcomes (default: every outcome saved in `out_dir`)."""
    outcomes = load(out_dir) if outcomes is None else outcomes
    lines = ["# nfcluster: the thesis's experiments on the real system", "",
             f"Written {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} "
             f"({platform.machine()}, Python {platform.python_version()}). Each section is one "
             "experiment (`make experiments EXP=<name>`); the thesis's numbers are appendix A of "
             "the thesis, tables " + ", ".join(TABLES) + ". Ratios are ours / thesis; where the "
             "units differ (the thesis's throughput unit is not a rate we can name) only the "
             "shape is comparable.", ""]
    for o in outcomes:
        args = o.get("args", {})
        lines += [f"## {o['name']}", "",
                  f"Run {o.get('date', '?')}, {o.get('seconds', '?')} s"
                  + (", quick mode" if args.get("quick") else "")
                  + f", seed {args.get('seed', '?')}, target {args.get('target', '?')}.", ""]
        if o.get("error"):
            lines += [f"**Failed:** {o['error']}", ""]
        for note in o.get("notes", []):
            lines.append(f"- {note}")
        if o.get("notes"):
            lines.append("")
        for c in o.get("comparisons", []):
            lines += comparison_table(c)
        if o.get("checks"):
            lines += ["Sanity checks:", "", *[check_line(c) for c in o["checks"]], ""]
        for p in o.get("plots", []):
            lines += [f"![{p}]({plot_prefix}{p})", ""]
        if o.get("csvs"):
            lines += ["Data: " + ", ".join(f"`{c}`" for c in o["csvs"]), ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
