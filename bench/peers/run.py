#!/usr/bin/env python3
"""Runs every peer (JAX, Warp, Taichi, Quadrants) against ctgrad and the
hand-written C++ on the four workloads, each peer in its own process
(harness.py), and writes into the results folder:

  peers.json   everything measured, with versions and thread settings
  peers.md     the table docs/05-performance.md shows
  peers.svg    ratio to the hand-written code per workload and system

  run.py --lib build/bench/bench/libbench_peers_native.so [--out bench/results] [--peers jax,warp]
         [--name peers]

--name names the three files (another build of the C++ side writes its own).

scripts/bench.sh --peers sets up the virtual environment and calls this.
"""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEERS = ["jax", "warp", "taichi", "quadrants"]
WORKLOADS = [
    ("map", "map `y = sin(x) x`", "4M"),
    ("wave", "1-D wave, every step stored", "16K cells × 200 steps"),
    ("springs", "2-D spring force scatter", "64K masses, 256K springs"),
    ("recurrence", "carried recurrence `v = sin(v) a + x b`", "256K × 64"),
]
# ctgrad's systems in the harness's reports, and their columns: in IEEE mode,
# and with subnormals flushed (ctg::set_flush_subnormals).
CTGRAD_SYSTEMS = {"ctgrad": "ctgrad", "ctgrad_flushed": "ctgrad, flushed"}
COLORS = {"ctgrad": "#1f77b4", "ctgrad, flushed": "#7fb2dc", "JAX": "#ff7f0e", "Warp": "#2ca02c",
          "Taichi": "#d62728", "Quadrants": "#9467bd"}


def git_hash():
    try:
        h = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "include", "bench", ":!bench/results"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return h + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_peer(peer, lib, budget, scratch):
    out = os.path.join(scratch, f"{peer}.json")
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ, OMP_NUM_THREADS="1", CTG_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, os.path.join(HERE, "harness.py"), "--peer", peer, "--lib", lib, "--out", out,
           "--budget", str(budget)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        print("  " + line)
    report = None
    if os.path.exists(out):
        with open(out) as f:
            report = json.load(f)
    if report is None or (proc.returncode != 0 and "workloads" not in report):
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        report = {"peer": peer, "skipped": f"the peer's process failed (exit {proc.returncode}): {tail}"}
        print(f"  {peer}: {report['skipped']}")
    elif proc.returncode != 0:
        report.setdefault("stderr_tail", "\n".join(proc.stderr.strip().splitlines()[-10:]))
    return report


def aggregate(reports):
    """Per workload: the hand-written time, ctgrad's ratio (pooled over the
    peers' processes) and each peer's ratio, by CPU time and by wall time."""
    results = {}
    for w, _, _ in WORKLOADS:
        row = {"hand_ms": [], "hand_cpu_ms": [], "ratio": {}, "cpu_ratio": {}, "ms": {}, "notes": {}}
        ours = {key: ([], []) for key in CTGRAD_SYSTEMS}  # per-repetition ratios: wall, CPU
        for r in reports:
            wr = r.get("workloads", {}).get(w)
            if not wr:
                continue
            name = r["name"]
            if "error" in wr:
                row["notes"][name] = wr["error"].strip().splitlines()[-1]
                continue
            row["hand_ms"].append(wr["median_ms"]["hand"])
            row["hand_cpu_ms"].append(wr["cpu_median_ms"]["hand"])
            row["ratio"][name] = wr["ratio_to_hand"]["peer"]
            row["cpu_ratio"][name] = wr["cpu_ratio_to_hand"]["peer"]
            row["ms"][name] = wr["median_ms"]["peer"]
            t, c = wr["times_ms"], wr["cpu_times_ms"]
            for key, (wall, cpu) in ours.items():
                if key in t:
                    wall += [a / h for a, h in zip(t[key], t["hand"])]
                    cpu += [a / h for a, h in zip(c[key], c["hand"]) if h > 0]
        for key, (wall, cpu) in ours.items():
            if wall:
                row["ratio"][CTGRAD_SYSTEMS[key]] = statistics.median(wall)
                row["cpu_ratio"][CTGRAD_SYSTEMS[key]] = statistics.median(cpu)
        row["hand_ms"] = statistics.median(row["hand_ms"]) if row["hand_ms"] else None
        row["hand_cpu_ms"] = statistics.median(row["hand_cpu_ms"]) if row["hand_cpu_ms"] else None
        results[w] = row
    return results


def systems_of(reports):
    return list(CTGRAD_SYSTEMS.values()) + [r.get("name", r["peer"]) for r in reports]


def fmt(x):
    if x is None:
        return "—"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def table(context, reports, results):
    systems = systems_of(reports)
    lines = [
        f"Run: {context['date']}, {context['cpu']} ({context['cpus']} CPUs), load average "
        f"{context['load_start']} at the start and {context['load_end']} at the end; git {context['git']}; "
        f"C++: {context['cpp'].get('compiler', '?')}, `{context['cpp'].get('flags', '?')}`, "
        f"{context['cpp'].get('threads', '?')} thread; Python {context['python']}, NumPy {context['numpy']}.",
        "",
        "Ratio of each system's gradient time (clear the gradients, then the value and the gradient) to the "
        "hand-written C++ gradient on the same data (one loop for the value and the gradient of the map and the "
        "recurrence, forward then adjoint for the others), median over repetitions in which all ran alternately in one process; "
        "CPU time of the whole process first, wall time in parentheses. Below 1: faster than the hand-written code. "
        "The hand-written C++ and the *ctgrad* column keep IEEE subnormals; *ctgrad, flushed* "
        "(`ctg::set_flush_subnormals(true)`) and the peers whose kernels flush them (the last table) set them to "
        "zero, and a gradient that decays through them (the recurrence's) runs much faster so.",
        "",
        "| workload | size | hand-written ms | " + " | ".join(systems) + " |",
        "|---|---|---:|" + "---:|" * len(systems),
    ]
    for w, label, size in WORKLOADS:
        row = results[w]
        cells = []
        for s in systems:
            if s in row["cpu_ratio"]:
                cells.append(f"{fmt(row['cpu_ratio'][s])} ({fmt(row['ratio'][s])})")
            elif s in row["notes"]:
                cells.append("failed¹")
            else:
                cells.append("—")
        lines.append(f"| {label} | {size} | {fmt(row['hand_ms'])} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| system | version | threads | subnormals | notes |")
    lines.append("|---|---|---|---|---|")
    version = context['cpp'].get('ctgrad_version', '?')
    lines.append(f"| ctgrad | {version} | ctg::set_num_threads(1) | IEEE (the default) | |")
    lines.append(f"| ctgrad, flushed | {version} | ctg::set_num_threads(1) | flushed: "
                 "`ctg::set_flush_subnormals(true)` | |")
    for r in reports:
        name = r.get("name", r["peer"])
        if "skipped" in r:
            lines.append(f"| {name} | — | — | — | skipped: {r['skipped'].splitlines()[0]} |")
            continue
        versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        notes = "; ".join(f"{w}: {wr['error'].strip().splitlines()[-1]}" for w, wr in r["workloads"].items()
                          if "error" in wr)
        mode = {True: "flushed", False: "IEEE"}.get(r.get("flushes_subnormals"), "?")
        if r.get("leaves_thread_flushing"):
            mode += " (and leaves the calling thread flushing)"
        lines.append(f"| {name} | {versions} | `{r['threads']}` | {mode} | {notes} |")
    if any(results[w]["notes"] for w, _, _ in WORKLOADS):
        lines.append("")
        lines.append("¹ The gradient did not match the hand-written one, or the peer failed; see the notes above.")
    return "\n".join(lines) + "\n"


def svg(reports, results):
    """Grouped bars on a log scale: ratio (CPU time) to the hand-written code."""
    systems = systems_of(reports)
    values = [results[w]["cpu_ratio"].get(s) for w, _, _ in WORKLOADS for s in systems]
    present = [v for v in values if v]
    lo = 2.0 ** math.floor(math.log2(min(present + [1.0]) / 1.05))
    hi = 2.0 ** math.ceil(math.log2(max(present + [1.0]) * 1.05))
    width, height, left, right, top, bottom = 760, 360, 60, 150, 30, 60
    plot_w, plot_h = width - left - right, height - top - bottom

    def y(v):
        return top + plot_h * (1 - (math.log2(v) - math.log2(lo)) / (math.log2(hi) - math.log2(lo)))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="13">Gradient time / hand-written C++ (CPU time, 1 thread, log scale)'
           f'</text>']
    v = lo
    while v <= hi * 1.0001:
        yy = y(v)
        out.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + plot_w}" y2="{yy:.1f}" '
                   f'stroke="{"#444" if v == 1 else "#ddd"}" stroke-width="{1.5 if v == 1 else 1}"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{v:g}</text>')
        v *= 2
    group_w = plot_w / len(WORKLOADS)
    bar_w = group_w * 0.8 / len(systems)
    for g, (w, label, _) in enumerate(WORKLOADS):
        x0 = left + g * group_w + group_w * 0.1
        for k, s in enumerate(systems):
            r = results[w]["cpu_ratio"].get(s)
            x = x0 + k * bar_w
            if not r:
                out.append(f'<text x="{x + bar_w / 2:.1f}" y="{y(1) - 4:.1f}" text-anchor="middle" '
                           f'font-size="10" fill="#888">n/a</text>')
                continue
            y1, y0 = sorted((y(r), y(1)))
            out.append(f'<rect x="{x:.1f}" y="{y1:.1f}" width="{bar_w * 0.9:.1f}" height="{max(y0 - y1, 1):.1f}" '
                       f'fill="{COLORS.get(s, "#7f7f7f")}"><title>{s} {w}: {r:.2f}</title></rect>')
            ty = y(r) - 3 if r >= 1 else y(r) + 11
            out.append(f'<text x="{x + bar_w * 0.45:.1f}" y="{ty:.1f}" text-anchor="middle" font-size="9">'
                       f'{fmt(r)}</text>')
        out.append(f'<text x="{left + g * group_w + group_w / 2:.1f}" y="{top + plot_h + 18}" '
                   f'text-anchor="middle">{w}</text>')
    for k, s in enumerate(systems):
        ly = top + 10 + 20 * k
        out.append(f'<rect x="{left + plot_w + 20}" y="{ly - 10}" width="12" height="12" '
                   f'fill="{COLORS.get(s, "#7f7f7f")}"/>')
        out.append(f'<text x="{left + plot_w + 38}" y="{ly}">{s}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def load_average():
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="the bench_peers_native module")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--budget", type=float, default=4.0, help="seconds of timed repetitions per workload and peer")
    ap.add_argument("--name", default="peers", help="the result files' name, before .json, .md and .svg")
    args = ap.parse_args()
    lib = os.path.abspath(args.lib)
    scratch = os.path.join(ROOT, "build", "peers")
    os.makedirs(scratch, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)

    sys.path.insert(0, HERE)
    import numpy
    import native

    context = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "load_start": load_average(),
        "git": git_hash(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }
    cpp = native.Native(lib).info()
    print(f"peers: C++ {cpp['compiler']}, flags {cpp['flags']}; Python {context['python']}")
    reports = []
    for peer in args.peers.split(","):
        print(f"peers: {peer}")
        r = run_peer(peer, lib, args.budget, scratch)
        if "versions" in r:
            print(f"  versions: {r['versions']}; threads: {r['threads']}")
        reports.append(r)
    context["load_end"] = load_average()
    context["cpp"] = next((r["cpp"] for r in reports if "cpp" in r), cpp)
    results = aggregate(reports)
    with open(os.path.join(args.out, args.name + ".json"), "w") as f:
        json.dump({"context": context, "results": results, "reports": reports}, f, indent=1)
    md = table(context, reports, results)
    with open(os.path.join(args.out, args.name + ".md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, args.name + ".svg"), "w") as f:
        f.write(svg(reports, results))
    print(md)
    failed = [f"{r.get('name', r['peer'])} {w}" for r in reports for w, wr in r.get("workloads", {}).items()
              if "error" in wr]
    if failed:
        print("peers: failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
