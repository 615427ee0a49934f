#!/usr/bin/env python3
"""Draws a pipeline timeline from a Chrome trace as an SVG picture.

  tools/trace_svg.py TRACE.json -o OUT.svg [--title T] [--width PX]

TRACE.json is what `cleave-run --trace`, `cleave-compile --emit=schedule`
and `cleave-schedule --trace` write: complete events ("ph": "X") with the
rank as "tid", the step as "name" (F3, B0, Bi2, W1, with ".c1" for chunk 1
of an interleaved schedule) and "ts"/"dur" in microseconds. The picture has
one row per rank and one box per step, labelled with its name where it
fits (every box carries it as a tooltip): forward steps in one colour,
backward (B, Bi) in another, weight gradients (W) in a third, later chunks
in lighter shades of the same, anything else grey. Idle time stays blank.
Below the rows runs a time axis in milliseconds; the heading gives the
bubble (1 - busy time / (ranks x span), as `cleave-run --trace` measures
it). Each step is the picture's only kind of <rect>.

Standard library only.
"""

import argparse
import json
import math
import os
import re
import sys
from xml.sax.saxutils import escape

PROG = "trace_svg.py"

# Base colours per kind of step (Tableau 10).
COLOURS = {
    "forward": "#4c78a8",
    "backward": "#e45756",
    "weight": "#54a24b",
    "other": "#9d9d9d",
}
LEGEND = [("forward", "forward (F)"), ("backward", "backward (B, Bi)"),
          ("weight", "weight gradient (W)")]

STEP_NAME = re.compile(r"^(Bi|F|B|W)(\d+)(?:\.c(\d+))?$")

ROW_HEIGHT = 26
ROW_GAP = 6
LEFT = 64        # room for the rank labels
RIGHT = 24
FONT = "font-family=\"Helvetica, Arial, sans-serif\""
CHAR_WIDTH = 6.2  # of an 11 px label, for deciding whether a name fits


class TraceError(Exception):
    pass


def classify(name):
    """(kind, chunk) of a step name: F -> forward, B/Bi -> backward,
    W -> weight; chunk from a ".cN" suffix (0 without one)."""
    m = STEP_NAME.match(name)
    if not m:
        return "other", 0
    kind = {"F": "forward", "B": "backward", "Bi": "backward",
            "W": "weight"}[m.group(1)]
    return kind, int(m.group(3) or 0)


def lighten(colour, amount):
    """`colour` mixed with white by `amount` (0: unchanged, 1: white)."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    rgb = [round(c + (255 - c) * amount) for c in rgb]
    return "#%02x%02x%02x" % tuple(rgb)


def fill_of(kind, chunk):
    # Chunk 1 is clearly lighter; further chunks lighter still.
    amount = min(0.45 * chunk, 0.75) if chunk > 0 else 0.0
    return lighten(COLOURS[kind], amount)


def text_colour(fill):
    r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


def load_events(path):
    """The complete events of the trace: dicts with rank key, name, ts,
    dur (microseconds)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise TraceError("cannot read '%s': %s" % (path, e.strerror))
    except (ValueError, UnicodeDecodeError) as e:
        raise TraceError("'%s' is not JSON: %s" % (path, e))
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError("'%s' has no traceEvents array (a Chrome trace "
                         "from cleave-run --trace or cleave-compile "
                         "--emit=schedule)" % path)
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            ts, dur = float(e["ts"]), float(e["dur"])
            tid = e.get("tid", 0)
            pid = e.get("pid", 0)
        except (KeyError, TypeError, ValueError):
            raise TraceError("event %d of '%s' has no numeric ts and dur"
                             % (i, path))
        if not (math.isfinite(ts) and math.isfinite(dur)) or dur < 0:
            raise TraceError("event %d of '%s' has a bad time (ts %r, dur %r)"
                             % (i, path, e["ts"], e["dur"]))
        out.append({"row": (pid, tid), "name": str(e.get("name", "")),
                    "ts": ts, "dur": dur})
    if not out:
        raise TraceError("'%s' has no complete (\"ph\": \"X\") events to "
                         "draw" % path)
    return out


def nice_step(span, target):
    """A tick step of 1, 2 or 5 times a power of ten giving about `target`
    ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * power:
            return m * power
    return 10 * power


def format_ms(value, step):
    decimals = max(0, -int(math.floor(math.log10(step)))) if step < 1 else 0
    return "%.*f" % (decimals, value)


def row_label(row, pids):
    pid, tid = row
    return ("rank %s" % tid) if len(pids) == 1 else ("%s:%s" % (pid, tid))


def render(events, title, width):
    rows = sorted({e["row"] for e in events},
                  key=lambda r: (str(type(r[0])), r[0], str(type(r[1])), r[1]))
    pids = {r[0] for r in rows}
    index = {r: i for i, r in enumerate(rows)}
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    span_us = max(end - start, 1e-9)
    plot = max(width - LEFT - RIGHT, 100)
    scale = plot / span_us  # pixels per microsecond

    busy = sum(e["dur"] for e in events)
    bubble = 1.0 - busy / (len(rows) * span_us) if span_us > 0 else 0.0
    has_chunks = any(classify(e["name"])[1] > 0 for e in events)
    kinds = {classify(e["name"])[0] for e in events}

    top = 12
    lines = []
    if title:
        top += 16
        lines.append('<text x="%d" y="%d" font-size="15" font-weight="bold" '
                     '%s>%s</text>' % (LEFT, top, FONT, escape(title)))
    top += 18
    summary = ("%d ranks, %d steps, %.3g ms; bubble %.1f%% (idle time left "
               "blank)" % (len(rows), len(events), span_us / 1000.0,
                           bubble * 100.0))
    lines.append('<text x="%d" y="%d" font-size="12" fill="#333333" %s>%s'
                 '</text>' % (LEFT, top, FONT, escape(summary)))
    top += 14

    # Legend: swatches are paths, so the steps are the only rects.
    x = LEFT
    legend = [(k, label) for k, label in LEGEND if k in kinds]
    if "other" in kinds:
        legend.append(("other", "other"))
    entries = [(fill_of(k, 0), label) for k, label in legend]
    if has_chunks:
        entries.append((fill_of("forward", 1), "chunk 1 (lighter shades)"))
    for fill, label in entries:
        lines.append('<path d="M%d %d h12 v12 h-12 z" fill="%s"/>'
                     % (x, top, fill))
        lines.append('<text x="%d" y="%d" font-size="12" %s>%s</text>'
                     % (x + 17, top + 10, FONT, escape(label)))
        x += 17 + int(len(label) * 6.6) + 18
    top += 24

    rows_top = top
    rows_height = len(rows) * (ROW_HEIGHT + ROW_GAP) - ROW_GAP
    axis_y = rows_top + rows_height + 6

    # Time axis and grid.
    span_ms = span_us / 1000.0
    step = nice_step(span_ms, max(2, plot // 90))
    grid = []
    for i in range(int(span_ms / step * (1 + 1e-9)) + 1):
        tick = i * step
        gx = LEFT + tick * 1000.0 * scale
        grid.append('<path d="M%.2f %d V%d" stroke="#e6e6e6" '
                    'stroke-width="1"/>' % (gx, rows_top - 2, axis_y))
        grid.append('<path d="M%.2f %d v5" stroke="#555555"/>' % (gx, axis_y))
        grid.append('<text x="%.2f" y="%d" font-size="11" text-anchor="middle"'
                    ' fill="#333333" %s>%s</text>'
                    % (gx, axis_y + 17, FONT, format_ms(tick, step)))
    grid.append('<path d="M%d %d H%.2f" stroke="#555555"/>'
                % (LEFT, axis_y, LEFT + plot))
    grid.append('<text x="%.2f" y="%d" font-size="12" text-anchor="middle" '
                'fill="#333333" %s>time (ms)</text>'
                % (LEFT + plot / 2.0, axis_y + 33, FONT))

    # Rank labels and steps.
    body = []
    for r in rows:
        y = rows_top + index[r] * (ROW_HEIGHT + ROW_GAP)
        body.append('<text x="%d" y="%.1f" font-size="12" text-anchor="end" '
                    '%s>%s</text>' % (LEFT - 8, y + ROW_HEIGHT / 2.0 + 4, FONT,
                                      escape(row_label(r, pids))))
    for e in sorted(events, key=lambda e: (index[e["row"]], e["ts"])):
        kind, chunk = classify(e["name"])
        fill = fill_of(kind, chunk)
        x0 = LEFT + (e["ts"] - start) * scale
        w = max(e["dur"] * scale, 0.5)
        y = rows_top + index[e["row"]] * (ROW_HEIGHT + ROW_GAP)
        name = escape(e["name"])
        tip = "%s on %s: %.3f ms at %.3f ms" % (
            e["name"], row_label(e["row"], pids), e["dur"] / 1000.0,
            (e["ts"] - start) / 1000.0)
        body.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" '
                    'fill="%s" stroke="#ffffff" stroke-width="0.75">'
                    '<title>%s</title></rect>'
                    % (x0, y, w, ROW_HEIGHT, fill, escape(tip)))
        if len(e["name"]) * CHAR_WIDTH + 4 <= w:
            body.append('<text x="%.2f" y="%.1f" font-size="11" '
                        'text-anchor="middle" fill="%s" %s>%s</text>'
                        % (x0 + w / 2.0, y + ROW_HEIGHT / 2.0 + 4,
                           text_colour(fill), FONT, name))

    height = axis_y + 44
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d">' % (width, height, width, height),
           '<path d="M0 0 H%d V%d H0 z" fill="#ffffff"/>' % (width, height)]
    out += lines + grid + body
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Draws a pipeline timeline (a Chrome trace from "
                    "cleave-run --trace or cleave-compile --emit=schedule) "
                    "as an SVG: one row per rank, one box per step.")
    parser.add_argument("trace", metavar="TRACE.json")
    parser.add_argument("-o", "--output", metavar="OUT.svg", required=True)
    parser.add_argument("--title", default="",
                        help="a heading above the timeline")
    parser.add_argument("--width", type=int, default=1000,
                        help="picture width in pixels (default 1000)")
    args = parser.parse_args(argv)
    if args.width < 200:
        parser.error("--width must be at least 200 pixels")
    try:
        svg = render(load_events(args.trace), args.title, args.width)
    except TraceError as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    # Written next to its destination, then renamed: never half a file.
    tmp = args.output + ".tmp%d" % os.getpid()
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(svg)
        os.replace(tmp, args.output)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        print("%s: error: cannot write '%s': %s"
              % (PROG, args.output, e.strerror), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
