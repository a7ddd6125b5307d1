#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Exact guest instruction counts of prof_bench's timed passes, per kernel function.

Runs prof_bench (tools/testing/spin/bench/prof_bench.c) in the rig with the insn_count TCG
plugin (tools/testing/spin/qemu/insn_count.c), which counts every guest instruction, kernel
and user, on every vCPU, per translation block, while the bench's reader is inside a timed
pass (between its two getrusage() calls, the plugin's toggle) and per round (every write of a
/sys/kernel/spin file starts a new phase; prof_bench writes the mode before each round). The
kernel is booted with nokaslr so that System.map gives the functions.

No sampling, no timing: per mode, the instructions per request (pread() calls counted in the
same passes) of every function, and the functions where the modes differ most. Instruction-
counted guest time (vm.py --icount N) charges each instruction 2^N ns (memset and copies count
about one instruction per byte, rep-string iterations each), so this is the breakdown of what
`SPIN_VM_ICOUNT=2 make bench-prof` measures, not of time on real hardware.

Usage: insn_prof.py [--top N] [--out DIR] PROF_ARG...   (e.g. prof_bench.size=512;
       make bench-insn PROF_ARGS=...); the report goes to stdout and DIR/summary.md
       insn_prof.py --report FILE --log RESULTS   (only analyse an earlier run)
"""
import argparse
import bisect
import collections
import contextlib
import os
import re
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../.."))
BUILD = os.environ.get("BUILD", os.path.join(REPO, "build"))
KOBJ = os.environ.get("KOBJ", os.path.join(BUILD, "obj"))
SRC = os.path.join(REPO, "tools/testing/spin/qemu/insn_count.c")
TOGGLE = "__x64_sys_getrusage"
PHASE = "kobj_attr_store"
PREAD = "__x64_sys_pread64"


def symbols(path):
    """Sorted text symbols of System.map: (addresses, names)."""
    syms = []
    with open(path) as f:
        for line in f:
            addr, kind, name = line.split()[:3]
            if kind in "tTwW" and not name.startswith("__pfx_"):
                syms.append((int(addr, 16), name))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def build_plugin(out):
    so = os.path.join(out, "insn_count.so")
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-shared", "-fPIC",
                    "-fvisibility=hidden", "-o", so, SRC, "-lpthread"], check=True)
    return so


def demangle(names):
    """Rust v0 symbols demangled by binutils' c++filt, the crates' hashes dropped
    (rust:spin::router::route); C names as they are."""
    out = {n: n for n in names}
    rust = sorted(n for n in names if n.startswith("_R"))
    if rust:
        r = subprocess.run(["c++filt"], input="\n".join(rust) + "\n",
                           capture_output=True, text=True, check=True)
        lines = r.stdout.splitlines()
        if len(lines) == len(rust):
            for n, d in zip(rust, lines):
                out[n] = "rust:" + re.sub(r"\[[0-9a-f]+\]", "", d)
    return out


def analyse(report, log, top):
    addrs, names = symbols(os.path.join(KOBJ, "System.map"))
    rounds = [m.group(1) for m in re.finditer(r"^# round \d+ (\S+):", log, re.M)]
    per = collections.defaultdict(collections.Counter)   # phase -> function -> insns
    with open(report) as f:
        for line in f:
            w = line.split()
            if w[0] != "phase":
                continue
            phase, vaddr, n, count = int(w[1]), int(w[2], 16), int(w[3]), int(w[4])
            if vaddr < 0xffff800000000000:
                fn = "[user]"
            else:
                i = bisect.bisect_right(addrs, vaddr) - 1
                fn = names[i] if i >= 0 else "[?]"
                if fn == PREAD and vaddr == addrs[i]:
                    per[phase]["#requests"] += count
            per[phase][fn] += n * count
    phases = sorted(p for p in per if per[p]["#requests"])
    if len(phases) != len(rounds):
        sys.exit(f"insn_prof: {len(phases)} counted phases, {len(rounds)} rounds in the log")
    modes = collections.defaultdict(collections.Counter)
    for p, mode in zip(phases, rounds):
        modes[mode].update(per[p])
        reqs = per[p]["#requests"]
        total = sum(v for k, v in per[p].items() if not k.startswith("#"))
        print(f"# phase {p}: {mode}, {reqs} requests, {total / reqs:.1f} instructions each")
    short = demangle({fn for c in modes.values() for fn in c})
    per_req = {}
    for mode, c in modes.items():
        reqs = c.pop("#requests")
        per_req[mode] = {fn: v / reqs for fn, v in c.items()}
        tot = sum(per_req[mode].values())
        print(f"\n## {mode}: {tot:.1f} instructions per request ({reqs} requests)\n")
        print("| function | instructions per request |\n| --- | --- |")
        for fn, v in sorted(per_req[mode].items(), key=lambda kv: -kv[1])[:top]:
            print(f"| {short.get(fn, fn)} | {v:.1f} |")
    if len(per_req) == 2:
        a, b = sorted(per_req)
        fns = set(per_req[a]) | set(per_req[b])
        diff = {fn: per_req[a].get(fn, 0) - per_req[b].get(fn, 0) for fn in fns}
        tot = sum(diff.values())
        print(f"\n## {a} - {b}: {tot:+.1f} instructions per request\n")
        print(f"| function | {a} | {b} | difference |\n| --- | --- | --- | --- |")
        for fn, v in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]:
            print(f"| {short.get(fn, fn)} | {per_req[a].get(fn, 0):.1f} | "
                  f"{per_req[b].get(fn, 0):.1f} | {v:+.1f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--out", default=os.path.join(BUILD, "insn-prof"))
    p.add_argument("--report", default=None, help="the plugin's report of an earlier run")
    p.add_argument("--log", default=None, help="prof_bench's results.log of that run")
    p.add_argument("args", nargs="*", help="prof_bench.* options")
    a = p.parse_args()
    if a.report:
        with open(a.log or os.path.join(a.out, "results.log"), errors="replace") as f:
            analyse(a.report, f.read(), a.top)
        return
    os.makedirs(a.out, exist_ok=True)
    so = build_plugin(a.out)
    addrs, names = symbols(os.path.join(KOBJ, "System.map"))
    at = {n: a_ for a_, n in zip(addrs, names)}
    report = os.path.join(a.out, "insn_count.txt")
    plugin = f"{so},out={report},toggle={at[TOGGLE]:x},phase={at[PHASE]:x}"
    bps, iops = os.environ.get("SPIN_VM_BPS", "180000000"), os.environ.get("SPIN_VM_IOPS", "2000")
    cmd = [sys.executable, os.path.join(REPO, "tools/testing/spin/scripts/vm.py"),
           "--mode", "bench", "--bench", "prof_bench", "--out", a.out, "--bps", bps,
           "--iops", iops, "--plugin", plugin, "--append",
           " ".join(["nokaslr", f"prof_bench.bps={bps}", f"prof_bench.iops={iops}",
                     "prof_bench.sample=0", *a.args])]
    # vm.py's progress to stderr: stdout is the report.
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    with open(os.path.join(a.out, "results.log"), errors="replace") as f:
        log = f.read()
    summary = os.path.join(a.out, "summary.md")
    with open(summary, "w") as out, contextlib.redirect_stdout(out):
        print("".join(l + "\n" for l in log.splitlines() if l.startswith("# ")), end="")
        analyse(report, log, a.top)
    with open(summary) as f:
        sys.stdout.write(f.read())
    print(f"[bench] report: {summary}", file=sys.stderr)


if __name__ == "__main__":
    main()
