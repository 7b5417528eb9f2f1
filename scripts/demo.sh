#!/usr/bin/env bash
# Installs missing dependencies, builds the flagship example (a spring robot
# that learns to walk, examples/mass_spring.cpp) in Release mode (build/release)
# and runs it at its default size; its pictures go to build/pictures unless
# --out DIR is given. Other arguments are passed to the example (--quick,
# --iters N; --help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target example_mass_spring

out=build/pictures
args=("$@")
for ((k = 0; k < ${#args[@]}; ++k)); do
  if [[ "${args[k]}" == "--out" && $((k + 1)) -lt ${#args[@]} ]]; then out=${args[k + 1]}; fi
done
build/release/examples/example_mass_spring --out "$out" "$@"
echo
echo "The pictures (SVG, open them in a web browser) are in $out/:"
echo "  $out/mass_spring_final.svg  the robot walking to the target"
echo "  $out/mass_spring_loss.svg   the loss per gradient-descent iteration"
echo "More simulations: build/release/examples/example_{diffmpm,billiards,wave} after"
echo "  cmake --build --preset release --target example_diffmpm example_billiards example_wave"
