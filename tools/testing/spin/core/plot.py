#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Plot spin-sim's CSV output as one PNG.

Usage: plot.py [DIR]   (default build/bench-core; reads quality.csv, overlap.csv and
decision_cost.csv there, writes bench-core.png there)
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PAPER_GREEDY = 98.9


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/bench-core"
    quality = rows(os.path.join(out, "quality.csv"))
    overlap = rows(os.path.join(out, "overlap.csv"))
    cost = rows(os.path.join(out, "decision_cost.csv"))
    sets = ordered(r["set"] for r in quality)
    gens = ordered(r["generator"] for r in quality)
    if not sets or not gens:
        sys.exit(f"plot.py: no quality data in {out} (was spin-sim run with --bench-only?)")

    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    width = 0.8 / (2 * len(sets))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    for ax, field, title in (
        (axes[0][0], "mean_perf", "Mean: optimal time / scheduler time"),
        (axes[0][1], "worst_perf", "Worst case: optimal time / scheduler time"),
    ):
        i = 0
        for s in sets:
            for sched in ("greedy", "released"):
                ys = []
                for g in gens:
                    r = next(x for x in quality if x["set"] == s and x["generator"] == g and x["scheduler"] == sched)
                    ys.append(100.0 * float(r[field]))
                xs = [j + (i - len(sets)) * width + width / 2 for j in range(len(gens))]
                ax.bar(xs, ys, width, label=f"{sched} ({s})", color=colors[i % len(colors)],
                       hatch="//" if sched == "released" else None)
                i += 1
        ax.axhline(PAPER_GREEDY, color="black", linestyle="--", linewidth=1, label="paper: greedy 98.9% (mean)")
        ax.set_xticks(range(len(gens)))
        ax.set_xticklabels(gens, rotation=15)
        ax.set_ylabel("% of optimal performance")
        ax.set_title(title)
        lo = min(100.0 * float(r[field]) for r in quality)
        ax.set_ylim(max(0.0, lo - 2.0), 100.5)
        ax.legend(fontsize=7, loc="lower left", ncol=2, framealpha=0.9)

    ax = axes[1][0]
    width = 0.8 / len(sets)
    for i, s in enumerate(sets):
        ys = []
        for g in gens:
            r = next(x for x in overlap if x["set"] == s and x["generator"] == g)
            ys.append(float(r["mean_speedup"]))
        xs = [j + (i - len(sets) / 2) * width + width / 2 for j in range(len(gens))]
        ax.bar(xs, ys, width, label=s, color=colors[i % len(colors)])
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks(range(len(gens)))
    ax.set_xticklabels(gens, rotation=15)
    ax.set_ylabel("additive optimum / overlap makespan")
    ax.set_title("What overlapping P2P with page-cache copies buys (mean)")
    ax.legend(fontsize=8)

    ax = axes[1][1]
    scheds = ordered(r["scheduler"] for r in cost)
    width = 0.8 / len(sets)
    for i, s in enumerate(sets):
        ys = [float(next(x for x in cost if x["set"] == s and x["generator"] == "all" and x["scheduler"] == sc)["ns_per_request"])
              for sc in scheds]
        xs = [j + (i - len(sets) / 2) * width + width / 2 for j in range(len(scheds))]
        bars = ax.bar(xs, ys, width, label=s, color=colors[i % len(colors)])
        for b, y in zip(bars, ys):
            ax.annotate(f"{y:.0f}", (b.get_x() + b.get_width() / 2, max(y, 1.0)), ha="center", va="bottom", fontsize=7)
    ax.axhline(2000, color="red", linestyle="--", linewidth=1, label="goal: 2 us")
    ax.set_yscale("log")
    ax.set_xticks(range(len(scheds)))
    ax.set_xticklabels(scheds)
    ax.set_ylabel("ns per 8 MB request (all generators mixed)")
    ax.set_title("Decision cost (release build)")
    ax.legend(fontsize=8)

    fig.suptitle("spin decision core: SPIN §4.3.1 scheduling experiment (spin-sim)")
    fig.tight_layout()
    path = os.path.join(out, "bench-core.png")
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
