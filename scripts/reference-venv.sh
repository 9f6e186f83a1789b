#!/usr/bin/env bash
# Builds once, then prints the python of, the reference environment: the ORIGINAL implementation
# (tensorflow-cpu 2.15 + tensorflow-estimator 2.15, the last release that has it). The
# differential and compat tests and benchmarks/vs_original.py run the same program on it and on
# tpu_estimator and compare.
#
#   bash scripts/reference-venv.sh              -> prints the venv's python path (last line)
#   "$(bash scripts/reference-venv.sh)" prog.py
#
# Where: $REFERENCE_VENV, default ~/.cache/tpu-estimator-reference (outside the checkout, shared
# by every clone). TF 2.15 needs Python 3.9-3.11: the first of $REFERENCE_BASE_PYTHON (only it,
# when set), python3.11, python3.10, python3.9, python3, pyenv's 3.11/3.10/3.9 that is one.
# Exit status: 0 ready; 3 no such interpreter here (the tests that need the reference are
# skipped); anything else, the build failed (those tests fail).
set -euo pipefail

venv="${REFERENCE_VENV:-$HOME/.cache/tpu-estimator-reference}"
source "$(dirname "$0")/install.sh"  # install_into VENV ARGS...: uv where it can be had, else pip

ready() {  # built, and checked once (importing TF takes seconds; the mark makes it instant)
  [ -x "$venv/bin/python" ] || return 1
  [ -f "$venv/.reference-ok" ] && return 0
  "$venv/bin/python" -c "import tensorflow_estimator" >/dev/null 2>&1 &&
    touch "$venv/.reference-ok"
}

suitable() {  # is "$1" a Python 3.9-3.11?
  command -v "$1" >/dev/null 2>&1 &&
    "$1" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info[:2] <= (3, 11) else 1)' \
      >/dev/null 2>&1
}

find_base_python() {
  if [ -n "${REFERENCE_BASE_PYTHON:-}" ]; then
    suitable "$REFERENCE_BASE_PYTHON" && echo "$REFERENCE_BASE_PYTHON"
    return 0
  fi
  local candidate
  for candidate in python3.11 python3.10 python3.9 python3; do
    if suitable "$candidate"; then echo "$candidate"; return 0; fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    for candidate in "$(pyenv root)"/versions/3.1[01]*/bin/python "$(pyenv root)"/versions/3.9*/bin/python; do
      if suitable "$candidate"; then echo "$candidate"; return 0; fi
    done
  fi
}

build() {
  local py
  py="$(find_base_python)"
  if [ -z "$py" ]; then
    echo "reference-venv: no Python 3.9-3.11 interpreter found (TF 2.15 needs one; set" \
         "REFERENCE_BASE_PYTHON to its path)" >&2
    exit 3
  fi
  # A half-built venv (an interrupted install) is rebuilt; only a venv is ever removed.
  if [ -e "$venv" ]; then
    if [ -f "$venv/pyvenv.cfg" ]; then
      rm -rf "$venv"
    else
      echo "reference-venv: $venv exists and is not a virtual environment; set REFERENCE_VENV" >&2
      exit 1
    fi
  fi
  echo "reference-venv: building $venv with $py (TF 2.15, a few minutes, once)" >&2
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv" >&2
  install_into "$venv" "tensorflow-cpu==2.15.*" "tensorflow-estimator==2.15.*" >&2
  ready || { echo "reference-venv: built $venv, but tensorflow_estimator does not import" >&2; exit 1; }
}

if ! [[ -x "$venv/bin/python" && -f "$venv/.reference-ok" ]]; then
  mkdir -p "$(dirname "$venv")"
  # Two test sessions (or a test and a benchmark, or scripts/test.sh's early build and a test)
  # asking at once build it once; the check of a venv without its mark waits for the lock too,
  # so a venv still being filled is never marked.
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$venv.lock"
    flock 9
  fi
  ready || build
fi
echo "$venv/bin/python"
