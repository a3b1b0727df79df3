// The planning model refitted to measured step times: it learns what it got wrong where the
// measurements exercise it, and nothing where they do not.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "placement/serialization.h"
#include "planning/sim/refit.h"
#include "planning/sim/topology.h"

namespace placementd::sim {
namespace {

using placement::Placement;

// Inception-V3 on 2×K40 + CPU, as the truth: the cost model's figures, taken as measured; with
// `gpu_launch` times the presets' host cost per launch on the GPUs, the first of which (whose
// units the GPUs' profiles are in) runs at `first_gpu_speed`.
Simulator truth(const SimulatorOptions& options = {}, double gpu_launch = 1.0,
                double first_gpu_speed = 1.0) {
  placement::DeviceSet devices = load_topology(TOPOLOGY_DIR "/2xk40_cpu.toml");
  for (placement::Device& d : devices.devices)
    if (d.spec && d.kind == placement::DeviceKind::kCuda) d.spec->launch_s *= gpu_launch;
  devices.devices[1].speed = first_gpu_speed;
  const Simulator predicted(placement::load_graph_file(GRAPH_DIR "/papers/inception_v3.json.gz"),
                            devices, options);
  placement::OpGraph g = predicted.graph();
  for (auto& op : g.ops)
    for (auto& [kind, p] : op.profile) p.predicted = false;
  return Simulator(g, predicted.devices(), predicted.options());
}

// The truth with its two GPUs (devices 1 and 2) time-slicing one card: they take turns.
Simulator gpus_taking_turns() {
  SimulatorOptions options;
  options.shared_with = {0, 1, 1};
  return truth(options);
}

// The truth with one kind of op `factor` times faster on the host than it is: what a planner
// believes. Only that kind's host profile is wrong.
Simulator believed(const Simulator& t, const std::string& kind, double factor) {
  placement::OpGraph g = t.graph();
  for (auto& op : g.ops)
    if (op.kind == kind)
      for (auto& [device_kind, p] : op.profile)
        if (device_kind == "cpu") {
          p.forward_s /= factor;
          p.backward_s /= factor;
          p.update_s /= factor;
        }
  return Simulator(g, t.devices(), t.options());
}

// Random placements over every device that the model lets run.
std::vector<Placement> random_placements(const Simulator& model, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> device(0, static_cast<int>(model.devices().size()) - 1);
  std::vector<Placement> out;
  while (out.size() < n) {
    // Runs of ops on one device, as placers make them, so links are not crossed at every edge.
    Placement p;
    int d = device(rng);
    for (size_t op = 0; op < model.graph().ops.size(); ++op) {
      if (op % 40 == 0) d = device(rng);
      p.device_of_op.push_back(d);
    }
    p.enforce_pins(model.graph(), model.devices());
    if (model.simulate(p).valid) out.push_back(std::move(p));
  }
  return out;
}

// `ps` with the truth's step times, as a job would measure them (exactly).
std::vector<MeasuredPlacement> measured_on(const Simulator& t, const std::vector<Placement>& ps) {
  std::vector<MeasuredPlacement> out;
  for (const Placement& p : ps) out.push_back({p, t.simulate(p).step_time_s, 0.05});
  return out;
}

double log_error(const Simulator& model, const Simulator& t, const std::vector<Placement>& ps) {
  double sum = 0;
  for (const Placement& p : ps) {
    const double e = std::log(model.simulate(p).step_time_s / t.simulate(p).step_time_s);
    sum += e * e;
  }
  return std::sqrt(sum / static_cast<double>(ps.size()));
}

TEST(Refit, LearnsTheKindItGotWrongAndPredictsPlacementsItNeverSaw) {
  const Simulator t = truth();
  const std::string kind = "aten::_convolution";
  const Simulator model = believed(t, kind, 4.0);
  const std::vector<MeasuredPlacement> measured = measured_on(t, random_placements(t, 10, 1));
  const RefitResult r = refit(model, measured);
  EXPECT_GT(r.rms_log_error_before, 0.2);
  EXPECT_LT(r.rms_log_error_after, r.rms_log_error_before / 3);
  ASSERT_FALSE(r.factors.empty());
  EXPECT_EQ(r.factors.front().what, kind + " on cpu");
  EXPECT_GT(r.factors.front().scale, 2.5);
  EXPECT_LT(r.factors.front().scale, 6.0);
  // On placements it was never shown, the refitted model is closer to the truth than the model.
  const std::vector<Placement> unseen = random_placements(t, 20, 2);
  EXPECT_LT(log_error(r.model, t, unseen), log_error(model, t, unseen) / 2);
  // Memory is exact in both: the refit never changes it.
  for (const Placement& p : unseen)
    for (size_t d = 0; d < t.devices().size(); ++d)
      EXPECT_EQ(r.model.check_memory(p).memory[d].peak(), model.check_memory(p).memory[d].peak());
}

// The GPU runs measured 10-19 us a launch where the presets say 5: every op pays more, a small one
// mostly that and a large one little, which one factor per kind of launches says and no op kind's
// factor does. The first GPU runs at half speed, so a share of launches taken in the wrong
// device's units misses the factor.
TEST(Refit, LearnsTheHostsLaunchCostForEveryOpAtOnce) {
  const Simulator t = truth({}, 3.0, 0.5);
  const Simulator model = truth({}, 1.0, 0.5);
  const std::vector<MeasuredPlacement> measured = measured_on(t, random_placements(t, 20, 4));
  const RefitResult r = refit(model, measured);
  EXPECT_GT(r.rms_log_error_before, 0.1);
  EXPECT_LT(r.rms_log_error_after, r.rms_log_error_before / 5);
  ASSERT_FALSE(r.factors.empty());
  EXPECT_EQ(r.factors.front().what, "launch on cuda");
  EXPECT_GT(r.factors.front().scale, 2.6);
  EXPECT_LT(r.factors.front().scale, 3.4);
  // What else moved is the measurements' fit of a kind's kernels, not the host's launches.
  for (const RefitFactor& f : r.factors) {
    if (f.what != "launch on cuda") {
      EXPECT_LT(std::abs(std::log(f.scale)), std::log(1.25)) << f.what;
    }
  }
  const std::vector<Placement> unseen = random_placements(t, 20, 5);
  EXPECT_LT(log_error(r.model, t, unseen), log_error(model, t, unseen) / 4);
}

TEST(Refit, AnExactModelStaysAsItIs) {
  const Simulator t = truth();
  const std::vector<MeasuredPlacement> measured = measured_on(t, random_placements(t, 6, 3));
  const RefitResult r = refit(t, measured);
  EXPECT_LT(r.rms_log_error_before, 1e-9);
  EXPECT_TRUE(r.factors.empty());
  for (const MeasuredPlacement& m : measured)
    EXPECT_DOUBLE_EQ(r.model.simulate(m.placement).step_time_s, m.step_time_s);
}

TEST(Refit, WhatNoMeasurementExercisesStaysAtOne) {
  const Simulator t = truth();
  const Simulator model = believed(t, "aten::_convolution", 4.0);
  // Everything on the first GPU (device 1; device 0 is the host): nothing runs on the host and no
  // link is crossed.
  Placement gpu = Placement::single(t.graph(), 1);
  gpu.enforce_pins(t.graph(), t.devices());
  ASSERT_TRUE(t.simulate(gpu).valid);
  // The GPU measured 1.5x what the truth says (the model has the GPU right): the GPU's factors
  // move, nothing of the host's does.
  const RefitResult r = refit(model, {{gpu, 1.5 * t.simulate(gpu).step_time_s, 0.05}});
  ASSERT_FALSE(r.factors.empty());
  for (const RefitFactor& f : r.factors) {
    EXPECT_EQ(f.what.find("cpu"), std::string::npos) << f.what;
    EXPECT_GT(f.scale, 1.0) << f.what;
  }
  EXPECT_GT(r.model.simulate(gpu).step_time_s, 1.3 * model.simulate(gpu).step_time_s);
  // All on the host, the one thing the model has wrong, is predicted as wrongly as before.
  Placement host = Placement::single(t.graph(), 0);
  ASSERT_TRUE(t.simulate(host).valid);
  EXPECT_DOUBLE_EQ(r.model.simulate(host).step_time_s, model.simulate(host).step_time_s);
  EXPECT_LT(model.simulate(host).step_time_s, 0.8 * t.simulate(host).step_time_s);
  EXPECT_EQ(refit(model, {}).factors.size(), 0u);
}

TEST(Refit, PastItsTimeItKeepsWhatItFittedSoFar) {
  const Simulator t = truth();
  const Simulator model = believed(t, "aten::_convolution", 4.0);
  const std::vector<MeasuredPlacement> measured = measured_on(t, random_placements(t, 6, 5));
  RefitOptions hurried;
  hurried.max_seconds = 1e-9;
  const RefitResult r = refit(model, measured, hurried);
  EXPECT_TRUE(r.timed_out);
  EXPECT_TRUE(r.factors.empty()) << "no iteration finished";
  EXPECT_DOUBLE_EQ(r.rms_log_error_after, r.rms_log_error_before);
  const RefitResult full = refit(model, measured);
  EXPECT_FALSE(full.timed_out);
  EXPECT_LT(full.rms_log_error_after, full.rms_log_error_before / 3);
}

// All on one GPU, then on the other, then random placements over the two in short runs: the
// branches of a block land on both, which then have work at once. (A job starts on one GPU.)
std::vector<Placement> spread_over_gpus(const Simulator& model, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> gpu(1, 2), run(1, 6);
  std::vector<Placement> out;
  for (int d : {1, 2}) {
    out.push_back(Placement::single(model.graph(), d));
    out.back().enforce_pins(model.graph(), model.devices());
  }
  while (out.size() < n) {
    Placement p;
    while (p.device_of_op.size() < model.graph().ops.size()) {
      // Drawn one after the other: the order a call's arguments are evaluated in is the
      // compiler's (GCC and Clang differ), and with it the placements.
      const auto length = static_cast<size_t>(run(rng));
      p.device_of_op.insert(p.device_of_op.end(), length, gpu(rng));
    }
    p.device_of_op.resize(model.graph().ops.size());
    p.enforce_pins(model.graph(), model.devices());
    if (model.simulate(p).valid) out.push_back(std::move(p));
  }
  return out;
}

TEST(Refit, FindsDevicesThatTakeTurnsAndPredictsPlacementsItNeverSaw) {
  const Simulator t = gpus_taking_turns();
  const Simulator model = truth();  // has the GPUs compute at once
  const std::vector<Placement> unseen = spread_over_gpus(t, 20, 100);
  // Of 16 such placements, about one set in ten is explained within the measurements' spread by
  // two slower GPUs, and no pair is kept (the evidence it needs is not there); 24 were enough in
  // each of 30 sets tried.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<Placement> seen = spread_over_gpus(t, 24, seed);
    // The truth differs where both GPUs have work at once: on these placements, by more than the
    // measurements' spread.
    ASSERT_GT(log_error(model, t, seen), 0.1);
    const RefitResult r = refit(model, measured_on(t, seen));
    ASSERT_EQ(r.shared.size(), 1u);
    EXPECT_EQ(r.shared.front(), "cuda:0 and cuda:1");
    EXPECT_EQ(r.model.options().shared_with, t.options().shared_with);
    EXPECT_LT(r.rms_log_error_after, r.rms_log_error_before / 3);
    EXPECT_LT(log_error(r.model, t, unseen), log_error(model, t, unseen) / 3);
  }
}

TEST(Refit, DevicesThatComputeAtOnceAreNotTakenForTurns) {
  // A kind the model has 4x too fast on the host, measured with log-normal noise at the spread
  // the measurements claim: the factors explain it, and no pair is made to take turns.
  const Simulator t = truth();
  const Simulator model = believed(t, "aten::_convolution", 4.0);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> noise(0.0, 0.05);
  for (uint64_t seed = 10; seed < 15; ++seed) {
    std::vector<Placement> ps = random_placements(t, 6, seed);
    for (Placement& p : spread_over_gpus(t, 6, seed)) ps.push_back(std::move(p));
    std::vector<MeasuredPlacement> measured = measured_on(t, ps);
    for (MeasuredPlacement& m : measured) m.step_time_s *= std::exp(noise(rng));
    const RefitResult r = refit(model, measured);
    EXPECT_TRUE(r.shared.empty()) << "seed " << seed << ": " << r.shared.front();
    EXPECT_TRUE(r.model.options().shared_with.empty());
  }
}

TEST(Refit, RefusesMeasurementsItCannotUseNamingWhich) {
  const Simulator t = truth();
  Placement gpu = Placement::single(t.graph(), 1);
  gpu.enforce_pins(t.graph(), t.devices());
  const auto message = [&](std::vector<MeasuredPlacement> m) {
    try {
      refit(t, m);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{gpu, 0.1, 0.05}, {gpu, 0.0, 0.05}}).find("measurement 1: step_time_s"),
            std::string::npos);
  EXPECT_NE(message({{gpu, INFINITY, 0.05}}).find("measurement 0: step_time_s"), std::string::npos);
  EXPECT_NE(message({{gpu, 0.1, 0.0}}).find("measurement 0: log_sd"), std::string::npos);
  EXPECT_NE(message({{Placement{{0, 1}}, 0.1, 0.05}}).find("measurement 0: "), std::string::npos);
}

}  // namespace
}  // namespace placementd::sim
