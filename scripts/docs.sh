#!/usr/bin/env bash
# Builds the documentation site into site/ with `mkdocs build --strict`: a broken link, a
# missing anchor, a missing included file or an API reference to a name that does not exist
# fails the build (and this script). scripts/test.sh runs it.
#
# MkDocs, the Material theme and mkdocstrings come from the `docs` extra of pyproject.toml,
# installed into their own venv, .venv-docs (the project itself is not installed there: the API
# reference is read from the source by static analysis, so no TensorFlow is needed). The venv
# is built on the first run and reused while its stamp matches the extra; delete it to rebuild.
# Arguments are passed on to `mkdocs build` (e.g. --site-dir DIR); `--venv-only` as the only
# argument builds the venv and stops (scripts/test.sh builds it while the tests run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh  # install_into VENV ARGS...: uv where it can be had, else pip

DOCS_VENV=.venv-docs
# The docs extra as pyproject.toml declares it: a change there rebuilds the venv.
wanted=$(python3 -c "
import re
try:
  import tomllib  # Python 3.11+
  with open('pyproject.toml', 'rb') as f:
    print(' '.join(tomllib.load(f)['project']['optional-dependencies']['docs']))
except ImportError:  # Python 3.10: the extra is one line, docs = [...]
  line = re.search(r'^docs = \\[(.*)\\]', open('pyproject.toml').read(), re.M).group(1)
  print(' '.join(re.findall(r'\"([^\"]+)\"', line)))")
stamp="$DOCS_VENV/.tpu-estimator-docs-requirements"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
  echo "=== Building $DOCS_VENV ($wanted) ==="
  rm -rf "$DOCS_VENV"
  python3 -m venv "$DOCS_VENV"
  # shellcheck disable=SC2086  # the requirements are separate words
  install_into "$DOCS_VENV" $wanted
  echo "$wanted" > "$stamp"
fi

[[ "${1:-}" == --venv-only ]] && exit 0

# Material prints a banner about MkDocs 2 on every build; the pins keep MkDocs 1.x.
export NO_MKDOCS_2_WARNING=1
"$DOCS_VENV/bin/mkdocs" build --strict --clean "$@"
echo "=== The site is in site/ (python3 -m http.server -d site) ==="
