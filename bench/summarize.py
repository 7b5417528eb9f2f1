#!/usr/bin/env python3
"""Turns the JSON and CSV files scripts/bench.sh leaves in bench/results/ into
the Markdown tables docs/05-performance.md shows (bench/results/summary.md).

  bench/summarize.py [RESULTS_DIR]
"""
import csv
import json
import os
import re
import sys

RESULTS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def load(name):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def runtime_tables(out):
    runs = {}
    context = None
    for name in ("cpu_workloads.json", "cpu_workloads_sim.json"):
        data = load(name)
        if not data:
            continue
        context = context or data["context"]
        for b in data["benchmarks"]:
            m = re.match(r"BM_(\w+?)_(forward|adjoint)/threads:(\d+)", b["name"])
            if not m:
                continue
            workload, which, threads = m.group(1), m.group(2), int(m.group(3))
            runs[(workload, which, threads)] = b
    if not runs:
        return
    c = context
    out.append(f"Run: {c.get('date')}, host {c.get('host_name')}, {c.get('num_cpus')} CPUs at {c.get('mhz_per_cpu')} MHz, "
               f"load average at start {', '.join(f'{x:.2f}' for x in c.get('load_avg', []))}; "
               f"{c.get('compiler', '?')}, flags `{c.get('flags', '?')}`; git {c.get('git_hash', '?')}.\n")
    threads = sorted({k[2] for k in runs})
    head = "| workload |"
    rule = "|---|"
    for t in threads:
        head += f" fwd ctgrad ms ({t}t) | fwd ratio ({t}t) | adj ctgrad ms ({t}t) | adj ratio ({t}t) | adj/fwd ({t}t) |"
        rule += "---:|---:|---:|---:|---:|"
    out += [head, rule]
    order = ["map", "wave", "springs", "recurrence", "reduction", "mpm"]
    for w in order + sorted({k[0] for k in runs} - set(order)):
        if not any(k[0] == w for k in runs):
            continue
        row = f"| {w} |"
        for t in threads:
            f = runs.get((w, "forward", t))
            a = runs.get((w, "adjoint", t))
            row += (f" {fmt(f['real_time'] if f else None)} | {fmt(f and f.get('ratio_ctgrad_over_hand_forward'))} |"
                    f" {fmt(a['real_time'] if a else None)} | {fmt(a and a.get('ratio_ctgrad_over_hand_adjoint'))} |"
                    f" {fmt(a and a.get('ratio_adjoint_over_forward'))} |")
        out.append(row)
    out.append("")
    for (w, which, key, what) in (("wave", "adjoint", "ratio_ctgrad_over_hand_scatter_adjoint",
                                   "wave adjoint against the hand-written scatter with atomics (ctgrad's structure)"),
                                  ("reduction", "forward", "ratio_ctgrad_over_hand_atomic_forward",
                                   "reduction forward against hand-written code with one atomic add per element")):
        vals = [f"{fmt(runs[(w, which, t)].get(key))} ({t}t)" for t in threads if (w, which, t) in runs and key in runs[(w, which, t)]]
        if vals:
            out.append(f"- {what}: {', '.join(vals)}")
    out.append("")
    out.append("Ratios are ctgrad time over hand-written time summed over the same paired iterations; "
               "adj/fwd is ctgrad's adjoint over ctgrad's forward (the hand-written code's own adj/fwd is in the JSON, "
               "`hand_ratio_adjoint_over_forward`).\n")


def gradient_table(out):
    data = load("cpu_workloads.json")
    if not data:
        return
    runs = {}
    for b in data["benchmarks"]:
        m = re.match(r"BM_(\w+?)_gradient/threads:(\d+)", b["name"])
        if m:
            runs[(m.group(1), int(m.group(2)))] = b
    if not runs:
        return
    out.append("## Value and gradient\n")
    out.append("| workload | threads | one sweep | ctgrad value_and_grad ms | / hand one pass | ctgrad k() + k.grad() / hand one pass |"
               " hand two passes / hand one pass |")
    out.append("|---|---:|---|---:|---:|---:|---:|")
    for (w, t) in sorted(runs, key=lambda k: (["map", "recurrence", "reduction"].index(k[0])
                                             if k[0] in ("map", "recurrence", "reduction") else 9, k[1])):
        b = runs[(w, t)]
        out.append(f"| {w} | {t} | {'yes' if b.get('one_sweep') else 'no'} | {fmt(b['real_time'])} |"
                   f" {fmt(b.get('ratio_ctgrad_over_hand_gradient'))} | {fmt(b.get('ratio_two_launches_over_hand_gradient'))} |"
                   f" {fmt(b.get('hand_ratio_two_passes_over_one'))} |")
    out.append("")


def adolc_table(out):
    data = load("cpu_adolc.json")
    if not data:
        out.append("ADOL-C: not run (not installed, or the benchmark skipped).\n")
        return
    out += ["| workload (1 thread, double) | ctgrad fwd+adj ms | ADOL-C / ctgrad (tape reused) | ADOL-C / ctgrad (retaped) |",
            "|---|---:|---:|---:|"]
    for b in data["benchmarks"]:
        name = b["name"].split("/")[0].replace("BM_adolc_", "")
        out.append(f"| {name} | {fmt(b['real_time'], 3)} | {fmt(b.get('ratio_adolc_over_ctgrad'))} |"
                   f" {fmt(b.get('ratio_adolc_retape_over_ctgrad'))} |")
    out.append(f"\nADOL-C {data['context'].get('adolc', '?')}.\n")


def alloc_table(out):
    data = load("alloc_count.json")
    if not data:
        return
    out += ["| kernel | threads | allocations in k(...) | allocations in k.grad(...) | sizes in k.grad (bytes: count) |",
            "|---|---:|---:|---:|---|"]
    for r in data["runs"]:
        sizes = ", ".join(f"{s}: {n}" for s, n in r["grad"]["sizes"].items()) or "—"
        out.append(f"| {r['kernel']} | {r['threads']} | {r['forward']['allocations']} | {r['grad']['allocations']} | {sizes} |")
    out.append("")


def cell(mine):
    """One compile: seconds, or what stopped it (and the time with a raised
    instantiation depth, when that was tried)."""
    if not mine:
        return "—"
    plain = next((r for r in mine if not r.get("flags")), mine[0])
    error = plain.get("error")
    if not error:
        return fmt(plain["cpu_seconds"])
    if error.startswith("timed out") or error.startswith("skipped"):
        return "> " + error.split("after ")[-1].split(" ")[0] + " s"
    retry = next((r for r in mine if r.get("flags") and not r.get("error")), None)
    mark = "¹" if "instantiation depth" in error else "²" if error.startswith("compiler crashed") else ""
    if retry:
        return f"fails{mark} ({fmt(retry['cpu_seconds'])} with `{retry['flags']}`)"
    return f"fails{mark}"


def compile_tables(out, name="compile_time.json"):
    data = load(name)
    if not data:
        return
    rows = data["results"]
    compilers = list(dict.fromkeys(r["compiler"] for r in rows))
    modes = ["forward-nograd", "forward", "forward+adjoint"]
    out.append(f"Compile times ({data['date']}, git {data['git']}, load average at start "
               f"{', '.join(f'{x:.2f}' for x in data['load_average_at_start'])}); CPU seconds of one `-O2 -c`, "
               "wall seconds in the JSON.\n")
    for c in compilers:
        base = next((r for r in rows if r["compiler"] == c and r["shape"] == "baseline"), None)
        out.append(f"{c} ({data['compilers'].get(c)}); headers alone: {fmt(base and base['cpu_seconds'])} s\n")
        shapes = [s for s in dict.fromkeys(r["shape"] for r in rows) if s != "baseline"]
        head = "| ops |" + "".join(f" {s} {m} |" for s in shapes for m in modes)
        out += [head, "|---:|" + "---:|" * (len(shapes) * len(modes))]
        for n in sorted({r["ops"] for r in rows if r["ops"]}):
            cells = []
            for s in shapes:
                for m in modes:
                    mine = [r for r in rows if r["compiler"] == c and r["shape"] == s and r["ops"] == n and r["mode"] == m]
                    cells.append(cell(mine))
            out.append(f"| {n} | " + " | ".join(cells) + " |")
        out.append("")
    if any("instantiation depth" in (r.get("error") or "") for r in rows):
        out.append("¹ template instantiation depth exceeds the compiler's default (g++: 900).\n")
    if any((r.get("error") or "").startswith("compiler crashed") for r in rows):
        out.append("² the compiler crashed (SIGSEGV: its recursion overflows the default 8 MiB stack).\n")
    if "test_suite_build" in data:
        t = data["test_suite_build"]
        out.append(f"Test suite build from clean (preset {t['preset']}, {t['jobs']} jobs, ccache {t['ccache']}): "
                   f"{t['seconds']:.0f} s.\n")


def instruction_table(out):
    path = os.path.join(RESULTS, "instructions.csv")
    if not os.path.exists(path):
        return
    with open(path) as f:
        rows = list(csv.DictReader(f))
    per = {(r["workload"], r["variant"]): float(r["instructions_per_element"]) for r in rows}
    out += ["| workload | ctgrad fwd | hand fwd | ratio | ctgrad adj | hand adj | ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
    for w in dict.fromkeys(r["workload"] for r in rows):
        g = lambda v: per.get((w, v))
        ratio = lambda a, b: a / b if a and b else None
        out.append(f"| {w} | {fmt(g('ctgrad_forward'), 1)} | {fmt(g('hand_forward'), 1)} |"
                   f" {fmt(ratio(g('ctgrad_forward'), g('hand_forward')))} | {fmt(g('ctgrad_adjoint'), 1)} |"
                   f" {fmt(g('hand_adjoint'), 1)} | {fmt(ratio(g('ctgrad_adjoint'), g('hand_adjoint')))} |")
    out.append("\nInstructions per element on one thread (callgrind; `launch` is per launch).\n")


def main():
    out = ["# Benchmark summary", "", "## Runtime (CPU)", ""]
    runtime_tables(out)
    gradient_table(out)
    out += ["## ADOL-C", ""]
    adolc_table(out)
    out += ["## Heap allocations", ""]
    alloc_table(out)
    out += ["## Compile time", ""]
    compile_tables(out)
    if load("compile_time_full.json"):
        out += ["### Compile time, full run (scripts/bench.sh --full)", ""]
        compile_tables(out, "compile_time_full.json")
    out += ["## Instruction counts", ""]
    instruction_table(out)
    text = "\n".join(out) + "\n"
    with open(os.path.join(RESULTS, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
