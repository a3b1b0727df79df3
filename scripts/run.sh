#!/usr/bin/env bash
# README command 1, the main job: install what is missing, build, start placementd with the
# default config on a temporary socket, run the most complete flow that exists against it, and
# print a summary. Today that flow is a job that attaches, uploads the bundled two-tower MLP graph
# and receives its placement; the live example job replaces it once training runs through the SDK.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" >/dev/null
work=$(mktemp -d /tmp/placementd.XXXXXX)
socket=$work/placementd.sock
cleanup() {
  [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
echo "== placementd (default config $root/etc/placementd.toml, socket $socket)"
"$build/bin/placementd" --config "$root/etc/placementd.toml" --socket "$socket" --state-dir "$work/state" \
  2>"$work/placementd.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
"$build/bin/placementctl" --socket "$socket" status
echo
echo "== plugins"
"$build/bin/placementctl" --socket "$socket" plugins
echo
echo "== a job attaches, uploads its graph and receives a placement"
"$build/bin/attach_graph" --socket "$socket" --graph "$root/examples/graphs/two_tower_mlp.json" --devices cpu:0,cpu:1
echo
echo "== daemon log"
kill -TERM "$daemon"
wait "$daemon" && echo "(placementd exited 0 on SIGTERM)"
daemon=
cat "$work/placementd.log"
