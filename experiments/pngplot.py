"""A small PNG plotter in pure Python, used when matplotlib is not installed: line plots and
grouped bar plots with axes, ticks, a title, axis labels and a legend, in a 5x7 bitmap font
(upper case). Plain, but a figure rather than no figure; `experiments.plots` prefers matplotlib.
"""

from __future__ import annotations

import itertools
import math
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

W, H = 800, 520
LEFT, RIGHT, TOP, BOTTOM = 90, 200, 50, 70
COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75), (227, 119, 194), (127, 127, 127)]
BLACK, GREY, WHITE = (0, 0, 0), (215, 215, 215), (255, 255, 255)

_FONT_ROWS = {
    "0": "01110 10001 10011 10101 11001 10001 01110", "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111", "3": "11110 00001 00001 01110 00001 00001 11110",
    "4": "00010 00110 01010 10010 11111 00010 00010", "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110", "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110", "9": "01110 10001 10001 01111 00001 00010 01100",
    "A": "01110 10001 10001 11111 10001 10001 10001", "B": "11110 10001 10001 11110 10001 10001 11110",
    "C": "01110 10001 10000 10000 10000 10001 01110", "D": "11100 10010 10001 10001 10001 10010 11100",
    "E": "11111 10000 10000 11110 10000 10000 11111", "F": "11111 10000 10000 11110 10000 10000 10000",
    "G": "01110 10001 10000 10111 10001 10001 01111", "H": "10001 10001 10001 11111 10001 10001 10001",
    "I": "01110 00100 00100 00100 00100 00100 01110", "J": "00111 00010 00010 00010 00010 10010 01100",
    "K": "10001 10010 10100 11000 10100 10010 10001", "L": "10000 10000 10000 10000 10000 10000 11111",
    "M": "10001 11011 10101 10101 10001 10001 10001", "N": "10001 10001 11001 10101 10011 10001 10001",
    "O": "01110 10001 10001 10001 10001 10001 01110", "P": "11110 10001 10001 11110 10000 10000 10000",
    "Q": "01110 10001 10001 10001 10101 10010 01101", "R": "11110 10001 10001 11110 10100 10010 10001",
    "S": "01111 10000 10000 01110 00001 00001 11110", "T": "11111 00100 00100 00100 00100 00100 00100",
    "U": "10001 10001 10001 10001 10001 10001 01110", "V": "10001 10001 10001 10001 10001 01010 00100",
    "W": "10001 10001 10001 10101 10101 10101 01010", "X": "10001 10001 01010 00100 01010 10001 10001",
    "Y": "10001 10001 01010 00100 00100 00100 00100", "Z": "11111 00001 00010 00100 01000 10000 11111",
    ".": "00000 00000 00000 00000 00000 01100 01100", ",": "00000 00000 00000 00000 01100 00100 01000",
    "-": "00000 00000 00000 11111 00000 00000 00000", "+": "00000 00100 00100 11111 00100 00100 00000",
    "/": "00001 00010 00010 00100 01000 01000 10000", "(": "00010 00100 01000 01000 01000 00100 00010",
    ")": "01000 00100 00010 00010 00010 00100 01000", ":": "00000 01100 01100 00000 01100 01100 00000",
    "%": "11001 11010 00010 00100 01000 01011 10011", "=": "00000 00000 11111 00000 11111 00000 00000",
    "_": "00000 00000 00000 00000 00000 00000 11111", "x": "00000 10001 01010 00100 01010 10001 00000",
    " ": "00000 00000 00000 00000 00000 00000 00000", ">": "01000 00100 00010 00001 00010 00100 01000",
}
FONT = {c: [int(row, 2) for row in rows.split()] for c, rows in _FONT_ROWS.items()}


class Canvas:
    def __init__(self, w: int = W, h: int = H) -> None:
        self.w, self.h = w, h
        self.px = bytearray(WHITE * (w * h))

    def dot(self, x: int, y: int, c: tuple[int, int, int]) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = 3 * (y * self.w + x)
            self.px[i:i + 3] = bytes(c)

    def rect(self, x0: int, y0: int, x1: int, y1: int, c: tuple[int, int, int]) -> None:
        for y in range(max(0, min(y0, y1)), min(self.h, max(y0, y1) + 1)):
            for x in range(max(0, min(x0, x1)), min(self.w, max(x0, x1) + 1)):
                self.dot(x, y, c)

    def line(self, x0: int, y0: int, x1: int, y1: int, c: tuple[int, int, int], width: int = 1) -> None:
        n = max(abs(x1 - x0), abs(y1 - y0), 1)
        r = width // 2
        for i in range(n + 1):
            x, y = x0 + (x1 - x0) * i // n, y0 + (y1 - y0) * i // n
            if r:
                self.rect(x - r, y - r, x + r, y + r, c)
            else:
                self.dot(x, y, c)

    def text(self, x: int, y: int, s: str, c: tuple[int, int, int] = BLACK, scale: int = 1,
             anchor: str = "left", vertical: bool = False) -> None:
        s = s.upper()
        width = 6 * scale * len(s)
        if anchor == "center":
            x -= width // 2 if not vertical else 0
            y += width // 2 if vertical else 0
        elif anchor == "right":
            x -= width
        for k, ch in enumerate(s):
            glyph = FONT.get(ch, FONT[" "] if ch == " " else FONT["_"])
            for row, bits in enumerate(glyph):
                for col in range(5):
                    if bits >> (4 - col) & 1:
                        for dy in range(scale):
                            for dx in range(scale):
                                gx, gy = 6 * scale * k + col * scale + dx, row * scale + dy
                                if vertical:
                                    self.dot(x + gy, y - gx, c)
                                else:
                                    self.dot(x + gx, y + gy, c)

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.px[3 * self.w * y:3 * self.w * (y + 1)])
                       for y in range(self.h))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return (struct.pack("!I", len(data)) + kind + data
                    + struct.pack("!I", zlib.crc32(kind + data) & 0xFFFFFFFF))

        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack("!IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2) if start + i * step <= hi + 1e-9]


def _label(v: float) -> str:
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-2):
        return f"{v:.0e}"
    return f"{v:g}" if abs(v) < 1000 else f"{v:.0f}"


def _frame(cv: Canvas, title: str, xlabel: str, ylabel: str, ylo: float, yhi: float
           ) -> tuple[list[float], float, float]:
    cv.text(LEFT + (W - LEFT - RIGHT) // 2, 15, title, anchor="center", scale=2)
    cv.text(LEFT + (W - LEFT - RIGHT) // 2, H - 25, xlabel, anchor="center")
    cv.text(15, TOP + (H - TOP - BOTTOM) // 2, ylabel, anchor="center", vertical=True)
    ticks = nice_ticks(ylo, yhi)
    ylo, yhi = min(ticks[0], ylo), max(ticks[-1], yhi)
    for t in ticks:
        y = _ymap(t, ylo, yhi)
        cv.line(LEFT, y, W - RIGHT, y, GREY)
        cv.text(LEFT - 6, y - 3, _label(t), anchor="right")
    cv.line(LEFT, TOP, LEFT, H - BOTTOM, BLACK)
    cv.line(LEFT, H - BOTTOM, W - RIGHT, H - BOTTOM, BLACK)
    return ticks, ylo, yhi


def _ymap(v: float, lo: float, hi: float) -> int:
    return int(H - BOTTOM - (v - lo) / (hi - lo) * (H - TOP - BOTTOM))


def _legend(cv: Canvas, labels: Sequence[str]) -> None:
    for i, label in enumerate(labels):
        y = TOP + 10 + 18 * i
        cv.rect(W - RIGHT + 12, y, W - RIGHT + 24, y + 7, COLOURS[i % len(COLOURS)])
        cv.text(W - RIGHT + 30, y, label[:27])


def line_plot(path: Path, title: str, xlabel: str, ylabel: str,
              series: Sequence[tuple[str, Sequence[float], Sequence[float]]]) -> Path:
    cv = Canvas()
    xs = [x for _l, sx, sy in series for x, y in zip(sx, sy, strict=True) if y == y]
    ys = [y for _l, _sx, sy in series for y in sy if y == y]
    xlo, xhi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if xhi == xlo:
        xlo, xhi = xlo - 1, xhi + 1
    _ticks, ylo, yhi = _frame(cv, title, xlabel, ylabel, min([0.0, *ys]), max([1e-9, *ys]) * 1.05)
    xt = nice_ticks(xlo, xhi)

    def xmap(v: float) -> int:
        return int(LEFT + (v - xlo) / (xhi - xlo) * (W - LEFT - RIGHT))

    for t in xt:
        if xlo <= t <= xhi:
            cv.line(xmap(t), H - BOTTOM, xmap(t), H - BOTTOM + 4, BLACK)
            cv.text(xmap(t), H - BOTTOM + 8, _label(t), anchor="center")
    for i, (_name, sx, sy) in enumerate(series):
        c = COLOURS[i % len(COLOURS)]
        pts = [(xmap(x), _ymap(y, ylo, yhi)) for x, y in zip(sx, sy, strict=True) if y == y]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            cv.line(x0, y0, x1, y1, c, width=2)
        for x, y in pts:
            cv.rect(x - 3, y - 3, x + 3, y + 3, c)
    _legend(cv, [s[0] for s in series])
    path.write_bytes(cv.png())
    return path


def bar_plot(path: Path, title: str, xlabel: str, ylabel: str, categories: Sequence[str],
             series: Sequence[tuple[str, Sequence[float]]]) -> Path:
    cv = Canvas()
    ys = [y for _l, sy in series for y in sy if y == y]
    _ticks, ylo, yhi = _frame(cv, title, xlabel, ylabel, 0.0, max([1e-9, *ys]) * 1.05)
    n, k = len(categories), max(1, len(series))
    group = (W - LEFT - RIGHT) / max(1, n)
    bar = max(1, int(group * 0.8 / k))
    for j, cat in enumerate(categories):
        x0 = int(LEFT + j * group + group * 0.1)
        cv.text(int(LEFT + (j + 0.5) * group), H - BOTTOM + 8, cat, anchor="center")
        for i, (_l, sy) in enumerate(series):
            v = sy[j]
            if v == v and v > 0:
                cv.rect(x0 + i * bar, _ymap(v, ylo, yhi), x0 + (i + 1) * bar - 2, H - BOTTOM - 1,
                        COLOURS[i % len(COLOURS)])
    _legend(cv, [s[0] for s in series])
    path.write_bytes(cv.png())
    return path
