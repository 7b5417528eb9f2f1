#!/usr/bin/env python3
"""Compiles every compile-fail test with each compiler and writes what the
compilers print into docs/04-diagnostics.md, so the chapter shows the real
messages: per compiler, a table of each diagnostic's line count and its
first error line.

usage: scripts/diagnostics-table.py [--check]

Compilers: g++, clang++-14, clang++-19 and nvcc, those that are installed;
nvcc compiles every test, as CUDA.
The table sits between the markers
    <!-- diagnostics-table: begin -->  and  <!-- diagnostics-table: end -->
--check prints the tables and exits 1 if the chapter's copy differs (the
line counts and first lines, paths made relative).
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "04-diagnostics.md")
TESTS = os.path.join(ROOT, "tests", "compile_fail")
BEGIN, END = "<!-- diagnostics-table: begin -->", "<!-- diagnostics-table: end -->"


def eigen_include():
    for d in ("/usr/include/eigen3", "/usr/local/include/eigen3"):
        if os.path.isdir(d):
            return d
    sys.exit("diagnostics-table.py: Eigen 3 headers not found")


def compilers():
    found = []
    for name in ("g++", "clang++-14", "clang++-19"):
        path = shutil.which(name)
        if path:
            found.append((name, path, False))
    nvcc = shutil.which("nvcc")
    if nvcc:
        found.append(("nvcc", nvcc, True))
    return found


def version(path):
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", out) or re.search(r"version (\d+\.\d+(\.\d+)?)", out) or \
        re.search(r"\) (\d+\.\d+\.\d+)", out)
    return m.group(1) if m else "?"


def compile_output(path, cuda, source):
    common = ["-I" + os.path.join(ROOT, "include"), "-isystem", eigen_include(), "-std=c++20"]
    if cuda:
        args = [path, *common, "-x", "cu", "-arch=sm_90", "--expt-relaxed-constexpr", "--extended-lambda",
                "-diag-suppress=20012", "-DCTG_HAS_CUDA=1", "-c", "-o", os.devnull, source]
    else:
        args = [path, *common, "-fsyntax-only", source]
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    text = (p.stdout + p.stderr).replace(ROOT + "/", "")
    return p.returncode, text


def first_error(text):
    for line in text.splitlines():
        # "error:" as the compilers print it, not a source line they echo
        # that happens to hold "expected-error".
        if re.search(r"(?<![-\w])error:", line):
            line = re.sub(r"\s+", " ", line.strip())
            return line if len(line) <= 220 else line[:217] + "..."
    return "(no error line)"


def tables():
    sources = sorted(f for f in os.listdir(TESTS) if f.endswith((".cpp", ".cu")))
    out = []
    for name, path, cuda in compilers():
        rows = []
        for src in sources:
            # nvcc compiles every test as CUDA (a kernel in a .cu file is
            # built by it, whatever the extension); the host compilers the .cpp ones.
            if src.endswith(".cu") and not cuda:
                continue
            rc, text = compile_output(path, cuda, os.path.join(TESTS, src))
            lines = text.count("\n")
            rows.append((src, "fails" if rc else "COMPILES", lines, first_error(text)))
        if not rows:
            continue
        out.append(f"**{name} {version(path)}**\n")
        out.append("| test | lines | first error line |")
        out.append("|---|---:|---|")
        for src, status, lines, first in rows:
            first = first.replace("|", "\\|")
            out.append(f"| `{src}` | {lines if status == 'fails' else status} | `{first}` |")
        out.append("")
    return "\n".join(out)


def main():
    table = tables()
    doc = open(DOC).read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"diagnostics-table.py: {DOC} has no {BEGIN} ... {END} markers")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + table + "\n" + END + tail
    if "--check" in sys.argv:
        print(table)
        sys.exit(0 if new == doc else 1)
    open(DOC, "w").write(new)
    print(table)


if __name__ == "__main__":
    main()
