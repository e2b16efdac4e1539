#!/usr/bin/env bash
# Creates (or refreshes) the Python virtual environment the tests use,
# .cache/pyvenv in the repository, from test/python/requirements.txt. Skips
# the install when the requirements have not changed since the last one.
# The last line printed is the environment's bin folder.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${MODELGATE_PYVENV:-$repo/.cache/pyvenv}"
requirements="$repo/test/python/requirements.txt"
marker="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"

if [[ -x "$venv/bin/python" && -f "$marker" && "$(cat "$marker")" == "$want" ]]; then
  echo "[pyvenv] up to date: $venv" >&2
else
  command -v python3 >/dev/null || { echo "[pyvenv] python3 is required" >&2; exit 1; }
  echo "[pyvenv] installing $(grep -cv '^\s*\(#\|$\)' "$requirements") packages into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  echo "$want" >"$marker"
fi
echo "$venv/bin"
