#!/usr/bin/env python3
"""Summarise a clang -ftime-trace JSON file: where the compile time goes.

Prints
  - clang's own totals per phase ("Total Frontend", "Total InstantiateClass",
    "Total Backend", ...), which count nested events once;
  - the templates instantiated most: InstantiateClass / InstantiateFunction
    events grouped by template name (the detail with its template arguments
    cut off), with the count, the self milliseconds (the event's time less
    that of the events nested in it: recursive instantiations nest deeply,
    so inclusive times count the same work hundreds of times over), the
    inclusive milliseconds of the outermost events only, and the longest
    name seen, which shows how long the spelled types get.

Usage: bench/trace_summary.py TRACE.json [--top 25] [--kind InstantiateClass,...]
Compile with `clang++ -ftime-trace -ftime-trace-granularity=100 ...` for the
trace: a finer granularity lists more small instantiations, a coarser one
leaves them out of the per-name counts (the phase totals keep them).
"""
import argparse
import collections
import json


def template_name(detail):
    """`ctg::ir::math<ctg::ir::op::sin, ...>::eval` -> `ctg::ir::math<>::eval`:
    the template arguments collapsed, the qualified name kept."""
    out, depth = [], 0
    for ch in detail:
        if ch == "<":
            if depth == 0:
                out.append("<>")
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--kind", default="InstantiateClass,InstantiateFunction")
    args = ap.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]

    # Self time: the events of one thread nest as intervals; walk them in
    # order of start with a stack of the open ones.
    spans = sorted((e for e in events if e.get("ph") == "X" and not e.get("name", "").startswith("Total ")),
                   key=lambda e: (e.get("tid", 0), e["ts"], -e["dur"]))
    stack, open_keys = [], collections.Counter()
    for e in spans:
        e["_key"] = (e.get("name"), template_name(e.get("args", {}).get("detail", ""))
                     if e.get("name", "").startswith("Instantiate") else "")
        e["_child"] = 0
        while stack and (stack[-1].get("tid", 0) != e.get("tid", 0) or stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]):
            open_keys[stack.pop()["_key"]] -= 1
        if stack:
            stack[-1]["_child"] += e["dur"]
        # outermost of its name: not nested in an instantiation of the same template
        e["_outer"] = open_keys[e["_key"]] == 0
        open_keys[e["_key"]] += 1
        stack.append(e)

    totals = {e["name"]: e["dur"] / 1000.0 for e in events if e.get("name", "").startswith("Total ")}
    print("phase totals (ms):")
    for name, ms in sorted(totals.items(), key=lambda kv: -kv[1])[:16]:
        print(f"  {ms:10.0f}  {name[6:]}")

    # Self time of all instantiations by the namespace they live in (the
    # first two components of the name: ctg::check, ctg::ad, std, Eigen).
    spaces = collections.Counter()
    for e in spans:
        if e.get("name", "").startswith("Instantiate"):
            spaces["::".join(e["_key"][1].split("::")[:2]).split("<")[0]] += (e["dur"] - e["_child"]) / 1000.0
    print("\ninstantiation self time by namespace (ms):")
    for name, ms in spaces.most_common(8):
        print(f"  {ms:10.0f}  {name}")

    for kind in args.kind.split(","):
        groups = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])
        for e in spans:
            if e.get("name") != kind:
                continue
            detail = e.get("args", {}).get("detail", "")
            g = groups[e["_key"][1]]
            g[0] += 1
            g[1] += (e["dur"] - e["_child"]) / 1000.0
            if e["_outer"]:
                g[2] += e["dur"] / 1000.0
            g[3] = max(g[3], len(detail))
        n = sum(g[0] for g in groups.values())
        self_ms = sum(g[1] for g in groups.values())
        print(f"\n{kind}: {n} events, {self_ms:.0f} ms self, top {args.top} by self ms")
        print(f"  {'count':>6} {'self ms':>9} {'incl ms':>9} {'longest':>8}  template")
        for name, (count, ms, incl, longest) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:args.top]:
            print(f"  {count:6d} {ms:9.0f} {incl:9.0f} {longest:8d}  {name[:110]}")


if __name__ == "__main__":
    main()
