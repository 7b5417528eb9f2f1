#!/usr/bin/env bash
# Installs missing dependencies, then configures, builds (2 jobs) and runs:
#   ci        every test, with the index checks on (build/ci): the unit and
#             lowering tests at -O1 under AddressSanitizer and UBSan, all else
#             at -O2;
#   memcheck  the lowering tests at -O1 under valgrind (build/lowering).
# Prints how long each took. The unit tests are built once: a second build of
# them (the `sanitize` preset, index checks off) would double the run.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
# Paths below the checkout are hashed relative to it, so that a clone in
# another directory reuses the compiler cache of this one.
export CCACHE_BASEDIR="$PWD"
for preset in ci memcheck; do
  start=$SECONDS
  cmake --workflow --preset "$preset"
  echo "test.sh: workflow '$preset' took $((SECONDS - start)) s"
done
