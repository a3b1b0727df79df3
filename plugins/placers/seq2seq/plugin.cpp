#include "placement/plugin_export.h"
#include "seq2seq_network.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "seq2seq";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "Learned seq2seq placer: bi-LSTM encoder, LSTM decoder, attention before (EAGLE) or after (HP)";
  i.hyperparameters = learned_placer_hyperparameters();
  i.hyperparameters.push_back({"hidden", int64_t{256}, "LSTM hidden units (HP/EAGLE: 256 or 512)", 2.0, 8192.0, {}});
  i.hyperparameters.push_back(
      {"device_embedding", int64_t{32}, "size of the previous-device embedding fed to the decoder", 1.0, 4096.0, {}});
  i.hyperparameters.push_back({"attention", std::string("after"),
                               "content-based attention before the decoder (EAGLE) or after it (HP)",
                               std::nullopt, std::nullopt, {"before", "after"}});
  i.torch_version = linked_torch_version();
  return i;
}

std::vector<ParamError> validate(const Params& p) {
  if (param_int(p, "hidden") % 2 != 0) return {{"hidden", "must be even (the encoder has two directions)"}};
  return {};
}

std::unique_ptr<Placer> create(const Params& p) {
  const AttentionPosition attention =
      param_string(p, "attention") == "before" ? AttentionPosition::kBefore : AttentionPosition::kAfter;
  return std::make_unique<LearnedPlacer>(
      "seq2seq", seq2seq_network(param_int(p, "hidden"), param_int(p, "device_embedding"), attention),
      logit_shaping(p), static_cast<int>(param_int(p, "vocabulary")));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate, placement::plugins::create)
