#!/usr/bin/env bash
# Installs the Debian packages ctgrad needs to build and test, if any is
# missing. Quiet and does nothing when all are present.
set -euo pipefail

# libdlpack-dev: dlpack.h, for ctg::to_dlpack / ctg::from_dlpack (include/ctgrad/dlpack.hpp).
# valgrind: the memcheck workflow of scripts/test.sh (and bench/profile.sh).
packages=(cmake ninja-build g++ ccache libeigen3-dev doctest-dev libbenchmark-dev valgrind clang-14 clang-19 libdlpack-dev)
# OpenMPI: the optional ctgrad::mpi component and its tests (ctest -L mpi).
packages+=(libopenmpi-dev openmpi-bin)
# python3-venv, python3-dev: the test python.dlpack (a nanobind extension in a
# virtual environment; NumPy and nanobind come from PyPI, never the headers).
packages+=(python3-venv python3-dev)
# Optional, not installed here: libadolc-dev (the ADOL-C comparison in
# bench/cpu_adolc.cpp, skipped without it).

if ! command -v dpkg >/dev/null 2>&1; then
  echo "deps.sh: not a Debian system; install by hand: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  # dpkg -s also lists removed packages whose config files remain; ask for
  # the installed state explicitly.
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "deps.sh: not root and no sudo; install by hand: ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
