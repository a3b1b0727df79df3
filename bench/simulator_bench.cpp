// simulate() time on a large graph: an unrolled 4-layer recurrent stack (GNMT-like: each cell
// depends on the previous time step of its layer and on the layer below), 80 000 ops, placed
// randomly and layer-wise on "4xH100 + CPU" (tests/data/topologies/4xh100_cpu_pcie5.toml).
// Target (issue #3): <= 50 ms per placement. Prints the median of 20 placements of each kind.
// Then the same graph without profiles, every op timed by the cost model from its work (issue #17
// target: the cost model's part of construction <= 1 s).
//
//   simulator_bench [--ops N]   (default 80000; --help)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "placement/op_work.h"
#include "planning/sim/simulator.h"
#include "planning/sim/topology.h"

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kLayers = 4;

// Prints the figures for a stack of about `ops` ops (a multiple of kLayers).
int time_simulator(int ops) {
  const int layers = kLayers, steps = ops / layers;
  placement::OpGraph g;
  g.name = "unrolled-4-layer";
  for (int t = 0; t < steps; ++t)
    for (int l = 0; l < layers; ++l) {
      placement::Op op;
      op.id = static_cast<int>(g.ops.size());
      op.name = "layer." + std::to_string(l) + ".step." + std::to_string(t);
      op.kind = "aten::lstm_cell";
      op.outputs.push_back({{128, 1024}, "float32", 128 * 1024 * 4});
      op.parameter_bytes = t == 0 ? 32u << 20 : 0;
      op.profile["cuda"] = {20e-6, 40e-6, t == 0 ? 50e-6 : 0.0, 512 * 1024};
      op.profile["cpu"] = {2e-3, 4e-3, t == 0 ? 5e-3 : 0.0, 512 * 1024};
      if (t > 0) g.edges.push_back({op.id - layers, op.id, 512 * 1024});
      if (l > 0) g.edges.push_back({op.id - 1, op.id, 512 * 1024});
      g.ops.push_back(op);
    }
  const auto devices = placementd::sim::load_topology(TOPOLOGY_DIR "/4xh100_cpu_pcie5.toml");
  auto t0 = Clock::now();
  const placementd::sim::Simulator sim(g, devices);
  const double setup_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::mt19937_64 rng(1);
  auto time = [&](const placement::Placement& p, double* step) {
    const auto start = Clock::now();
    *step = sim.simulate(p).step_time_s;
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  std::vector<double> random_ms, layer_ms;
  double step_random = 0, step_layer = 0;
  for (int i = 0; i < 20; ++i) {
    placement::Placement random, layerwise;
    for (int u = 0; u < static_cast<int>(g.ops.size()); ++u) {
      random.device_of_op.push_back(1 + static_cast<int>(rng() % 4));
      layerwise.device_of_op.push_back(1 + u % layers);
    }
    random_ms.push_back(time(random, &step_random));
    layer_ms.push_back(time(layerwise, &step_layer));
  }
  std::sort(random_ms.begin(), random_ms.end());
  std::sort(layer_ms.begin(), layer_ms.end());
  t0 = Clock::now();
  const double bound = sim.lower_bound_s();
  const double bound_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("graph %s: %zu ops, %zu edges on %zu devices\n", g.name.c_str(), g.ops.size(),
              g.edges.size(), devices.size());
  std::printf("%-36s %10.2f ms\n", "Simulator construction", setup_ms);
  std::printf("%-36s %10.2f ms  (predicted step %.3f s)\n", "simulate(), random placement",
              random_ms[10], step_random);
  std::printf("%-36s %10.2f ms  (predicted step %.3f s)\n", "simulate(), layer i on cuda:i",
              layer_ms[10], step_layer);
  std::printf("%-36s %10.2f ms  (%.3f s)\n", "lower_bound_s()", bound_ms, bound);

  // The same graph as capture records it without --profile: each cell's work, no profile.
  auto f32 = [](std::vector<int64_t> shape) {
    placement::TensorInfo t{shape, "float32", 4};
    for (int64_t d : shape) t.bytes *= static_cast<uint64_t>(d);
    return t;
  };
  const placement::OpWork cell = placement::estimate_work(
      "aten::lstm_cell",
      {placement::OpArgument::tensor(f32({128, 1024})),
       placement::OpArgument::tensor_list({f32({128, 1024}), f32({128, 1024})}),
       placement::OpArgument::tensor(f32({4096, 1024})),
       placement::OpArgument::tensor(f32({4096, 1024}))},
      {f32({128, 1024}), f32({128, 1024})});
  for (placement::Op& op : g.ops) {
    op.profile.clear();
    op.work = cell;
  }
  t0 = Clock::now();
  const placementd::sim::Simulator predicted(g, devices);
  const double predicted_setup_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  placement::Placement layerwise;
  for (int u = 0; u < static_cast<int>(g.ops.size()); ++u)
    layerwise.device_of_op.push_back(1 + u % layers);
  double predicted_step = 0;
  std::vector<double> predicted_ms;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    predicted_step = predicted.simulate(layerwise).step_time_s;
    predicted_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(predicted_ms.begin(), predicted_ms.end());
  std::printf("%-36s %10.2f ms  (every op on every device by the cost model)\n",
              "Simulator construction, no profiles", predicted_setup_ms);
  std::printf("%-36s %10.2f ms  (predicted step %.3f s)\n", "simulate(), layer i on cuda:i",
              predicted_ms[2], predicted_step);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "simulate() time on an unrolled 4-layer recurrent stack placed on 4xH100 + CPU "
      "(tests/data/topologies/4xh100_cpu_pcie5.toml): median of 20 random and 20 layer-wise "
      "placements.",
      "simulator_bench"};
  int ops = 80000;
  app.add_option("--ops", ops, "ops in the graph, rounded down to a multiple of the 4 layers")
      ->capture_default_str()
      ->check(examples::command_line::at_least(kLayers));
  return examples::command_line::run(app, argc, argv, [&] { return time_simulator(ops); });
}
