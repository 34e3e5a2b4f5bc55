#!/usr/bin/env bash
# Installs the Debian packages reshard builds and tests with. Idempotent:
# packages already present are left alone, and apt-get runs only if any is missing.
# Usage: scripts/install-deps.sh [--notebooks]   (--notebooks adds Jupyter for notebooks/:
# `jupyter nbconvert` and the Python packages the notebooks import)
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libboost-graph-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  # the Python module (python/, docs/python.md): pybind11, its tests, pip install into a venv
  python3-dev pybind11-dev python3-pytest python3-pandas
  python3-venv python3-pip python3-setuptools python3-wheel
)
if [[ "${1:-}" == "--notebooks" ]]; then
  pkgs+=(jupyter-nbconvert python3-nbconvert python3-nbformat python3-ipykernel python3-matplotlib python3-pandas)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
