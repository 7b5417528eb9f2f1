#!/usr/bin/env bash
# Installs missing dependencies, then configures, builds (2 jobs) and runs
# every test with the `ci` preset (build tree: build/ci).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cmake --workflow --preset ci
