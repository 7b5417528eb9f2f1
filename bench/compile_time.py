#!/usr/bin/env python3
"""Compile-time benchmarks for ctgrad.

Generates one kernel of N operations (N = 10, 25, 50, 100, 200) in two
shapes and measures how long one translation unit takes to compile with
g++ -O2 and clang++ -O2 (or nvcc -O2, as CUDA for sm_90), in three modes:

  forward          k(x, y) on fields declared with ctg::grad (no k.grad call)
  forward-nograd   k(x, y) on fields without gradient buffers
  forward+adjoint  k(x, y) and k.grad(x, y)

and these shapes:

  expr    one expression N operations deep: y[i] = op_N(... op_1(x[i]))
  locals  N assignments to one local: v = op_k(v), then y[i] = v
  lets    the expr chain cut every 32 operations by a ctg::let: each
          let-local holds 32 operations and the next 32 start from it
          (not measured by default: `--shapes lets`). The same arithmetic
          as expr, written the way docs/05 *Keeping it down* recommends.
  args    the expr chain with its three constants passed as kernel
          arguments (float c1, c2, c3) instead of written as literals (not
          measured by default: `--shapes args`). g++ follows a literal's
          value through the copies of the tree to fold it; an argument's
          value it cannot see (docs/05, *Data in the tree*).
  captureless
          the expr chain in a lambda that captures nothing, `[]` rather than
          `[=]` (not measured by default: `--shapes captureless`), the way
          most kernels are written: its IR can be built in a constant
          expression, which the checks do only when they need its numbers
          (docs/05, *Checks that build the IR*).
  funcs   N/4 nested calls of a 4-operation func that uses its argument
          three times, around a let-block with a serial loop (not measured by
          default: `--shapes funcs`). A func's arguments are evaluated once,
          so this grows like the others; substituted by name it would
          copy the innermost block 3^(N/4) times.

plus a baseline translation unit that includes ctgrad and launches nothing.
Both CPU seconds (user + sys of the compiler) and wall seconds are recorded;
CPU seconds move less when other work shares the machine.
With --suite it also times the whole test suite's build from clean (the ci
preset, 2 jobs, ccache disabled) in a separate build tree.

Writes bench/results/compile_time.json and .csv, and draws the curve (CPU
seconds above the headers-alone build against operations, one line per shape
and compiler, forward + adjoint) into docs/images/ under the name of --out
(compile_time.svg, compile_time_full.svg). Usage:

  bench/compile_time.py [--sizes 10,25,50,100,200] [--compilers g++,clang++,nvcc] [--shapes expr,locals,lets,args]
                        [--modes forward+adjoint] [--suite]
  bench/compile_time.py --plot bench/results/compile_time_full.csv   (redraw only)
"""
import argparse
import csv
import datetime
import json
import math
import os
import platform
import resource
import shutil
import signal
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One operation of the chain: each wraps the previous expression `e` once, so
# the expression tree grows by one math node (and at most one leaf) per step.
OPS = [
    "ctg::sin({e})",
    "{e} * 1.01f",
    "{e} + x[i]",
    "ctg::cos({e})",
    "{e} - 0.5f",
    "ctg::tanh({e})",
    "{e} * x[i]",
    "ctg::exp({e} * 0.1f)",
]


# The constants of OPS, and the kernel parameters that stand for them in the
# args shape.
ARGUMENT_CONSTANTS = (("1.01f", "c1"), ("0.5f", "c2"), ("0.1f", "c3"))

MODES = ("forward", "forward-nograd", "forward+adjoint")


def kernel_source(n, shape, mode):
    if shape == "funcs":
        e = "smooth(x[i])"
        for _ in range(max(1, n // 4)):
            e = f"tri({e})"
        body = f"return y[i] = {e};"
        funcs = """
  auto smooth = ctg::func<"smooth">([](auto a) {
    return ctg::let(a, [=](auto s) {
      return ctg::block(ctg::serial_range(4, [=](auto) { return s = s * 0.5f + ctg::sin(s); }), ctg::result(s));
    });
  });
  auto tri = ctg::func<"tri">([](auto a) { return a * a * 0.25f + ctg::sin(a); });"""
    elif shape == "lets":
        # let(chain_0, [=](auto s0) { return let(chain_1(s0), [=](auto s1) { ... y[i] = chain_k(s); }); })
        segment, e, opened = 32, "x[i]", 0
        body = ""
        for start in range(0, n, segment):
            for k in range(start, min(start + segment, n)):
                e = OPS[k % len(OPS)].format(e=e)
            if start + segment < n:
                body += f"return ctg::let({e}, [=](auto s{opened}) {{\n        "
                e = f"s{opened}"
                opened += 1
        body += f"return y[i] = {e};" + "\n      });" * opened
    elif shape in ("expr", "args", "captureless"):
        e = "x[i]"
        for k in range(n):
            e = OPS[k % len(OPS)].format(e=e)
        if shape == "args":
            for literal, name in ARGUMENT_CONSTANTS:
                e = e.replace(literal, name)
        body = f"return y[i] = {e};"
    else:
        stmts = [f"v = {OPS[k % len(OPS)].format(e='v')}" for k in range(n)]
        stmts.append("y[i] = v")
        joined = ",\n          ".join(stmts)
        body = f"return ctg::let(x[i], [=](auto v) {{\n        return ctg::block(\n          {joined});\n      }});"
    if shape != "funcs":
        funcs = ""
    adjoint = mode == "forward+adjoint"
    params, values = "auto x, auto y", "x, y"
    if shape == "args":
        params += "".join(f", float {name}" for _, name in ARGUMENT_CONSTANTS)
        values += "".join(f", {literal}" for literal, _ in ARGUMENT_CONSTANTS)
    launch = (f"k({values});\n  y.grad().fill(1.0f);\n  k.grad({values});" if adjoint else f"k({values});")
    flags = "" if mode == "forward-nograd" else ", ctg::grad"
    capture = "" if shape == "captureless" else "="
    return f"""// Generated by bench/compile_time.py: {n} operations, shape {shape}, mode {mode}.
#include <ctgrad/ctgrad.hpp>

int main() {{
  ctg::field<float, 1{flags}> x({{1024}}, {{.name = "x"}}), y({{1024}}, {{.name = "y"}});{funcs}
  auto k = ctg::kernel<"chain">([{capture}]({params}) {{
    return ctg::range(x.size(), [=](auto i) {{
      {body}
    }});
  }});
  {launch}
  return y.at(0) > 0.0f ? 0 : 1;
}}
"""


BASELINE = """// Generated by bench/compile_time.py: the headers alone.
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 1, ctg::grad> x({1024}, {.name = "x"});
  return x.at(0) > 0.0f ? 0 : 1;
}
"""


# What CMakeLists.txt gives nvcc for the CUDA tests, for sm_90 (-x cu: the
# file is a .cpp).
NVCC_FLAGS = ["--expt-relaxed-constexpr", "--extended-lambda", "-diag-suppress=20012",
              "--generate-code=arch=compute_90,code=[sm_90]", "-x", "cu"]
# nvcc's front end has its own limit on nested instantiations.
NVCC_DEPTH_FLAGS = ("-Xcudafe", "--pending_instantiations=1000", "-ftemplate-depth=2048")


def compiler_flags(cxx):
    """The flags a compiler needs beyond -std=c++20 -O2: nvcc compiles the
    generated .cpp as CUDA (the backend's launches are instantiated for the
    device even on host fields); the host compilers need none."""
    return list(NVCC_FLAGS) if os.path.basename(cxx) == "nvcc" else []


def unlimited_stack():
    resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def compile_once(cxx, source, workdir, extra=(), timeout=None):
    """(wall seconds, cpu seconds, peak MiB, error): error is None, the first
    error line of a failed compile, or a note that it ran out of time."""
    path = os.path.join(workdir, "tu.cpp")
    with open(path, "w") as f:
        f.write(source)
    stack = "ulimit -s unlimited" in extra
    flags = [x for x in extra if x != "ulimit -s unlimited"]
    cmd = [cxx, "-std=c++20", "-O2", *compiler_flags(cxx), *flags, "-I", os.path.join(ROOT, "include"), "-isystem",
           "/usr/include/eigen3", "-c", path, "-o", os.path.join(workdir, "tu.o")]
    log_path = os.path.join(workdir, "compile.log")
    with open(log_path, "w") as log:
        start = time.perf_counter()
        # A new process group, so that a timeout stops the compiler proper too.
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=unlimited_stack if stack else None)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout and time.perf_counter() - start > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                timed_out = True
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - start
    # wait4's usage covers the driver and the compiler proper it waited for.
    error = None
    if timed_out:
        error = f"timed out after {timeout:.0f} s"
    elif os.WIFSIGNALED(status):
        error = f"compiler crashed (signal {os.WTERMSIG(status)})"
    elif os.waitstatus_to_exitcode(status) != 0:
        with open(log_path, errors="replace") as log:
            out = log.read()
        lines = [l for l in out.splitlines() if "error" in l] or out.splitlines()[-1:]
        error = lines[0][:400] if lines else "failed"
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, error


def compiler_version(cxx):
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except OSError:
        return None


def suite_build(workdir_name="build/compile-time-ci"):
    build = os.path.join(ROOT, workdir_name)
    shutil.rmtree(build, ignore_errors=True)
    env = dict(os.environ, CCACHE_DISABLE="1")
    subprocess.run(["cmake", "--preset", "ci", "-B", build], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    start = time.perf_counter()
    subprocess.run(["cmake", "--build", build, "-j", "2"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    shutil.rmtree(build, ignore_errors=True)
    return seconds


def _seconds(row):
    v = row.get("cpu_seconds")
    return float(v) if v not in (None, "") else None


def write_svg(rows, path, mode="forward+adjoint", title=None):
    """Ops against CPU seconds above the same compiler's headers-alone build,
    one line per (compiler, shape). Above the headers, because that is what a
    kernel adds to a build and what the growth targets are stated in; a
    compile that failed or ran out of time ends its line with a cross at the
    top of the plot."""
    base = {r["compiler"]: _seconds(r) for r in rows if r["shape"] == "baseline" and _seconds(r) is not None}
    lines = {}
    failed = {}
    for r in rows:
        if r["mode"] != mode or r["compiler"] not in base:
            continue
        key = (r["compiler"], r["shape"])
        sec = _seconds(r)
        # with a raised depth or stack a row repeats an (ops, mode): keep the one that compiled
        if sec is None:
            failed.setdefault(key, set()).add(int(r["ops"]))
        else:
            lines.setdefault(key, {})[int(r["ops"])] = max(sec - base[r["compiler"]], 0.0)
    for key, ops in failed.items():
        failed[key] = {n for n in ops if n not in lines.get(key, {})}
    if not lines:
        return False
    xmax = max(max(p) for p in lines.values())
    xmax = max([xmax] + [max(f) for f in failed.values() if f])
    ymax = max(max(p.values()) for p in lines.values()) * 1.08
    step = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000) if ymax / s <= 8)
    ymax = step * math.ceil(ymax / step)
    w, h, left, right, top, bottom = 760, 440, 70, 600, 50, 380

    def px(n):
        return left + (right - left) * n / xmax

    def py(sec):
        return bottom - (bottom - top) * sec / ymax

    colors = ["#2c7fb8", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e"]
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{(left + right) / 2}" y="24" text-anchor="middle" font-size="15">'
         f'{title or "compile time of one kernel, " + mode + ", -O2"}</text>',
         f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
         f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>']
    xstep = 50 if xmax > 100 else 25
    for n in range(0, xmax + 1, xstep):
        s.append(f'<line x1="{px(n):.1f}" y1="{bottom}" x2="{px(n):.1f}" y2="{top}" stroke="#eeeeee"/>')
        s.append(f'<text x="{px(n):.1f}" y="{bottom + 16}" text-anchor="middle">{n}</text>')
    y = 0
    while y <= ymax:
        s.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{right}" y2="{py(y):.1f}" stroke="#eeeeee"/>')
        s.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
        y += step
    s.append(f'<text x="{(left + right) / 2}" y="{bottom + 36}" text-anchor="middle">operations in the kernel</text>')
    s.append(f'<text x="18" y="{(top + bottom) / 2}" text-anchor="middle" transform="rotate(-90 18 '
             f'{(top + bottom) / 2})">CPU seconds above the headers alone</text>')
    # one colour per compiler; solid for expr, dashed for locals, dotted for lets, dash-dot for args,
    # long dashes for captureless
    compilers = sorted({key[0] for key in lines})
    for k, (key, pts) in enumerate(sorted(lines.items())):
        c = colors[compilers.index(key[0]) % len(colors)]
        dash = {"locals": ' stroke-dasharray="5 3"', "lets": ' stroke-dasharray="1.5 2.5"',
                "args": ' stroke-dasharray="8 2 2 2"', "captureless": ' stroke-dasharray="10 4"'}.get(key[1], "")
        xy = sorted(pts.items())
        s.append(f'<polyline points="{" ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in xy)}" fill="none" '
                 f'stroke="{c}" stroke-width="1.6"{dash}/>')
        for n, v in xy:
            s.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="3" fill="{c}"/>')
        for n in sorted(failed.get(key, ())):
            s.append(f'<text x="{px(n):.1f}" y="{top + 4}" text-anchor="middle" fill="{c}" font-size="14">×</text>')
        ly = top + 10 + 18 * k
        s.append(f'<line x1="{right + 14}" y1="{ly}" x2="{right + 40}" y2="{ly}" stroke="{c}" stroke-width="1.6"{dash}/>')
        s.append(f'<text x="{right + 46}" y="{ly + 4}">{key[0]} {key[1]}</text>')
    s.append("</svg>")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(s) + "\n")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,25,50,100,200")
    ap.add_argument("--compilers", default="g++,clang++")
    ap.add_argument("--shapes", default="expr,locals")
    ap.add_argument("--modes", default=",".join(MODES), help="which of " + ", ".join(MODES))
    ap.add_argument("--suite", action="store_true", help="also time the test suite's build from clean")
    ap.add_argument("--timeout", type=float, default=300, help="seconds after which one compile is stopped")
    ap.add_argument("--cxxflags", default="", help="more flags for every compile, headers included "
                                                 "(e.g. --param=ggc-min-heapsize=4194304, docs/05)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "compile_time"))
    ap.add_argument("--svg", help="where the curve goes (default docs/images/ named after --out, so that the "
                                  "short run and the --full run keep a curve each)")
    ap.add_argument("--plot", metavar="CSV", help="only redraw the SVG from a CSV this script wrote")
    args = ap.parse_args()
    if not args.svg:
        stem = os.path.basename(args.plot or args.out)
        args.svg = os.path.join(ROOT, "docs", "images", os.path.splitext(stem)[0] + ".svg")

    if args.plot:
        with open(args.plot, newline="") as f:
            rows = list(csv.DictReader(f))
        write_svg(rows, args.svg)
        print(f"wrote {args.svg}")
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    compilers = [c for c in args.compilers.split(",") if shutil.which(c)]
    shapes = args.shapes.split(",")
    modes = [m for m in MODES if m in args.modes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for cxx in compilers:
            timed_out = set()

            def one(shape, n, mode, source, extra=()):
                if (shape, n) in timed_out:
                    # A slower mode of this size already ran out of time;
                    # the others are no quicker.
                    rows.append({"compiler": cxx, "shape": shape, "ops": n, "mode": mode, "flags": " ".join(extra),
                                 "cpu_seconds": None, "wall_seconds": None, "peak_mib": None,
                                 "error": f"skipped: another mode timed out after {args.timeout:.0f} s"})
                    print(f"{cxx:8} {shape:8} {n:4} {mode:15} skipped (another mode of this size timed out)", flush=True)
                    return
                wall, cpu, mib, error = compile_once(cxx, source, work, extra, args.timeout)
                if error and error.startswith("timed out"):
                    timed_out.add((shape, n))
                rows.append({"compiler": cxx, "shape": shape, "ops": n, "mode": mode, "flags": " ".join(extra),
                             "cpu_seconds": None if error else round(cpu, 2),
                             "wall_seconds": None if error else round(wall, 2),
                             # a stopped compile's own usage is not reported back
                             "peak_mib": None if error and error.startswith("timed out") else round(mib),
                             "error": error})
                print(f"{cxx:8} {shape:8} {n:4} {mode:15} {' '.join(extra):22} "
                      + (f"FAILED: {error[:150]}" if error else
                         f"cpu {cpu:6.2f} s  wall {wall:6.2f} s  {mib:5.0f} MiB"), flush=True)
                # A kernel deeper than the compiler's default instantiation
                # depth fails; say what it takes with the depth raised.
                if error and "instantiation depth" in error and "-ftemplate-depth=4096" not in extra:
                    one(shape, n, mode, source, (*extra, "-ftemplate-depth=4096"))
                if error and "excessive recursion" in error and NVCC_DEPTH_FLAGS[1] not in extra:
                    one(shape, n, mode, source, (*extra, *NVCC_DEPTH_FLAGS))
                # clang++ recurses deeply enough on deep kernels to overflow
                # the default 8 MiB stack: say what it takes without the limit.
                if error and error.startswith("compiler crashed (signal 11)") and "ulimit -s unlimited" not in extra:
                    one(shape, n, mode, source, (*extra, "ulimit -s unlimited"))

            common = tuple(args.cxxflags.split())
            one("baseline", 0, "headers", BASELINE, common)
            for shape in shapes:
                for n in sizes:
                    for mode in modes:
                        one(shape, n, mode, kernel_source(n, shape, mode), common)

    result = {
        "what": "seconds to compile one translation unit holding one kernel of N operations (-std=c++20 -O2 -c); cpu = user + sys of the compiler",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip(),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "compilers": {c: compiler_version(c) for c in compilers},
        "results": rows,
    }
    if args.suite:
        print("timing the test suite's build from clean (ci preset, 2 jobs, CCACHE_DISABLE=1)...", flush=True)
        seconds = suite_build()
        result["test_suite_build"] = {"preset": "ci", "jobs": 2, "ccache": "disabled", "seconds": round(seconds, 1)}
        print(f"test suite build: {seconds:.1f} s", flush=True)

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(args.out + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["compiler", "shape", "ops", "mode", "flags", "cpu_seconds", "wall_seconds",
                                          "peak_mib", "error"])
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {args.out}.json and .csv")
    if write_svg(rows, args.svg):
        print(f"wrote {args.svg}")


if __name__ == "__main__":
    main()
