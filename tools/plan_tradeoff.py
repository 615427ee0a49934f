#!/usr/bin/env python3
"""The cost-versus-time trade-off of cleave-compile --auto's candidates.

Reads the CSVs that `cleave-compile --auto --candidates FILE` writes (one
per cluster size, say), keeps the feasible layouts, and prints them as a table with, for a run of
--token-budget tokens, the steps, days, kWh and cost; the layouts on the
Pareto front (no other is both faster and cheaper) are marked. With --png
(and matplotlib installed) it plots cost against time, the front joined.

    plan_tradeoff.py candidates.csv... [--token-budget 3e11] [--png out.png]
        [--title TEXT] [--top 12]
"""

import argparse
import csv
import math
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--token-budget", type=float, default=0,
                    help="tokens of the whole run (default: one step)")
    ap.add_argument("--png", default=None)
    ap.add_argument("--title", default="")
    ap.add_argument("--top", type=int, default=12, help="table rows (the front is always shown)")
    a = ap.parse_args()

    rows = []
    for path in a.csv:
        with open(path) as f:
            rows += [r for r in csv.DictReader(f) if not r["rejected"]]
    if not rows:
        sys.exit("%s: no feasible candidate" % ", ".join(a.csv))
    for r in rows:
        step = float(r["step_s"])
        steps = math.ceil(a.token_budget / float(r["tokens_per_step"])) if a.token_budget else 1
        r["time"] = steps * step
        r["kwh"] = steps * float(r["kwh_per_step"])
        r["cost"] = steps * float(r["cost_per_step"])
        r["steps"] = steps
        r["label"] = "%s GPUs: dp%s tp%s%s pp%s v%s b%s %s%s" % (
            r["devices"], r["dp"], r["tp"], "+sp" if r["sp"] == "1" else "", r["pp"], r["chunks"], r["microbatch_size"],
            r["recompute"], " z1" if r["zero"] == "1" else "")
    rows.sort(key=lambda r: r["time"])
    front, cheapest = [], float("inf")
    for r in rows:
        r["front"] = r["cost"] < cheapest
        if r["front"]:
            cheapest = r["cost"]
            front.append(r)

    unit = "run" if a.token_budget else "step"
    time_unit, scale = ("days", 86400.0) if a.token_budget else ("s", 1.0)
    print("| layout | %s | step s | %s (%s) | kWh | cost | Pareto |" % ("steps" if a.token_budget else "", unit, time_unit))
    print("|---|---|---|---|---|---|---|")
    shown = [r for i, r in enumerate(rows) if i < a.top or r["front"]]
    for r in shown:
        print("| %s | %s | %.4g | %.4g | %.4g | %.4g | %s |" % (
            r["label"], r["steps"] if a.token_budget else "", float(r["step_s"]), r["time"] / scale,
            r["kwh"], r["cost"], "yes" if r["front"] else ""))

    if a.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            sys.exit("matplotlib is not installed: no plot (pip install matplotlib)")
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
        ax.scatter([r["time"] / scale for r in rows], [r["cost"] for r in rows], s=14, c="#9aa7b8",
                   label="feasible layouts")
        ax.plot([r["time"] / scale for r in front], [r["cost"] for r in front], "-o", c="#c0392b", ms=5,
                label="Pareto front")
        # The front's points numbered; their layouts in a box.
        lines = []
        for i, r in enumerate(front[:8]):
            ax.annotate(str(i + 1), (r["time"] / scale, r["cost"]), fontsize=8, fontweight="bold",
                        xytext=(-4, -14), textcoords="offset points")
            lines.append("%d: %s" % (i + 1, r["label"]))
        ax.text(0.98, 0.04, "\n".join(lines), transform=ax.transAxes, fontsize=7, ha="right", va="bottom",
                bbox=dict(boxstyle="round", fc="white", ec="#cccccc"))
        ax.set_ylim(0, 2.5 * max(r["cost"] for r in front))
        ax.set_xlim(0, None)
        ax.set_xlabel("time per %s (%s)" % (unit, time_unit))
        ax.set_ylabel("cost per %s (device-hours + energy)" % unit)
        ax.set_title(a.title or "cleave-compile --auto: cost against time")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.png)
        print("wrote %s" % a.png, file=sys.stderr)


if __name__ == "__main__":
    main()
