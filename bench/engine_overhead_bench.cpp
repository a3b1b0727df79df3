// Engine overhead: a training step (forward, backward, SGD update) of the plain TorchScript module
// against the same step through PlacedModule with every op on the same device. Steps alternate
// between the two so machine noise hits both alike; medians over >= 20 steps after warm-up.
// Issue #3 targets: <= 3% at GPU-bound batches, <= 10% at batch size 1.
//
//   engine_overhead_bench [--device cpu|cuda:N] [MODEL_DIR [MODEL ...]]
//     (default: cpu, the small test models traced into a temp dir). On a GPU the module, its inputs
//     and the placed ops are on that device and every step ends with a device synchronisation.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>
#include <unistd.h>

#include "bench_util.h"
#include "placement/capture.h"
#include "placement/engine.h"

using Clock = std::chrono::steady_clock;

namespace {

using placement::bench::median;

}  // namespace

int main(int argc, char** argv) try {
  std::string dir, device_name = "cpu";
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) device_name = argv[++i];
    else if (dir.empty()) dir = arg;
    else names.push_back(arg);
  }
  const placement::Device device = placement::parse_device_name(device_name);
  const bool cuda = device.kind == placement::DeviceKind::kCuda;
  if (cuda && static_cast<int>(torch::cuda::device_count()) <= device.index)
    throw std::invalid_argument(device_name + " asked for, but this LibTorch sees " +
                                std::to_string(torch::cuda::device_count()) + " CUDA device(s)");
  const c10::Device torch_device = cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device.index)) : c10::Device(c10::kCPU);
  auto sync = [cuda] {
    if (cuda) torch::cuda::synchronize();
  };
  if (names.empty()) names = {"mlp", "two_tower", "gnmt_small", "gnmt_small_unrolled", "rnnlm_small", "bert_small", "resnet18"};
  if (dir.empty()) dir = placement::bench::trace_models(SOURCE_DIR, "overhead");
  std::printf("threads: %d intra-op; device: %s\n", at::get_num_threads(), device_name.c_str());
  std::printf("%-20s %6s %12s %12s %9s\n", "model", "ops", "plain", "placed", "overhead");
  const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (const std::string& name : names) {
    std::ifstream in(dir + "/" + name + ".json");
    const auto spec = nlohmann::json::parse(in);
    torch::jit::Module plain = torch::jit::load(dir + "/" + name + ".pt");
    torch::jit::Module copy = torch::jit::load(dir + "/" + name + ".pt");
    const auto tensors = placement::example_inputs(spec["inputs"].get<std::vector<std::vector<int64_t>>>(), spec["dtype"]);
    plain.to(torch_device);
    std::vector<c10::IValue> inputs;
    for (const at::Tensor& t : tensors) inputs.emplace_back(t.to(torch_device));
    // Memory only matters to the simulator, not to placed execution.
    placement::PlacedModule placed(copy, placement::capture(copy, tensors, name),
                                   placement::DeviceSet::uniform({{device.kind, device.index, memory, 1.0}}, 1e9, 0));
    std::vector<at::Tensor> plain_params;
    for (const auto& p : plain.parameters()) plain_params.push_back(p);
    torch::optim::SGD plain_sgd(plain_params, torch::optim::SGDOptions(1e-4));
    torch::optim::SGD placed_sgd(placed.parameters(), torch::optim::SGDOptions(1e-4));
    auto step_plain = [&] {
      plain.forward(inputs).toTensor().pow(2).mean().backward();
      plain_sgd.step();
      plain_sgd.zero_grad();
      sync();
    };
    auto step_placed = [&] {
      placed.forward(inputs).at(0).toTensor().pow(2).mean().backward();
      placed_sgd.step();
      placed_sgd.zero_grad();
      sync();
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
} catch (const c10::Error& e) {
  std::fprintf(stderr, "engine_overhead_bench: %s\n", e.what_without_backtrace());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "engine_overhead_bench: %s\n", e.what());
  return 1;
}
