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
# 2. The oldest TensorFlow the project supports (2.16): the whole suite again, but for the
#    tests of scikit-learn, pandas and tensorflow_hub and the differential files
#    (OLDEST_LEAVES_OUT), in .venv-tf216, built on the first run and reused while complete.
#    A TensorFlow release that moved an internal the library relies on, or that computes
#    differently (XLA's CPU backend in 2.16 keeps float16 products in float32), fails here
#    rather than on a user's machine. Installing it needs the package index: when it cannot be
#    installed this run fails; it is never skipped.
# 3. The documentation site: scripts/docs.sh (`mkdocs build --strict` in .venv-docs, built on
#    the first run; ~20 s once built): a broken link or API reference fails the run.
#
# Every venv is filled by scripts/install.sh: uv where it can be installed (about half pip's
# time on 2 cores), else pip. Only the test venv is built before the suite starts: the reference
# venv is built beside it (the first test that needs it waits for it), the TF 2.16 and docs venvs
# while the suite runs. A build mostly waits on downloads and the disk, the suite on the CPU.
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
# TensorFlow's minor version; see below for --no-deps). No scikit-learn, pandas, scipy or
# tensorflow_hub: where installed, Keras imports the first three inside `import tensorflow`
# (+2.5 s of CPU in every test process here, and ~20 s more to install). The tests that need
# them (the contrib metrics against scikit-learn's, the demo and TensorBoard's view of it on
# scikit-learn's digits, pandas_input_fn, a legacy program importing tensorflow_hub) run on the
# newest TensorFlow only: OLDEST_LEAVES_OUT. So do the files that compare whole programs with
# the original (tests/*differential.py: a quarter of the suite's CPU, half of it the original's
# side, which is the same TF 2.15 in both runs): on 2.16 they would compare two TensorFlow
# releases, not two implementations. The compat probes, the cluster tests and every behaviour
# test, which exercise the same internals, run on both (docs/design-decisions.md, "CI time").
OLDEST_TF='2.16'
OLDEST_VENV=.venv-tf216
OLDEST_REQUIREMENTS=("tensorflow-cpu==${OLDEST_TF}.*" "keras==3.5.*" tensorboard tf-slim pytest
                     pytest-xdist)
OLDEST_LEAVES_OUT=(--ignore=tests/test_contrib_metrics.py --ignore=tests/test_demo.py
                   --ignore=tests/test_tensorboard.py --ignore-glob='tests/*differential.py'
                   --deselect=tests/test_input_helpers.py::test_pandas_input_fn
                   "--deselect=tests/test_contrib_imports.py::test_tensorflow_hub_imports_under_run[tf2]"
                   "--deselect=tests/test_contrib_imports.py::test_tensorflow_hub_imports_under_run[tf1]")

build_oldest() {  # the oldest TensorFlow's venv, unless a build with these requirements completed
  local stamp="$OLDEST_VENV/.tpu-estimator-requirements"
  local wanted="${OLDEST_REQUIREMENTS[*]} tf_keras~=${OLDEST_TF}.0"
  [[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && return 0
  echo "=== Building $OLDEST_VENV (TensorFlow $OLDEST_TF) ==="
  rm -rf "$OLDEST_VENV"
  python3 -m venv "$OLDEST_VENV" &&
    install_into "$OLDEST_VENV" "${OLDEST_REQUIREMENTS[@]}" &&
    install_into "$OLDEST_VENV" --no-deps "tf_keras~=${OLDEST_TF}.0" &&
    echo "$wanted" > "$stamp"  # written last: a complete build
}

logs=$(mktemp -d)
declare -A pids
started() {  # `started NAME COMMAND...`: runs it in the background, output to $logs/NAME.log
  local name="$1"
  shift
  "$@" >"$logs/$name.log" 2>&1 &
  pids[$name]=$!
}
finished() {  # `finished NAME`: its exit status; its log is shown when it failed
  local status=0
  wait "${pids[$1]}" || status=$?
  ((status == 0)) || cat "$logs/$1.log" >&2
  return "$status"
}
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT  # nothing outlives this script

# ---------------------------------------------------------------------------------------------
# 1. The newest TensorFlow, the whole suite.

# Its failure shows in the tests that need it (scripts/reference-venv.sh runs again there and
# waits for this build on a lock: without flock the tests build it themselves).
if command -v flock >/dev/null 2>&1; then
  started reference bash scripts/reference-venv.sh
fi
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

started oldest build_oldest
started docs bash scripts/docs.sh --venv-only
echo "=== Tests on the newest TensorFlow ($(versions .venv)): the whole suite ==="
newest_status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "${WORKERS[@]}" "$@" || newest_status=$?

# ---------------------------------------------------------------------------------------------
# 2. The oldest supported TensorFlow, the suite but for OLDEST_LEAVES_OUT.

# Its venv is reused when a build with these same requirements completed; otherwise it was
# built afresh while the suite ran. The project itself comes from the checkout (PYTHONPATH).
if ! finished oldest; then
  echo "ERROR: could not install TensorFlow $OLDEST_TF into $OLDEST_VENV (is the package index" \
       "reachable?). The tests on the oldest supported TensorFlow are part of the tests:" \
       "this run fails rather than skip them." >&2
  exit 1
fi

echo "=== Tests on the oldest supported TensorFlow ($(versions "$OLDEST_VENV")): the suite but" \
     "the tests of scikit-learn, pandas and tensorflow_hub and the differential files ==="
oldest_status=0
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$OLDEST_VENV/bin/python" -m pytest -q \
  -p no:cacheprovider "${WORKERS[@]}" tests "${OLDEST_LEAVES_OUT[@]}" || oldest_status=$?

# ---------------------------------------------------------------------------------------------
# 3. The documentation site, built strictly.

echo "=== The documentation site (mkdocs build --strict) ==="
docs_status=0
finished docs && bash scripts/docs.sh || docs_status=$?

echo "=== Newest TensorFlow: $( ((newest_status == 0)) && echo passed || echo "FAILED ($newest_status)");" \
     "TensorFlow $OLDEST_TF: $( ((oldest_status == 0)) && echo passed || echo "FAILED ($oldest_status)");" \
     "docs: $( ((docs_status == 0)) && echo passed || echo "FAILED ($docs_status)") ==="
((newest_status == 0 && oldest_status == 0 && docs_status == 0))
