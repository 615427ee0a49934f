#!/usr/bin/env python3
"""Draws training losses against wall time as an SVG picture.

  tools/loss_svg.py LABEL=LOG.jsonl ... -o OUT.svg [--title T]
      [--smooth N] [--width PX] [--height PX]

Each LOG.jsonl is what `cleave-run --log-json` writes: one object per
logged step with "loss" and "step_ms" (the step's wall time). A run is one
polyline of its loss (the running mean of the last N logged losses,
--smooth, default 1: as logged) against the time elapsed at the end of each
step (the sum of step_ms), labelled LABEL in the legend; runs whose label
ends in "(straggler)" are drawn dashed in their base label's colour. Axes
in seconds and loss, with grid lines. Each run is the picture's only kind
of <polyline>.

Standard library only.
"""

import argparse
import json
import math
import os
import sys
from xml.sax.saxutils import escape

PROG = "loss_svg.py"

# Tableau 10.
PALETTE = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b",
           "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"]
FONT = "font-family=\"Helvetica, Arial, sans-serif\""
LEFT, RIGHT, TOP, BOTTOM = 64, 210, 48, 48
STRAGGLER = " (straggler)"


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def read_run(spec, smooth):
    if "=" not in spec:
        fail(f"expected LABEL=LOG.jsonl, got '{spec}'")
    label, path = spec.split("=", 1)
    points, elapsed, window = [], 0.0, []
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        fail(f"cannot read '{path}': {e.strerror}")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            loss, ms = float(r["loss"]), float(r["step_ms"])
        except (ValueError, KeyError, TypeError):
            fail(f"{path}:{n}: not a cleave-run --log-json line with loss and step_ms")
        if not math.isfinite(loss) or not math.isfinite(ms) or ms < 0:
            continue
        elapsed += ms / 1000.0
        window = (window + [loss])[-smooth:]
        points.append((elapsed, sum(window) / len(window)))
    if not points:
        fail(f"'{path}' has no logged steps")
    return label, points


def nice_ticks(lo, hi, count=6):
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    # From the last tick at or below lo to the first at or above hi.
    first = math.floor(lo / step + 1e-9) * step
    ticks = [first]
    while ticks[-1] < hi - step * 1e-9:
        ticks.append(first + len(ticks) * step)
    return ticks


def fmt(v):
    return f"{v:.2f}".rstrip("0").rstrip(".") if abs(v) < 100 else f"{v:.0f}"


def draw(runs, title, width, height):
    xs = [x for _, pts in runs for x, _ in pts]
    ys = [y for _, pts in runs for _, y in pts]
    xticks = nice_ticks(0.0, max(xs))
    yticks = nice_ticks(min(ys), max(ys))
    x0, x1, y0, y1 = xticks[0], xticks[-1], yticks[0], yticks[-1]
    pw, ph = width - LEFT - RIGHT, height - TOP - BOTTOM

    def px(x):
        return LEFT + (x - x0) / (x1 - x0) * pw

    def py(y):
        return TOP + ph - (y - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="22" {FONT} font-size="14" '
           f'font-weight="bold">{escape(title)}</text>']
    for t in xticks:
        out.append(f'<line x1="{px(t):.2f}" y1="{TOP}" x2="{px(t):.2f}" '
                   f'y2="{TOP + ph}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{px(t):.2f}" y="{TOP + ph + 16}" {FONT} '
                   f'font-size="11" text-anchor="middle">{fmt(t)}</text>')
    for t in yticks:
        out.append(f'<line x1="{LEFT}" y1="{py(t):.2f}" x2="{LEFT + pw}" '
                   f'y2="{py(t):.2f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(t) + 4:.2f}" {FONT} '
                   f'font-size="11" text-anchor="end">{fmt(t)}</text>')
    out.append(f'<text x="{LEFT + pw / 2:.2f}" y="{height - 10}" {FONT} '
               f'font-size="12" text-anchor="middle">wall time (s)</text>')
    out.append(f'<text x="16" y="{TOP + ph / 2:.2f}" {FONT} font-size="12" '
               f'text-anchor="middle" transform="rotate(-90 16 '
               f'{TOP + ph / 2:.2f})">loss</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" '
               f'fill="none" stroke="#606060"/>')
    colours = {}
    for i, (label, pts) in enumerate(runs):
        base = label[:-len(STRAGGLER)] if label.endswith(STRAGGLER) else label
        colour = colours.setdefault(base, PALETTE[len(colours) % len(PALETTE)])
        dash = ' stroke-dasharray="5 3"' if label != base else ""
        coords = " ".join(f"{px(x):.2f},{py(y):.2f}" for x, y in pts)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" '
                   f'stroke-width="1.6"{dash}><title>{escape(label)}: loss '
                   f'{pts[-1][1]:.4f} at {pts[-1][0]:.2f} s</title></polyline>')
        ly = TOP + 8 + 16 * i
        lx = LEFT + pw + 14
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 22}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 28}" y="{ly + 4}" {FONT} '
                   f'font-size="11">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", metavar="LABEL=LOG.jsonl")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title", default="loss against wall time")
    ap.add_argument("--smooth", type=int, default=1)
    ap.add_argument("--width", type=int, default=860)
    ap.add_argument("--height", type=int, default=420)
    args = ap.parse_args()
    if args.smooth < 1:
        fail("--smooth must be at least 1")
    if args.width < LEFT + RIGHT + 100 or args.height < TOP + BOTTOM + 100:
        fail("the picture is too small")
    runs = [read_run(spec, args.smooth) for spec in args.runs]
    svg = draw(runs, args.title, args.width, args.height)
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        f.write(svg)
    os.replace(tmp, args.output)


if __name__ == "__main__":
    main()
