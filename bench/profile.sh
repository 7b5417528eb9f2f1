#!/usr/bin/env bash
# Instruction counts of every CPU workload variant on one thread, under
# valgrind's callgrind (counts do not drift with the machine's clock the way
# times do). Needs valgrind and a built bench_profile_counts (scripts/bench.sh
# builds it). Writes bench/results/instructions.csv; takes a few minutes.
#
#   bench/profile.sh [BUILD_DIR]     # default build/bench
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/bench}
prog=$build/bench/bench_profile_counts
command -v valgrind >/dev/null || { echo "profile.sh: valgrind is not installed" >&2; exit 1; }
[[ -x $prog ]] || { echo "profile.sh: $prog not built (cmake --build --preset bench --target bench_profile_counts)" >&2; exit 1; }

out=bench/results/instructions.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p bench/results
echo "workload,variant,instructions,elements,instructions_per_element" >"$out"
for w in launch map wave recurrence reduction springs mpm_p2g mpm_grid mpm_g2p; do
  for v in ctgrad_forward hand_forward ctgrad_adjoint hand_adjoint; do
    # The toggle names the wrapper the program calls the variant through.
    log=$(valgrind --tool=callgrind --collect-atstart=no '--toggle-collect=*measured*' \
      --callgrind-out-file="$tmp/cg.out" "$prog" "$w" "$v" 2>&1)
    ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$log")
    n=$(sed -n 's/.* elements \([0-9]*\)$/\1/p' <<<"$log")
    per=$(awk -v a="$ir" -v b="$n" 'BEGIN { printf "%.1f", a / b }')
    echo "$w,$v,$ir,$n,$per" | tee -a "$out"
  done
done
echo "wrote $out"
