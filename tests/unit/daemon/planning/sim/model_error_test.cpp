// The planning model of the simulator warm start: wrong by a controlled, reproducible amount.
#include <gtest/gtest.h>

#include <cmath>

#include "planning/sim/model_error.h"
#include "test_graphs.h"

namespace placementd::sim {
namespace {

using placement::DeviceKind;
using placement::Placement;

Simulator two_chains_truth() {
  placement::OpGraph g = placement::testing::two_chains(6);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  return Simulator(g, placement::testing::devices(2, DeviceKind::kCuda));
}

const Placement kSplit{{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0}};

TEST(ModelError, ZeroIsTheTruth) {
  const Simulator truth = two_chains_truth();
  const Simulator model = with_model_error(truth, 0.0, 3);
  EXPECT_DOUBLE_EQ(model.simulate(kSplit).step_time_s, truth.simulate(kSplit).step_time_s);
}

TEST(ModelError, ScalesOpTimesAndBandwidthsReproducibly) {
  const Simulator truth = two_chains_truth();
  const Simulator a = with_model_error(truth, 0.3, 3), b = with_model_error(truth, 0.3, 3),
                  c = with_model_error(truth, 0.3, 4);
  EXPECT_EQ(a.simulate(kSplit).step_time_s, b.simulate(kSplit).step_time_s);
  EXPECT_NE(a.simulate(kSplit).step_time_s, truth.simulate(kSplit).step_time_s);
  EXPECT_NE(a.simulate(kSplit).step_time_s, c.simulate(kSplit).step_time_s);
  // Per op one factor for forward, backward and update; the log-factors have about sigma spread.
  double sum = 0, sum_sq = 0;
  const auto& ops = a.graph().ops;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& p = ops[i].profile.at("cuda");
    const auto& t = truth.graph().ops[i].profile.at("cuda");
    EXPECT_DOUBLE_EQ(p.backward_s / t.backward_s, p.forward_s / t.forward_s);
    EXPECT_EQ(p.activation_bytes, t.activation_bytes) << "memory stays exact";
    const double l = std::log(p.forward_s / t.forward_s);
    sum += l;
    sum_sq += l * l;
  }
  const double n = static_cast<double>(ops.size()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.3);
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), 0.3, 0.15);
  EXPECT_NE(a.devices().bandwidth[0][1], truth.devices().bandwidth[0][1]);
  EXPECT_THROW(with_model_error(truth, -0.1, 1), std::invalid_argument);
}

// Ops the cost model times (captured without a profile) are as uncertain as profiled ones.
TEST(ModelError, AlsoScalesWhatTheCostModelPredictsFrom) {
  placement::OpGraph g = placement::testing::two_chains(6);
  placement::testing::give_work(g, 1e9, 1e6, 0);
  placement::DeviceSet devices = placement::testing::devices(2, DeviceKind::kCuda);
  for (auto& d : devices.devices) {
    d.spec.emplace();
    d.spec->fp32_flops = 1e12;
    d.spec->memory_bandwidth = 1e11;
  }
  const Simulator truth(g, devices);
  const Simulator model = with_model_error(truth, 0.3, 3);
  EXPECT_EQ(model.simulate(kSplit).predicted_ops, g.ops.size());
  EXPECT_NE(model.simulate(kSplit).step_time_s, truth.simulate(kSplit).step_time_s);
  EXPECT_DOUBLE_EQ(with_model_error(truth, 0.0, 3).simulate(kSplit).step_time_s,
                   truth.simulate(kSplit).step_time_s);
}

}  // namespace
}  // namespace placementd::sim
