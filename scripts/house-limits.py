#!/usr/bin/env python3
"""The house's limits on its shape (issue 40), checked in CI (.ci/run):

- no Rust source file over 800 lines (crates/ and fuzz/, tests included);
- no import circle between the files of a crate (scripts/import-cycles.py on each
  crates/*/src): where two files need each other, what they share goes to a file of its
  own, or they are one job and become one file;
- no public unsafe function (`pub unsafe fn`): unsafe stays behind safe wrappers in the two
  crates that hold it (pub(crate) is fine);
- a thin binary: crates/rtlab depends on rtlab-lab, rtlab-report and rtlab-core only (its
  tests may use any crate: [dev-dependencies]).

(No function over 120 lines is clippy's too_many_lines, denied in .ci/run.)

Usage: scripts/house-limits.py [ROOT]   (ROOT: the repository, default: this script's parent)
Exit 0 when every limit holds; 1 with one line per breach; 2 on bad input.
"""
import os
import re
import subprocess
import sys

MAX_LINES = 800


def rust_files(top):
    for d, dirs, fs in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x not in ("target", ".git"))
        for f in sorted(fs):
            if f.endswith(".rs"):
                yield os.path.join(d, f)


def long_files(root):
    out = []
    for top in ("crates", "fuzz"):
        for p in rust_files(os.path.join(root, top)):
            with open(p, encoding="utf-8", errors="replace") as fh:
                n = sum(1 for _ in fh)
            if n > MAX_LINES:
                out.append(f"{os.path.relpath(p, root)}: {n} lines (the limit is {MAX_LINES})")
    return out


def public_unsafe(root):
    out = []
    for p in rust_files(os.path.join(root, "crates")):
        with open(p, encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh, 1):
                code = line.split("//", 1)[0]
                if re.search(r"\bpub\s+unsafe\s+(extern\s+\S+\s+)?fn\b", code):
                    out.append(f"{os.path.relpath(p, root)}:{i}: a public unsafe function")
    return out


THIN = ("rtlab-core", "rtlab-report", "rtlab-lab")


def thick_binary(root):
    """Every rtlab crate the binary's [dependencies] name beyond THIN."""
    p = os.path.join(root, "crates", "rtlab", "Cargo.toml")
    if not os.path.exists(p):
        return []
    out, section = [], ""
    with open(p, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            t = line.split("#", 1)[0].strip()
            if t.startswith("["):
                section = t
            m = re.match(r"(rtlab-[a-z0-9-]+)\s*[.=]", t)
            if section == "[dependencies]" and m and m.group(1) not in THIN:
                out.append(
                    f"crates/rtlab/Cargo.toml:{i}: the binary depends on {m.group(1)} "
                    f"(only {', '.join(THIN)})"
                )
    return out


def cycles(root, checker):
    """Every import circle, as 'crate: file file ...' (the files as the check prints them)."""
    found = []
    crates = os.path.join(root, "crates")
    for c in sorted(os.listdir(crates)):
        src = os.path.join(crates, c, "src")
        if not os.path.isdir(src):
            continue
        o = subprocess.run([sys.executable, checker, src], capture_output=True, text=True)
        if o.returncode != 0:
            last = (o.stderr.strip().splitlines() or ["no output"])[-1]
            sys.exit(f"house-limits: {checker} failed on {src}: {last}")
        for line in o.stdout.splitlines()[1:]:
            # "  N files: a.rs b.rs"
            files = line.split(":", 1)[1].split()
            found.append(f"{c}: {' '.join(sorted(files))}")
    return found


def main():
    if len(sys.argv) > 2:
        print("house-limits: usage: scripts/house-limits.py [ROOT]", file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) == 2 else os.path.dirname(here)
    if not os.path.isdir(os.path.join(root, "crates")):
        print(f"house-limits: {root}: no crates/ folder (give the repository)", file=sys.stderr)
        return 2
    breaches = long_files(root) + public_unsafe(root) + thick_binary(root)
    breaches += [f"import circle: {c}" for c in cycles(root, os.path.join(here, "import-cycles.py"))]
    for b in breaches:
        print(b)
    n = len(breaches)
    print(
        f"house-limits: {n} breach{'es' if n != 1 else ''} "
        f"(files up to {MAX_LINES} lines, no import circle, no public unsafe function, "
        f"a thin binary)"
    )
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
