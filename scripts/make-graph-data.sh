#!/usr/bin/env bash
# Regenerates tests/data/graphs/: the benchmark models (Inception-V3, ResNet-50, GNMT-4 per layer
# and unrolled, RNNLM, BERT-base) traced with random weights, captured and profiled on this CPU,
# written as gzip-compressed OpGraph JSON (no weights). Prints each model's capture+profile wall
# time and peak memory. Batch size 1 (the inputs in tests/models/make_models.py): CPU profiles of
# the papers' large batches would take hours on a 2-core machine.
#
#   scripts/make-graph-data.sh [--keep-profiles] [MODEL ...]
#   scripts/make-graph-data.sh --papers [MODEL ...]
#
# --keep-profiles captures again without profiling and keeps each file's profiles (the model must be
# unchanged): how files written before placementd recorded op work gain it.
#
# --papers writes tests/data/graphs/papers/: the papers' models at the papers' batch sizes, and two
# that do not fit one 80 GiB GPU, with shapes and op work but no profiles (the cost model times
# them). Those without convolutions are traced and captured on the meta device, so nothing is
# computed and GPT-2 XL needs no memory for weights; the CNNs are captured on this CPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/python-env.sh
. "$root/scripts/python-env.sh"
build=${BUILD_DIR:-$root/build}
out=$root/tests/data/graphs
keep=0
papers=0
if [[ ${1:-} == --keep-profiles ]]; then
  keep=1
  shift
elif [[ ${1:-} == --papers ]]; then
  papers=1
  out=$out/papers
  shift
fi
models=("$@")
# PyTorch's meta convolution does not trace (make_models.py): the CNNs are traced on the CPU.
cnns=(inception_v3 inception_v3_bs32 resnet50_bs64)
if ((papers)); then
  ((${#models[@]})) || models=("${cnns[@]}" gnmt4_bs128 gnmt4_unrolled_bs128 gnmt8_bs256 gnmt8_unrolled_bs256
    rnnlm_bs64 bert_base_mlm_bs24 bert_large_mlm_bs24 gnmt8_vocab1m_bs256 gpt2_xl_bs8)
else
  ((${#models[@]})) || models=(inception_v3 resnet50 gnmt4 gnmt4_unrolled rnnlm bert_base)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
on_cpu=() on_meta=()
for m in "${models[@]}"; do
  if ((papers)) && [[ " ${cnns[*]} " != *" $m "* ]]; then on_meta+=("$m"); else on_cpu+=("$m"); fi
done
((${#on_cpu[@]} == 0)) || "$placement_python" "$root/tests/models/make_models.py" "$tmp" "${on_cpu[@]}" >/dev/null
((${#on_meta[@]} == 0)) ||
  "$placement_python" "$root/tests/models/make_models.py" --device meta "$tmp" "${on_meta[@]}" >/dev/null
printf '%-22s %8s %10s  %s\n' model "time(s)" "peak(MiB)" summary
for m in "${models[@]}"; do
  read -r dtype args < <("$placement_python" -c "
import json; s = json.load(open('$tmp/$m.json'))
print(s['dtype'], ' '.join('--input ' + 'x'.join(map(str, shape)) for shape in s['inputs']))")
  if ((papers)); then
    measure=()
    : >"$tmp/log.head"
  elif ((keep)); then
    measure=(--keep-profiles "$out/$m.json.gz")
    # The summary line is the first without a profile line before it.
    echo >"$tmp/log.head"
  else
    measure=(--profile cpu --profile-steps 3)
    : >"$tmp/log.head"
  fi
  # shellcheck disable=SC2086
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$build/bin/placementctl-capture" "$tmp/$m.pt" $args --dtype "$dtype" \
    ${measure[@]+"${measure[@]}"} -o "$out/$m.json.gz" >"$tmp/log.body"
  cat "$tmp/log.head" "$tmp/log.body" >"$tmp/log"
  read -r seconds kib <"$tmp/time"
  printf "%-22s %8s %10d  %s; %s\n" "$m" "$seconds" $((kib / 1024)) "$(sed -n 2p "$tmp/log" | sed "s/^[^:]*: //; s/, fingerprint.*//")" "$(head -1 "$tmp/log" | sed "s/^[^:]*: //")"
done
