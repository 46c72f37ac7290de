"""The figures: line plots (a measure against a parameter, one line per variant) and grouped bar
plots (bytes per batch), written as PNG with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen

BACKEND = f"matplotlib {matplotlib.__version__}"

Series = tuple[str, Sequence[float], Sequence[float]]


def line(path: Path, title: str, xlabel: str, ylabel: str, series: Sequence[Series],
         logx: bool = False) -> Path:
    """One line (with markers) per (label, xs, ys); NaN values are left out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for label, xs, ys in series:
        pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y == y]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    if logx:
        ax.set_xscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def bars(path: Path, title: str, xlabel: str, ylabel: str, categories: Sequence[str],
         series: Sequence[tuple[str, Sequence[float]]]) -> Path:
    """Grouped bars: for each category, one bar per (label, values) series."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    k = max(1, len(series))
    width = 0.8 / k
    for i, (label, ys) in enumerate(series):
        ax.bar([j + (i - (k - 1) / 2) * width for j in range(len(categories))], ys, width,
               label=label)
    ax.set_xticks(range(len(categories)), list(categories))
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


Panel = tuple[str, Sequence[Series], Sequence[tuple[float, str]]]


def timeline(path: Path, title: str, xlabel: str, ylabel: str, panels: Sequence[Panel]) -> Path:
    """One panel per (title, series, marks), stacked, sharing the x axis: one line per (label,
    xs, ys) over time, and a dashed vertical line with its label at each (x, label) of the marks
    (the events)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.6 * len(panels) + 0.8), dpi=110,
                             sharex=True, squeeze=False)
    for ax, (name, series, marks) in zip(axes[:, 0], panels, strict=True):
        for label, xs, ys in series:
            ax.plot(list(xs), list(ys), label=label, linewidth=1)
        top = max((max(ys) for _, _, ys in series if len(ys)), default=1.0)
        for x, label in marks:
            ax.axvline(x, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
            ax.text(x, top * 1.02, f" {label}", va="bottom", ha="left", fontsize="small")
        ax.set_title(name, fontsize="medium")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0, top=top * 1.2)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="lower right")
    axes[-1, 0].set_xlabel(xlabel)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
