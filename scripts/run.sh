#!/usr/bin/env bash
# README command 1, the main job: install what is missing, build, start placementd with the
# default config on a temporary socket, train the Inception-style example job attached to it on
# the devices present (two logical CPU devices on a machine without a GPU), and print the job's
# summary, placementctl's view of it and the learning-curve plot's path.
#
#   scripts/run.sh [--steps N] [--example inception|gnmt] [--out DIR] [--config FILE]
#
# --config: another daemon config (e.g. one with [policy] warm_start = "simulator"); default
# etc/placementd.toml.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/python-env.sh
. "$root/scripts/python-env.sh"
build=${BUILD_DIR:-$root/build}
steps=1200
example=inception
out=$root/build/run
config=$root/etc/placementd.toml
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --example) example=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --config) config=$(realpath "$2"); shift 2 ;;
    *) echo "usage: $0 [--steps N] [--example inception|gnmt] [--out DIR] [--config FILE]" >&2; exit 2 ;;
  esac
done
case "$example" in
  inception|gnmt) ;;
  *) echo "--example must be inception or gnmt" >&2; exit 2 ;;
esac
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" >/dev/null
mkdir -p "$out"
work=$(mktemp -d /tmp/placementd.XXXXXX)
socket=$work/placementd.sock
cleanup() {
  [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "== exporting the example model in train mode (tests/models/export_models.py: torch.export, torch $("$placement_python" -c 'import torch; print(torch.__version__)'))"
"$placement_python" "$root/tests/models/export_models.py" --no-reference "$work/models" "${example}_example" >/dev/null

# CUDA devices need the GPU build and their memory given (JobOptions::memory_bytes); the live GPU
# run is scripts/gpu-run.sh's, not this one's.
devices=cpu:0,cpu:1
echo "== placementd (config $config, socket $socket)"
"$build/bin/placementd" --config "$config" --socket "$socket" --state-dir "$work/state" \
  2>"$work/placementd.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
"$build/bin/placementctl" --socket "$socket" status
echo
echo "== the ${example} example job trains $steps steps on $devices while placementd places it"
echo "   (it starts from a naive placement that alternates consecutive ops between the devices, so"
echo "   there is something to find on logical CPU devices; on one host no split beats one device)"
"$build/bin/train_${example}" --model "$work/models/${example}_example.pt2" --socket "$socket" --devices "$devices" \
  --steps "$steps" --log-every $((steps / 10)) --start interleaved
echo
echo "== placementctl jobs --finished"
"$build/bin/placementctl" --socket "$socket" jobs --finished
echo
echo "== placementctl jobs show 1 --plot $out/learning-curve.svg"
"$build/bin/placementctl" --socket "$socket" jobs show 1 --plot "$out/learning-curve.svg"
echo
echo "== daemon log"
kill -TERM "$daemon"
wait "$daemon" && echo "(placementd exited 0 on SIGTERM)"
daemon=
cat "$work/placementd.log"
