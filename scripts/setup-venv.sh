#!/usr/bin/env bash
# Create .venv with the pinned Python requirements; skipped when it already matches them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
stamp=$VENV/.requirements.sha256
want=$(sha256sum "$ROOT/requirements.txt" | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  log "virtual environment up to date ($VENV)"
  exit 0
fi
log "creating the virtual environment $VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$ROOT/requirements.txt"
echo "$want" > "$stamp"
