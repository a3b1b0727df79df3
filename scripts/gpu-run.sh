#!/usr/bin/env bash
# The GPU run, in stages that each fit one call of the GPU machine (10 minutes, 8 files back). Each
# stage writes OUT/STAGE.md (what it measured, with the date, hardware and commit) and
# OUT/STAGE-logs.tar.gz (every log), and exits non-zero when anything in it failed. Later stages
# reuse the build directory, which stays on a warm machine between calls. docs/gpu-runs/README.md
# says how to run them with the device tool and what each records.
#
#   scripts/gpu-run.sh --stage build|test|engine|live|learning|profiles|offload [--cpu] [--out DIR]
#                      [--build-dir DIR] [--devices LIST] [--memory-gib G] [--steps N] [--tests REGEX]
#                      [--targets "TARGET..."] [--bench-args "ARGS"]
#
#   build     configure (LibTorch and CUDA forced on) and build (everything, or --targets; say,
#             "placementd placementctl plugins/all train_inception train_gnmt" for the learning
#             stage alone); prints the build's feature line
#   test      ctest (all tests, or --tests REGEX), and the CUDA tests' results by name
#   engine    traces the models on the device, engine overhead vs the plain module per model; the
#             export front end's job.step vs plain eager PyTorch (ResNet-18, BERT-base, GPT-2 small)
#   live      placementd with the example jobs on DEVICES (C++ and Python), two data-parallel
#             replicas of the GNMT example, live_bench, the Python SDK's step overhead
#   learning  the C++ example jobs with the simulator warm start, long enough for exploration to end
#             (--steps; 2000 on a GPU), and each job's warm start (the planning model's answer and
#             its predicted time) against what its trials measured
#   profiles  per-op profiles of the test models on the device (placementctl capture --profile), and
#             the cost model against them per op kind (placementctl simulate --by-kind)
#   offload   a model larger than the capped GPU: placementd's residence plans against torchao's and
#             FSDP2's offload (bench/python/offload_bench.py; --bench-args adds to its options, e.g.
#             "--ratio 3 --model llama"); torchao comes from .gpu-deps/wheels on the GPU machine
#
# --cpu runs the same stages without a GPU (devices cpu:0,cpu:1, CUDA not forced, the torch of the
# project's environment, .venv): how CI checks this script (tests/scripts/gpu_run_cpu_mode.sh).
# On the GPU machine the build uses that machine's own torch 2.11 (its pip install), the same way
# scripts/build.sh uses .venv's: LibTorch, CUDA runtime and NCCL from the wheel.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/python-env.sh
. "$root/scripts/python-env.sh"
usage() {
  sed -n '8,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
stage=
cpu=0
out=${OUT:-$root/build-gpu/run}
build=
devices=
memory_gib=60
steps=
tests=
targets=
bench_args=
while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage=${2:-}; shift 2 ;;
    --cpu) cpu=1; shift ;;
    --out) out=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    --memory-gib) memory_gib=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --bench-args) bench_args=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-run.sh: unknown argument $1" >&2; usage ;;
  esac
done
case "$stage" in build|test|engine|live|learning|profiles|offload) ;; *) echo "gpu-run.sh: --stage is one of build, test, engine, live, learning, profiles, offload" >&2; usage ;; esac
if ((cpu)); then
  build=${build:-$root/build}
  devices=${devices:-cpu:0,cpu:1}
  steps=${steps:-60}
  python=$placement_python
else
  build=${build:-$root/build-gpu}
  devices=${devices:-cpu,cuda:0}
  steps=${steps:-2000}
  # The GPU machine's pip torch, its CMake and ninja: on PATH, or in the venv that machine keeps them in.
  [ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
  python=$(command -v python3)
  "$python" -c 'import torch' 2>/dev/null || python=/opt/torch/.venv/bin/python3
fi
device=${devices##*,}  # the device the single-device stages use: the last one named
mkdir -p "$out"
logs=$(mktemp -d -t "gpu-run-$stage.XXXXXX")  # mktemp fills in the X's; packed and removed at exit
report=$out/$stage.md
failures=0
log() { echo "$@" | tee -a "$report"; }
fail() {
  log "FAILED: $*"
  failures=$((failures + 1))
}
finish() {
  # Without the traced and exported models, which any machine makes again (make_models.py): with
  # them the engine, live and profiles tarballs outgrow what the device tool brings back (16 MiB).
  tar -C "$logs" --exclude='*.pt' --exclude='*.pt2' -czf "$out/$stage-logs.tar.gz" .
  rm -rf "$logs"
  if ((failures)); then
    log
    log "stage $stage: $failures failure(s)"
  else
    log
    log "stage $stage: ok"
  fi
}
trap finish EXIT
# `timeout` stops a stage with SIGTERM (to its whole process group): the stage still ends through
# its EXIT trap, which stops its daemon and packs its logs, and its report says why it ended.
trap 'trap "" TERM INT; fail "stopped by a signal (its timeout?) before the stage ended"; exit 143' TERM INT
: >"$report"

deps=$root/.gpu-deps
[ -d "$deps" ] && export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
log "# placementd GPU run: stage $stage"
log
log "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
log "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
log "- host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
if command -v nvidia-smi >/dev/null; then
  log "- gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
else
  log "- gpu: none (nvidia-smi not found)"
fi
log "- toolchain: $(cmake --version | head -1), $(c++ --version 2>&1 | head -1)"
log "- torch: $("$python" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
log "- devices: $devices; build: $build"
log

need_build() {
  if [ ! -x "$build/bin/placementd" ]; then
    fail "no build in $build: run --stage build first (on the same warm machine)"
    exit 1
  fi
}

# Appends an example job's summary (its "== summary" on) to the report under the title $1.
report_summary() {
  log "## $1"
  log
  log '```'
  sed -n '/== summary/,$p' "$2" | tee -a "$report"
  log '```'
  log
}

# Starts placementd with the config $1 (the shipped one by default) on a socket of its own (stopped,
# with its state, when the stage exits) and waits for its socket: loading the LibTorch plugins
# takes seconds on a cold machine.
start_daemon() {
  work=$(mktemp -d -t placementd-gpu.XXXXXX)  # mktemp fills in the X's: the daemon's socket and state
  socket=$work/placementd.sock
  "$build/bin/placementd" --config "${1:-$root/etc/placementd.toml}" --socket "$socket" --state-dir "$work/state" \
    2>"$logs/placementd.log" &
  daemon=$!
  stop_daemon() {
    # Its status, when a signal to the stage's process group stopped it first, is not the stage's.
    kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
    rm -rf "$work"
    finish
  }
  trap stop_daemon EXIT
  for _ in $(seq 600); do
    [ -S "$socket" ] && break
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -S "$socket" ]; then
    fail "placementd did not open its socket in 60 s; its log:"
    tail -n 20 "$logs/placementd.log" | tee -a "$report"
    exit 1
  fi
}

case "$stage" in
build)
  args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DPLACEMENT_WITH_TORCH=ON -DPLACEMENT_MODEL_PYTHON="$python")
  prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  if ((cpu)); then
    args+=(-DPLACEMENT_BUILD_TESTS=ON -DPLACEMENT_BUILD_BENCH=ON -DCMAKE_PREFIX_PATH="$prefix")
  else
    [ -d "$deps" ] && prefix="$prefix;$deps"
    args+=(-DPLACEMENT_WITH_CUDA=ON -DCMAKE_PREFIX_PATH="$prefix")
    [ -d "$deps" ] && args+=(-DCMAKE_INCLUDE_PATH="$deps/include" -DCMAKE_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu")
  fi
  started=$SECONDS
  if cmake -S "$root" -B "$build" "${args[@]}" >"$logs/cmake.log" 2>&1; then
    log "features: $(grep -o 'placementd features: .*' "$logs/cmake.log" | tail -1)"
    # shellcheck disable=SC2086  # --targets is a list of targets
    if cmake --build "$build" -j"$(nproc)" ${targets:+--target $targets} -- -k 0 >"$logs/build.log" 2>&1; then
      log "built in $((SECONDS - started)) s: $("$build/bin/placementd" --version)"
      # This machine's CMake and compiler are newer than CI's: that libstdc++ still comes first.
      if ! "$root/tests/scripts/libstdcxx_first_test.sh" "$build/bin" 2>&1 | tee -a "$report"; then
        fail "a program linking LibTorch does not need libstdc++ first"
        # What decides it: the compiler CMake used (a wrapper may add flags), where it finds
        # libstdc++, and one program's link line.
        cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
        {
          echo "compiler: $cxx -> $(readlink -f "$cxx") ($(file -b "$(readlink -f "$cxx")" | cut -c1-60)); CXX=${CXX:-unset}"
          echo "libstdc++.so: $("$cxx" -print-file-name=libstdc++.so); libstdc++.a: $("$cxx" -print-file-name=libstdc++.a)"
          echo "link of placementctl-calibrate:"
          ninja -C "$build" -t commands bin/placementctl-calibrate | tail -1 | cut -c1-600
          echo "as the driver passes it to the linker:"
          (cd "$build" && eval "$(ninja -t commands bin/placementctl-calibrate | tail -1 | sed 's/^: && //; s/ && :$//') -###" 2>&1 |
            grep -E 'collect2|/ld' | tr ' ' '\n' | grep -nE 'stdc|as-needed|state|Bstatic|Bdynamic' | head -20)
        } 2>&1 | tee -a "$report"
      fi
    else
      fail "build; the first errors:"
      grep -m 20 -E 'error|undefined reference' "$logs/build.log" | tee -a "$report" || true
    fi
  else
    fail "configure; its last lines:"
    tail -n 20 "$logs/cmake.log" | tee -a "$report"
  fi
  ;;
test)
  need_build
  args=(--test-dir "$build" -j"$(nproc)" --output-on-failure --timeout 300)
  [ -n "$tests" ] && args+=(-R "$tests")
  if OMP_NUM_THREADS=1 ctest "${args[@]}" >"$logs/ctest.log" 2>&1 && ! grep -q 'No tests were found' "$logs/ctest.log"; then
    log "tests: $(grep -E 'tests passed' "$logs/ctest.log" | tail -1)"
  else
    fail "tests: $(grep -E 'tests passed|No tests were found' "$logs/ctest.log" | tail -1)"
    sed -n '/The following tests FAILED/,$p' "$logs/ctest.log" | tee -a "$report"
  fi
  # The tests that need a GPU skip elsewhere: say what each did here.
  log
  log "GPU tests:"
  grep -oE '(Cuda|CudaTransfer|CudaReplicas)\.[A-Za-z]+ \.+ *[*A-Za-z]+( +[0-9.]+ sec)?' "$logs/ctest.log" |
    sed -E 's/ \.+ */ /; s/^/- /' | tee -a "$report" || log "- none ran (filtered out by --tests)"
  ;;
engine)
  need_build
  models=(mlp two_tower gnmt_small bert_small rnnlm_small hf_bert hf_gpt2 hf_llama)
  big=()
  # The papers' sizes only where they take seconds, not minutes.
  ((cpu)) || big=(resnet18 inception_v3 inception_v3_bs32 resnet50_bs64 gnmt4_bs256)
  trace_on=cpu
  [[ $device == cuda* ]] && trace_on=$device
  if ! "$python" "$root/tests/models/make_models.py" --device "$trace_on" "$logs/models" "${models[@]}" "${big[@]}" \
      >"$logs/trace.log" 2>&1; then
    fail "tracing the models on $device; its last lines:"
    tail -n 5 "$logs/trace.log" | tee -a "$report"
    exit 1
  fi
  log "## engine overhead (plain module vs PlacedModule, all on $device)"
  log
  log '```'
  # Line-buffered: a row printed before a crash stays in the log (a crash writes its stack too).
  stdbuf -oL "$build/bin/engine_overhead_bench" --device "$device" "$logs/models" "${models[@]}" "${big[@]}" \
    >"$logs/engine_overhead.log" 2>&1 || fail "engine_overhead_bench (a row failed)"
  tee -a "$report" <"$logs/engine_overhead.log" >/dev/null
  log '```'
  # The torch.export front end (issue #40), which the Python SDK uses by default: job.step against
  # the plain eager PyTorch loop, windows interleaved, a 95% interval each. On the GPU at the
  # sizes issue #40 names; in --cpu mode at sizes a CPU runs in seconds.
  # BERT with the per-op profile (which ops the engine calls more often a step than eager does):
  # on the GPU it was the one model job.step made slower (docs/gpu-runs/2026-11-27-2.md).
  rows=("--model resnet18 --batch 32 --image-size 224" "--model bert --batch 8 --seq 128 --profile 3"
        "--model gpt2 --batch 8 --seq 128" "--model mlp")
  ((cpu)) && rows=("--model mlp --pairs 4" "--model resnet18 --batch 2 --image-size 32 --pairs 2 --window 2")
  log
  log "## export front end: job.step vs plain eager PyTorch (bench/python/step_overhead.py, all on $device)"
  if [ -f "$build/python/placement/__init__.py" ]; then
    for row in "${rows[@]}"; do
      log
      log '```'
      # shellcheck disable=SC2086  # a row is its options, split on spaces
      PYTHONPATH="$build/python" "$python" "$root/bench/python/step_overhead.py" $row --device "$device" \
        --frontend export >"$logs/export_overhead.log" 2>&1 || fail "step_overhead.py $row"
      grep -v -i warn "$logs/export_overhead.log" | tee -a "$report" >/dev/null
      cat "$logs/export_overhead.log" >>"$logs/export_overhead_all.log"
      log '```'
    done
  else
    fail "the Python SDK was not built (no Python.h or libtorch_python for $python: see cmake.log of the build stage)"
  fi
  ;;
live)
  need_build
  # The examples' models and live_bench's.
  "$python" "$root/tests/models/make_models.py" "$logs/models" inception_example gnmt_example mlp two_tower gnmt_small \
    resnet18 bert_small >/dev/null
  start_daemon
  # Each job starts with its ops interleaved over the devices (what the README's example shows)
  # and lets placementd find better.
  for example in inception gnmt; do
    echo "== $example example on $devices"
    if "$build/bin/train_$example" --model "$logs/models/${example}_example.pt" --socket "$socket" --devices "$devices" \
        --memory-gib "$memory_gib" --steps "$steps" --log-every $((steps / 5)) --start interleaved >"$logs/$example.log" 2>&1; then
      report_summary "$example example ($steps steps on $devices)" "$logs/$example.log"
    else
      fail "train_$example; its last lines:"
      tail -n 10 "$logs/$example.log" | tee -a "$report"
    fi
  done
  # The Python SDK (issue #19): its examples placed live, and what job.step costs beyond the plain
  # loop. In --cpu mode at sizes a CPU runs in seconds; on the GPU at the examples' own sizes.
  if [ -f "$build/python/placement/__init__.py" ]; then
    resnet_sizes=() lm_sizes=() overhead=(--model resnet18 --device "$device")
    if ((cpu)); then
      resnet_sizes=(--batch 2 --image-size 32 --classes 10)
      lm_sizes=(--layers 2 --context 16 --width 32 --heads 2 --vocab 64)
      overhead=(--model mlp --pairs 6)
    fi
    for example in resnet lm; do
      sizes="${example}_sizes[@]"
      if PYTHONPATH="$build/python" "$python" "$root/examples/python/train_$example.py" "${!sizes}" --socket "$socket" \
          --devices "$devices" --steps "$steps" --log-every $((steps / 5)) >"$logs/python_$example.log" 2>&1; then
        report_summary "Python $example example ($steps steps on $devices)" "$logs/python_$example.log"
      else
        fail "examples/python/train_$example.py; its last lines:"
        tail -n 10 "$logs/python_$example.log" | tee -a "$report"
      fi
    done
    log "## Python SDK step overhead"
    log
    log '```'
    PYTHONPATH="$build/python" "$python" "$root/bench/python/step_overhead.py" "${overhead[@]}" \
      >"$logs/python_overhead.log" 2>&1 || fail "bench/python/step_overhead.py"
    grep -v -i warn "$logs/python_overhead.log" | tee -a "$report" >/dev/null
    log '```'
  else
    fail "the Python SDK was not built (no Python.h or libtorch_python for $python: see cmake.log of the build stage)"
  fi
  # Data-parallel replicas (issue #20): two ranks of the GNMT example under torchrun's environment
  # on the same devices. With one GPU both ranks share it, which NCCL refuses, so their CUDA
  # gradients go through Gloo and host memory (the summary says so); CudaReplicas.* in the test
  # stage runs NCCL itself. Both ranks must end with the same parameters, bit for bit. torchrun
  # also gives each rank one intra-op thread unless OMP_NUM_THREADS says otherwise; two ranks with a
  # thread per core each oversubscribe the cores (docs/gpu-runs/2026-11-26-2.md: 9.4 s a step).
  port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  replica_steps=$((steps / 4 > 5 ? steps / 4 : 5))
  replicas=()
  for rank in 0 1; do
    RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$build/bin/train_gnmt" \
      --model "$logs/models/gnmt_example.pt" --socket "$socket" --devices "$devices" --memory-gib "$memory_gib" \
      --steps "$replica_steps" --log-every $((replica_steps / 5)) --job gnmt-replicas >"$logs/replica$rank.log" 2>&1 &
    replicas+=($!)
  done
  replicas_ok=1
  for pid in "${replicas[@]}"; do wait "$pid" || replicas_ok=0; done
  # No digest at all (both ranks failed) is a failure to report, not the end of the script.
  digests=$(grep -h '^parameters digest' "$logs/replica0.log" "$logs/replica1.log" | sort -u || true)
  if ((replicas_ok)) && [ "$(grep -c . <<<"$digests")" = 1 ]; then
    report_summary "2 replicas of the gnmt example ($replica_steps steps each on $devices)" "$logs/replica0.log"
    log "both ranks: $digests"
    log
  else
    fail "2 replicas of train_gnmt (exit status or digests differ); their last lines:"
    tail -n 8 "$logs/replica0.log" "$logs/replica1.log" | tee -a "$report"
  fi
  "$build/bin/placementctl" --socket "$socket" --json jobs --finished >"$logs/jobs.json" || fail "placementctl jobs"
  log "## live_bench"
  log
  log '```'
  stdbuf -oL "$build/bin/live_bench" "$logs/models" --devices "$(echo "$devices" | cut -d, -f1,2)" >"$logs/live_bench.log" 2>&1 ||
    fail "live_bench"
  tee -a "$report" <"$logs/live_bench.log" >/dev/null
  log '```'
  ;;
learning)
  need_build
  # What the live phase finds beyond its warm start (issue #45) on a real job: the C++ examples long
  # enough for exploration to end, then each job's warm start (its planning model's answer and
  # predicted time) against what its trials measured, as `placementctl jobs show` prints them.
  "$python" "$root/tests/models/make_models.py" "$logs/models" inception_example gnmt_example >/dev/null
  # The shipped config with the simulator warm start, which the shipped one leaves off.
  sed 's/^# warm_start = "metis"$/warm_start = "simulator"/' "$root/etc/placementd.toml" >"$logs/placementd.toml"
  grep -q '^warm_start = "simulator"$' "$logs/placementd.toml" || { fail "no warm_start line to set in etc/placementd.toml"; exit 1; }
  start_daemon "$logs/placementd.toml"
  for example in inception gnmt; do
    echo "== $example example on $devices"
    if "$build/bin/train_$example" --model "$logs/models/${example}_example.pt" --socket "$socket" --devices "$devices" \
        --memory-gib "$memory_gib" --steps "$steps" --log-every $((steps / 5)) --start interleaved \
        --job "learning-$example" >"$logs/$example.log" 2>&1; then
      report_summary "$example example ($steps steps on $devices)" "$logs/$example.log"
    else
      fail "train_$example; its last lines:"
      tail -n 10 "$logs/$example.log" | tee -a "$report"
    fi
  done
  "$build/bin/placementctl" --socket "$socket" --json jobs --finished >"$logs/jobs.json" || fail "placementctl jobs"
  for example in inception gnmt; do
    id=$("$python" -c 'import json, sys; print(next((str(j["id"]) for j in json.load(open(sys.argv[1])) if j["name"] == sys.argv[2]), ""))' \
      "$logs/jobs.json" "learning-$example" 2>/dev/null || true)
    [ -n "$id" ] || { fail "no finished job learning-$example in placementctl jobs"; continue; }
    log "## placementctl jobs show (learning-$example)"
    log
    log '```'
    "$build/bin/placementctl" --socket "$socket" jobs show "$id" >"$logs/$example-show.log" 2>&1 || fail "placementctl jobs show $id"
    tee -a "$report" <"$logs/$example-show.log" >/dev/null
    log '```'
    log
  done
  ;;
profiles)
  need_build
  models=(mlp two_tower gnmt_small rnnlm_small bert_small)
  ((cpu)) || models+=(resnet18 inception_example gnmt_example)
  "$python" "$root/tests/models/make_models.py" "$logs/models" "${models[@]}" >/dev/null
  kind=${device%%:*}
  log "## per-op profiles on $device (placementctl capture --profile $kind)"
  log
  log "| model | ops | forward ms | backward ms | update ms | capture s |"
  log "|---|---|---|---|---|---|"
  for m in "${models[@]}"; do
    inputs=$("$python" -c "import json,sys; s=json.load(open(sys.argv[1])); print(' '.join('--input ' + 'x'.join(map(str, i)) for i in s['inputs']), '--dtype', s['dtype'])" "$logs/models/$m.json")
    started=$SECONDS
    # shellcheck disable=SC2086  # $inputs is a list of options
    if "$build/bin/placementctl" capture "$logs/models/$m.pt" $inputs --profile "$device" -o "$logs/$m.json" >"$logs/$m.log" 2>&1; then
      row=$("$python" - "$logs/$m.json" "$kind" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
ops = g["ops"]
total = lambda key: sum(op.get("profile", {}).get(sys.argv[2], {}).get(key, 0.0) for op in ops) * 1e3
print(f'{len(ops)} | {total("forward_s"):.3f} | {total("backward_s"):.3f} | {total("update_s"):.3f}')
PY
)
      log "| $m | $row | $((SECONDS - started)) |"
    else
      fail "capture of $m; its last lines:"
      tail -n 5 "$logs/$m.log" | tee -a "$report"
    fi
  done
  # The cost model against those profiles, per op kind: what re-fits a preset's efficiencies.
  # On a GPU, the H100 preset; on the CPU, this machine's own calibration.
  if ((cpu)); then
    "$build/bin/placementctl" calibrate -o "$logs/spec.toml" >/dev/null 2>"$logs/calibrate.log" || fail "placementctl calibrate"
  else
    printf '[[device]]\nname = "%s"\nspec = "h100-sxm"\n' "$device" >"$logs/spec.toml"
  fi
  log
  log "## the cost model against the $kind profiles (placementctl simulate --by-kind)"
  log
  log '```'
  for m in "${models[@]}"; do
    [[ -f $logs/$m.json ]] || continue
    "$build/bin/placementctl" simulate --by-kind --graph "$logs/$m.json" --devices "$logs/spec.toml" \
      >"$logs/$m-by-kind.log" 2>&1 || fail "simulate --by-kind of $m"
    tee -a "$report" <"$logs/$m-by-kind.log" >/dev/null
  done
  log '```'
  ;;
offload)
  need_build
  # A model larger than the capped GPU (issue #66's benchmark): plain eager with memory to spare,
  # torchao's CPUOffloadOptimizer, FSDP2's CPUOffloadPolicy and placementd's residence plans, the
  # same model and batches, each row in a process of its own. Rows print as they end, so a stage
  # cut short keeps the rows it ran; every row's measurements come back in offload.json.
  site=
  if ((!cpu)); then
    wheel=$(compgen -G "$deps/wheels/torchao-*.whl" | head -1 || true)
    if [ -n "$wheel" ]; then
      site=$build/offload-site
      "$python" -m pip install -q --no-deps --no-index --target "$site" "$wheel" >"$logs/pip.log" 2>&1 ||
        fail "installing $(basename "$wheel"); pip said: $(tail -n 1 "$logs/pip.log")"
    else
      log "no torchao wheel in $deps/wheels (scripts/stage-gpu-deps.sh stages it): its row says torchao is missing"
    fi
  fi
  args=(--check --row-timeout 240 --json "$out/offload.json")
  if ((cpu)); then
    # The stage's own plumbing: python.offload_bench runs every CPU row in the suite.
    args+=(--cpu --rows ideal,placementd:optimizer_on_host)
  else
    args+=(--device "$device" --steps 10 --warmup 2)
  fi
  # shellcheck disable=SC2206  # --bench-args is a list of options
  args+=($bench_args)
  log "## offload: placementd's residence plans against torchao and FSDP2 (bench/python/offload_bench.py ${args[*]})"
  log
  log '```'
  status=0
  PYTHONPATH="$build/python${site:+:$site}" stdbuf -oL "$python" "$root/bench/python/offload_bench.py" "${args[@]}" \
    >"$logs/offload.log" 2>&1 || status=$?
  grep -v -i warn "$logs/offload.log" | tee -a "$report" >/dev/null
  log '```'
  # Exit 1 is a target not met (the check lines say which): a finding, not a failure of the run.
  case $status in
    0) ;;
    1) log "targets not met: see the check lines above" ;;
    *) fail "offload_bench.py exited $status" ;;
  esac
  ;;
esac
((failures == 0))
