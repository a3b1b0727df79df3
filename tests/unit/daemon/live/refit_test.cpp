// The planning model refitted to a job's measured steps (daemon/live/refit.cpp), as the server
// drives a session: real plugins (none + feedforward + reinforce, the "simulator" warm start), a
// job whose steps a *true* simulator times, and a planning model that does not know one GPU is
// three times slower than its siblings (another tenant shares it).

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "built_plugins.h"
#include "live/live_session.h"
#include "planning/sim/simulator.h"
#include "test_graphs.h"
#include "test_session.h"
#include "test_store.h"

namespace placementd {
namespace {

namespace msg = placement::messages;
using placement::DeviceKind;

struct Job {
  placement::OpGraph graph = placement::testing::two_chains(6);
  placement::DeviceSet devices = placement::testing::devices(2, DeviceKind::kCuda);
  Job() { placement::testing::profile_all(graph, DeviceKind::kCuda, 1e-3); }
  // What the job's steps take: cuda:1 runs at a third of the speed its profiles say.
  sim::Simulator truth() const {
    placement::DeviceSet slow = devices;
    slow.devices[1].speed = 1.0 / 3;
    return sim::Simulator(graph, slow);
  }
};

bool learned_placer_built() {
  return offline::built_plugins().has(placement::PluginKind::kPlacer, "feedforward");
}

std::unique_ptr<LiveSession> attach(const Job& job, int64_t refits, Store& store) {
  JobIdentity identity;
  identity.attach.job = "refit";
  identity.uid = ::getuid();
  identity.pid = ::getpid();
  identity.attach.devices = job.devices;
  return std::make_unique<LiveSession>(1, std::move(identity),
                                       testing::simulator_warm_start_policy(refits, 12),
                                       offline::built_plugins(), store);
}

// Trains `steps` steps, each timed by `truth` exactly; returns the directives it got.
std::vector<msg::Directive> train(LiveSession& live, const sim::Simulator& truth, int steps) {
  std::vector<msg::Directive> got{live.next_directive()};
  for (uint64_t step = 0; step < static_cast<uint64_t>(steps); ++step) {
    const msg::Directive& in_force = got.back();
    const double t = truth.simulate(in_force.placement).step_time_s;
    std::optional<msg::Directive> next = live.on_report({in_force.placement_id, step, t, true, ""});
    if (live.has_deferred_work())
      if (auto pushed = live.run_deferred_work()) next = pushed;
    if (next) got.push_back(*next);
  }
  return got;
}

TEST(Refit, TheModelLearnsTheSlowGpuFromTheStepsAndItsAnswerRunsNext) {
  if (!learned_placer_built()) GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  const Job job;
  const sim::Simulator truth = job.truth();
  testing::TestStore store{"refit_test"};
  auto live = attach(job, 2, *store);
  live->on_graph(job.graph, std::nullopt, 0.0);
  const std::vector<msg::Directive> got = train(*live, truth, 300);

  const msg::JobInfo info = live->detail();
  ASSERT_FALSE(info.warm_start.is_null());
  ASSERT_GE(info.refits.size(), 1u) << info.to_json().dump();
  ASSERT_LE(info.refits.size(), 2u) << "[policy] refits bounds them";
  const nlohmann::json& first = info.refits.front();
  EXPECT_GE(first["measured"].get<int>(), 3);
  EXPECT_LT(first["log_error_after"].get<double>(), first["log_error_before"].get<double>() / 2)
      << first.dump();
  // What it learned: cuda:1 three times as slow as cuda:0 (whatever share of it went to the op
  // kind's factor, which both have).
  std::map<std::string, double> scale;
  for (const nlohmann::json& f : first["factors"]) scale[f["what"]] = f["scale"];
  ASSERT_TRUE(scale.count("compute on cuda:1")) << first.dump();
  const double cuda0 = scale.count("compute on cuda:0") ? scale["compute on cuda:0"] : 1.0;
  EXPECT_NEAR(scale["compute on cuda:1"] / cuda0, 3.0, 0.5) << first.dump();

  // The warm start's answer splits the chains across the GPUs, as the model says is fastest; the
  // refit's answer, offered with the same reason after it, is another placement.
  // (A trial's windows give a challenger its directive again: one per placement id.)
  std::vector<const msg::Directive*> warm;
  for (const msg::Directive& d : got)
    if (d.reason == msg::Reason::kWarmStart &&
        std::none_of(warm.begin(), warm.end(),
                     [&](const msg::Directive* w) { return w->placement_id == d.placement_id; }))
      warm.push_back(&d);
  ASSERT_GE(warm.size(), 2u);
  EXPECT_NE(warm[0]->placement.fingerprint(), warm[1]->placement.fingerprint());
  // It is faster in truth than the warm start's answer, which the model got wrong.
  EXPECT_LT(truth.simulate(warm[1]->placement).step_time_s,
            truth.simulate(warm[0]->placement).step_time_s);
}

TEST(Refit, TwoGpusThatTakeTurnsAreFoundAndTheJobEndsNoSlowerThanItStarted) {
  if (!learned_placer_built()) GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  // The job's two GPUs are slices of one card, time-sliced: they take turns, at the speed their
  // profiles say. The planning model has them compute at once, so it expects the two chains split
  // across them to take half the time.
  const Job job;
  sim::SimulatorOptions one_card;
  one_card.shared_with = {0, 0};
  const sim::Simulator truth(job.graph, job.devices, one_card);
  testing::TestStore store{"refit_test_turns"};
  auto live = attach(job, 2, *store);
  live->on_graph(job.graph, std::nullopt, 0.0);
  const std::vector<msg::Directive> got = train(*live, truth, 300);

  const msg::JobInfo info = live->detail();
  ASSERT_GE(info.refits.size(), 1u) << info.to_json().dump();
  std::set<std::string> found;
  for (const nlohmann::json& refit : info.refits)
    for (const nlohmann::json& pair : refit.value("shared", nlohmann::json::array()))
      found.insert(pair.get<std::string>());
  EXPECT_EQ(found, std::set<std::string>{"cuda:0 and cuda:1"}) << info.to_json().dump();
  // The model that knows explains what was measured; the one that did not, by far less.
  const nlohmann::json& last = info.refits.back();
  EXPECT_LT(last["log_error_after"].get<double>(), 0.05) << last.dump();
  EXPECT_GT(last["log_error_before"].get<double>(), 0.2) << last.dump();
  // Where the job is left is no slower in truth than where it started.
  EXPECT_LE(truth.simulate(got.back().placement).step_time_s,
            truth.simulate(got.front().placement).step_time_s * 1.0001);
}

TEST(Refit, NoneRunsWhenTheConfigSaysNone) {
  if (!learned_placer_built()) GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  const Job job;
  const sim::Simulator truth = job.truth();
  testing::TestStore store{"refit_test_none"};
  auto live = attach(job, 0, *store);
  live->on_graph(job.graph, std::nullopt, 0.0);
  const std::vector<msg::Directive> got = train(*live, truth, 300);
  const msg::JobInfo info = live->detail();
  EXPECT_TRUE(info.refits.empty());
  // The warm start's answer, and the heuristics' placements after it, are all that ran so.
  std::set<uint64_t> heuristics;
  for (const nlohmann::json& h : info.warm_start.value("heuristics", nlohmann::json::array()))
    if (h.contains("candidate")) heuristics.insert(h["candidate"].get<uint64_t>());
  std::set<uint64_t> warm;
  for (const msg::Directive& d : got)
    if (d.reason == msg::Reason::kWarmStart && !heuristics.count(d.placement_id))
      warm.insert(d.placement_id);
  EXPECT_EQ(warm.size(), 1u) << info.warm_start.dump();
}

}  // namespace
}  // namespace placementd
