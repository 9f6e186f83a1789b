#!/usr/bin/env bash
# Installs the project with its test extras into .venv (CPU-only TensorFlow) and runs the tests.
# Differential tests also build the reference venv (the original tensorflow-estimator 2.15)
# through ../shared/tools/reference-venv.sh when it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
export TF_CPP_MIN_LOG_LEVEL=2
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
