#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Find the vocabulary of the development process in the tracked files of the repository.

The tree describes the design, its trade-offs and their numbers; the story of how it got there
belongs to git. This scans every file that `git ls-files` lists (text files only; in patch files
the mail header lines From, Date and Subject are left out, the bodies are scanned) for:

  round     numbered work r[o]unds and s[p]rints
  issue     issue and review references by number
  decider   who decided something, instead of what was decided and why
  ci        particular runs of continuous integration, red or green
  oneoff    builds that were made to try something and then thrown away
  date      ISO dates, allowed only in Documentation/spin/measurements.rst (each number there
            says when it was measured), and month-year dates outside the ABI's Date: lines

and prints FILE:LINE: [KIND] MATCH for every hit. Exit status 1 if there is one, else 0.
The patterns are written to leave technical text alone: C preprocessor lines, Rust attributes,
hex colours, a benchmark's rounds, "the owner of" a page or a lock, a confidence interval (CI).
This file is scanned too: its patterns are written so that they do not match themselves.

  process_words.py [--repo DIR]
"""

import argparse
import os
import re
import subprocess
import sys

# The words are split with [] so that this file's text would not match them either.
PATTERNS = [
    ("round", r"\bs[e]ssions?[ -]\d+|\bs[e]ssion-\d+\b"),
    ("round", r"\b(?:this|next|last|previous|same|that|each|every|one|a|the|earlier|later)"
              r" s[e]ssion(?:'s|s)?\b(?! (?:key|id|leader|cookie|ticket)s?\b)"),
    ("round", r"\bs[p]rints?\b"),
    ("round", r"\b(?:work|review|development) r[o]unds?\b|\br[o]und \d+ of (?:work|review)\b"),
    ("issue", r"(?<![\w&$#'\"/])#\d+(?![\w-])"),
    ("issue", r"\b(?:issues?|tickets?|reviews?) #?\d+\b|\bi[s]sue #\w"),
    ("decider", r"\b(?:project|repository)(?:'s)? o[w]ner\b|\bo[w]ner (?:decided|chose|agreed|"
                r"asked|wants|said|approved|accepted)\b|\b(?:decision|call) for the o[w]ner\b"),
    ("decider", r"\bC[E]O\b|\bwe (?:decided|chose|agreed)\b"),
    ("decider", r"\b(?:maintainers?|team|owner|management) (?:decided|chose|agreed|asked)\b"),
    ("ci", r"\bC[I] (?:runs?|passed|failed|was|saw|went|of)\b|\b(?:in|by|on) C[I]\b(?! [\d.])"),
    ("ci", r"\b(?:green|red) (?:runs?|CI|builds?|`make test`|make test)\b"),
    ("oneoff", r"\bone-o[f]f\b|\bthrow-?a[w]ay\b"),
]
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
MONTH_DATE = re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|"
                        r"October|November|December) 20\d\d\b")
DATES_ALLOWED = {"Documentation/spin/measurements.rst"}
# Case-insensitive, except C[E]O, which only counts in capitals.
COMPILED = [(kind, re.compile(p, 0 if "C[E]O" in p else re.IGNORECASE)) for kind, p in PATTERNS]


def header_lines(lines):
    """Indexes of the mail header lines of a patch file that are not scanned."""
    skip = set()
    in_header = False
    for i, line in enumerate(lines):
        if i == 0 and (line.startswith("From ") or line.startswith("Subject:")):
            in_header = True
        if not in_header:
            break
        if line.strip() == "":
            break
        if re.match(r"(From |From:|Date:|Subject:)", line):
            skip.add(i)
            last = i
        elif line[:1] in (" ", "\t") and i - 1 in skip and i - 1 == last:
            skip.add(i)  # a folded Subject line
            last = i
    return skip


def scan_text(rel, text):
    hits = []
    lines = text.split("\n")
    skip = header_lines(lines) if rel.startswith("patches/") else set()
    abi = rel.startswith("Documentation/ABI/")
    for i, line in enumerate(lines):
        if i in skip:
            continue
        for kind, rx in COMPILED:
            for m in rx.finditer(line):
                hits.append((i + 1, kind, m.group(0), m.start(), m.end()))
        if rel not in DATES_ALLOWED:
            for m in DATE.finditer(line):
                hits.append((i + 1, "date", m.group(0), m.start(), m.end()))
        if not (abi and line.startswith("Date:")):
            for m in MONTH_DATE.finditer(line):
                hits.append((i + 1, "date", m.group(0), m.start(), m.end()))
    # Where matches overlap on a line (an issue reference and the number in it), the longest
    # is reported.
    out = []
    for h in sorted(hits, key=lambda h: (h[0], h[3], -(h[4] - h[3]))):
        if out and out[-1][0] == h[0] and h[3] < out[-1][4]:
            continue
        out.append(h)
    return [h[:3] for h in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
    args = ap.parse_args()
    files = subprocess.run(["git", "-C", args.repo, "ls-files", "-z"], check=True,
                           capture_output=True).stdout.decode().split("\0")
    total = 0
    scanned = 0
    for rel in files:
        if not rel:
            continue
        path = os.path.join(args.repo, rel)
        if not os.path.isfile(path):
            continue  # deleted in the work tree
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        scanned += 1
        for line, kind, match in scan_text(rel, text):
            print(f"{rel}:{line}: [{kind}] {match}")
            total += 1
    print(f"process_words: {scanned} files, {total} hit(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
