#include "planning/sim/model_error.h"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace placementd::sim {

Simulator with_model_error(const Simulator& truth, double sigma, uint64_t seed) {
  if (!(sigma >= 0.0))
    throw std::invalid_argument("model error must be >= 0, got " + std::to_string(sigma));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto factor = [&] { return std::exp(sigma * normal(rng)); };
  placement::OpGraph graph = truth.graph();
  for (auto& op : graph.ops) {
    // What the cost model predicts from is as uncertain as a profile.
    if (op.work) {
      const double f = factor();
      op.work->forward_flops *= f;
      op.work->backward_flops *= f;
      op.work->forward_bytes *= f;
      op.work->backward_bytes *= f;
    }
    for (auto& [kind, p] : op.profile) {
      // One factor per op and kind: a kernel mis-timed forward is mis-timed backward too.
      const double f = factor();
      p.forward_s *= f;
      p.backward_s *= f;
      p.update_s *= f;
    }
  }
  placement::DeviceSet devices = truth.devices();
  for (size_t a = 0; a < devices.size(); ++a)
    for (size_t b = 0; b < devices.size(); ++b)
      if (a != b) devices.bandwidth[a][b] *= factor();
  return Simulator(std::move(graph), std::move(devices), truth.options());
}

}  // namespace placementd::sim
