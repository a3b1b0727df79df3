// Engine overhead: a training step (forward, backward, SGD update) of the plain TorchScript module
// against the same step through PlacedModule with every op on the same device. Steps alternate
// between the two so machine noise hits both alike; medians over >= 20 steps after warm-up.
// Issue #3 targets: <= 3% at GPU-bound batches, <= 10% at batch size 1.
//
//   engine_overhead_bench [MODEL_DIR [MODEL ...]]  (default: traces the small test models)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/optim/sgd.h>
#include <unistd.h>

#include "bench_util.h"
#include "placement/capture.h"
#include "placement/engine.h"

using Clock = std::chrono::steady_clock;

namespace {

using placement::bench::median;

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "";
  std::vector<std::string> names;
  for (int i = 2; i < argc; ++i) names.push_back(argv[i]);
  if (names.empty()) names = {"mlp", "two_tower", "gnmt_small", "gnmt_small_unrolled", "rnnlm_small", "bert_small", "resnet18"};
  if (dir.empty()) dir = placement::bench::trace_models(SOURCE_DIR, "overhead");
  std::printf("threads: %d intra-op; device: cpu\n", at::get_num_threads());
  std::printf("%-20s %6s %12s %12s %9s\n", "model", "ops", "plain", "placed", "overhead");
  const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (const std::string& name : names) {
    std::ifstream in(dir + "/" + name + ".json");
    const auto spec = nlohmann::json::parse(in);
    torch::jit::Module plain = torch::jit::load(dir + "/" + name + ".pt");
    torch::jit::Module copy = torch::jit::load(dir + "/" + name + ".pt");
    const auto tensors = placement::example_inputs(spec["inputs"].get<std::vector<std::vector<int64_t>>>(), spec["dtype"]);
    std::vector<c10::IValue> inputs(tensors.begin(), tensors.end());
    placement::PlacedModule placed(copy, placement::capture(copy, tensors, name),
                                   placement::DeviceSet::uniform({{placement::DeviceKind::kCpu, 0, memory, 1.0}}, 1e9, 0));
    std::vector<at::Tensor> plain_params;
    for (const auto& p : plain.parameters()) plain_params.push_back(p);
    torch::optim::SGD plain_sgd(plain_params, torch::optim::SGDOptions(1e-4));
    torch::optim::SGD placed_sgd(placed.parameters(), torch::optim::SGDOptions(1e-4));
    auto step_plain = [&] {
      plain.forward(inputs).toTensor().pow(2).mean().backward();
      plain_sgd.step();
      plain_sgd.zero_grad();
    };
    auto step_placed = [&] {
      placed.forward(inputs).at(0).toTensor().pow(2).mean().backward();
      placed_sgd.step();
      placed_sgd.zero_grad();
    };
    const int steps = name.rfind("resnet", 0) == 0 || name.rfind("inception", 0) == 0 || name.rfind("bert_base", 0) == 0 ? 20 : 60;
    std::vector<double> a, b;
    for (int i = 0; i < steps + 5; ++i) {
      auto t0 = Clock::now();
      step_plain();
      auto t1 = Clock::now();
      step_placed();
      auto t2 = Clock::now();
      if (i < 5) continue;
      a.push_back(std::chrono::duration<double>(t1 - t0).count());
      b.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    const double ma = median(a), mb = median(b);
    std::printf("%-20s %6zu %9.3f ms %9.3f ms %+8.1f%%\n", name.c_str(), placed.graph().ops.size(), ma * 1e3, mb * 1e3,
                (mb / ma - 1) * 100);
  }
  return 0;
}
