#!/usr/bin/env bash
# Print the path of a working Python 3.12 (the `ansible` 14 packages need >= 3.12). pyenv shims are
# tried last and only if they really run 3.12 (a shim exists even when that version is not selected).
for c in "${PYTHON312:-}" $(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python 2>/dev/null | sort -V -r) \
         /usr/bin/python3.12 /usr/local/bin/python3.12 "$(command -v python3.12 2>/dev/null)"; do
  [ -n "$c" ] && [ -x "$c" ] || continue
  if "$c" -c 'import sys, venv; sys.exit(0 if sys.version_info[:2] == (3, 12) else 1)' >/dev/null 2>&1; then
    echo "$c"; exit 0
  fi
done
echo "Python 3.12 not found: install it (pyenv install 3.12, or apt-get install python3.12 python3.12-venv) or set PYTHON312=/path/to/python3.12" >&2
exit 3
