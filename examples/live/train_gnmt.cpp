// A GNMT-style LSTM encoder-decoder (4 layers each way, attention) trained on synthetic token
// sequences while placementd places it. The model comes from tests/models/make_models.py
// (gnmt_example: vocabulary 1000, hidden 128, batch 16, 20 tokens).
//
//   train_gnmt --model gnmt_example.pt --steps 300 [--socket S] [--devices cpu:0,cpu:1]
//   (every option: train_gnmt --help; docs/live.md)

#include <torch/nn/functional/loss.h>

#include "live_training.h"

namespace {

constexpr int64_t kVocab = 1000, kBatch = 16, kTokens = 20;

examples::ExampleModel gnmt(const examples::LiveOptions& options) {
  examples::ExampleModel model;
  model.example_inputs = {torch::randint(kVocab, {kBatch, kTokens}),
                          torch::randint(kVocab, {kBatch, kTokens})};
  model.batch = [seed = options.seed](int64_t step) {
    torch::manual_seed(static_cast<int64_t>(seed * 1000003 + static_cast<uint64_t>(step)));
    const at::Tensor src = torch::randint(kVocab, {kBatch, kTokens});
    // The synthetic task: translate to the reversed source sequence.
    const at::Tensor tgt = src.flip(1);
    return examples::Batch{{src, tgt}, tgt};
  };
  model.loss = [](const at::Tensor& logits, const at::Tensor& target) {
    return torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}),
                                                target.reshape({-1}).to(logits.device()));
  };
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::live_main(argc, argv,
                             {"train_gnmt", "GNMT-style encoder-decoder, placed live by placementd",
                              "gnmt-example", gnmt});
}
