#!/usr/bin/env bash
# systemd-analyze verify on the units as CMake configured them, with ExecStart pointing at this
# build's placementd (verify checks that it exists). verify exits 0 on parse warnings, so any
# output counts as a failure too. Exit 77 (skipped) where systemd-analyze is missing.
set -u
service_in=$1 socket=$2 placementd=$3
command -v systemd-analyze >/dev/null || { echo "systemd-analyze not installed"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed -E "s#^(ExecStart(Pre)?=)[^ ]*/placementd#\1$placementd#" "$service_in" >"$dir/placementd.service"
cp "$socket" "$dir/placementd.socket"
grep -q "^ExecStart=$placementd " "$dir/placementd.service" || { echo "ExecStart not rewritten"; exit 1; }
out=$(cd "$dir" && systemd-analyze verify placementd.service placementd.socket 2>&1)
rc=$?
if [ $rc -ne 0 ] || [ -n "$out" ]; then
  echo "systemd-analyze verify (rc $rc):"
  echo "$out"
  exit 1
fi
echo "placementd.service and placementd.socket verify clean"
