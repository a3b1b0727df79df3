// Simulator calibration on this machine: for several models and placements over two logical CPU
// devices, the simulator's predicted step time (from a profile measured here) against the placed
// engine's measured step time. The logical devices' link is measured too (a tensor clone).
// Issue #3 goal: median |error| <= 10%.
//
//   calibration_bench [MODEL_DIR]   (default: traces the small test models into a temp dir)
//   (every option: calibration_bench --help; docs/benchmarks.md)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/sgd.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "command_line.h"
#include "placement/capture.h"
#include "placement/profiler.h"
#include "planning/sim/simulator.h"

using Clock = std::chrono::steady_clock;
using placement::Placement;

namespace {

using placement::bench::median;

// Time of cloning `bytes` on this host: what moving a tensor between two logical CPUs costs.
double clone_seconds(int64_t bytes) {
  at::Tensor t = at::randn({bytes / 4});
  std::vector<double> times;
  for (int i = 0; i < 15; ++i) {
    const auto start = Clock::now();
    at::Tensor c = t.clone();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return median(times);
}

// Prints the table for the models in `dir` (traced into a new directory when empty).
int calibrate(std::string dir) {
  if (dir.empty()) dir = placement::bench::trace_models(SOURCE_DIR, "calib");
  at::set_num_threads(1);
  const double latency = clone_seconds(4);
  // 1 MiB: the size of the activations these models move; far larger clones measure mostly the
  // page faults of fresh allocations.
  const double bandwidth = (1.0 * (1 << 20)) / (clone_seconds(1 << 20) - latency);
  const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<placement::Device> list = {{placement::DeviceKind::kCpu, 0, memory, 1.0, {}},
                                         {placement::DeviceKind::kCpu, 1, memory, 1.0, {}}};
  const auto devices = placement::DeviceSet::uniform(list, bandwidth, latency);
  std::printf("logical CPU link (measured clone): %.2f GB/s, %.1f us; 1 intra-op thread\n",
              bandwidth / 1e9, latency * 1e6);
  std::printf("%-20s %-16s %12s %12s %9s\n", "model", "placement", "measured", "predicted",
              "error");

  std::vector<double> errors;
  for (const std::string name : {"two_tower", "gnmt_small", "gnmt_small_unrolled", "rnnlm_small",
                                 "bert_small", "resnet18"}) {
    auto [module, tensors] = placement::bench::load_traced_model(dir, name);
    std::vector<c10::IValue> inputs(tensors.begin(), tensors.end());
    placement::OpGraph graph = placement::capture(module, tensors, name);
    placement::PlacedModule placed(module, graph, devices);
    torch::optim::SGD sgd(placed.parameters(), torch::optim::SGDOptions(1e-4));
    auto forward_backward = [&] {
      placed.forward(inputs).at(0).toTensor().pow(2).mean().backward();
    };
    auto update = [&] {
      sgd.step();
      sgd.zero_grad();
    };
    placement::record_profiles(graph, placed,
                               placement::profile_steps(placed, forward_backward, update, {2, 7}));
    const placementd::sim::Simulator sim(graph, devices);

    const size_t n = graph.ops.size();
    std::vector<std::pair<std::string, Placement>> placements;
    placements.emplace_back("all on cpu:0", Placement::single(graph, 0));
    Placement halves = Placement::single(graph, 0);
    for (size_t i = n / 2; i < n; ++i) halves.device_of_op[i] = 1;
    placements.emplace_back("halves", halves);
    Placement alternating = Placement::single(graph, 0);
    for (size_t i = 0; i < n; i += 2) alternating.device_of_op[i] = 1;
    placements.emplace_back("alternating", alternating);
    std::mt19937 rng(1);
    Placement random = Placement::single(graph, 0);
    for (auto& d : random.device_of_op) d = static_cast<int>(rng() % 2);
    placements.emplace_back("random", random);

    for (const auto& [label, p] : placements) {
      placed.set_placement(p);
      const double measured = placement::bench::median_step_seconds([&] {
        forward_backward();
        update();
      });
      const double predicted = sim.simulate(p).step_time_s;
      const double error = (predicted - measured) / measured;
      errors.push_back(std::abs(error));
      std::printf("%-20s %-16s %9.2f ms %9.2f ms %+8.1f%%\n", name.c_str(), label.c_str(),
                  measured * 1e3, predicted * 1e3, error * 100);
    }
  }
  std::printf("median |error| over %zu placements: %.1f%%; max %.1f%%\n", errors.size(),
              median(errors) * 100, *std::max_element(errors.begin(), errors.end()) * 100);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Simulator calibration: the simulator's predicted step time against the placed engine's "
      "measured "
      "one, for several models and placements over two logical CPU devices.",
      "calibration_bench"};
  std::string dir;
  app.add_option("MODEL_DIR", dir,
                 "models as tests/models/make_models.py writes them (default: the small test "
                 "models, traced into a "
                 "new directory under /tmp)")
      ->check(CLI::ExistingDirectory);
  return examples::command_line::run(app, argc, argv, [&] { return calibrate(dir); });
}
