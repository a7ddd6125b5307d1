#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Report `make bench-cpu`: CPU-only reads on this kernel against CONFIG_SPIN=n.

Usage: cpu_report.py DIR

DIR holds one directory per boot, pair-N-spin and pair-N-nospin (N = 1, 2, ...), each with
the results.log of `router_bench.cpuonly=1` (tools/testing/spin/bench/router_bench.c). The
two boots of a pair ran back to back, in alternating order (spin first in odd pairs, nospin
first in even ones), so that a slow drift of the host cancels in the median of the pairs.

For every test (cached / uncached, 4 KiB / 1 MiB reads into host memory) it reports
  - per pair: spin "off" / nospin (a process that never mapped GPU memory: the static key
    is on, the router costs it one bit test) and spin "on" / nospin (a process with a GPU
    buffer mapped: every read's destination is looked at), each boot's value the median of
    its rounds;
  - the median over pairs of both ratios, with their min-max;
  - within the spin boots, on / off (the median of adjacent rounds' ratios), median over
    boots.
Goal: every ratio >= 0.99. Reported, never asserted. Writes DIR/summary.md
(also printed); the exit status is non-zero only when there is nothing to report.
"""
import math
import os
import re
import statistics
import sys

GOAL = 0.99


def median_ci(v):
    """The median of v and a 95% confidence interval of it (order statistics)."""
    v = sorted(v)
    n = len(v)
    k = max(0, int((n - 1.96 * math.sqrt(n)) / 2))
    return statistics.median(v), v[k], v[n - 1 - k]


def parse(path):
    """{test: {key: value}} of the rb-cpu lines of a results log; the pairs' on / off
    ratios under "pairs"."""
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path, errors="replace"):
        words = line.split()
        if len(words) == 3 and words[0] == "rb-cpu-pairs":
            test = words[1].split("=", 1)[1]
            ratios = [float(x) for x in words[2].split("=", 1)[1].split(",") if x]
            out.setdefault(test, {})["pairs"] = ratios
            continue
        if not words or words[0] != "rb-cpu":
            continue
        rec = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        test = rec.pop("test", None)
        if test:
            out.setdefault(test, {}).update(
                {k: (float(v) if re.match(r"^[0-9.]+$", v) else v) for k, v in rec.items()})
    return out


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "build/bench-cpu"
    pairs = []
    n = 1
    while True:
        s = os.path.join(d, f"pair-{n}-spin", "results.log")
        ns = os.path.join(d, f"pair-{n}-nospin", "results.log")
        if not os.path.exists(s) and not os.path.exists(ns):
            break
        pairs.append((n, parse(s), parse(ns)))
        n += 1
    lines = []
    w = lines.append
    w("## CPU-only reads: this kernel / the same tree with CONFIG_SPIN=n (`make bench-cpu`)\n")
    usable = [(i, s, ns) for i, s, ns in pairs if s and ns]
    w(f"{len(usable)} pairs of boots (of {len(pairs)}), spin and CONFIG_SPIN=n back to back in "
      "alternating order; per boot the median of its rounds. Ratios: median over pairs "
      "(min-max). Goal >= 0.99.\n")
    if not usable:
        w("No pair has results from both kernels: see the console.log of each boot.")
        print("\n".join(lines))
        return 1
    tests = [t for t in usable[0][1] if all(t in s and t in ns for _, s, ns in usable)]
    w("| test | off / SPIN=n | on / SPIN=n | on / off (in the spin boots) | per pair: off, on / "
      "SPIN=n |")
    w("| --- | --- | --- | --- | --- |")
    worst = None
    for t in tests:
        off = [s[t]["off"] / ns[t]["off"] for _, s, ns in usable]
        on = [s[t]["on"] / ns[t]["off"] for _, s, ns in usable if "on" in s[t]]
        inb = [s[t]["ratio"] for _, s, _ in usable if "ratio" in s[t]]

        def cell(v):
            if not v:
                return "-"
            m = statistics.median(v)
            return f"{m:.3f} ({min(v):.3f}-{max(v):.3f}) {'met' if m >= GOAL else '**missed**'}"

        per = ", ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(off, on))
        w(f"| {t} | {cell(off)} | {cell(on)} | {cell(inb)} | {per} |")
        for v in (off, on, inb):
            if v:
                m = statistics.median(v)
                worst = m if worst is None else min(worst, m)
    w("")
    w("Within the spin boots, every pair of adjacent rounds (one off, one on) of every boot "
      "pooled: the median of on / off and a 95% confidence interval of that median (order "
      "statistics).\n")
    w("| test | pairs | on / off | 95% CI | |")
    w("| --- | --- | --- | --- | --- |")
    for t in tests:
        pooled = [r for _, s, _ in usable for r in s[t].get("pairs", [])]
        if not pooled:
            continue
        m, lo, hi = median_ci(pooled)
        verdict = ("met" if lo >= GOAL else "**missed**" if hi < GOAL
                   else "not settled (the interval straddles the goal)")
        w(f"| {t} | {len(pooled)} | {m:.3f} | {lo:.3f}-{hi:.3f} | {verdict} |")
    w("")
    w("| test | boot | spin off MB/s | spin on MB/s | SPIN=n MB/s |")
    w("| --- | --- | --- | --- | --- |")
    for t in tests:
        for i, s, ns in usable:
            w(f"| {t} | pair {i} | {s[t]['off']:.1f} ({s[t]['off_min']:.0f}-"
              f"{s[t]['off_max']:.0f}) | "
              + (f"{s[t]['on']:.1f} ({s[t]['on_min']:.0f}-{s[t]['on_max']:.0f})"
                 if "on" in s[t] else "-")
              + f" | {ns[t]['off']:.1f} ({ns[t]['off_min']:.0f}-{ns[t]['off_max']:.0f}) |")
    w(f"\nLowest median ratio: {worst:.3f} (goal {GOAL}).")
    w("\nEmulator figures (QEMU TCG): only ratios mean anything.")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
