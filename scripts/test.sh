#!/usr/bin/env bash
# Installs missing dependencies, then configures, builds (2 jobs) and runs:
#   ci        every test, optimised with the index checks on (build/ci);
#   sanitize  the unit and lowering tests under AddressSanitizer and UBSan at
#             -O1, index checks off so that a read out of range reaches ASan
#             (build/sanitize);
#   memcheck  the lowering tests at -O1 under valgrind (build/lowering).
# Prints how long each took.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
# Paths below the checkout are hashed relative to it, so that a clone in
# another directory reuses the compiler cache of this one.
export CCACHE_BASEDIR="$PWD"
for preset in ci sanitize memcheck; do
  start=$SECONDS
  cmake --workflow --preset "$preset"
  echo "test.sh: workflow '$preset' took $((SECONDS - start)) s"
done
