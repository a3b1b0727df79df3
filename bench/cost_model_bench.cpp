// The cost model on this CPU (issue #17 target: median |error| <= 20%): for each test model, the
// training step time the simulator predicts from the model's captured work alone (no profile) and
// this CPU's calibration (placementctl calibrate's figures), against the step time measured by
// running the model op by op on the CPU (forward, backward, SGD update; median of 7 after 2
// warm-up steps). Both with the same intra-op threads.
//
//   cost_model_bench [MODEL_DIR] [--threads N]   (default: traces the small test models into a temp
//   dir) (every option: cost_model_bench --help; docs/benchmarks.md)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "command_line.h"
#include "placement/calibration.h"
#include "placement/capture.h"
#include "placement/engine.h"
#include "planning/sim/simulator.h"

namespace {

using placement::bench::median;

int run(std::string dir, int threads) {
  if (dir.empty()) dir = placement::bench::trace_models(SOURCE_DIR, "costmodel");
  const placement::CpuCalibration cpu = placement::calibrate_cpu(threads);
  std::printf(
      "this CPU, %d intra-op threads: %.3f TFLOP/s (1024^3 matmul), convolutions at %.2f of it "
      "plus their "
      "bytes at %.2f GB/s, pooling at %.4f of it, %.1f GB/s (add), %.2f us per dispatch and %.1f "
      "us per step "
      "(engine), LSTM layers %.1f us per call and %.2f us per step\n",
      cpu.threads, cpu.spec.fp32_flops / 1e12, cpu.spec.conv_efficiency,
      cpu.spec.conv_layout_bandwidth / 1e9, cpu.spec.pool_efficiency,
      cpu.spec.memory_bandwidth / 1e9, cpu.spec.launch_s * 1e6, cpu.spec.step_s * 1e6,
      cpu.spec.rnn_layer_s * 1e6, cpu.spec.rnn_step_s * 1e6);
  const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto engine_devices =
      placement::DeviceSet::uniform({{placement::DeviceKind::kCpu, 0, memory, 1.0, {}}}, 1e10, 0);
  const auto model_devices = placement::DeviceSet::uniform(
      {{placement::DeviceKind::kCpu, 0, memory, 1.0, cpu.spec}}, 1e10, 0);
  placementd::sim::SimulatorOptions options;
  options.optimizer_state_factor = 0;  // plain SGD, as measured

  std::printf("%-22s %6s %10s %12s %12s %9s\n", "model", "ops", "GFLOP", "measured", "predicted",
              "error");
  std::vector<double> errors;
  for (const std::string name :
       {"mlp", "two_tower", "gnmt_small", "gnmt_small_unrolled", "rnnlm_small", "bert_small",
        "resnet18", "gnmt_example", "inception_example"}) {
    auto [module, tensors] = placement::bench::load_traced_model(dir, name);
    std::vector<c10::IValue> inputs(tensors.begin(), tensors.end());
    const placement::OpGraph graph = placement::capture(module, tensors, name);
    placement::PlacedModule placed(module, graph, engine_devices);
    torch::optim::SGD sgd(placed.parameters(), torch::optim::SGDOptions(1e-4));
    const double measured = placement::bench::median_step_seconds([&] {
      placed.forward(inputs).at(0).toTensor().to(at::kFloat).pow(2).mean().backward();
      sgd.step();
      sgd.zero_grad();
    });
    const placementd::sim::Simulator sim(graph, model_devices, options);
    const double predicted = sim.simulate(placement::Placement::single(graph, 0)).step_time_s;
    double flops = 0;
    for (const auto& op : graph.ops) flops += op.work->forward_flops + op.work->backward_flops;
    const double error = (predicted - measured) / measured;
    errors.push_back(std::abs(error));
    std::printf("%-22s %6zu %10.3f %9.2f ms %9.2f ms %+8.1f%%\n", name.c_str(), graph.ops.size(),
                flops / 1e9, measured * 1e3, predicted * 1e3, error * 100);
  }
  std::printf("median |error| over %zu models: %.1f%%; max %.1f%%\n", errors.size(),
              median(errors) * 100, *std::max_element(errors.begin(), errors.end()) * 100);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Cost model calibration on this CPU: the step time predicted from each model's captured work "
      "and "
      "this CPU's measured figures, against the measured one.",
      "cost_model_bench"};
  std::string dir;
  int threads = 0;
  app.add_option("MODEL_DIR", dir,
                 "models as tests/models/make_models.py writes them (default: the small test "
                 "models, traced into a "
                 "new directory under /tmp)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--threads", threads, "intra-op threads for both (default: LibTorch's)")
      ->check(CLI::Range(1, 4096));
  return examples::command_line::run(app, argc, argv, [&] { return run(dir, threads); });
}
