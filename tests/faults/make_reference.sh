#!/usr/bin/env bash
# The fault suite's reference run: the GNMT example trained without placementd for as many steps as
# this machine trains in about SECONDS, at least MIN and at most MAX, a multiple of 8. Those steps
# size every job of the suite (fault_suite_test.cpp): the longest trains all of them, the others a
# half or a quarter. So a test lasts about as long on a fast machine as on a slow one: long enough
# for its faults (ten restarts of the daemon, a 30 s stop) and no longer, where fixed step counts
# ran 1 minute on one machine and 4 on the next.
#   make_reference.sh pace TRAIN_GNMT MODEL STEPS_FILE SECONDS MIN MAX
#     times 30 steps (ctest faults.pace, which runs alone: a pace measured beside other tests
#     would be slower than the suite's jobs later see, and size them too short) and writes the
#     steps to STEPS_FILE;
#   make_reference.sh train TRAIN_GNMT MODEL STEPS_FILE LOSSES
#     trains them, writing their losses (ctest faults.reference).
set -euo pipefail
mode=$1 train=$2 model=$3 steps_file=$4
case $mode in
pace)
  seconds=$5 min=$6 max=$7
  # The last 10 of the 30 steps are timed (the example logs each window's mean): the first ones
  # include the warm-up.
  timing=$("$train" --model "$model" --steps 30 --log-every 10 --no-daemon)
  ms=$(sed -nE 's/^step +30 +loss +[^ ]+ +([0-9.]+) ms\/step.*/\1/p' <<<"$timing")
  if [ -z "$ms" ]; then
    echo "make_reference.sh: no time for step 30 in the example's output:" >&2
    echo "$timing" >&2
    exit 1
  fi
  steps=$(awk -v s="$seconds" -v ms="$ms" -v lo="$min" -v hi="$max" \
    'BEGIN { n = int(s * 1000 / ms / 8) * 8; if (n < lo) n = lo; if (n > hi) n = hi; print n }')
  echo "$steps" >"$steps_file"
  echo "the example trains a step in $ms ms here: $steps steps for about $seconds s"
  ;;
train)
  losses=$5
  steps=$(cat "$steps_file")
  "$train" --model "$model" --steps "$steps" --log-every "$steps" --no-daemon --losses "$losses"
  lines=$(wc -l <"$losses")
  [ "$lines" -eq "$steps" ] || { echo "make_reference.sh: $losses has $lines losses, not $steps" >&2; exit 1; }
  ;;
*)
  echo "make_reference.sh: mode must be pace or train, not '$mode'" >&2
  exit 2
  ;;
esac
