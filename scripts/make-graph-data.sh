#!/usr/bin/env bash
# Regenerates tests/data/graphs/: the benchmark models (Inception-V3, ResNet-50, GNMT-4 per layer
# and unrolled, RNNLM, BERT-base) traced with random weights, captured and profiled on this CPU,
# written as gzip-compressed OpGraph JSON (no weights). Prints each model's capture+profile wall
# time and peak memory. Batch size 1 (the inputs in tests/models/make_models.py): CPU profiles of
# the papers' large batches would take hours on a 2-core machine.
#
#   scripts/make-graph-data.sh [--keep-profiles] [MODEL ...]
#
# --keep-profiles captures again without profiling and keeps each file's profiles (the model must be
# unchanged): how files written before placementd recorded op work gain it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/python-env.sh
. "$root/scripts/python-env.sh"
build=${BUILD_DIR:-$root/build}
out=$root/tests/data/graphs
keep=0
if [[ ${1:-} == --keep-profiles ]]; then
  keep=1
  shift
fi
models=("$@")
((${#models[@]})) || models=(inception_v3 resnet50 gnmt4 gnmt4_unrolled rnnlm bert_base)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
"$placement_python" "$root/tests/models/make_models.py" "$tmp" "${models[@]}" >/dev/null
printf '%-16s %8s %10s  %s\n' model "time(s)" "peak(MiB)" summary
for m in "${models[@]}"; do
  read -r dtype args < <("$placement_python" -c "
import json; s = json.load(open('$tmp/$m.json'))
print(s['dtype'], ' '.join('--input ' + 'x'.join(map(str, shape)) for shape in s['inputs']))")
  if ((keep)); then
    measure=(--keep-profiles "$out/$m.json.gz")
    # The summary line is the first without a profile line before it.
    echo >"$tmp/log.head"
  else
    measure=(--profile cpu --profile-steps 3)
    : >"$tmp/log.head"
  fi
  # shellcheck disable=SC2086
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$build/bin/placementctl-capture" "$tmp/$m.pt" $args --dtype "$dtype" \
    "${measure[@]}" -o "$out/$m.json.gz" >"$tmp/log.body"
  cat "$tmp/log.head" "$tmp/log.body" >"$tmp/log"
  read -r seconds kib <"$tmp/time"
  printf "%-16s %8s %10d  %s; %s\n" "$m" "$seconds" $((kib / 1024)) "$(sed -n 2p "$tmp/log" | sed "s/^[^:]*: //; s/, fingerprint.*//")" "$(head -1 "$tmp/log" | sed "s/^[^:]*: //")"
done
