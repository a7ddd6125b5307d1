#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Check that Documentation/spin builds without a warning.

Every .rst file of the directory goes through docutils (Debian's python3-docutils), with the
roles and directives that the kernel's Sphinx adds registered here as stand-ins: ``:doc:``
(its target must exist), ``:c:func:`` and the other C-domain roles, ``:ref:``,
``.. toctree::`` (every entry must exist, and every document must be in index.rst's toctree),
``.. kernel-doc::`` and ``.. kernel-abi::`` (their file must exist). Any message of docutils at
warning level or above is a failure: each is printed as FILE:LINE: message, and the exit status
is 1. The whole kernel tree and Sphinx are not needed. It also checks that the C program
README.md shows is the text of tools/testing/selftests/spin/gpu_pread_example.c, which
``make test`` runs.

  docs_check.py [DIR]      (default: Documentation/spin of this repository)
"""

import io
import os
import sys

try:
    import docutils.core
    import docutils.nodes
    import docutils.utils
    from docutils.parsers.rst import Directive, directives, roles
except ImportError:
    sys.exit("docs_check: docutils is missing (apt-get install python3-docutils)")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

# Set per document by check(): the directory of the documents and the one being read.
STATE = {"dir": None, "doc": None}


def doc_exists(target):
    """Whether a :doc: or toctree target names a document of the checked directory."""
    base = os.path.dirname(STATE["doc"]) if not target.startswith("/") else STATE["dir"]
    path = os.path.normpath(os.path.join(base, target.lstrip("/")))
    return os.path.isfile(path + ".rst")


def doc_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    target = text
    if "<" in text and text.endswith(">"):
        target = text[text.rindex("<") + 1:-1]
    node = docutils.nodes.literal(rawtext, text)
    if not doc_exists(target):
        msg = inliner.reporter.warning(f"unknown document: {target!r}", line=lineno)
        return [node], [msg]
    return [node], []


def literal_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """Sphinx's C-domain and cross-reference roles: rendered as literals, not checked."""
    return [docutils.nodes.literal(rawtext, text)], []


class TocTree(Directive):
    has_content = True
    option_spec = {"maxdepth": directives.nonnegative_int, "numbered": directives.flag,
                   "caption": directives.unchanged, "hidden": directives.flag,
                   "glob": directives.flag, "titlesonly": directives.flag}

    def run(self):
        out = []
        for entry in self.content:
            entry = entry.strip()
            if not entry:
                continue
            target = entry[entry.rindex("<") + 1:-1] if entry.endswith(">") else entry
            STATE.setdefault("toctree", set()).add(target)
            if not doc_exists(target):
                out.append(self.state_machine.reporter.warning(
                    f"toctree entry {target!r} names no document", line=self.lineno))
        return out


class FileDirective(Directive):
    """kernel-doc and kernel-abi: the named file must exist in the repository."""
    required_arguments = 1
    optional_arguments = 0
    final_argument_whitespace = True
    has_content = True
    option_spec = {"doc": directives.unchanged, "functions": directives.unchanged,
                   "identifiers": directives.unchanged, "export": directives.unchanged,
                   "internal": directives.unchanged, "no-identifiers": directives.unchanged,
                   "rst": directives.unchanged, "no-symbols": directives.unchanged}

    def run(self):
        path = os.path.join(REPO, self.arguments[0])
        if not os.path.exists(path):
            return [self.state_machine.reporter.warning(
                f"{self.name}: {self.arguments[0]} is not in this repository", line=self.lineno)]
        return []


class Ignored(Directive):
    """Sphinx-only directives without a check of their own."""
    required_arguments = 0
    optional_arguments = 10
    final_argument_whitespace = True
    has_content = True
    option_spec = None

    def run(self):
        return []


def register():
    roles.register_local_role("doc", doc_role)
    for name in ("c:func", "c:type", "c:macro", "c:data", "c:member", "c:enum", "c:struct",
                 "c:union", "c:expr", "c:texpr", "ref", "manpage", "file", "command",
                 "envvar", "option", "kbd", "menuselection", "samp", "program", "abbr"):
        roles.register_local_role(name, literal_role)
    directives.register_directive("toctree", TocTree)
    directives.register_directive("kernel-doc", FileDirective)
    directives.register_directive("kernel-abi", FileDirective)
    for name in ("c:function", "c:type", "c:macro", "c:struct", "c:union", "c:enum",
                 "c:member", "c:var", "only", "index", "highlight", "code-block",
                 "literalinclude", "kernel-feat", "kernel-include", "seealso",
                 "versionadded", "versionchanged", "deprecated", "tabularcolumns"):
        directives.register_directive(name, Ignored)


def check(path):
    """The warnings of one document: [(line, message)]."""
    STATE["doc"] = path
    stream = io.StringIO()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    docutils.core.publish_doctree(
        text, source_path=path,
        settings_overrides={"report_level": 2, "halt_level": 5, "warning_stream": stream,
                            "file_insertion_enabled": False, "raw_enabled": False,
                            "input_encoding": "utf-8", "syntax_highlight": "none"})
    msgs = []
    for line in stream.getvalue().splitlines():
        # "path:LINE: (LEVEL/N) message"; continuation lines belong to the message before.
        if line.startswith(path + ":"):
            msgs.append(line[len(path) + 1:])
        elif msgs:
            msgs[-1] += " " + line.strip()
    return msgs


def check_readme_example():
    """1 if README.md's ```c block is not gpu_pread_example.c's text, else 0."""
    example = "tools/testing/selftests/spin/gpu_pread_example.c"
    try:
        with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        with open(os.path.join(REPO, example), encoding="utf-8") as f:
            want = f.read()
    except OSError as e:
        print(f"README.md:1: (WARNING/2) {e}")
        return 1
    start = readme.find("```c\n")
    end = readme.find("\n```", start + 5)
    if start < 0 or end < 0 or readme[start + 5:end + 1] != want:
        print(f"README.md:{readme[:max(start, 0)].count(chr(10)) + 1}: (WARNING/2) "
              f"the example is not the text of {example}")
        return 1
    return 0


def main():
    top = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                          os.path.join(REPO, "Documentation", "spin"))
    STATE["dir"] = top
    register()
    docs = sorted(f for f in os.listdir(top) if f.endswith(".rst"))
    bad = 0
    for name in docs:
        for msg in check(os.path.join(top, name)):
            print(f"{os.path.relpath(os.path.join(top, name), REPO)}:{msg}")
            bad += 1
    listed = STATE.get("toctree", set())
    for name in docs:
        if name != "index.rst" and name[:-4] not in listed:
            print(f"{os.path.relpath(os.path.join(top, name), REPO)}:1: "
                  "(WARNING/2) not in index.rst's toctree")
            bad += 1
    bad += check_readme_example()
    print(f"docs_check: {len(docs)} documents, {bad} warning(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
