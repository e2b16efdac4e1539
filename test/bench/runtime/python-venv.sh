#!/usr/bin/env bash
# Creates (or reuses) the Python environment of the decode-step profile,
# .cache/bench-pyvenv in the repository, from python-requirements.txt here
# (PyPI only). Reinstalls only when the requirements change. The last line
# printed is the environment's python.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="$repo/.cache/bench-pyvenv"
requirements="$here/python-requirements.txt"
marker="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"

if [[ -x "$venv/bin/python" && -f "$marker" && "$(cat "$marker")" == "$want" ]]; then
  echo "[bench-pyvenv] up to date: $venv" >&2
else
  command -v python3 >/dev/null || { echo "[bench-pyvenv] python3 is required" >&2; exit 1; }
  echo "[bench-pyvenv] installing onnxruntime and numpy into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2
  echo "$want" >"$marker"
fi
echo "$venv/bin/python"
