# SPDX-License-Identifier: GPL-2.0
"""Parse what a guest run sent over its results channel, plus its console log.

The guest (tools/testing/spin/guest/run.sh) writes:

  @@ begin mode=<mode> kernel=<release>
  @@ kunit <suite>          followed by the suite's KTAP (debugfs kunit/<suite>/results)
  @@ tap <program>          followed by the program's TAP output
  @@ exit <program> <rc>
  @@ expect <program>...    the programs the guest was built with
  @@ done

Every leaf test line counts once: "ok" passes; "not ok", and "ok ... # SKIP", fail (nothing
is skipped silently: the kselftest harness's SKIP() prints such a line). A program that exits
non-zero (KSFT_SKIP, 4, included: a selftest skips when a rig device is missing), breaks its
plan (a skipped program's "1..0 # SKIP" has no results), or never reports its exit fails; so does a KUnit suite that is expected (tools/testing/spin/kunit-suites) but
absent, a guest that never says "@@ done", and a kernel log with an oops, BUG or WARNING.
"""

import os
import re

RESULT = re.compile(r"^(\s*)(not ok|ok) (\d+)\s*(?:- )?([^#]*?)\s*(?:#\s*(.*))?$")
PLAN = re.compile(r"^(\s*)1\.\.(\d+)")
# What the kernel says when something is wrong, the debug kernel's checkers included: lockdep
# ("WARNING: possible circular locking", "DEBUG_LOCKS_WARN_ON"), sleeping in atomic context
# ("BUG: sleeping function"), KASAN and KFENCE ("BUG: KASAN", "BUG: KFENCE"), UBSAN, DEBUG_LIST
# and DEBUG_OBJECTS ("list_add corruption", "ODEBUG:"), kmemleak, a Rust panic, a hung task.
# kmemleak scans only when soak_test asks (no auto scan); its "N new suspected memory leaks"
# line is a count, not a report: soak_test reads the objects and their stacks from debugfs
# and fails on any that involves spin (the others, upstream's, it lists). "Disabling lock
# debugging" fails the run too: after it lockdep watches nothing, so a clean log would lie.
KERNEL_BAD = re.compile(r"(Kernel panic|BUG:|WARNING:|Oops|general protection fault|"
                        r"Call Trace:|UBSAN:|KASAN:|KFENCE:|rcu_.*stall|DEBUG_LOCKS_WARN_ON|"
                        r"ODEBUG:|list_(add|del) corruption|"
                        r"kmemleak:(?! \d+ new suspected memory leaks).*leak|"
                        r"unreferenced object|panicked at|blocked for more than|"
                        r"Disabling lock debugging)")
SUITES = os.path.join(os.path.dirname(__file__), "..", "kunit-suites")

# Reports of the debug kernel that are known, upstream, and not spin's: (header, a frame that
# must be in the same report, why). A report matching both is printed as known and does not
# fail the run; every other report does. Keep this list short and say why for each entry.
KNOWN_REPORTS = [
    # Empty: vm.py boots with la57=off, which avoids the early "KASAN: wild-memory-access
    # in rcu_is_watching" (identify_boot_cpu, TCG, 5-level paging) whose taint would switch
    # lockdep off for the rest of the run.
]


def known_blocks(lines):
    """Indices of the console lines that belong to a known report, and the reasons."""
    skip, why = set(), []
    for i, line in enumerate(lines):
        for header, frame, reason in KNOWN_REPORTS:
            if header not in line:
                continue
            # The report runs to KASAN's closing line of '=' (or 80 lines at most).
            end = next((j for j in range(i + 1, min(len(lines), i + 80))
                        if re.search(r"={20,}", lines[j])), None)
            if end is None or not any(frame in lines[j] for j in range(i, end)):
                continue
            skip.update(range(i, end + 1))
            why.append(f"{header} ({reason})")
    return skip, why


def suites_text():
    """The expected KUnit suites (committed version when SPIN_APPLY=committed)."""
    if os.environ.get("SPIN_APPLY") == "committed":
        import subprocess
        return subprocess.run(["git", "-C", os.path.dirname(SUITES), "show",
                               "HEAD:tools/testing/spin/kunit-suites"], capture_output=True,
                              text=True, check=True).stdout
    return open(SUITES).read()


class Results:
    def __init__(self, mode):
        self.mode = mode
        self.tests = []  # (name, ok, detail)

    def add(self, name, ok, detail=""):
        self.tests.append((name, ok, detail))

    def passed(self):
        return sum(1 for t in self.tests if t[1])

    def failed(self):
        return sum(1 for t in self.tests if not t[1])

    def ok(self):
        return self.failed() == 0 and self.passed() > 0

    def report(self):
        for name, ok, detail in self.tests:
            if not ok:
                print(f"[vm] not ok {name}{': ' + detail if detail else ''}")
        print(f"[vm] {self.passed()} passed, {self.failed()} failed")

    def as_dict(self):
        return {"passed": self.passed(), "failed": self.failed(),
                "failures": [f"{n}: {d}" for n, ok, d in self.tests if not ok]}


def parse_tap(prefix, lines, res):
    """Count the leaf results of a (possibly nested) TAP/KTAP stream."""
    pending = {}  # indent -> results seen deeper since the last result at this indent
    plans = {}
    top = {}
    stack_names = {}
    leaves = 0
    for line in lines:
        m = PLAN.match(line)
        if m:
            plans.setdefault(len(m.group(1)), int(m.group(2)))
            continue
        sub = re.match(r"^(\s*)# Subtest: (.*)$", line)
        if sub:
            stack_names[len(sub.group(1))] = sub.group(2).strip()
            continue
        m = RESULT.match(line)
        if not m:
            continue
        indent, status, _num, name, directive = m.groups()
        indent = len(indent)
        directive = directive or ""
        is_leaf = not pending.get(indent, False)
        for k in list(pending):
            if k >= indent:
                pending[k] = False
        for k in range(indent):
            pending[k] = True
        top[indent] = top.get(indent, 0) + 1
        ok = status == "ok" and not directive.upper().startswith(("SKIP", "TODO"))
        if is_leaf:
            leaves += 1
            parent = stack_names.get(indent - 4) or stack_names.get(indent - 8)
            full = f"{prefix}/{parent}.{name}" if parent and parent != name else f"{prefix}/{name}"
            res.add(full, ok, "" if ok else (directive or status))
        elif not ok:
            res.add(f"{prefix}/{name} (suite)", False, directive or "not ok")
    if leaves == 0:
        res.add(prefix, False, "no test results")
    outer = min(plans) if plans else None
    if outer is not None and top.get(outer, 0) != plans[outer]:
        res.add(f"{prefix} (plan)", False,
                f"planned {plans[outer]} results, got {top.get(outer, 0)}")


def parse(results_path, console_path, mode, timed_out=False, timeout=0, stalled=False):
    res = Results(mode)
    lines = open(results_path, errors="replace").read().splitlines() if os.path.exists(
        results_path) else []
    lines = [line.rstrip("\r") for line in lines]
    sections = []  # (kind, name, lines)
    exits = {}
    expected = []
    done = False
    for line in lines:
        if line.startswith("@@ "):
            w = line.split()
            if w[1] in ("kunit", "tap"):
                sections.append((w[1], w[2], []))
            elif w[1] == "exit":
                exits[w[2]] = int(w[3])
            elif w[1] == "expect":
                expected += w[2:]
            elif w[1] == "done":
                done = True
            continue
        if sections:
            sections[-1][2].append(line)
    if mode == "demo":
        # The demo's output is for people; its checks still count.
        body = [line for line in lines if not line.startswith("@@ ")]
        # Numbered TAP lines of the programs it runs and its own "not ok - ..." lines.
        bad = [line.strip() for line in body if re.match(r"not ok\b", line.strip())]
        res.add("demo/checks", not bad, "; ".join(bad[:3]))
        sections = []
    seen_suites = set()
    for kind, name, body in sections:
        if kind == "kunit":
            seen_suites.add(name)
            parse_tap(f"kunit/{name}", body, res)
        else:
            parse_tap(f"vm/{name}", body, res)
            rc = exits.get(name)
            if rc is None:
                res.add(f"vm/{name} (exit)", False, "did not finish")
            elif rc != 0:
                res.add(f"vm/{name} (exit)", False, f"exit status {rc}")
    want = [] if mode == "demo" else [
        s.strip() for s in suites_text().splitlines() if s.strip() and not s.startswith("#")]
    for s in want:
        if s not in seen_suites:
            res.add(f"kunit/{s}", False, "expected suite did not run")
    for p in expected:
        if not any(k == "tap" and n == p for k, n, _ in sections):
            res.add(f"vm/{p}", False, "expected test program did not run")
    if not done:
        why = (f"watchdog fired after {timeout} s" if timed_out else
               "the boot stalled, twice (vm.py: stall-*.txt)" if stalled else
               "guest stopped early")
        res.add("vm/guest-finished", False, why)
    console = open(console_path, errors="replace").read() if os.path.exists(
        console_path) else ""
    lines = console.splitlines()
    skip, known = known_blocks(lines)
    for k in known:
        print(f"[vm] known upstream report in the kernel log, not counted: {k}")
    bad = [line for i, line in enumerate(lines) if i not in skip and KERNEL_BAD.search(line)]
    res.add("vm/kernel-log-clean", not bad, "; ".join(bad[:3]))
    return res
