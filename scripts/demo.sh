#!/usr/bin/env bash
# Installs missing dependencies, builds the demo (Release, build/release) and
# runs it; arguments are passed to the demo.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target ctgrad_demo
exec build/release/examples/ctgrad_demo "$@"
