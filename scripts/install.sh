# Sourced by scripts/test.sh, scripts/reference-venv.sh and scripts/docs.sh:
#
#   install_into VENV ARGS...   installs ARGS (pip install's arguments) into the venv VENV
#
# through uv (`uv pip install --compile-bytecode`), else pip. uv installs a TensorFlow venv in
# about half the time pip takes on a 2-core machine (52 s for the test venv from an empty
# cache, against 118 s for pip with a warm one): it downloads and unpacks in parallel and
# byte-compiles on every core. uv is a single binary from PyPI, installed once with pip into
# $TPU_ESTIMATOR_TOOLS (default ~/.cache/tpu-estimator-tools, outside the checkout, shared by
# every clone). Where it cannot be installed, pip does the work as before; TPU_ESTIMATOR_PIP=1
# asks for pip. Packages are byte-compiled either way: where PYTHONDONTWRITEBYTECODE is set,
# every fresh process would otherwise compile TensorFlow's modules again.

_tools="${TPU_ESTIMATOR_TOOLS:-$HOME/.cache/tpu-estimator-tools}"

_uv() {  # prints the uv binary's path, installing it on first use; fails where it cannot
  [[ "${TPU_ESTIMATOR_PIP:-}" == 1 ]] && return 1
  if [[ ! -x "$_tools/bin/uv" ]]; then
    local staging="$_tools.$$"
    rm -rf "$staging"
    mkdir -p "$(dirname "$_tools")"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --target "$staging" uv >&2 ||
      { rm -rf "$staging"; return 1; }
    # Two scripts installing it at once: the first rename wins, the other copy is dropped.
    mv -T "$staging" "$_tools" 2>/dev/null || rm -rf "$staging"
  fi
  [[ -x "$_tools/bin/uv" ]] && echo "$_tools/bin/uv"
}

install_into() {
  local venv="$1" uv
  shift
  if uv="$(_uv)"; then
    "$uv" pip install -q --compile-bytecode --python "$venv/bin/python" "$@"
  else
    "$venv/bin/python" -m pip install -q "$@"
  fi
}
