#!/usr/bin/env python3
"""Prints the folder-level include graph of include/ctgrad and fails when it
has a cycle or an arrow the layering forbids.

A part is a folder of include/ctgrad (ad, check, ...) or a top-level header
(field.hpp, kernel.hpp, ...). An arrow A -> B means a header of A includes a
header of B. The layering is a list of levels, lowest first; a part may
include its own level or a lower one, never a higher one, and parts of one
level may not include each other (each level's parts are siblings).

  scripts/include-graph.py            print the graph, check it
  scripts/include-graph.py --dot      the graph in Graphviz's dot language
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include", "ctgrad")

# Lowest first. Each inner list is one level of sibling parts: the
# configuration and small utilities, the element types and errors, memory
# (atomics, device allocation), the field (the data a kernel sees), the IR
# and the op table, lowering, the analyses shared by the checks and the
# adjoint, the evaluators, the adjoint, the checks of the adjoint and the
# backends, the errors a launch raises, the user-facing face, and on top
# src.hpp, which defines the runtime of a separately compiled program.
LAYERS = [
    ["config.hpp"],
    ["detail"],
    ["errors.hpp", "element.hpp"],
    ["memory"],
    ["field.hpp"],
    ["view.hpp"],
    ["ir"],
    ["lower"],
    ["analysis"],
    ["eval"],
    ["ad"],
    ["check", "backend"],
    ["launch_errors.hpp"],
    ["checkpoint.hpp"],
    ["tape.hpp"],
    ["kernel.hpp"],
    ["check_gradient.hpp"],
    ["ctgrad.hpp"],
    ["src.hpp"],
]
# Optional components sit above the face: they may include any part; no
# part of the core includes them.
COMPONENTS = ["mpi", "dlpack.hpp"]

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def part_of(rel):
    head = rel.split("/")[0]
    return head


def resolve(including, target):
    """The path of `target` relative to ROOT, or None for a header outside ctgrad."""
    if target.startswith("ctgrad/"):
        return target[len("ctgrad/"):]
    here = os.path.dirname(including)
    candidate = os.path.normpath(os.path.join(here, target))
    if os.path.exists(os.path.join(ROOT, candidate)) and not candidate.startswith(".."):
        return candidate
    return None


def edges():
    out = {}
    for base, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith((".hpp", ".h", ".cuh")):
                continue
            rel = os.path.relpath(os.path.join(base, name), ROOT)
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                for line in f:
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = resolve(rel, m.group(1))
                    if target is None:
                        continue
                    a, b = part_of(rel), part_of(target)
                    if a != b:
                        out.setdefault((a, b), []).append(f"{rel} -> {target}")
    return out


def cycles(graph_edges):
    succ = {}
    for a, b in graph_edges:
        succ.setdefault(a, set()).add(b)
        succ.setdefault(b, set())
    found = []
    # Every elementary cycle is found from its smallest part (Johnson's idea,
    # done plainly: the graph has a dozen parts).
    nodes = sorted(succ)
    for start in nodes:
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(succ[node]):
                if nxt == start:
                    found.append(path + [start])
                elif nxt > start and nxt not in path:
                    stack.append((nxt, path + [nxt]))
    return found


def level(part):
    for i, names in enumerate(LAYERS):
        if part in names:
            return i
    if part in COMPONENTS:
        return len(LAYERS)
    return None


def main():
    graph = edges()
    if "--dot" in sys.argv:
        print("digraph ctgrad {")
        for a, b in sorted(graph):
            print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    problems = []
    for a, b in sorted(graph):
        la, lb = level(a), level(b)
        note = ""
        if la is None or lb is None:
            problems.append(f"{a if la is None else b}: a part the layering does not list: add it to LAYERS in scripts/include-graph.py")
            note = "  (unlisted part)"
        elif la == len(LAYERS) and lb < la:
            pass  # a component includes the core
        elif lb >= la:
            note = "  (FORBIDDEN: includes a higher or sibling part)"
            for why in graph[(a, b)]:
                problems.append(f"{a} -> {b} goes up the layering: {why}")
        print(f"{a:>20} -> {b}{note}")
    loops = cycles(graph)
    for loop in loops:
        problems.append("cycle: " + " -> ".join(loop))
    print(f"{len(graph)} arrows, {len(loops)} cycles")
    for p in problems:
        print("include-graph:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
