#!/usr/bin/env bash
# Formats the C++ sources by .clang-format, or with --check lists those that differ from it and
# exits 1 (ctest's style.format runs that). clang-format-14 is the formatter, Debian 12's
# (scripts/install-deps.sh installs it): another version formats some lines otherwise, so without it
# the check is skipped (exit 77) rather than failed on lines this one did not write; with
# PLACEMENT_STRICT_CHECKS=1 (CI's .ci/run sets it, where install-deps.sh has installed it) a missing
# formatter fails the check.
#   scripts/format.sh [--check]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac
formatter=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$formatter" >/dev/null; then
  if [ "${PLACEMENT_STRICT_CHECKS:-0}" = 1 ]; then
    echo "format: no $formatter (Debian 12's clang-format-14; scripts/install-deps.sh installs it), and PLACEMENT_STRICT_CHECKS=1: failed" >&2
    exit 1
  fi
  echo "format: no $formatter (Debian 12's clang-format-14; scripts/install-deps.sh installs it): not checked" >&2
  exit 77
fi
cd "$root"
# The C++ sources (tracked ones in a checkout); tests/data holds inputs, not code.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cpp' '*.h' ':!:tests/data/**')
else
  mapfile -t files < <(find . \( -path ./tests/data -o -path './build*' -o -path ./.venv -o -path ./.gpu-deps \) -prune \
                         -o -type f \( -name '*.cpp' -o -name '*.h' \) -print | sed 's|^\./||' | sort)
fi
if ((check)); then
  differ=()
  for f in "${files[@]}"; do
    "$formatter" --style=file "$f" | cmp -s - "$f" || differ+=("$f")
  done
  if ((${#differ[@]})); then
    printf '%s\n' "${differ[@]}" >&2
    echo "format: ${#differ[@]} of ${#files[@]} files differ from .clang-format; scripts/format.sh formats them" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files as .clang-format has them"
else
  "$formatter" --style=file -i "${files[@]}"
fi
