// Engine overhead: a training step (forward, backward, SGD update) of the plain TorchScript module
// against the same step through PlacedModule with every op on the same device. Steps alternate
// between the two so machine noise hits both alike; medians over >= 20 steps after warm-up. Also
// the time a capture of the model takes (median of 5; tracing excluded: it reads the saved module),
// and what a job's step under one of placementd's placements adds before it runs: a snapshot of the
// model's buffers and random generators (detail::ModelState), which a failed attempt is rolled
// back to before the batch runs again (issue #41), timed between the steps.
// Issue #3 targets: <= 3% at GPU-bound batches, <= 10% at batch size 1.
//
//   engine_overhead_bench [--device cpu|cuda:N] [MODEL_DIR [MODEL ...]]
//     (default: cpu, the small test models traced into a temp dir; every option: --help,
//     docs/benchmarks.md). On a GPU the module, its inputs and the placed ops are on that device
//     and every step ends with a device synchronisation; trace the models on that device
//     (make_models.py --device cuda:0), since a trace keeps the device of the tensors it creates.
//     Each model is its own row: one that fails prints why and the others still run; the exit
//     status is 1 when any row failed, 2 for a bad command line.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "command_line.h"
#include "model_state.h"
#include "placement/capture.h"
#include "placement/engine.h"

using Clock = std::chrono::steady_clock;

namespace {

using placement::bench::median;

struct Row {
  size_t ops = 0;
  double plain_s = 0, placed_s = 0;
  double capture_s = 0;   // placement::capture of the module (a forward pass op by op), median of 5
  double snapshot_s = 0;  // a ModelState of the placed model's buffers, median over the steps
};

// What a step's loss is taken from: the output, or the first tensor in the tuple or dict it is (a
// transformers model returns {"logits": ...}).
at::Tensor first_tensor(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor();
  if (value.isTuple() && !value.toTupleRef().elements().empty())
    return first_tensor(value.toTupleRef().elements()[0]);
  if (value.isGenericDict() && !value.toGenericDict().empty())
    return first_tensor(value.toGenericDict().begin()->value());
  throw std::runtime_error("the model's output holds no tensor to take a loss from");
}

Row measure(const std::string& dir, const std::string& name, const placement::Device& device,
            uint64_t memory) {
  const bool cuda = device.kind == placement::DeviceKind::kCuda;
  const c10::Device torch_device =
      cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device.index))
           : c10::Device(c10::kCPU);
  auto sync = [cuda, &device] {
    if (cuda) torch::cuda::synchronize(device.index);
  };
  placement::bench::TracedModel traced = placement::bench::load_traced_model(dir, name);
  torch::jit::Module& plain = traced.module;
  const std::vector<at::Tensor>& tensors = traced.inputs;
  torch::jit::Module copy = torch::jit::load(dir + "/" + name + ".pt");
  plain.to(torch_device);
  copy.to(torch_device);
  std::vector<c10::IValue> inputs;
  std::vector<at::Tensor> capture_inputs;
  for (const at::Tensor& t : tensors) {
    inputs.emplace_back(t.to(torch_device));
    capture_inputs.push_back(t.to(torch_device));
  }
  // The median of 5 captures: the first call in a process also pays LibTorch's one-time set-up.
  placement::OpGraph graph;
  std::vector<double> captures;
  for (int i = 0; i < 5; ++i) {
    const auto c0 = Clock::now();
    graph = placement::capture(copy, capture_inputs, name);
    sync();
    captures.push_back(std::chrono::duration<double>(Clock::now() - c0).count());
  }
  const double capture_s = median(captures);
  // Memory only matters to the simulator, not to placed execution.
  placement::PlacedModule placed(
      copy, std::move(graph),
      placement::DeviceSet::uniform({{device.kind, device.index, memory, 1.0, {}}}, 1e9, 0));
  std::vector<at::Tensor> plain_params;
  for (const auto& p : plain.parameters()) plain_params.push_back(p);
  torch::optim::SGD plain_sgd(plain_params, torch::optim::SGDOptions(1e-4));
  torch::optim::SGD placed_sgd(placed.parameters(), torch::optim::SGDOptions(1e-4));
  auto step_plain = [&] {
    first_tensor(plain.forward(inputs)).pow(2).mean().backward();
    plain_sgd.step();
    plain_sgd.zero_grad();
    sync();
  };
  auto step_placed = [&] {
    first_tensor(placed.forward(inputs).at(0)).pow(2).mean().backward();
    placed_sgd.step();
    placed_sgd.zero_grad();
    sync();
  };
  const int steps = name.rfind("resnet", 0) == 0 || name.rfind("inception", 0) == 0 ||
                            name.rfind("bert_base", 0) == 0
                        ? 20
                        : 60;
  std::vector<double> a, b, snapshots;
  for (int i = 0; i < steps + 5; ++i) {
    auto t0 = Clock::now();
    step_plain();
    auto t1 = Clock::now();
    step_placed();
    auto t2 = Clock::now();
    {
      const placement::detail::ModelState state(placed.model().named_buffers());
      sync();
    }
    auto t3 = Clock::now();
    if (i < 5) continue;
    a.push_back(std::chrono::duration<double>(t1 - t0).count());
    b.push_back(std::chrono::duration<double>(t2 - t1).count());
    snapshots.push_back(std::chrono::duration<double>(t3 - t2).count());
  }
  return {placed.graph().ops.size(), median(a), median(b), capture_s, median(snapshots)};
}

// The first line of an error: LibTorch appends its C++ backtrace.
std::string first_line(std::string text) {
  if (const auto cut = text.find('\n'); cut != std::string::npos) text.resize(cut);
  return text;
}

// Prints a row per model of `names` in `dir` (the test models, traced into a new directory, when
// `dir` is empty); returns 1 when any row failed.
int run_rows(const std::string& device_name, std::string dir, std::vector<std::string> names) {
  const placement::Device device = placement::parse_device_name(device_name);
  if (names.empty())
    names = {"mlp",         "two_tower",  "gnmt_small", "gnmt_small_unrolled",
             "rnnlm_small", "bert_small", "resnet18",   "hf_bert",
             "hf_gpt2",     "hf_llama"};
  if (dir.empty()) dir = placement::bench::trace_models(SOURCE_DIR, "overhead");
  std::printf("threads: %d intra-op; device: %s\n", at::get_num_threads(), device_name.c_str());
  std::printf("%-20s %6s %12s %12s %9s %12s %12s\n", "model", "ops", "plain", "placed", "overhead",
              "capture", "snapshot");
  const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  int failed = 0;
  for (const std::string& name : names) {
    try {
      const Row r = measure(dir, name, device, memory);
      std::printf("%-20s %6zu %9.3f ms %9.3f ms %+8.1f%% %9.1f ms %9.3f ms\n", name.c_str(), r.ops,
                  r.plain_s * 1e3, r.placed_s * 1e3, (r.placed_s / r.plain_s - 1) * 100,
                  r.capture_s * 1e3, r.snapshot_s * 1e3);
    } catch (const std::exception& e) {
      ++failed;
      std::printf("%-20s FAILED: %s\n", name.c_str(), first_line(e.what()).c_str());
    }
    std::fflush(stdout);
  }
  if (failed > 0)
    std::fprintf(stderr, "engine_overhead_bench: %d of %zu models failed\n", failed, names.size());
  return failed > 0 ? 1 : 0;
}

// Accepts cpu[:N], and cuda:N only if this LibTorch sees it, so that a typo fails before any model
// is traced.
CLI::Validator visible_device() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        placement::Device device;
        try {
          device = placement::parse_device_name(text);
        } catch (const std::exception& e) {
          return e.what();
        }
        const int visible = static_cast<int>(torch::cuda::device_count());
        if (device.kind != placement::DeviceKind::kCuda || device.index < visible) return "";
        return text + " asked for, but this LibTorch sees " + std::to_string(visible) +
               " CUDA device(s)";
      },
      "");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Times a training step of each model's plain TorchScript module against the same step "
      "through "
      "PlacedModule with every op on DEVICE (alternating, medians after warm-up), and a capture of "
      "the "
      "model (placement::capture, median of 5).",
      "engine_overhead_bench"};
  app.footer(
      "Exit status: 0; 1 when any model's row failed (the other rows still run); 2 for a bad "
      "command line.");
  std::string dir, device_name = "cpu";
  std::vector<std::string> names;
  app.add_option("--device", device_name,
                 "device of the module, its inputs and every placed op: cpu or cuda:N")
      ->capture_default_str()
      ->check(visible_device());
  app.add_option("MODEL_DIR", dir,
                 "MODEL.pt and MODEL.json as tests/models/make_models.py writes them (default: the "
                 "small test "
                 "models, traced into a new directory under /tmp)")
      ->check(CLI::ExistingDirectory);
  app.add_option("MODEL", names,
                 "models in MODEL_DIR to time (default: mlp two_tower gnmt_small "
                 "gnmt_small_unrolled rnnlm_small "
                 "bert_small resnet18 hf_bert hf_gpt2 hf_llama)");
  return examples::command_line::run(app, argc, argv,
                                     [&] { return run_rows(device_name, dir, names); });
}
