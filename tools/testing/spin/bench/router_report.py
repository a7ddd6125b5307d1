#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Turn router_bench's results log into a Markdown report and a PNG.

Usage: router_report.py [DIR]   (default build/bench-router)
       router_report.py --fit-args DIR   (the router_bench.fit= option of DIR's fit)

Reads DIR/results.log (the "rb-*" lines of tools/testing/spin/bench/router_bench.c), and if
present DIR/cpu/results.log (the CPU-only check in a boot of its own, under instruction
counting: `make bench-router`'s CPU_ICOUNT), DIR/cached/results.log (the fully resident cells
in a boot of their own under instruction counting, CACHED_ICOUNT) and DIR/nospin/results.log
(the CPU-only check on the same tree built with CONFIG_SPIN=n, `make bench-router NOSPIN=1`).
Writes DIR/summary.md (also printed) and DIR/router.png.

The fully resident cells do no device I/O: they measure the CPU, and on the host's clock they
move with its load (one cell's rounds 0.55-1.62 on a busy hour). Where the cached boot ran,
their verdict is auto / pagecache of that boot (per round, median), and the table shows both;
pagecache is their best fixed path if the timed run says so (a copy at memory speed against
the throttled drive). p2p mode's rates under instruction counting are not used: it waits for
the drive, on the host's clock.

The router's goals are reported, never asserted:
  - auto >= 0.97 x the best fixed path (p2p or pagecache) on random reads and on sequential
    reads of at least the readahead window;
  - auto >= 1.2 x the best fixed path on mixed residency: the 50% cells whose requests
    mostly cover both resident and non-resident pages (router_bench's "mixed" share >= 0.5);
  - small sequential reads (below the readahead window), GPU read-ahead: auto >= 0.97 x
    the best fixed path in every cell, and auto / pagecache >= 0.95 on an uncached file;
  - CPU-only: buffered reads into host memory, a process with GPU memory mapped / one without (MMF_P2PDMA) >= 0.99
    (and against a CONFIG_SPIN=n kernel when that run exists).
The exit status is non-zero only when there is nothing to report.
"""
import math
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = ("auto", "p2p", "pagecache")
GOAL_BEST = 0.97
GOAL_MIXED = 1.2
GOAL_CPU = 0.99
GOAL_RA_PC = 0.95


def value(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def parse(path):
    """{"header": {...}, "calib": {...}, "cells": [...], "cpu": [...], "tap": [...]}."""
    out = {"header": None, "calib": None, "cells": [], "cpu": [], "tap": [], "warnings": [],
           "tool": None, "runs": []}
    if not os.path.exists(path):
        return out
    for line in open(path, errors="replace"):
        line = line.rstrip("\r\n")
        words = line.split()
        if not words:
            continue
        if words[0].startswith("rb-"):
            rec = dict(w.split("=", 1) for w in words[1:] if "=" in w)
            rec = {k: value(v) for k, v in rec.items()}
            kind = words[0][3:]
            if kind in ("header", "calib"):
                out[kind] = rec
            elif kind == "cell":
                out["cells"].append(rec)
            elif kind == "cpu":
                out["cpu"].append(rec)
            elif kind == "tool":
                out["tool"] = rec
            elif kind == "run":
                out["runs"].append(rec)
        elif line.startswith(("ok ", "not ok ")):
            out["tap"].append(line)
        elif line.startswith("# warning"):
            out["warnings"].append(line[2:])
    return out


def human(size):
    if size >= 1 << 20:
        return f"{size >> 20} MiB"
    if size >= 1 << 10:
        return f"{size >> 10} KiB"
    return f"{size} B"


def classify(c, ra):
    """(goal name, threshold or None) of a cell."""
    if c["res"] == 50 and c["mixed"] >= 0.5:
        return "mixed residency", GOAL_MIXED
    if c["res"] in (25, 75) and c["mixed"] >= 0.5:
        return "mixed residency, 25 and 75%", GOAL_BEST
    if c["kind"] == "rand":
        return "random", GOAL_BEST
    if ra is not None and c["size"] >= ra:
        return "sequential >= readahead", GOAL_BEST
    return "small sequential (GPU read-ahead)", GOAL_BEST


def share(c, mode):
    p2p, pc = c.get(f"{mode}_p2p", 0), c.get(f"{mode}_pc", 0)
    return p2p / (p2p + pc) if p2p + pc else float("nan")


def gmean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def pct(x):
    return "-" if x != x else f"{100 * x:.0f}%"


def icount_of(run):
    """The -icount shift of the guest run in directory `run` (its qemu.cmd), or None."""
    try:
        with open(os.path.join(run, "qemu.cmd")) as f:
            words = f.read().split()
    except OSError:
        return None
    for i, word in enumerate(words[:-1]):
        if word == "-icount":
            for opt in words[i + 1].split(","):
                if opt.startswith("shift="):
                    return opt[len("shift="):]
    return None


def icount_ratios(cached):
    """{(kind, size): (median, min, max, rounds)} of auto / pagecache per round of the fully
    resident cells in the instruction-counted boot `cached` (parsed results.log)."""
    rates = {}
    for r in cached["runs"]:
        if r.get("res") != 100 or r.get("mode") not in ("auto", "pagecache"):
            continue
        rates.setdefault((r["kind"], r["size"]), {}).setdefault(r["round"], {})[r["mode"]] = \
            r["rate"]
    out = {}
    for key, rounds in rates.items():
        rs = sorted(m["auto"] / m["pagecache"] for m in rounds.values()
                    if m.get("pagecache", 0) > 0 and "auto" in m)
        if rs:
            out[key] = (statistics.median(rs), rs[0], rs[-1], len(rs))
    return out


def report(d, nospin):
    h = d["header"] or {}
    ra = h.get("ra_kb") * 1024 if isinstance(h.get("ra_kb"), int) else None
    out = []
    w = out.append
    w("## spin router benchmark (`make bench-router`)\n")
    if not d["header"]:
        w("No results: the guest printed no `rb-header` line (see console.log and "
          "results.log).\n")
    else:
        w(f"Kernel {h.get('kernel')}, file {h.get('file_mib')} MiB on ext4 on {h.get('disk')} "
          f"(spin-nvme0), readahead {h.get('ra_kb')} KiB, 50% residency = alternating "
          f"{human(h.get('chunk', 0))} chunks, {h.get('rounds')} interleaved rounds per cell "
          f"(up to {h.get('max_rounds', h.get('rounds'))} for noisy cells; medians), timed runs "
          f"capped at {h.get('tmax_ms', '?')} ms, disks throttled to "
          f"{h.get('bps', 0) / 1e6:.0f} MB/s and "
          f"{h.get('iops')} IOPS, cost model: {h.get('model')}.\n")
        if h.get("norouter"):
            w("**Self-test run (`router_bench.norouter=1`): no router was measured; the "
              "three modes are the same plain buffered read.**\n")
    for t in d["tap"]:
        if t.startswith("not ok"):
            w(f"**Guest failure:** `{t}`\n")
    for warn in d["warnings"]:
        w(f"- {warn}")
    if d["warnings"]:
        w("")

    cal = d["calib"]
    if cal:
        w("### Cost model of the rig (/sys/block/<disk>/spin/*)\n")
        w("| parameter | kernel default | fitted to the rig |\n| --- | --- | --- |")
        for a in ("s_cutoff", "c_p2p_ns", "bw_p2p", "bw_pc"):
            w(f"| {a} | {cal.get('default_' + a)} | {cal.get('fit_' + a)} |")
        times = ", ".join(f"{human(int(k[6:]))} {v:.0f} us" for k, v in cal.items()
                          if k.startswith("t_p2p_"))
        w(f"\nP2P time per call (p2p mode, uncached): "
          f"{times or 'not measured (router_bench.fit: an earlier run fitted it)'}. "
          f"Used: {cal.get('used')}.\n")

    cells = d["cells"]
    if cells:
        w("### auto against the best fixed path (MB/s, median of the rounds)\n")
        w("The best fixed path is the mode with the higher median; auto / best is the median "
          "over rounds of auto's rate over that mode's in the same round (min-max in "
          "brackets).\n")
        w("| kind | size | resident | auto | p2p | pagecache | auto / best fixed | "
          "auto: bytes by P2P | rounds | goal | |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        groups = {}
        icount = d.get("cached_ratios", {})
        for c in cells:
            if "ratio" not in c:
                best = max(c["p2p"], c["pagecache"])
                c["ratio"] = c["auto"] / best if best > 0 else float("nan")
            ratio = c["ratio"]
            spread = (f" ({c['ratio_min']:.2f}-{c['ratio_max']:.2f})"
                      if "ratio_min" in c else "")
            ic = icount.get((c["kind"], c["size"])) if c["res"] == 100 else None
            if ic and c["pagecache"] >= c["p2p"]:
                # The verdict of a fully resident cell: the instruction-counted boot.
                c["icount"] = ic
                ratio = ic[0]
                spread += f"; **icount {ic[0]:.3f}** ({ic[1]:.3f}-{ic[2]:.3f})"
            goal, thr = classify(c, ra)
            c["goal"] = goal
            met = "" if thr is None else ("met" if ratio >= thr else "**missed**")
            groups.setdefault((goal, thr), []).append(ratio)
            res_note = ""
            if c["res_min"] < c["res"] - 5 or c["res_max"] > c["res"] + 5:
                res_note = f" (measured {c['res_min']:.0f}-{c['res_max']:.0f}%)"
            w(f"| {'random' if c['kind'] == 'rand' else 'sequential'} | {human(c['size'])} | "
              f"{c['res']}%{res_note} | {c['auto']:.1f} | {c['p2p']:.1f} | "
              f"{c['pagecache']:.1f} | {c['ratio']:.2f}{spread} | {pct(share(c, 'auto'))} | "
              f"{c.get('reps', '?')} | "
              f"{goal if thr is None else f'{goal} >= {thr}'} | {met} |")
        if icount:
            w(f"\nThe fully resident rows (no device I/O) were measured again in a boot of "
              f"their own with guest time counted in instructions (QEMU `-icount shift="
              f"{d.get('cached_icount')}`), where the host's load does not move them: "
              "\"icount\" is the median over rounds of auto / pagecache there (min-max), and "
              "it is their verdict and the goals' below wherever the timed run found "
              "pagecache their best fixed path.")
        w("\n### Goals of the router and GPU read-ahead (reported, not asserted)\n")
        w("| goal | cells | met | min | geometric mean |\n| --- | --- | --- | --- | --- |")
        for (goal, thr), rs in groups.items():
            n_met = "-" if thr is None else str(sum(r >= thr for r in rs))
            w(f"| {goal}{'' if thr is None else f' (auto/best >= {thr})'} | {len(rs)} | "
              f"{n_met} | {min(rs):.2f} | {gmean(rs):.2f} |")
        small = [c for c in cells if c["kind"] == "seq" and c["res"] == 0 and
                 (ra is None or c["size"] < ra)]
        if small:
            w("\n### GPU read-ahead: small sequential reads of an uncached file\n")
            w(f"auto / pagecache (medians), goal >= {GOAL_RA_PC}:\n")
            w("| size | auto | pagecache | auto / pagecache | |\n| --- | --- | --- | --- | --- |")
            for c in small:
                r = c["auto"] / c["pagecache"] if c["pagecache"] > 0 else float("nan")
                w(f"| {human(c['size'])} | {c['auto']:.1f} | {c['pagecache']:.1f} | {r:.2f} | "
                  f"{'met' if r >= GOAL_RA_PC else '**missed**'} |")
        rnd = [c for c in cells if c["kind"] == "rand" and c["res"] < 100 and
               c.get("auto_calls_all")]
        if rnd:
            w("\n### The device's reads in the random cells\n")
            w("Per `pread()` (all rounds), from the disk's own counters "
              "(`/sys/block/<disk>/stat`): how many reads the device served and their mean "
              "size. A random round reads distinct slots, none twice, so a mode that needs "
              "fewer reads per call found pages read ahead by an earlier call (the page "
              "cache's context read-ahead after cached pages, in `pagecache` mode).\n")
            w("| size | resident | auto reads | auto KiB/read | pagecache reads | "
              "pagecache KiB/read | auto / best |\n| --- | --- | --- | --- | --- | --- | --- |")
            for c in rnd:
                def per(m):
                    calls = c[f"{m}_calls_all"]
                    n = c[f"{m}_dev_reads"]
                    return (n / calls if calls else float("nan"),
                            c[f"{m}_dev_kib"] / n if n else float("nan"))
                (an, ak), (pn, pk) = per("auto"), per("pagecache")
                w(f"| {human(c['size'])} | {c['res']}% | {an:.2f} | {ak:.0f} | {pn:.2f} | "
                  f"{pk:.0f} | {c['ratio']:.2f} |")
        odd = [c for c in cells if c.get("p2p_fb", 0) or c.get("auto_ioerr", 0)
               or c.get("p2p_ioerr", 0)]
        def mode_share(m):
            p2p = sum(c[f"{m}_p2p"] for c in cells)
            return pct(p2p / (p2p + sum(c[f"{m}_pc"] for c in cells)) if p2p or any(
                c[f"{m}_pc"] for c in cells) else float("nan"))
        w(f"\nWhat the fixed modes did (bytes by P2P): p2p mode {mode_share('p2p')}, "
          f"pagecache mode {mode_share('pagecache')}; cells with fallbacks in p2p mode or "
          f"I/O errors: {len(odd)}.")
        for c in odd:
            w(f"- {c['kind']} {human(c['size'])} {c['res']}%: p2p fallbacks {c.get('p2p_fb')}, "
              f"I/O errors auto {c.get('auto_ioerr')} p2p {c.get('p2p_ioerr')}")
        w("")

    if d["tool"]:
        t = d["tool"]
        w("### The user tool's fit against the bench's (router_bench.model=both)\n")
        w("Every round of every cell also ran `auto` with the parameters of `spin calibrate "
          "--apply` (tool) next to `auto` with the bench's fit; per cell the median over rounds "
          "of tool / auto in the same round (min-max in brackets).\n")
        w("| kind | size | resident | auto | tool | tool / auto |\n| --- | --- | --- | --- | --- | --- |")
        for c in cells:
            if "tool_ratio" not in c:
                continue
            w(f"| {c['kind']} | {human(c['size'])} | {c['res']}% | {c['auto']:.1f} | "
              f"{c.get('tool', float('nan')):.1f} | {c['tool_ratio']:.2f} "
              f"({c['tool_ratio_min']:.2f}-{c['tool_ratio_max']:.2f}) |")
        w(f"\nGeometric mean over {t['cells']} cells: **{t['geomean']:.3f}** (cells from "
          f"{t['min']:.2f} to {t['max']:.2f}; tool >= auto in {t['ge1']}).\n")

    if d["cpu"]:
        ns = {r["test"]: r for r in nospin["cpu"]} if nospin else {}
        w("### CPU-only: buffered reads into host memory (MB/s, median)\n")
        if d.get("cpu_icount"):
            w(f"Measured in a boot of its own{' and CONFIG_SPIN=n in another' if ns else ''}, "
              f"with guest time counted in instructions (QEMU `-icount shift="
              f"{d['cpu_icount']}`: 2^{d['cpu_icount']} ns per instruction while a vCPU runs, "
              "waits advanced from the host's clock), so that the host's load does not move "
              "the cached rows; the uncached rows wait for the throttled drive and keep its "
              "noise.\n")
        cols = "| test | off (process without GPU mappings) | on (process with a GPU buffer mapped) | on / off |"
        sep = "| --- | --- | --- | --- |"
        if ns:
            cols += " CONFIG_SPIN=n | off / SPIN=n | on / SPIN=n |"
            sep += " --- | --- | --- |"
        w(cols + "\n" + sep)
        for r in d["cpu"]:
            on = r.get("on")
            ratio = r.get("ratio")
            spread = (f" ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})"
                      if "ratio_min" in r else "")
            line = (f"| {r['test']} | {r['off']:.1f} ({r['off_min']:.1f}-{r['off_max']:.1f}) | "
                    + (f"{on:.1f} ({r['on_min']:.1f}-{r['on_max']:.1f}) | "
                       f"{ratio:.3f}{spread} {'met' if ratio >= GOAL_CPU else '**missed**'} |"
                       if on is not None else "- | - |"))
            n = ns.get(r["test"])
            if ns:
                # Bracketed: the extremes of the rounds of one boot over those of the other.
                def vs(med, lo, hi):
                    return (f"{med / n['off']:.3f} ({lo / n['off_max']:.3f}-"
                            f"{hi / n['off_min']:.3f})")
                line += (f" {n['off']:.1f} ({n['off_min']:.1f}-{n['off_max']:.1f}) | "
                         f"{vs(r['off'], r['off_min'], r['off_max'])} | "
                         + (f"{vs(on, r['on_min'], r['on_max'])} |" if on is not None
                            else "- |")
                         if n else " - | - | - |")
            w(line)
        w(f"\nKey on / off is the median of the ratios of adjacent rounds (min-max in "
          f"brackets). Goal: >= {GOAL_CPU}; also for this kernel / CONFIG_SPIN=n, measured in a "
          "separate boot when `NOSPIN=1`: the medians of the two boots, in brackets the "
          "slowest round of one over the fastest of the other and the reverse, so that "
          "boot-to-boot drift counts too.\n")
    w("Emulator figures (QEMU TCG, the GPU BAR is host RAM, disks throttled): only ratios "
      "within one run mean anything.")
    return "\n".join(out) + "\n"


def plot(d, nospin, ra, path):
    cells = d["cells"]
    if not cells:
        return False
    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    colors = {0: "tab:blue", 25: "tab:cyan", 50: "tab:orange", 75: "tab:red", 100: "tab:green"}
    for ax, kind, title in ((axes[0][0], "seq", "Sequential reads"),
                            (axes[0][1], "rand", "Random reads")):
        for res in sorted(colors):
            cs = sorted((c for c in cells if c["kind"] == kind and c["res"] == res),
                        key=lambda c: c["size"])
            if cs:
                ax.plot([c["size"] for c in cs], [c["ratio"] for c in cs], "o-",
                        color=colors[res], label=f"{res}% resident")
        ax.axhline(GOAL_BEST, color="black", linestyle="--", linewidth=1,
                   label=f"goal {GOAL_BEST}")
        ax.axhline(GOAL_MIXED, color="tab:orange", linestyle=":", linewidth=1,
                   label=f"goal {GOAL_MIXED} (mixed)")
        if kind == "seq" and ra:
            ax.axvline(ra, color="grey", linewidth=1, label="readahead window")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per pread()")
        ax.set_ylabel("auto / best fixed path")
        ax.set_title(f"{title}: auto against max(p2p, pagecache)")
        ax.legend(fontsize=8)
    ax = axes[1][0]
    for kind, style in (("seq", "o-"), ("rand", "s--")):
        for res in sorted(colors):
            cs = sorted((c for c in cells if c["kind"] == kind and c["res"] == res),
                        key=lambda c: c["size"])
            if cs:
                ax.plot([c["size"] for c in cs], [100 * share(c, "auto") for c in cs], style,
                        color=colors[res], label=f"{kind} {res}%")
    ax.set_xscale("log", base=2)
    ax.set_ylim(-5, 105)
    ax.set_xlabel("bytes per pread()")
    ax.set_ylabel("% of bytes auto moved by P2P")
    ax.set_title("What auto chose (/sys/block/<disk>/spin/stat)")
    ax.legend(fontsize=7, ncol=2, loc="center right")
    ax = axes[1][1]
    cpu = d["cpu"]
    if cpu and any("ratio" in r for r in cpu):
        names = [r["test"] for r in cpu]
        series = [("key on / off", [r.get("ratio", float("nan")) for r in cpu], "tab:purple")]
        ns = {r["test"]: r for r in nospin["cpu"]} if nospin else {}
        if ns:
            series.append(("key off / CONFIG_SPIN=n",
                           [r["off"] / ns[r["test"]]["off"] if r["test"] in ns else float("nan")
                            for r in cpu], "tab:grey"))
            series.append(("key on / CONFIG_SPIN=n",
                           [r.get("on", float("nan")) / ns[r["test"]]["off"]
                            if r["test"] in ns else float("nan") for r in cpu], "tab:olive"))
        width = 0.8 / len(series)
        allys = []
        for i, (label, ys, color) in enumerate(series):
            xs = [j + (i - len(series) / 2) * width + width / 2 for j in range(len(names))]
            bars = ax.bar(xs, ys, width, color=color, label=label)
            allys += [y for y in ys if y == y]
            for b, y in zip(bars, ys):
                ax.annotate(f"{y:.3f}", (b.get_x() + b.get_width() / 2, y), ha="center",
                            va="bottom", fontsize=7)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.axhline(GOAL_CPU, color="red", linestyle="--", linewidth=1, label=f"goal {GOAL_CPU}")
        ax.set_ylim(min(min(allys), GOAL_CPU) - 0.05, max(max(allys), 1.0) + 0.05)
        ax.set_ylabel("throughput ratio")
        ax.legend(fontsize=8)
    ax.set_title("CPU-only: buffered reads into host memory")
    fig.suptitle("spin router: buffered pread() into GPU memory, QEMU TCG rig")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def fit_args(out):
    """The option that gives the instruction-counted boot the timed boot's fit of the cost
    model (router_bench.fit), or nothing if that boot used no fit of its own."""
    cal = parse(os.path.join(out, "results.log"))["calib"] or {}
    if cal.get("used") not in ("fit", "given"):
        return ""
    vals = [cal.get("fit_" + a) for a in ("s_cutoff", "c_p2p_ns", "bw_p2p", "bw_pc")]
    if not all(isinstance(v, int) for v in vals):
        return ""
    return "router_bench.fit=" + ",".join(str(v) for v in vals)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fit-args":
        print(fit_args(sys.argv[2]))
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "build/bench-router"
    d = parse(os.path.join(out, "results.log"))
    cpu_path = os.path.join(out, "cpu", "results.log")
    if os.path.exists(cpu_path):
        d["cpu"] = parse(cpu_path)["cpu"]
        d["cpu_icount"] = icount_of(os.path.join(out, "cpu"))
    cached_path = os.path.join(out, "cached", "results.log")
    if os.path.exists(cached_path):
        d["cached_ratios"] = icount_ratios(parse(cached_path))
        d["cached_icount"] = icount_of(os.path.join(out, "cached"))
    ns_path = os.path.join(out, "nospin", "results.log")
    nospin = parse(ns_path) if os.path.exists(ns_path) else None
    text = report(d, nospin)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    h = d["header"] or {}
    ra = h.get("ra_kb") * 1024 if isinstance(h.get("ra_kb"), int) else None
    png = os.path.join(out, "router.png")
    if plot(d, nospin, ra, png):
        print(f"[bench] plot: {png}")
    print(f"[bench] report: {os.path.join(out, 'summary.md')}")
    sys.exit(0 if d["header"] else 1)


if __name__ == "__main__":
    main()
