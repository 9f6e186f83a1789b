#!/usr/bin/env bash
# The tests, in two runs, then the documentation build; the exit status fails if any fails.
#
# 1. The newest TensorFlow: installs the project with its test extras into .venv (CPU-only
#    TensorFlow) and runs the whole suite (arguments are passed on to this pytest run).
#    The differential and compat tests compare with the original (TF 2.15 +
#    tensorflow-estimator 2.15): they build it once through scripts/reference-venv.sh, in
#    ~/.cache/tpu-estimator-reference ($REFERENCE_VENV) outside the checkout. A machine without
#    Python 3.9-3.11 cannot have it: those tests are then skipped with one reason line
#    (pytest -ra); a failed build fails them.
# 2. The oldest TensorFlow the project supports (2.16): the core tests (CORE_TESTS, the files
#    that exercise the TensorFlow internals the library relies on) in .venv-tf216, built on the
#    first run and reused while complete. A TensorFlow release that moved one of those internals
#    fails here rather than on a user's machine. Installing it needs the package index: when it
#    cannot be installed this run fails; it is never skipped.
# 3. The documentation site: scripts/docs.sh (`mkdocs build --strict` in .venv-docs, built on
#    the first run; ~20 s once built): a broken link or API reference fails the run.
#
# Every venv is filled by scripts/install.sh: uv where it can be installed (about half pip's
# time on 2 cores), else pip.
#
# Both pytest runs use two worker processes (pytest-xdist), each test file whole on one worker
# (`--dist loadfile`: a file's module fixtures, such as a differential test's two programs, run
# once). On 2 cores this keeps both busy while one test waits on its child processes;
# TEST_WORKERS=N sets another count (0: no workers, one process as before).
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2
source scripts/install.sh  # install_into VENV ARGS...: uv where it can be had, else pip
WORKERS=(-n "${TEST_WORKERS:-2}" --dist loadfile)

# The oldest supported TensorFlow, and what its run installs besides (tf_keras follows
# TensorFlow's minor version; see below for --no-deps). No scikit-learn, pandas or scipy: no
# core test uses them, and where installed, Keras imports them inside `import tensorflow`
# (+2.5 s of CPU in every test process here, and ~20 s more to install).
OLDEST_TF='2.16'
OLDEST_VENV=.venv-tf216
OLDEST_REQUIREMENTS=("tensorflow-cpu==${OLDEST_TF}.*" "keras==3.5.*" tensorboard tf-slim pytest
                     pytest-xdist)
# Checkpoint saver hooks, step counter and progress hooks, the device loop and MirroredStrategy
# sharding, XLA and its compilation cache across processes (TensorFlow's persistent cache
# flags), graph reuse, Keras 3 naming in model_fn, contrib layers (legacy Keras through
# tf-slim), export, RunConfig strategies, and each private TensorFlow API the library uses:
# ~3 minutes on 2 cores.
CORE_TESTS=(tests/test_tf_internals.py tests/test_checkpoint_faults.py tests/test_progress.py
            tests/test_tpu_estimator.py tests/test_xla.py tests/test_compile_cache.py
            tests/test_eval_reuse.py
            tests/test_keras_model_fns.py tests/test_contrib_layers.py tests/test_export.py
            tests/test_strategies.py)

# ---------------------------------------------------------------------------------------------
# 1. The newest TensorFlow, the whole suite.

python3 -m venv .venv
install_into .venv -e ".[test]"
# tf_keras (legacy tf.compat.v1.layers, tested by tests/test_compat.py) declares a dependency on
# the full `tensorflow` wheel; tensorflow-cpu provides the same module, so skip that download.
tf_version=$(.venv/bin/python -c "from importlib.metadata import version; print('.'.join(version('tensorflow-cpu').split('.')[:2]))")
install_into .venv --no-deps "tf_keras~=${tf_version}.0"
# tensorflow_hub (imported at module level by legacy programs; tests/test_contrib_imports.py)
# depends on tf_keras, so the same applies.
install_into .venv --no-deps "tensorflow_hub>=0.16"

versions() {  # "TensorFlow X, Keras Y" of a venv, read without importing TensorFlow
  "$1/bin/python" -c "from importlib.metadata import version as v; print('TensorFlow %s, Keras %s' % (v('tensorflow-cpu'), v('keras')))"
}

echo "=== Tests on the newest TensorFlow ($(versions .venv)): the whole suite ==="
newest_status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "${WORKERS[@]}" "$@" || newest_status=$?

# ---------------------------------------------------------------------------------------------
# 2. The oldest supported TensorFlow, the core tests.

# The venv is reused when a build with these same requirements completed (the stamp is written
# last); otherwise it is built afresh. The project itself comes from the checkout (PYTHONPATH).
stamp="$OLDEST_VENV/.tpu-estimator-requirements"
wanted="${OLDEST_REQUIREMENTS[*]} tf_keras~=${OLDEST_TF}.0"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
  echo "=== Building $OLDEST_VENV (TensorFlow $OLDEST_TF) ==="
  rm -rf "$OLDEST_VENV"
  if ! { python3 -m venv "$OLDEST_VENV" &&
         install_into "$OLDEST_VENV" "${OLDEST_REQUIREMENTS[@]}" &&
         install_into "$OLDEST_VENV" --no-deps "tf_keras~=${OLDEST_TF}.0"; }; then
    echo "ERROR: could not install TensorFlow $OLDEST_TF into $OLDEST_VENV (is the package index" \
         "reachable?). The core tests on the oldest supported TensorFlow are part of the tests:" \
         "this run fails rather than skip them." >&2
    exit 1
  fi
  echo "$wanted" > "$stamp"
fi

echo "=== Tests on the oldest supported TensorFlow ($(versions "$OLDEST_VENV")): the core tests ==="
oldest_status=0
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$OLDEST_VENV/bin/python" -m pytest -q \
  -p no:cacheprovider "${WORKERS[@]}" "${CORE_TESTS[@]}" || oldest_status=$?

# ---------------------------------------------------------------------------------------------
# 3. The documentation site, built strictly.

echo "=== The documentation site (mkdocs build --strict) ==="
docs_status=0
bash scripts/docs.sh || docs_status=$?

echo "=== Newest TensorFlow: $( ((newest_status == 0)) && echo passed || echo "FAILED ($newest_status)");" \
     "TensorFlow $OLDEST_TF core: $( ((oldest_status == 0)) && echo passed || echo "FAILED ($oldest_status)");" \
     "docs: $( ((docs_status == 0)) && echo passed || echo "FAILED ($docs_status)") ==="
((newest_status == 0 && oldest_status == 0 && docs_status == 0))
