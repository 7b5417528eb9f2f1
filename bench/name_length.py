#!/usr/bin/env python3
"""What a long template argument costs g++ when nothing is emitted.

Generates translation units that call 5000 instances of one small inline
function template, each instance's arguments holding one type nested D deep
(D = 0, 150, 300, 600), and compiles each with `-O2 -c`. Every call is
inlined, so the object holds none of those functions: the difference from
D = 0 is what naming them costs (g++ mangles every function it instantiates).
The per-node functions of a kernel's evaluators are such instances, their
arguments a node's subtree: this is why docs/05 (*Build time*) keeps the body
out of their names. Prints CPU seconds per depth; writes nothing.

  bench/name_length.py [--compiler g++] [--depths 0,150,300,600] [--functions 5000]
"""
import argparse
import os
import resource
import subprocess
import tempfile


def source(depth, functions):
    nested = "void"
    for k in range(depth):
        nested = f"pair<tag<{k}>, {nested}>"
    lines = [
        "template <int> struct tag {};",
        "template <class, class> struct pair {};",
        f"using nested = {nested if depth else 'int'};",
        "template <int K, class T> inline int step(int x) { return x * K + 1; }",
        "int main(int argc, char**) {",
        "  int s = argc;",
    ]
    lines += [f"  s = step<{k}, nested>(s);" for k in range(functions)]
    lines += ["  return s;", "}"]
    return "\n".join(lines) + "\n"


def cpu_seconds(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compiler", default="g++")
    ap.add_argument("--depths", default="0,150,300,600")
    ap.add_argument("--functions", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = None
        for depth in (int(d) for d in args.depths.split(",")):
            path = os.path.join(tmp, f"names_{depth}.cpp")
            with open(path, "w") as f:
                f.write(source(depth, args.functions))
            t = cpu_seconds([args.compiler, "-std=c++20", "-O2", "-c", path, "-o", os.devnull])
            base = t if base is None else base
            print(f"depth {depth:4d}: {t:6.2f} s CPU, {t - base:6.2f} s above depth 0", flush=True)


if __name__ == "__main__":
    main()
