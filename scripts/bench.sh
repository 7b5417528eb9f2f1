#!/usr/bin/env bash
# Builds the CPU benchmarks (preset bench, build tree build/bench) and runs
# them, writing JSON and CSV into bench/results/ and the tables of
# docs/05-performance.md into bench/results/summary.md:
#
#   cpu_workloads.json, cpu_workloads_sim.json   ctgrad vs hand-written, paired timing
#   launch_overhead.json                         the thread pool's cost per launch, 1 vs 2 threads
#   thread_scaling.json                          ctgrad and hand-written on 1 and 2 threads, paired
#   machine_scaling.json                         what a second thread gives on this machine, apart
#                                                from ctgrad (arithmetic in L1, in L2, a stream)
#   tape_inplace.json                            the tape's saving rate against memcpy, and in-place
#                                                rollouts against state indexed by the step
#   interleave.json                              the recurrence with its iterations interleaved, against
#                                                hand-written loops one element at a time and interleaved
#   vector_math.json                             the map with CTG_VECTOR_MATH, against hand-written
#                                                loops with scalar and with vector functions
#   cpu_adolc.json                               ctgrad vs ADOL-C (when libadolc-dev is installed)
#   alloc_count.json                             heap allocations inside launches
#   compile_time.json/.csv                       compile seconds of generated kernels
#   compile_time_full.json/.csv                  the same with --full: more sizes and shapes,
#                                                and the test suite's build from clean
#
# Under 15 minutes on 2 cores (the compile-time part: kernels of 10 to 100
# operations, expression shape). Options:
#   --quick       runtime benchmarks only, shorter minimum time per benchmark
#   --no-compile  leave the compile-time results as they are
#   --full        compile-time also at 200 operations and in the locals shape,
#                 the test suite's build from clean, and the instruction counts
#                 (bench/profile.sh, valgrind): about an hour more
#   --peers       only the peer comparison (bench/peers/): the four workloads in
#                 JAX, Warp, Taichi and Quadrants against ctgrad and the
#                 hand-written C++, into peers.json, peers.md and peers.svg, then
#                 again with the C++ side built for this machine with vector math
#                 (-march=native -DCTG_VECTOR_MATH=1) into peers_vector_native.*. The
#                 peers are installed with pip into build/peers-venv (a peer that
#                 does not install is skipped, with the reason); nothing else of
#                 the project needs them. About 20 minutes, plus the installs.
# The GPU benchmarks are not run here: scripts/gpu-check runs them.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
full=0
compile=1
peers=0
for a in "$@"; do
  case $a in
    --quick) quick=1 compile=0 ;;
    --no-compile) compile=0 ;;
    --full) full=1 ;;
    --peers) peers=1 ;;
    *) echo "usage: scripts/bench.sh [--quick | --no-compile | --full | --peers]" >&2; exit 2 ;;
  esac
done

if ((peers)); then
  scripts/deps.sh
  cmake --preset bench >/dev/null
  cmake --build --preset bench --target bench_peers_native bench_peers_native_vector
  venv=build/peers-venv
  if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv" || { echo "bench.sh: python3 -m venv failed: no peer can be run" >&2; exit 1; }
  fi
  py=$venv/bin/python
  "$py" -m pip install -q --disable-pip-version-check numpy
  for pkg in "jax[cpu]" warp-lang taichi quadrants; do
    if ! "$py" -m pip install -q --disable-pip-version-check "$pkg"; then
      echo "bench.sh: pip could not install $pkg: its peer will be reported as skipped"
    fi
  done
  "$py" bench/peers/run.py --lib build/bench/bench/libbench_peers_native.so --out bench/results
  # Again, the C++ side built for this machine with vector math (the peers compile for it too).
  "$py" bench/peers/run.py --lib build/bench/bench/libbench_peers_native_vector.so --out bench/results \
    --name peers_vector_native
  echo "bench.sh: results in bench/results/peers.{json,md,svg} and peers_vector_native.{json,md,svg}"
  exit 0
fi

scripts/deps.sh
if ! dpkg-query -W -f='${Status}' libadolc-dev 2>/dev/null | grep -q "ok installed"; then
  echo "bench.sh: ADOL-C (libadolc-dev) is not installed: the ADOL-C comparison will be skipped"
fi
cmake --preset bench >/dev/null
cmake --build --preset bench --target bench_cpu_workloads bench_cpu_workloads_sim bench_cpu_adolc \
  bench_alloc_count bench_profile_counts bench_launch_overhead bench_thread_scaling bench_machine_scaling \
  bench_tape_inplace bench_views_strided bench_interleave bench_vector_math

out=bench/results
bin=build/bench/bench
mkdir -p "$out"
git_hash=$(git rev-parse --short HEAD)
if [[ -n $(git status --porcelain -- include bench ':!bench/results') ]]; then git_hash="$git_hash-dirty"; fi
args=(--benchmark_out_format=json "--benchmark_context=git_hash=$git_hash")
if ((quick)); then args+=(--benchmark_min_time=0.1); fi

for b in cpu_workloads cpu_workloads_sim launch_overhead thread_scaling machine_scaling tape_inplace views_strided \
  interleave vector_math; do
  "$bin/bench_$b" "--benchmark_out=$out/$b.json" "${args[@]}"
done
# Exit status 77: built without ADOL-C (it says so).
rc=0
"$bin/bench_cpu_adolc" "--benchmark_out=$out/cpu_adolc.json" "${args[@]}" || rc=$?
if ((rc == 77)); then rm -f "$out/cpu_adolc.json"; elif ((rc != 0)); then exit "$rc"; fi
"$bin/bench_alloc_count" >"$out/alloc_count.json"

if ((compile)); then
  if ((full)); then
    bench/compile_time.py --shapes expr,locals --sizes 10,25,50,100,200 --suite --out "$out/compile_time_full"
  else
    bench/compile_time.py --shapes expr --sizes 10,25,50,100
  fi
fi
if ((full)); then bench/profile.sh; fi

bench/summarize.py >/dev/null
echo "bench.sh: results in $out/ (tables: $out/summary.md)"
