#!/usr/bin/env python3
"""Runs one peer on the four workloads, in its own process (each peer sets
its threads before it starts, and the peers' runtimes stay apart), paired
with the C++ side in the same process:

  harness.py --peer jax --lib build/bench/bench/libbench_peers_native.so --out jax.json

For each workload: the C++ side builds the data and checks ctgrad's gradient
against the hand-written one; the peer builds its version from the same
inputs, runs it once (compilation) and twice more (warm-up), and its
gradient must match the hand-written one within a tolerance; then every
repetition runs the hand-written gradient, ctgrad's (in IEEE mode and with
subnormals flushed) and the peer's, in an order that rotates, and the result
is the median time of each and the median of the per-repetition ratios to
the hand-written time. bench/peers/run.py
runs this for every peer and writes the tables.
"""
import argparse
import importlib
import json
import os
import platform
import statistics
import sys
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import native  # noqa: E402

WORKLOADS = ["map", "wave", "springs", "recurrence"]
# Tolerances of the peers' gradients against the hand-written one, measured
# as in bench/cpu_support.hpp: |peer - hand| / (|hand| + 1e-3 max|hand|).
# Other sin/cos implementations, other orders of float sums (scatters, the
# wave's 200 steps).
RTOL = {"map": 1e-4, "wave": 2e-3, "springs": 1e-3, "recurrence": 1e-3}


def rel_error(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise ValueError(f"shape {got.shape}, reference {want.shape}")
    scale = np.max(np.abs(want))
    if not scale > 0 or not np.isfinite(scale):
        raise ValueError("the reference gradient is zero or not finite")
    err = np.abs(got - want) / (np.abs(want) + 1e-3 * scale)
    return float(np.max(err)) if np.all(np.isfinite(got)) else float("inf")


def timed(f):
    """Wall seconds and CPU seconds of the whole process (every thread the
    peer runs, and any that spin while they wait) of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    f()
    t1, c1 = time.perf_counter(), time.process_time()
    return t1 - t0, c1 - c0


def timed_native(w, system):
    c0 = time.process_time()
    wall = w.gradient_seconds(system)  # timed in C++, around the gradient alone
    return wall, time.process_time() - c0


def run_workload(peer, nat, name, threads, budget):
    w = nat.open(name, threads)
    out = {"inputs": {k: list(v.shape) for k, v in w.inputs.items()}, "scalars": w.scalars}
    t0 = time.perf_counter()
    gradient, result = peer.make(name, w.inputs, w.scalars)
    gradient()
    out["first_call_s"] = time.perf_counter() - t0  # compilation included
    for _ in range(2):
        gradient()
    got = result()
    errors = {k: rel_error(got[k], w.reference[k]) for k in w.reference}
    out["max_rel_error"] = errors
    out["rtol"] = RTOL[name]
    if not all(e <= RTOL[name] for e in errors.values()):
        out["error"] = f"gradient mismatch: {errors} (tolerance {RTOL[name]})"
        return out

    systems = {
        "hand": lambda: timed_native(w, native.HAND),
        "ctgrad": lambda: timed_native(w, native.CTGRAD),
        "ctgrad_flushed": lambda: timed_native(w, native.CTGRAD_FLUSHED),
        "peer": lambda: timed(gradient),
    }
    one_round = sum(f()[0] for f in systems.values())  # C++ warm-up, and an estimate of a round
    reps = int(min(31, max(7, budget / max(one_round, 1e-9))))
    wall = {s: [] for s in systems}
    cpu = {s: [] for s in systems}
    order = list(systems)
    for r in range(reps):
        for s in order[r % len(order):] + order[:r % len(order)]:
            t, c = systems[s]()
            wall[s].append(t)
            cpu[s].append(c)
    out["reps"] = reps
    for key, times in (("", wall), ("cpu_", cpu)):
        out[key + "median_ms"] = {s: 1e3 * statistics.median(t) for s, t in times.items()}
        out[key + "ratio_to_hand"] = {s: statistics.median(a / h for a, h in zip(times[s], times["hand"]))
                                      for s in systems if s != "hand"}
        out[key + "times_ms"] = {s: [round(1e3 * x, 4) for x in t] for s, t in times.items()}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", required=True, help="jax, warp, taichi or quadrants")
    ap.add_argument("--lib", required=True, help="the bench_peers_native module")
    ap.add_argument("--out", required=True)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--threads", type=int, default=1, help="threads of the C++ side")
    ap.add_argument("--budget", type=float, default=4.0, help="seconds of timed repetitions per workload")
    args = ap.parse_args()

    report = {"peer": args.peer, "python": platform.python_version(), "numpy": np.__version__}
    try:
        peer = importlib.import_module(f"peer_{args.peer}")
        report["name"] = peer.NAME
        report["versions"], report["threads"] = peer.init()
    except Exception as e:  # not installed, or it does not start here
        report["skipped"] = f"{type(e).__name__}: {e}"
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"{args.peer}: skipped ({report['skipped']})")
        return 0

    # Whether the peer's kernels flush subnormals to zero (1e-20 * 1e-20
    # computed by one of them: 1e-40 is subnormal in float32), and whether
    # starting it left this thread, which calls the C++ side, flushing too.
    try:
        report["flushes_subnormals"] = bool(peer.subnormal_product() == 0.0)
    except Exception as e:
        report["subnormal_probe_error"] = f"{type(e).__name__}: {e}"
    report["leaves_thread_flushing"] = bool(np.float32(1e-20) * np.float32(1e-20) == 0.0)
    nat = native.Native(args.lib)
    report["workloads"] = {}
    for name in args.workloads.split(","):
        try:
            r = run_workload(peer, nat, name, args.threads, args.budget)
        except Exception:
            r = {"error": traceback.format_exc(limit=3)}
        report["workloads"][name] = r
        report["cpp"] = nat.info()  # after a workload set the C++ side's threads
        if "error" in r:
            print(f"{report['name']} {name}: {r['error']}")
        else:
            m = r["median_ms"]
            q = r["cpu_ratio_to_hand"]
            print(f"{report['name']} {name}: hand {m['hand']:.2f} ms, ctgrad {r['ratio_to_hand']['ctgrad']:.2f}x "
                  f"(CPU time {q['ctgrad']:.2f}x), flushed {r['ratio_to_hand']['ctgrad_flushed']:.2f}x, "
                  f"{report['name']} {r['ratio_to_hand']['peer']:.2f}x "
                  f"(CPU time {q['peer']:.2f}x, {m['peer']:.2f} ms), "
                  f"max error {max(r['max_rel_error'].values()):.1e}, {r['reps']} reps")
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if any("error" in r for r in report["workloads"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
