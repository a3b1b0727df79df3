#!/usr/bin/env bash
# The GPU run (issues #3 and #5): on a machine with a CUDA GPU and the pip LibTorch (see
# ../shared/gpu/README.md: run scripts/stage-gpu-deps.sh (the shared stage-deps.sh plus Eigen) on the development machine and copy
# .gpu-deps/ along), build against that LibTorch, run the test suite, then placementd with the live
# example jobs on `cpu,cuda:0`, the engine overhead on cuda:0 at the papers' batch sizes, live_bench,
# and write what was measured — with the date, the
# hardware and the commit — to OUT/gpu-run.md. Its figures go into docs/benchmarks.md.
#
#   scripts/gpu-run.sh [--out DIR] [--devices LIST] [--memory-gib G] [--steps N]
#                      [--build-dir DIR] [--skip-build] [--skip-tests]
#
# With --devices cpu:0,cpu:1 --skip-build --build-dir build the same flow runs without a GPU, which
# is how the script itself is checked.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/run}
devices=cpu,cuda:0
memory_gib=60
steps=2000
build=$root/build-gpu
skip_build=0
skip_tests=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    --memory-gib) memory_gib=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --skip-tests) skip_tests=1; shift ;;
    *) echo "usage: $0 [--out DIR] [--devices LIST] [--memory-gib G] [--steps N] [--build-dir DIR] [--skip-build] [--skip-tests]" >&2
       exit 2 ;;
  esac
done
mkdir -p "$out"
# The pip torch (GPU machine) or Debian's (/usr/bin/python3): whichever python has torch.
python=$(command -v python3)
"$python" -c 'import torch' 2>/dev/null || python=/usr/bin/python3
deps=$root/.gpu-deps
[ -d "$deps" ] && export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
report=$out/gpu-run.md
log() { echo "$@" | tee -a "$report"; }
: >"$report"

log "# placementd GPU run"
log
log "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
log "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
log "- host: $(hostname), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
log "- cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
if command -v nvidia-smi >/dev/null; then
  log "- gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
else
  log "- gpu: none (nvidia-smi not found)"
fi
log "- torch: $("$python" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"
log "- devices: $devices, $memory_gib GiB each for the memory model; $steps steps per job"
log

if ((!skip_build)); then
  prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  extra=()
  if [ -d "$deps" ]; then
    prefix="$prefix;$deps"
    extra=(-DCMAKE_INCLUDE_PATH="$deps/include" -DCMAKE_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu")
  fi
  echo "== building in $build (logs in $out)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DPLACEMENT_MODEL_PYTHON="$python" "${extra[@]}" >"$out/cmake.log" 2>&1
  cmake --build "$build" -j"$(nproc)" >"$out/build.log" 2>&1
fi

if ((!skip_tests)); then
  echo "== tests"
  if OMP_NUM_THREADS=1 ctest --test-dir "$build" -j"$(nproc)" --output-on-failure --timeout 300 >"$out/ctest.log" 2>&1; then
    log "tests: $(grep -E 'tests passed' "$out/ctest.log" | tail -1)"
  else
    log "tests: FAILED — $(grep -E 'tests passed' "$out/ctest.log" | tail -1); see ctest.log"
  fi
  # The migration's CUDA copy paths are checked only here (tests/unit/torch/transfer_test.cpp).
  log "CUDA copy paths: $(grep -E 'CudaTransfer\.' "$out/ctest.log" | grep -oE 'CudaTransfer\.[A-Za-z]+ \.+ *[*A-Za-z]+' |
    sed -E 's/ \.+ */ /' | paste -sd';' -)"
  log
fi

work=$(mktemp -d -t placementd-gpu.XXXXXX)  # mktemp fills in the X's
socket=$work/placementd.sock
cleanup() {
  [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
"$python" "$root/tests/models/make_models.py" "$work/models" >/dev/null  # the small set: examples and live_bench models
"$build/bin/placementd" --config "$root/etc/placementd.toml" --socket "$socket" --state-dir "$work/state" \
  2>"$out/placementd.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done

# Each job starts with every op on the first device (the CPU) and lets placementd find better.
for example in inception gnmt; do
  echo "== $example example on $devices"
  "$build/bin/train_$example" --model "$work/models/${example}_example.pt" --socket "$socket" --devices "$devices" \
    --memory-gib "$memory_gib" --steps "$steps" --log-every $((steps / 5)) --start first >"$out/$example.log" 2>&1
  log "## $example example"
  log
  log '```'
  sed -n '/== summary/,/placement in force/p' "$out/$example.log" | tee -a "$report"
  log '```'
  log
done
"$build/bin/placementctl" --socket "$socket" --json jobs --finished >"$out/jobs.json"
"$build/bin/placementctl" --socket "$socket" jobs show 1 --plot "$out/inception-curve.svg" >"$out/inception-show.txt"
"$build/bin/placementctl" --socket "$socket" jobs show 2 --plot "$out/gnmt-curve.svg" >"$out/gnmt-show.txt"

echo "== engine overhead on ${devices##*,}"
models=(mlp two_tower gnmt_small bert_small resnet18)
if [[ $devices == *cuda* ]]; then  # the papers' sizes only where they take seconds, not hours
  big=(inception_v3 inception_v3_bs32 resnet50_bs64 gnmt4_bs256)
  "$python" "$root/tests/models/make_models.py" "$work/models" "${big[@]}" >/dev/null
  models+=("${big[@]}")
fi
"$build/bin/engine_overhead_bench" --device "${devices##*,}" "$work/models" "${models[@]}" >"$out/engine_overhead.log" 2>&1 || true
log "## engine overhead (plain module vs PlacedModule, all on ${devices##*,})"
log
log '```'
tee -a "$report" <"$out/engine_overhead.log" >/dev/null
log '```'
log

echo "== live_bench"
"$build/bin/live_bench" "$work/models" --devices "$(echo "$devices" | cut -d, -f1,2)" >"$out/live_bench.log" 2>&1 || true
log "## live_bench"
log
log '```'
tee -a "$report" <"$out/live_bench.log" >/dev/null
log '```'
echo "report: $report"
