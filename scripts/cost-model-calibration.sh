#!/usr/bin/env bash
# Prints the cost model's H100 calibration (docs/simulator.md, "Calibration"): the step time the
# simulator predicts for each calibration model on one H100 (preset h100-sxm, no profile) beside
# the step time measured on the project's H100 with PyTorch 2.11 eager (fp32 weights, Adam, cuDNN
# benchmark mode). The models are traced with random weights into a temporary folder and captured
# without profiling: BERT on PyTorch's meta device (shapes and work, no weights: the same
# prediction in seconds, not minutes), ResNet-50 on the CPU (convolutions do not trace on meta);
# under a minute on 2 cores.
#
#   scripts/cost-model-calibration.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/python-env.sh
. "$root/scripts/python-env.sh"
bin=${BUILD_DIR:-$root/build}/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/h100.toml" <<'TOML'
[[device]]
name = "cuda:0"
spec = "h100-sxm"
TOML
# model, input shape, input dtype, measured ms, what it is
models=(
  "resnet50_bs64 64x3x224x224 float32 38.8 ResNet-50, batch 64, 224x224"
  "bert_base_mlm_bs24 24x384 int64 166.6 BERT-base masked LM, batch 24, sequence 384"
)
"$placement_python" "$root/tests/models/make_models.py" "$tmp" resnet50_bs64 >/dev/null
"$placement_python" "$root/tests/models/make_models.py" --device meta "$tmp" bert_base_mlm_bs24 >/dev/null
printf '%-48s %12s %13s %8s\n' model "measured ms" "predicted ms" error
for m in "${models[@]}"; do
  read -r name shape dtype measured what <<<"$m"
  "$bin/placementctl-capture" "$tmp/$name.pt" --input "$shape" --dtype "$dtype" -o "$tmp/$name.json.gz" >/dev/null
  predicted=$("$bin/placementctl" simulate --json --graph "$tmp/$name.json.gz" --devices "$tmp/h100.toml" |
    "$placement_python" -c "import json, sys; print(json.load(sys.stdin)['placements'][0]['step_time_s'] * 1e3)")
  "$placement_python" -c "
m, p = $measured, $predicted
print(f'{\"$what\":48s} {m:12.1f} {p:13.1f} {100 * (p - m) / m:+7.1f}%')"
done
