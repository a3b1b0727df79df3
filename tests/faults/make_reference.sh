#!/usr/bin/env bash
# The fault suite's reference run (ctest faults.reference): the GNMT example trained without
# placementd for as many steps as this machine trains in about SECONDS, at least MIN and at most
# MAX, a multiple of 8. Those steps size every job of the suite (fault_suite_test.cpp): the kill -9
# and SIGSTOP tests' jobs train all of them, the others a quarter. So a test lasts about as long on
# a fast machine as on a slow one: long enough for its faults (ten restarts of the daemon, a 30 s
# stop) and no longer, where fixed step counts ran 1 minute on one machine and 4 on the next.
#   make_reference.sh TRAIN_GNMT MODEL LOSSES SECONDS MIN MAX
set -euo pipefail
train=$1 model=$2 losses=$3 seconds=$4 min=$5 max=$6
# The pace: the fastest of three windows of 10 steps after 10 of warm-up (the example logs each
# window's mean). Other tests running beside this one slow some windows; a pace too slow would
# size the jobs too short for the faults when they later run with the machine to themselves.
timing=$("$train" --model "$model" --steps 40 --log-every 10 --no-daemon)
ms=$(sed -nE 's/^step +(20|30|40) +loss +[^ ]+ +([0-9.]+) ms\/step.*/\2/p' <<<"$timing" |
  awk 'NR == 1 || $1 < min { min = $1 } END { if (NR) print min }')
if [ -z "$ms" ]; then
  echo "make_reference.sh: no step times in the example's output:" >&2
  echo "$timing" >&2
  exit 1
fi
steps=$(awk -v s="$seconds" -v ms="$ms" -v lo="$min" -v hi="$max" \
  'BEGIN { n = int(s * 1000 / ms / 8) * 8; if (n < lo) n = lo; if (n > hi) n = hi; print n }')
echo "the example trains a step in $ms ms here: $steps steps for about $seconds s"
"$train" --model "$model" --steps "$steps" --log-every "$steps" --no-daemon --losses "$losses"
lines=$(wc -l <"$losses")
[ "$lines" -eq "$steps" ] || { echo "make_reference.sh: $losses has $lines losses, not $steps" >&2; exit 1; }
