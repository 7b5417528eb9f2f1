#!/usr/bin/env bash
# The Python DLPack test: a virtual environment with NumPy and nanobind (and
# PyTorch's CPU build when it can be installed), the extension built against
# ctgrad's headers, then test_dlpack.py. Exits 77 (CTest: skipped) when the
# environment cannot be made, e.g. without network access to PyPI.
#
# usage: run.sh <python> <ctgrad include dir> <work dir> <dlpack include dir>
set -uo pipefail
python=$1 include=$2 work=$3 dlpack_include=$4
here=$(cd "$(dirname "$0")" && pwd)
venv=$work/venv

skip() {
  echo "python.dlpack skipped: $*"
  exit 77
}

mkdir -p "$work"
"$python" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
  skip "no Python headers for $python (Debian: python3-dev)"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" || skip "cannot create a virtual environment with $python"
fi
if ! "$venv/bin/python" -c "import numpy, nanobind" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check numpy nanobind ||
    skip "cannot install numpy and nanobind from PyPI"
fi
# PyTorch's CPU wheels live on its own index; without them the torch cases skip.
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  timeout 180 "$venv/bin/python" -m pip install -q --disable-pip-version-check --timeout 15 --retries 1 torch \
    --index-url https://download.pytorch.org/whl/cpu >/dev/null 2>&1 ||
    echo "python.dlpack: PyTorch's CPU build could not be installed; its cases skip"
fi

cmake -S "$here" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$venv/bin/python" \
  -Dnanobind_DIR="$("$venv/bin/python" -m nanobind --cmake_dir)" \
  -DCTGRAD_INCLUDE_DIR="$include" -DCTGRAD_DLPACK_INCLUDE_DIR="$dlpack_include" >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log"
  exit 1
}
cmake --build "$work/build" || exit 1
PYTHONPATH="$work/build" "$venv/bin/python" "$here/test_dlpack.py"
