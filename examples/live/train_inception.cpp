// A small Inception-style CNN (a stem and three four-branch inception blocks) trained on synthetic
// 32x32 images while placementd places it. The model comes from tests/models/make_models.py
// (inception_example: batch 16).
//
//   train_inception --model inception_example.pt --steps 300 [--socket S] [--devices cpu:0,cpu:1]
//   (every option: train_inception --help; docs/live.md)

#include <torch/nn/functional/loss.h>

#include "live_training.h"

namespace {

constexpr int64_t kBatch = 16, kClasses = 10;

examples::ExampleModel inception(const examples::LiveOptions& options) {
  examples::ExampleModel model;
  model.example_inputs = {torch::randn({kBatch, 3, 32, 32})};
  model.batch = [seed = options.seed](int64_t step) {
    torch::manual_seed(static_cast<int64_t>(seed * 1000003 + static_cast<uint64_t>(step)));
    const at::Tensor labels = torch::randint(kClasses, {kBatch});
    // Images whose mean brightness encodes the label, plus noise: learnable, like a real task.
    const at::Tensor images =
        torch::randn({kBatch, 3, 32, 32}) + labels.to(torch::kFloat).view({kBatch, 1, 1, 1}) / 5.0;
    return examples::Batch{{images}, labels};
  };
  model.loss = [](const at::Tensor& logits, const at::Tensor& target) {
    return torch::nn::functional::cross_entropy(logits, target.to(logits.device()));
  };
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::live_main(argc, argv,
                             {"train_inception", "Inception-style CNN, placed live by placementd",
                              "inception-example", inception});
}
