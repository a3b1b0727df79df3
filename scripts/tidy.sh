#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy's checks, which the code meets) over the daemon's, SDK's,
# placementctl's and plugins' C++ sources in a build's compile_commands.json, and exits 1 when it
# warns. The LibTorch-facing sources (sdk/src/torch, the Python extension) are left out: their
# headers alone take minutes a file. clang-tidy-14 is Debian 12's; without it the check is skipped
# (exit 77). It takes about 5 minutes on two cores, so CI does not run it; run it before a change
# that a reviewer should see checked.
#   scripts/tidy.sh [BUILD_DIR] [FILE...]      (BUILD_DIR defaults to build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
shift || true
tidy=${CLANG_TIDY:-clang-tidy-14}
command -v "$tidy" >/dev/null || tidy=clang-tidy
if ! command -v "$tidy" >/dev/null; then
  echo "tidy: no clang-tidy-14 (Debian 12's clang-tidy package): not checked" >&2
  exit 77
fi
cd "$root"
db="$build/compile_commands.json"
if [[ ! -f $db ]]; then
  echo "tidy: $db not found: configure a build first (CMake writes it)" >&2
  exit 2
fi
if (($#)); then
  files=("$@")
else
  mapfile -t files < <(python3 -c '
import json, os, sys
root = sys.argv[2]
for entry in json.load(open(sys.argv[1])):
    path = os.path.relpath(entry["file"], root)
    if path.startswith(("daemon/", "sdk/src/", "ctl/", "plugins/")) and not path.startswith(
            ("sdk/src/torch/", "sdk/python/")) and "/python/" not in path:
        print(path)' "$db" "$root" | sort -u)
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet 2>/dev/null >"$log" || true
if grep -q "warning:\|error:" "$log"; then
  grep -A3 "warning:\|error:" "$log" >&2
  echo "tidy: $(grep -c "warning:\|error:" "$log") findings in ${#files[@]} files (.clang-tidy)" >&2
  exit 1
fi
echo "tidy: ${#files[@]} files meet .clang-tidy"
