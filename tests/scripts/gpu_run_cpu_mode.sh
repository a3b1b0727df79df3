#!/usr/bin/env bash
# scripts/gpu-run.sh in its CPU mode, every stage on the build under test: each must succeed,
# write its summary and its log tarball, and a stage with a failure must exit non-zero.
#   gpu_run_cpu_mode.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
out=$(mktemp -d -t gpu-run-cpu.XXXXXX)  # mktemp fills in the X's
trap 'rm -rf "$out"' EXIT
run() { "$root/scripts/gpu-run.sh" --cpu --build-dir "$build" --out "$out" "$@"; }
check() {  # STAGE PATTERN: the summary says the stage is ok and holds PATTERN; its logs came back
  grep -q "^stage $1: ok" "$out/$1.md" || { echo "stage $1 did not end ok:"; cat "$out/$1.md"; exit 1; }
  grep -qE "$2" "$out/$1.md" || { echo "stage $1's summary lacks /$2/:"; cat "$out/$1.md"; exit 1; }
  tar -tzf "$out/$1-logs.tar.gz" >/dev/null || { echo "stage $1: no log tarball"; exit 1; }
}
run --stage build >/dev/null
check build 'features: placementd features: .*torch=ON'
run --stage test --tests '^OpGraph\.' >/dev/null
check test '100% tests passed'
run --stage engine >/dev/null
check engine '^rnnlm_small +[0-9]+ +[0-9.]+ ms'
check engine '^resnet18 \(batch 2, 3x32x32\) on cpu:1, export front end'
run --stage profiles >/dev/null
check profiles '^\| gnmt_small \| 36 \|'
check profiles '^aten::lstm +8 '  # gnmt_small's LSTMs, measured against the cost model
run --stage live --steps 40 >/dev/null
check live '^realized speed-up '
check live '^## Python lm example'
check live '^overhead +[-+][0-9.]+ %'
check live '^both ranks: parameters digest: [0-9a-f]{16}$'
check live '^gradients on cpu +gloo$'
run --stage learning --steps 40 >/dev/null
check learning '^## placementctl jobs show \(learning-gnmt\)'
check learning '^warm start +searched [0-9]+ simulated placements'
run --stage offload >/dev/null
check offload '^check: met: placementd:optimizer_on_host trains bit for bit as the ideal'
[ -s "$out/offload.json" ] || { echo "stage offload wrote no offload.json"; exit 1; }
# Failures are not swallowed: no test matched, an unknown stage.
if run --stage test --tests '^NoSuchTest$' >/dev/null 2>&1; then echo "a test stage that ran no test exited 0"; exit 1; fi
grep -q "^stage test: 1 failure" "$out/test.md" || { echo "the failed test stage says:"; cat "$out/test.md"; exit 1; }
if run --stage nonsense >/dev/null 2>&1; then echo "an unknown stage exited 0"; exit 1; fi
echo "gpu-run.sh CPU mode: every stage ok, failures exit non-zero"
