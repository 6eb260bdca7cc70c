#!/usr/bin/env bash
# Create a virtual environment with pinned Python requirements; skipped when it already matches
# them. With no arguments: .venv (or $GPUFLEET_VENV) from requirements.txt, the default line of
# the support matrix, on which the whole suite runs. `setup-venv.sh REQUIREMENTS VENV` makes
# another one (scripts/run-matrix.sh: one per line of tests/matrix/).
# A requirements file names the Python it needs in a `# python: X.Y` line; that interpreter is
# looked for as pythonX.Y on PATH, then among pyenv's versions.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
requirements=${1:-$ROOT/requirements.txt}
venv=${2:-$VENV}
want_python=$(sed -n 's/^# python: *\([0-9.]*\).*/\1/p' "$requirements" | head -n1)
[ -n "$want_python" ] || die "$requirements names no Python (a '# python: X.Y' line)"
stamp=$venv/.requirements.sha256
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  log "virtual environment up to date ($venv)"
  exit 0
fi
# The first candidate that runs and is that version (a pyenv shim is on PATH for every version
# pyenv has, but runs only the selected ones).
python=
for candidate in "$(command -v "python$want_python" || true)" \
                 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want_python".*/bin/python"$want_python"; do
  if [ -x "$candidate" ] && [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$want_python" ]; then
    # The interpreter itself, not a venv's link to it: the venv named here is removed below, and
    # its python may be the first on PATH (an activated .venv).
    python=$(readlink -f "$candidate")
    break
  fi
done
[ -n "$python" ] || die "$requirements needs Python $want_python, which is not on PATH nor in pyenv; install it (for instance pyenv install $want_python)"
log "creating the virtual environment $venv (Python $want_python: $python)"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
echo "$want" > "$stamp"
