#!/usr/bin/env bash
# Formats the Python sources with ruff (pyproject.toml's [tool.ruff]: 120 columns) and checks them
# with its linter, or with --check lists what differs or what the linter finds and exits 1 (ctest's
# style.python runs that). ruff is pinned in scripts/python-requirements.txt and run by the
# project's Python ($PLACEMENT_PYTHON, else .venv/bin/python: scripts/install-deps.sh makes it);
# without it the check is skipped (exit 77), and with PLACEMENT_STRICT_CHECKS=1 (CI) failed.
#   scripts/python-style.sh [--check]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: scripts/python-style.sh [--check]" >&2; exit 2 ;;
esac
python=${PLACEMENT_PYTHON:-$root/.venv/bin/python}
if ! "$python" -m ruff --version >/dev/null 2>&1; then
  if [ "${PLACEMENT_STRICT_CHECKS:-0}" = 1 ]; then
    echo "python-style: no ruff for $python (scripts/install-deps.sh installs it), and PLACEMENT_STRICT_CHECKS=1: failed" >&2
    exit 1
  fi
  echo "python-style: no ruff for $python (scripts/install-deps.sh installs it): not checked" >&2
  exit 77
fi
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.py' '*.pyi')
else
  mapfile -t files < <(find . \( -path './build*' -o -path ./.venv -o -path ./.gpu-deps \) -prune \
                         -o -type f \( -name '*.py' -o -name '*.pyi' \) -print | sed 's|^\./||' | sort)
fi
if ((check)); then
  failed=0
  "$python" -m ruff format --check "${files[@]}" >&2 || failed=1
  "$python" -m ruff check "${files[@]}" >&2 || failed=1
  if ((failed)); then
    echo "python-style: scripts/python-style.sh formats them; the linter's findings are fixed by hand" >&2
    exit 1
  fi
  echo "python-style: ${#files[@]} files as ruff formats them, no finding"
else
  "$python" -m ruff format "${files[@]}"
  "$python" -m ruff check "${files[@]}"
fi
