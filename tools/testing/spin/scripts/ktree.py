#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Keep a Linux kernel git tree in step with the spin repository.

The repository holds two kinds of change to the kernel:

* new files, at their kernel paths (rust/spin/..., Documentation/spin/...);
* changes to existing kernel files, as ``git format-patch`` mails under
  ``patches/<area>/``.

``patches/series`` orders them. Each line names one commit of the series:

* ``<area>/NNNN-name.patch``: a mail, applied with ``git apply``;
* ``<area>/NNNN-name.files``: a commit that adds new files; the file holds the
  commit message (``Subject:`` line, blank line, body) followed by a
  ``Files:`` line and one repository path (file or directory) per line.

A file belongs to the ``.files`` entry that names it most specifically (a file
named by one entry inside a directory named by an earlier one belongs to the
former). The repository holds every file as the series leaves it; a later
``.patch`` entry may change a file that a ``.files`` entry added (the commit
that adds a feature hooks it into files added before it). The ``.files`` entry
then adds the file as it is before those patches: its repository content with
each later patch that touches it applied in reverse, last first. A patch that
creates a file leaves it out of the earlier entry.

Sub-commands:

``init``    extract the pristine source and make it a git tree (tag ``pristine``).
``apply``   build the series as commits on top of ``pristine`` with git plumbing
            (a private index, fixed dates: an unchanged repo gives the same
            commits) and move the tree's worktree to the tip. Only files whose
            content changes are rewritten, so kbuild rebuilds only what changed.
``series``  ``git format-patch`` the series with a cover letter.
``export``  turn edits made in the kernel tree back into the repository.
``check``   ``git am`` the emitted series onto a scratch tree of the pristine
            source, proving the series applies.
"""

import argparse
import email
import email.policy
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXED_DATE = "1700000000 +0000"
# Where repository content comes from: the working copy (default), or with
# --committed (SPIN_APPLY=committed) only what is committed at HEAD, so that one
# developer's uncommitted work in a shared checkout does not enter another's build.
COMMITTED = False
TAG = "pristine"
BRANCH = "refs/heads/spin"


def log(msg):
    print(f"[ktree] {msg}", flush=True)


def die(msg):
    print(f"[ktree] ERROR: {msg}", file=sys.stderr)
    sys.exit(1)


def git(tree, *args, env=None, inp=None, check=True, strip=True):
    e = dict(os.environ)
    if env:
        e.update(env)
    r = subprocess.run(["git", "-C", tree, *args], input=inp, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode:
        die(f"git {' '.join(args)} failed:\n{r.stderr}{r.stdout}")
    return r.stdout.strip() if strip else r.stdout


def identity():
    name = git(REPO, "config", "user.name", check=False) or "spin developers"
    mail = git(REPO, "config", "user.email", check=False) or "spin@localhost"
    return name, mail


# ---------------------------------------------------------------- series ---

def repo_read(rel):
    """The content of repository file REL (working copy, or HEAD with --committed)."""
    if COMMITTED:
        r = subprocess.run(["git", "-C", REPO, "show", f"HEAD:{rel}"], capture_output=True)
        if r.returncode:
            die(f"{rel} is not committed")
        return r.stdout
    with open(os.path.join(REPO, rel), "rb") as f:
        return f.read()


def repo_exists(rel):
    if COMMITTED:
        return subprocess.run(["git", "-C", REPO, "cat-file", "-e", f"HEAD:{rel}"],
                              capture_output=True).returncode == 0
    return os.path.isfile(os.path.join(REPO, rel))


class Entry:
    """One commit of the series."""

    def __init__(self, rel):
        self.rel = rel
        self.path = os.path.join(REPO, "patches", rel)
        if not repo_exists(f"patches/{rel}"):
            die(f"patches/series names {rel}, which does not exist")
        self.kind = "patch" if rel.endswith(".patch") else "files"
        if self.kind == "files" and not rel.endswith(".files"):
            die(f"{rel}: a series entry ends in .patch or .files")

    def text(self):
        return repo_read(f"patches/{self.rel}").decode()

    def message_and_files(self):
        text = self.text()
        head, sep, files = text.partition("\nFiles:\n")
        if not sep:
            die(f"{self.rel}: no 'Files:' line")
        m = re.match(r"Subject: (.*)\n\n", head)
        if not m:
            die(f"{self.rel}: must start with 'Subject: ...' and a blank line")
        msg = m.group(1) + "\n\n" + head[m.end():].strip() + "\n"
        files = files.split("\ndiff --git ", 1)[0]
        paths = [p.strip() for p in files.splitlines() if p.strip() and not p.startswith("#")]
        return msg, paths

    def diff(self):
        """The diff this entry applies: a .patch entry's, or the one that follows a
        .files entry's file list (hooking the files it adds into earlier ones)."""
        text = self.text()
        if self.kind == "patch":
            return text
        files = text.partition("\nFiles:\n")[2]
        at = files.find("\ndiff --git ")
        return files[at + 1:] if at >= 0 else ""

    def subject(self):
        if self.kind == "files":
            return self.message_and_files()[0].splitlines()[0]
        msg = email.message_from_string(self.text(), policy=email.policy.default)
        return re.sub(r"^\[PATCH[^\]]*\]\s*", "", str(msg["Subject"]))


def read_series():
    entries = []
    for line in repo_read("patches/series").decode().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            entries.append(Entry(line))
    subjects = [e.subject() for e in entries]
    dup = {s for s in subjects if subjects.count(s) > 1}
    if dup:
        die(f"series subjects must be unique: {dup}")
    return entries


def repo_files(paths):
    """Repository files below PATHS: tracked and untracked-not-ignored, or committed."""
    if COMMITTED:
        out = git(REPO, "ls-tree", "-r", "--name-only", "HEAD", "--", *paths)
        files = sorted(set(out.splitlines()))
    else:
        out = git(REPO, "ls-files", "-co", "--exclude-standard", "--", *paths)
        files = sorted({f for f in out.splitlines() if os.path.isfile(os.path.join(REPO, f))})
    if not files:
        die(f"no repository files below {paths}")
    return files


def repo_blob(tree, rel):
    """Store repository file REL in TREE's object database: (blob id, mode)."""
    if COMMITTED:
        mode = git(REPO, "ls-tree", "HEAD", "--", rel).split()[0]
        r = subprocess.run(["git", "-C", tree, "hash-object", "-w", "--stdin"],
                           input=repo_read(rel), capture_output=True, check=True)
        return r.stdout.decode().strip(), mode
    full = os.path.join(REPO, rel)
    mode = "100755" if os.access(full, os.X_OK) else "100644"
    return git(tree, "hash-object", "-w", full), mode


# ------------------------------------------------------------------ init ---

def cmd_init(a):
    tree = a.tree
    if os.path.isdir(os.path.join(tree, ".git")):
        if git(tree, "rev-parse", "-q", "--verify", f"refs/tags/{TAG}", check=False):
            return
        die(f"{tree} is a git tree without a '{TAG}' tag: remove it and run again")
    parent = os.path.dirname(tree)
    os.makedirs(parent, exist_ok=True)
    if not os.path.isdir(tree):
        log(f"extracting {a.tarball} (about 15 s)")
        tmp = tempfile.mkdtemp(dir=parent)
        subprocess.run(["tar", "xf", a.tarball, "-C", tmp], check=True)
        (top,) = os.listdir(tmp)
        os.rename(os.path.join(tmp, top), tree)
        os.rmdir(tmp)
    log("recording the pristine source as a git commit (about 40 s)")
    git(tree, "init", "-q", "-b", "pristine-src")
    # No automatic repacking in the background of a kernel build.
    git(tree, "config", "gc.auto", "0")
    # Debian's .gitignore ignores everything at the top level: add by force.
    git(tree, "add", "-f", "-A", ".")
    name, mail = identity()
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": mail, "GIT_COMMITTER_NAME": name,
           "GIT_COMMITTER_EMAIL": mail, "GIT_AUTHOR_DATE": FIXED_DATE,
           "GIT_COMMITTER_DATE": FIXED_DATE}
    git(tree, "commit", "-q", "-m", f"Linux source from {os.path.basename(a.tarball)}", env=env)
    git(tree, "tag", TAG)


# ----------------------------------------------------------------- apply ---

def patch_paths(text):
    """The paths a mail's diff touches."""
    return set(re.findall(r"^diff --git a/(\S+) b/", text, flags=re.M))


def owners(entries):
    """{repository file: index of the .files entry it belongs to}."""
    own, spec = {}, {}
    for i, e in enumerate(entries):
        if e.kind != "files":
            continue
        for p in e.message_and_files()[1]:
            depth = p.rstrip("/").count("/") + (0 if p.endswith("/") else 1)
            for f in repo_files([p]):
                if f in own and spec[f] == depth:
                    die(f"{f} is named by both {entries[own[f]].rel} and {e.rel}")
                if f not in own or depth > spec[f]:
                    own[f], spec[f] = i, depth
    return own


def staged_blobs(tree, entries):
    """{entry index: [(path, blob, mode)]}: what each .files entry adds."""
    own = owners(entries)
    later = {}  # path -> [diff] of the entries after its owner that change it, in order
    for j, e in enumerate(entries):
        text = e.diff()
        for f in patch_paths(text):
            if f in own and own[f] == j:
                die(f"{e.rel} both adds and changes {f}")
            if f in own and own[f] < j:
                later.setdefault(f, []).append(text)
    out = {}
    for f, i in sorted(own.items()):
        blob, mode = repo_blob(tree, f)
        if f in later:
            content = git(tree, "cat-file", "blob", blob, strip=False)
            with tempfile.TemporaryDirectory() as td:
                path = os.path.join(td, f)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as fh:
                    fh.write(content)
                for text in reversed(later[f]):
                    r = subprocess.run(["git", "apply", "-R", f"--include={f}", "-"],
                                       input=text, cwd=td, capture_output=True, text=True)
                    if r.returncode:
                        die(f"{f}: a later patch does not reverse-apply to its repository "
                            f"content (is the patch in step with the file?):\n{r.stderr}")
                if not os.path.exists(path):
                    continue  # created by a later patch
                blob = git(tree, "hash-object", "-w", path)
        out.setdefault(i, []).append((f, blob, mode))
    return out


def build_series(tree, entries):
    """Make the series' commits without touching the worktree; return the tip."""
    index = os.path.join(tree, ".git", "spin-build.index")
    name, mail = identity()
    env = {"GIT_INDEX_FILE": index, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": mail,
           "GIT_COMMITTER_DATE": FIXED_DATE}
    parent = git(tree, "rev-parse", f"{TAG}^{{commit}}")
    git(tree, "read-tree", parent, env=env)
    staged = staged_blobs(tree, entries)
    for i, e in enumerate(entries):
        cenv = dict(env)
        if e.kind == "patch":
            text = e.text()
            with tempfile.TemporaryDirectory() as td:
                info = subprocess.run(["git", "mailinfo", os.path.join(td, "msg"),
                                       os.path.join(td, "patch")], input=text,
                                      capture_output=True, text=True, check=True).stdout
                hdr = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
                msg = hdr.get("Subject", e.rel) + "\n\n" + open(os.path.join(td, "msg")).read()
            cenv.update({"GIT_AUTHOR_NAME": hdr.get("Author", name),
                         "GIT_AUTHOR_EMAIL": hdr.get("Email", mail),
                         "GIT_AUTHOR_DATE": FIXED_DATE})
        else:
            msg, _ = e.message_and_files()
            if "Signed-off-by:" not in msg:
                msg = msg.rstrip("\n") + f"\n\nSigned-off-by: {name} <{mail}>\n"
            for f, blob, mode in staged.get(i, []):
                git(tree, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{f}", env=env)
            cenv.update({"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": mail,
                         "GIT_AUTHOR_DATE": FIXED_DATE})
        # A .patch entry's diff, or the one a .files entry ends with, after its files.
        diff = e.diff()
        if diff:
            r = subprocess.run(["git", "-C", tree, "apply", "--cached", "--whitespace=nowarn",
                                "-"], input=diff, env={**os.environ, **env},
                               capture_output=True, text=True)
            if r.returncode:
                die(f"the diff of patches/{e.rel} does not apply:\n{r.stderr}")
        treeid = git(tree, "write-tree", env=env)
        parent = git(tree, "commit-tree", treeid, "-p", parent, inp=msg, env=cenv)
    os.unlink(index)
    return parent


# Repository paths that mirror the kernel tree: every file below them must belong to a
# .files entry, or it would silently stay out of the kernel.
KERNEL_DIRS = ("rust/", "drivers/", "include/", "mm/", "block/", "fs/", "Documentation/",
               "tools/testing/selftests/")


def check_coverage(entries):
    owned = owned_paths(entries)
    out = git(REPO, "ls-tree", "-r", "--name-only", "HEAD") if COMMITTED else \
        git(REPO, "ls-files", "-co", "--exclude-standard")
    stray = [f for f in out.splitlines() if f.startswith(KERNEL_DIRS) and not is_owned(f, owned)]
    if stray:
        die("files at kernel paths that no .files entry of patches/series adds:\n  " +
            "\n  ".join(stray))


def cmd_apply(a):
    tree = a.tree
    entries = read_series()
    check_coverage(entries)
    tip = build_series(tree, entries)
    git(tree, "update-ref", BRANCH, tip)
    head = git(tree, "rev-parse", "HEAD")
    if head == tip:
        log(f"kernel tree already at the series tip {tip[:12]}")
        return
    dirty = git(tree, "status", "--porcelain", "-uno")
    if dirty and not a.force:
        die("the kernel tree has uncommitted edits; run 'make export' to keep them "
            "or 'make apply FORCE=1' to drop them:\n" + dirty)
    changed = git(tree, "diff", "--name-only", head, tip).splitlines()
    # Only files that differ are rewritten, so kbuild rebuilds only those.
    git(tree, "checkout", "-q", "-f", "--detach", tip)
    log(f"kernel tree moved to {tip[:12]}: {len(changed)} file(s) changed")


# ---------------------------------------------------------------- series ---

def cover_letter(entries):
    path = os.path.join(REPO, "patches", "cover-letter")
    text = open(path).read()
    m = re.match(r"Subject: (.*)\n\n", text)
    if not m:
        die("patches/cover-letter must start with 'Subject: ...' and a blank line")
    return m.group(1), text[m.end():]


def cmd_series(a):
    tree = a.tree
    entries = read_series()
    tip = build_series(tree, entries)
    git(tree, "update-ref", BRANCH, tip)
    out = os.path.abspath(a.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    git(tree, "format-patch", "-q", "--cover-letter", "--no-signature", "-o", out,
        f"{TAG}..{tip}")
    subject, body = cover_letter(entries)
    (cover,) = [f for f in os.listdir(out) if f.startswith("0000-")]
    cpath = os.path.join(out, cover)
    text = open(cpath).read()
    text = text.replace("*** SUBJECT HERE ***", subject)
    text = text.replace("*** BLURB HERE ***", body.rstrip())
    open(cpath, "w").write(text)
    log(f"{len(entries)} patches + cover letter in {out}")


def cmd_check(a):
    """git am the emitted series onto a scratch worktree of the pristine tag."""
    tree = a.tree
    patches = sorted(f for f in os.listdir(a.out) if f.endswith(".patch") and
                     not f.startswith("0000-"))
    scratch = tempfile.mkdtemp(prefix="spin-am-")
    try:
        git(tree, "worktree", "add", "-q", "--detach", scratch, TAG)
        r = subprocess.run(["git", "-C", scratch, "am", "-q",
                            *[os.path.join(a.out, p) for p in patches]],
                           capture_output=True, text=True)
        if r.returncode:
            die(f"git am failed:\n{r.stdout}{r.stderr}")
        mine = git(tree, "rev-parse", f"{BRANCH}^{{tree}}")
        theirs = git(scratch, "rev-parse", "HEAD^{tree}")
        if mine != theirs:
            die("git am result differs from the series tree")
        log(f"git am of {len(patches)} patches onto pristine source: OK (tree {mine[:12]})")
    finally:
        git(tree, "worktree", "remove", "--force", scratch, check=False)
        shutil.rmtree(scratch, ignore_errors=True)


# ---------------------------------------------------------------- export ---

def owned_paths(entries):
    """Repository paths (files or directories) that .files entries add."""
    owned = []
    for e in entries:
        if e.kind == "files":
            owned += e.message_and_files()[1]
    return owned


def is_owned(path, owned):
    return any(path == o or path.startswith(o.rstrip("/") + "/") for o in owned)


def area_of(path):
    parts = path.split("/")
    if parts[0] in ("drivers", "fs", "include") and len(parts) > 2:
        return "-".join(parts[:2]) if parts[0] != "drivers" else "-".join(parts[:3])
    return parts[0]


def cmd_export(a):
    tree = a.tree
    entries = read_series()
    owned = owned_paths(entries)
    tip = git(tree, "rev-parse", BRANCH)
    name, mail = identity()
    # 1. Uncommitted edits: new files go back into the repo as they are; edits
    #    of kernel files become fixups of the last patch that touches them.
    # "XY path" records: the leading blank of " M path" must survive.
    status = git(tree, "status", "--porcelain", "-z", "--untracked-files=all", "--ignored=no",
                 strip=False)
    copied = 0
    pending = []
    for line in filter(None, status.split("\0")):
        path = line[3:]
        if is_owned(path, owned):
            src = os.path.join(tree, path)
            dst = os.path.join(REPO, path)
            if os.path.exists(src):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
            elif os.path.exists(dst):
                os.unlink(dst)
            copied += 1
        else:
            pending.append(path)
    if copied:
        log(f"{copied} new-file edit(s) copied back into the repository")
    commits = git(tree, "log", "--reverse", "--format=%H", f"{TAG}..HEAD").splitlines()
    for path in pending:
        touching = [c for c in commits
                    if git(tree, "diff-tree", "--no-commit-id", "--name-only", "-r", c, "--",
                           path)]
        git(tree, "add", "-A", "-f", "--", path)
        if touching:
            git(tree, "commit", "-q", "--fixup", touching[-1], "--", path)
        else:
            git(tree, "commit", "-q", "-m",
                f"{area_of(path)}: EDIT THIS SUBJECT (new change to {path})", "--", path)
    # 2. Fold fixups in and write every kernel-file commit back as its patch.
    if any(git(tree, "log", "-1", "--format=%s", c).startswith(("fixup!", "squash!"))
           for c in git(tree, "log", "--format=%H", f"{tip}..HEAD").splitlines()):
        env = {"GIT_SEQUENCE_EDITOR": "true", "GIT_EDITOR": "true"}
        git(tree, "rebase", "-q", "-i", "--autosquash", TAG, env=env)
    by_subject = {e.subject(): e for e in entries}
    series = open(os.path.join(REPO, "patches", "series")).read()
    written = 0
    for c in git(tree, "log", "--reverse", "--format=%H", f"{TAG}..HEAD").splitlines():
        subject = git(tree, "log", "-1", "--format=%s", c)
        e = by_subject.get(subject)
        if e and e.kind == "files":
            continue  # its files were copied back above (or are unchanged)
        mail_text = git(tree, "format-patch", "-1", "--stdout", "--no-signature", c) + "\n"
        if e is None:
            files = git(tree, "diff-tree", "--no-commit-id", "--name-only", "-r", c).splitlines()
            if all("/" not in f for f in files):
                # Top-level files (Kconfig, Kbuild, Makefile): the subject's prefix names it.
                area = re.sub(r"[^a-z0-9-]", "", subject.split(":")[0].lower()) or "top"
            else:
                area = area_of(files[0])
            d = os.path.join(REPO, "patches", area)
            os.makedirs(d, exist_ok=True)
            n = len([f for f in os.listdir(d) if f.endswith(".patch")]) + 1
            slug = re.sub(r"[^A-Za-z0-9]+", "-", subject).strip("-")[:52]
            rel = f"{area}/{n:04d}-{slug}.patch"
            series += rel + "\n"
            log(f"new patch patches/{rel}: add it at the right place in patches/series")
            path = os.path.join(REPO, "patches", rel)
        else:
            path = e.path
        # Keep the mail's first line stable: it carries the commit id.
        mail_text = re.sub(r"^From [0-9a-f]{40} ", "From " + "0" * 40 + " ", mail_text)
        if not os.path.exists(path) or open(path).read() != mail_text:
            open(path, "w").write(mail_text)
            written += 1
    open(os.path.join(REPO, "patches", "series"), "w").write(series)
    log(f"{written} patch file(s) rewritten; now run 'make apply' to rebuild the series")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", required=True, help="the kernel git tree")
    p.add_argument("--committed", action="store_true",
                   default=os.environ.get("SPIN_APPLY") == "committed",
                   help="use only what is committed at HEAD (default: the working copy)")
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("--tarball", required=True)
    a = sub.add_parser("apply")
    a.add_argument("--force", action="store_true")
    s = sub.add_parser("series")
    s.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("--out", required=True)
    sub.add_parser("export")
    args = p.parse_args()
    args.tree = os.path.abspath(args.tree)
    global COMMITTED
    COMMITTED = args.committed
    {"init": cmd_init, "apply": cmd_apply, "series": cmd_series, "check": cmd_check,
     "export": cmd_export}[args.cmd](args)


if __name__ == "__main__":
    main()
