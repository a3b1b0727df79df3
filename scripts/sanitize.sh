#!/usr/bin/env bash
# The sanitizer and fuzzing stages (issue #41), which CI runs after the tests (.ci/run):
#  1. builds placementd's test programs without LibTorch with clang under AddressSanitizer and
#     UndefinedBehaviorSanitizer (any finding aborts) into build-sanitize/, and runs the unit and
#     integration tests there: the daemon with real sockets, the SDK's protocol code, the config and
#     topology readers, the plugins (the tests of the LibTorch plugins skip);
#  2. runs each libFuzzer target (tests/fuzz) for --fuzz-seconds from its seeds, as many at once as
#     there are cores (each fuzzes on one): the repository's own config, topology and graph files,
#     and the frames, graph uploads (the payload weigher's seeds too) and stored placements
#     fuzz_make_seeds encodes.
#     A crash leaves its input in build-sanitize/fuzz/NAME/ (the run says which file): make it a
#     regression test;
#  3. builds the policy-state fuzzer, which needs LibTorch, alone with clang, ASan and UBSan into
#     build-fuzz-torch/ (against the torch of scripts/install-deps.sh), before 2's runs, and runs
#     it among them, from the trained states it writes itself;
#  4. builds the test programs whose code runs threads (the server's, the live sessions', the SDK's
#     job channel; CMake target thread_tests) under ThreadSanitizer into build-tsan/ and runs their
#     tests there (label threads), the daemons they start included: a data race stops the process
#     that has it (halt_on_error) and fails its test.
# Every build is -O1 with line tables only, all a report's stack needs: the integration tests'
# daemon_test.cpp compiles under ASan in 33 s so, in 54 s at -O2 -g (2-vCPU VM, 2026-12-02).
#
#   scripts/sanitize.sh [--fuzz-seconds N] [--no-tests] [--no-fuzz] [--no-thread]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANITIZE_BUILD_DIR:-$root/build-sanitize}
tsan_build=${TSAN_BUILD_DIR:-$root/build-tsan}
torch_fuzz_build=${TORCH_FUZZ_BUILD_DIR:-$root/build-fuzz-torch}
fuzz_seconds=30
tests=1
fuzz=1
thread=1
while [ $# -gt 0 ]; do
  case "$1" in
    --fuzz-seconds) fuzz_seconds=$2; shift 2 ;;
    --no-tests) tests=0; shift ;;
    --no-fuzz) fuzz=0; shift ;;
    --no-thread) thread=0; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v clang++ >/dev/null || { echo "sanitize.sh: needs clang++ (scripts/install-deps.sh installs it)" >&2; exit 1; }

# A report's stack needs file and line, nothing more of the debug information.
optimize="-O1 -gline-tables-only -DNDEBUG"
flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$optimize" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$optimize")
mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja "${flags[@]}" \
  -DPLACEMENT_WITH_TORCH=OFF -DPLACEMENT_WITH_CUDA=OFF -DPLACEMENT_BUILD_BENCH=OFF -DPLACEMENT_BUILD_FUZZERS=ON \
  -DPLACEMENT_SANITIZERS=address,undefined >"$build/configure.log" 2>&1 || { tail -n 20 "$build/configure.log" >&2; exit 1; }
started=$SECONDS
cmake --build "$build" --target sanitized_tests
echo "sanitize.sh: built in $((SECONDS - started)) s"

# Not in the sanitized runs: what needs LibTorch or Python (not built), installs and packages, and
# what the main run already covers whose cost is elsewhere (docs, help texts, the load and size
# figures, the formatting).
not_here='^((package|install|systemd|models|python|docs|programs|limits|scripts|style|link)\.|live\.noise_harness$)'
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if ((tests)); then
  started=$SECONDS
  OMP_NUM_THREADS=1 ctest --test-dir "$build" -j"$(nproc)" --output-on-failure --timeout 600 -E "$not_here"
  echo "sanitize.sh: tests ran in $((SECONDS - started)) s"
fi
if ((fuzz)); then
  work=$build/fuzz
  seeds=$(mktemp -d -t placementd-seeds.XXXXXX)  # mktemp fills in the X's
  trap 'rm -rf "$seeds"' EXIT
  "$build/bin/fuzz_make_seeds" "$seeds"
  declare -A corpus=(
    [frame]="$seeds/frame"
    [graph_limits]="$seeds/graph_limits"
    [payload_weight]="$seeds/graph_limits"
    [stored_placement]="$seeds/stored_placement"
    [config]="$root/etc"
    [topology]="$root/tests/data/topologies"
    [graph_file]="$root/examples/graphs"
  )
  # fuzz NAME BINARY SEEDS: runs one target for --fuzz-seconds.
  fuzz() {
    local name=$1 binary=$2 seed_dir=$3 started=$SECONDS
    mkdir -p "$work/$name"
    # Found inputs go to $work/$name (kept between runs); the seed folders are only read.
    (cd "$work/$name" && "$binary" -max_total_time="$fuzz_seconds" -max_len=65536 \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$work/$name" "$seed_dir" >"$work/$name.log" 2>&1) || {
      echo "sanitize.sh: ${name}_fuzzer failed; its log ($work/$name.log) ends:" >&2
      tail -n 40 "$work/$name.log" >&2
      exit 1
    }
    echo "sanitize.sh: ${name}_fuzzer: $(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' "$work/$name.log" | grep -oE '[0-9]+') inputs in $((SECONDS - started)) s, no finding"
  }
  # As many at once as there are cores. A failure ends the stage once those running beside it end.
  running=()
  failed=0
  finish() {
    for pid in "${running[@]}"; do wait "$pid" || failed=1; done
    running=()
    if ((failed)); then exit 1; fi
  }
  # The policy-state reader needs LibTorch, which the build above leaves out: its own build, of
  # that target alone.
  # shellcheck source=scripts/python-env.sh
  . "$root/scripts/python-env.sh"
  torch_prefix=$("$placement_python" -c 'import torch; print(torch.utils.cmake_prefix_path)') || {
    echo "sanitize.sh: no torch in $placement_venv for the policy-state fuzzer: run scripts/install-deps.sh" >&2
    exit 1
  }
  mkdir -p "$torch_fuzz_build"
  CC=clang CXX=clang++ cmake -S "$root" -B "$torch_fuzz_build" -G Ninja "${flags[@]}" \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DPLACEMENT_WITH_TORCH=ON -DPLACEMENT_WITH_CUDA=OFF -DPLACEMENT_BUILD_BENCH=OFF \
    -DPLACEMENT_BUILD_FUZZERS=ON -DPLACEMENT_SANITIZERS=address,undefined >"$torch_fuzz_build/configure.log" 2>&1 ||
    { tail -n 20 "$torch_fuzz_build/configure.log" >&2; exit 1; }
  started=$SECONDS
  cmake --build "$torch_fuzz_build" --target policy_state_fuzzer
  echo "sanitize.sh: policy-state fuzzer built in $((SECONDS - started)) s"
  mkdir -p "$seeds/policy_state"
  PLACEMENT_FUZZ_WRITE_SEEDS="$seeds/policy_state" "$torch_fuzz_build/bin/policy_state_fuzzer"
  # Eight targets, two at a time on two cores: the policy-state fuzzer is built first so that it
  # fuzzes beside the seventh instead of after it, alone.
  for name in frame graph_limits payload_weight stored_placement config topology graph_file policy_state; do
    if [ "$name" = policy_state ]; then
      LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan_suppressions.txt OMP_NUM_THREADS=1 \
        fuzz policy_state "$torch_fuzz_build/bin/policy_state_fuzzer" "$seeds/policy_state" &
    else
      fuzz "$name" "$build/bin/${name}_fuzzer" "${corpus[$name]}" &
    fi
    running+=($!)
    if ((${#running[@]} >= $(nproc))); then finish; fi
  done
  finish
fi
if ((thread && tests)); then
  mkdir -p "$tsan_build"
  CC=clang CXX=clang++ cmake -S "$root" -B "$tsan_build" -G Ninja "${flags[@]}" \
    -DPLACEMENT_WITH_TORCH=OFF -DPLACEMENT_WITH_CUDA=OFF -DPLACEMENT_BUILD_BENCH=OFF -DPLACEMENT_BUILD_FUZZERS=OFF \
    -DPLACEMENT_SANITIZERS=thread >"$tsan_build/configure.log" 2>&1 || { tail -n 20 "$tsan_build/configure.log" >&2; exit 1; }
  started=$SECONDS
  cmake --build "$tsan_build" --target thread_tests
  echo "sanitize.sh: ThreadSanitizer build in $((SECONDS - started)) s"
  started=$SECONDS
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 OMP_NUM_THREADS=1 \
    ctest --test-dir "$tsan_build" -j"$(nproc)" --output-on-failure --timeout 600 -L '^threads$'
  echo "sanitize.sh: tests under ThreadSanitizer ran in $((SECONDS - started)) s"
fi
