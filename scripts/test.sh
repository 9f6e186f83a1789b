#!/usr/bin/env bash
# Installs the project with its test extras into .venv (CPU-only TensorFlow) and runs the tests.
# The differential and compat tests compare with the original (TF 2.15 + tensorflow-estimator
# 2.15): they build it once through scripts/reference-venv.sh, in ~/.cache/tpu-estimator-reference
# ($REFERENCE_VENV) outside the checkout. A machine without Python 3.9-3.11 cannot have it: those
# tests are then skipped with one reason line (pytest -ra); a failed build fails them.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
# tf_keras (legacy tf.compat.v1.layers, tested by tests/test_compat.py) declares a dependency on
# the full `tensorflow` wheel; tensorflow-cpu provides the same module, so skip that download.
tf_version=$(.venv/bin/python -c "from importlib.metadata import version; print('.'.join(version('tensorflow-cpu').split('.')[:2]))")
.venv/bin/python -m pip install -q --no-deps "tf_keras~=${tf_version}.0"
# tensorflow_hub (imported at module level by legacy programs; tests/test_contrib_imports.py)
# depends on tf_keras, so the same applies.
.venv/bin/python -m pip install -q --no-deps "tensorflow_hub>=0.16"
export TF_CPP_MIN_LOG_LEVEL=2
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
