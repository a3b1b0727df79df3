#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "built_plugins.h"
#include "live/live_session.h"
#include "live/session.h"
#include "placement/protocol.h"
#include "planning/sim/simulator.h"
#include "test_graphs.h"
#include "test_session.h"
#include "test_store.h"

namespace placementd {
namespace {

using placement::DeviceKind;
using placement::Placement;
using placement::messages::ProfileReport;
using placement::messages::Reason;
namespace msg = placement::messages;

// A four-op chain on one CPU and one GPU, the graph unprofiled, a job speaking protocol 2 that
// profiles `profile_steps` steps when asked, started on `start` (all on the CPU by default).
testing::SessionSetup on_cpu_and_gpu(
    int64_t profile_steps = 3, uint16_t protocol = placement::protocol::kProfileReportVersion) {
  testing::SessionSetup setup;
  placement::DeviceSet cpu = placement::testing::devices(1, DeviceKind::kCpu);
  placement::DeviceSet gpu = placement::testing::devices(1, DeviceKind::kCuda);
  setup.devices = placement::DeviceSet::uniform({cpu.devices[0], gpu.devices[0]}, 10e9, 1e-5);
  setup.protocol_version = protocol;
  setup.profile_steps = profile_steps;
  return setup;
}

ProfileReport all_ops(const Session& s, const char* kind, uint64_t activation_bytes) {
  ProfileReport r;
  r.placement_id = 1;
  r.steps = 3;
  for (size_t i = 0; i < s.graph()->ops.size(); ++i)
    r.ops.push_back({static_cast<int>(i), kind, {0.001, 0.002, 0.0, activation_bytes}});
  return r;
}

class LiveProfiles : public ::testing::Test {
 protected:
  // The session of `setup`, started: its first placement is candidate 1.
  std::unique_ptr<Session> started(testing::SessionSetup setup) {
    auto s = testing::make_test_session(std::move(setup), *store);
    s->start();
    return s;
  }
  testing::TestStore store{"live_profiles_test"};
};

TEST_F(LiveProfiles, AJobIsAskedToProfileWherePlacementsReachAnUnprofiledKind) {
  const auto s = started(on_cpu_and_gpu());
  const Placement on_cpu = Placement::single(*s->graph(), 0),
                  on_gpu = Placement::single(*s->graph(), 1);
  EXPECT_TRUE(s->wants_profile(on_cpu));
  EXPECT_FALSE(s->fully_profiled());
  s->apply_profiles(all_ops(*s, "cpu", 0));
  EXPECT_FALSE(s->wants_profile(on_cpu)) << "cpu has profiles now";
  EXPECT_TRUE(s->wants_profile(on_gpu));
  EXPECT_TRUE(s->wants_profile(Placement{{0, 0, 1, 0}})) << "one op on the GPU is enough to ask";
  EXPECT_FALSE(s->fully_profiled());
  s->apply_profiles(all_ops(*s, "cuda", 0));
  EXPECT_FALSE(s->wants_profile(on_gpu));
  EXPECT_TRUE(s->fully_profiled());
  EXPECT_EQ(s->profiled_kinds(), (std::set<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(s->counters().profile_reports, 2u);

  EXPECT_TRUE(started(on_cpu_and_gpu())->wants_profile(on_cpu));
  // A job that does not profile, or speaks protocol 1, is never asked.
  EXPECT_FALSE(started(on_cpu_and_gpu(0))->wants_profile(on_cpu));
  EXPECT_FALSE(started(on_cpu_and_gpu(3, 1))->wants_profile(on_cpu));
}

TEST_F(LiveProfiles, ASplitIsProfiledOnlyWhenNoAllOnOneCandidateFollows) {
  // Two logical CPUs and an interleaved start: its op times would include the copies between
  // cpu:0 and cpu:1, so the all-on-cpu:0 candidate that comes next is profiled instead.
  for (uint64_t memory : {uint64_t{1} << 30, uint64_t{5000}}) {
    testing::SessionSetup setup;
    setup.devices = placement::testing::devices(2, DeviceKind::kCpu, memory);
    setup.protocol_version = placement::protocol::kProfileReportVersion;
    setup.profile_steps = 3;
    setup.exploration.warmup_steps = 0;
    setup.exploration.steps_per_candidate = 1;
    const Placement split{{0, 1, 0, 1}};
    setup.start = split;
    const auto s = started(std::move(setup));
    const bool single_fits =
        s->memory_model()->check_memory(Placement::single(*s->graph(), 0)).valid;
    EXPECT_EQ(single_fits, memory > 5000) << "the second device set is too small for all-on-one";
    EXPECT_EQ(s->wants_profile(split), !single_fits) << memory << " bytes per device";
    // The start's one step screens it: the all-on-one-device candidate is offered next, if it fits.
    ASSERT_TRUE(s->record({1, 0, 1.0, true, ""}));
    s->advance(*store);
    ASSERT_TRUE(s->single_device_tried());
    EXPECT_TRUE(s->wants_profile(split))
        << "nothing cleaner follows once the single device was offered";
    EXPECT_TRUE(s->wants_profile(Placement::single(*s->graph(), 0)));
  }
}

TEST_F(LiveProfiles, MeasuredActivationsReachTheMemoryModel) {
  const auto s = started(on_cpu_and_gpu());
  const Placement on_cpu = Placement::single(*s->graph(), 0);
  const uint64_t before = s->memory_model()->check_memory(on_cpu).memory[0].activations;
  s->apply_profiles(all_ops(*s, "cpu", 1u << 20));
  const uint64_t after = s->memory_model()->check_memory(on_cpu).memory[0].activations;
  EXPECT_EQ(after, 4u * (1u << 20)) << "before: outputs' bytes, " << before;
  EXPECT_EQ(s->graph()->ops[2].profile.at("cpu").forward_s, 0.001);
}

TEST_F(LiveProfiles, TheMeasuredPeaksAreTheProfiledPlacementsInItsDetail) {
  const auto s = started(on_cpu_and_gpu());
  ProfileReport report = all_ops(*s, "cpu", 0);
  report.peak_bytes = {3u << 20, 0};
  report.held_bytes = {{1u << 20, 0, 1u << 20, 2u << 20, 0, 4096}, {}};
  s->apply_profiles(report);
  const placement::messages::JobInfo info = s->detail();
  ASSERT_FALSE(info.candidates.empty());
  EXPECT_EQ(info.candidates.at(0).id, report.placement_id);
  EXPECT_EQ(info.candidates.at(0).peak_bytes, report.peak_bytes);
  EXPECT_EQ(info.candidates.at(0).held_bytes, report.held_bytes);
  // And through job_info's JSON, as placementctl reads it.
  EXPECT_EQ(placement::messages::JobInfo::from_json(info.to_json()).candidates.at(0).held_bytes,
            report.held_bytes);
  // A report that measured nothing (no limit on a logical device) leaves them as they were.
  report.peak_bytes.clear();
  report.held_bytes.clear();
  s->apply_profiles(report);
  EXPECT_EQ(s->detail().candidates.at(0).peak_bytes, (std::vector<uint64_t>{3u << 20, 0}));
  EXPECT_EQ(s->detail().candidates.at(0).held_bytes.size(), 2u);
}

TEST_F(LiveProfiles, AReportThatDoesNotFitTheSessionChangesNothing) {
  const auto s = started(on_cpu_and_gpu());
  ProfileReport unknown_op = all_ops(*s, "cpu", 0);
  unknown_op.ops.push_back({9, "cpu", {}});
  EXPECT_THROW(s->apply_profiles(unknown_op), std::invalid_argument);
  ProfileReport foreign = all_ops(*s, "cpu", 0);
  foreign.placement_id = 5;
  try {
    s->apply_profiles(foreign);
    ADD_FAILURE() << "a placement never issued was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "placement_id 5 was never issued to this job");
  }
  testing::SessionSetup cpus = on_cpu_and_gpu();
  cpus.devices = placement::testing::devices(2, DeviceKind::kCpu);
  const auto cpu_only = started(std::move(cpus));
  EXPECT_THROW(cpu_only->apply_profiles(all_ops(*cpu_only, "cuda", 0)), std::invalid_argument);
  ProfileReport three_peaks = all_ops(*s, "cpu", 0);
  three_peaks.peak_bytes = {1, 2, 3};
  try {
    s->apply_profiles(three_peaks);
    ADD_FAILURE() << "peaks of three devices were taken for a job of two";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "peak_bytes: 3 entries for the job's 2 devices");
  }
  ProfileReport three_held = all_ops(*s, "cpu", 0);
  three_held.held_bytes.resize(3);
  try {
    s->apply_profiles(three_held);
    ADD_FAILURE() << "what three devices held was taken for a job of two";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "held_bytes: 3 entries for the job's 2 devices");
  }
  EXPECT_TRUE(s->detail().candidates.at(0).peak_bytes.empty());
  EXPECT_TRUE(s->detail().candidates.at(0).held_bytes.empty());
  EXPECT_TRUE(s->profiled_kinds().empty());
  EXPECT_EQ(s->counters().profile_reports, 0u);
}

TEST_F(LiveProfiles, OneReportIsReadForEachDirectiveThatAskedAndTheRestAreDroppedUnread) {
  // Each report took a pass over the whole graph: one user sending empty ones over two 50 000-op
  // jobs held another user's placements up for seconds.
  const auto s = started(on_cpu_and_gpu());
  const auto d = s->directive(1, Reason::kStart);
  ASSERT_TRUE(d.profile);
  EXPECT_TRUE(s->profile_asked(1));
  s->apply_profiles(all_ops(*s, "cpu", 0));
  EXPECT_FALSE(s->profile_asked(1)) << "answered";
  EXPECT_FALSE(s->profile_asked(1));
  EXPECT_EQ(s->counters().profile_reports, 1u);
  EXPECT_EQ(s->counters().profile_reports_dropped, 2u);
  EXPECT_TRUE(s->profile_asked(99)) << "never issued: apply_profiles names it";
  // A failed report does not use the request up.
  testing::SessionSetup setup = on_cpu_and_gpu();
  const auto t = started(std::move(setup));
  ASSERT_TRUE(t->directive(1, Reason::kStart).profile);
  ProfileReport bad = all_ops(*t, "cpu", 0);
  bad.ops.push_back({9, "cpu", {}});
  EXPECT_THROW(t->apply_profiles(bad), std::invalid_argument);
  EXPECT_TRUE(t->profile_asked(1));
  EXPECT_EQ(t->counters().profile_reports_dropped, 0u);
}

TEST_F(LiveProfiles, AStartSpreadOverACpuAndAGpuIsProfiledOpByOp) {
  // Each op of an interleaved start is timed on the one device it runs on: the CPU's times of the
  // ops on the GPU, and the GPU's of those on the CPU, are still to come.
  testing::SessionSetup setup = on_cpu_and_gpu();
  setup.start = Placement{{0, 1, 0, 1}};
  const auto s = started(std::move(setup));
  const Placement on_cpu = Placement::single(*s->graph(), 0),
                  on_gpu = Placement::single(*s->graph(), 1);
  ProfileReport start;
  start.placement_id = 1;
  start.steps = 3;
  for (int op = 0; op < 4; ++op)
    start.ops.push_back({op, op % 2 ? "cuda" : "cpu", {op % 2 ? 0.001 : 0.004, 0.002, 0.0, 0}});
  s->apply_profiles(start);
  EXPECT_EQ(s->profiled_kinds(), (std::set<std::string>{"cpu", "cuda"}));
  EXPECT_FALSE(s->fully_profiled()) << "each op on one kind only";
  EXPECT_FALSE(s->wants_profile(Placement{{0, 1, 0, 1}}));
  EXPECT_TRUE(s->wants_profile(on_gpu));
  EXPECT_TRUE(s->wants_profile(on_cpu));
  EXPECT_TRUE(s->wants_profile(Placement{{1, 1, 0, 1}})) << "op 0 has no GPU time";
  ProfileReport gpu = all_ops(*s, "cuda", 0);
  s->apply_profiles(gpu);
  EXPECT_FALSE(s->wants_profile(on_gpu));
  EXPECT_TRUE(s->wants_profile(on_cpu)) << "ops 1 and 3 never ran on the CPU";
  EXPECT_FALSE(s->fully_profiled());
  // Meanwhile the planning model times them there from ops 0 and 2, measured on both.
  const placement::OpProfile& filled = s->graph()->ops[1].profile.at("cpu");
  EXPECT_TRUE(filled.predicted);
  EXPECT_GT(filled.forward_s, s->graph()->ops[1].profile.at("cuda").forward_s);
  EXPECT_NO_THROW(s->memory_model()->simulate(on_cpu));
}

// A job on a CPU and a GPU that starts with its ops interleaved over them, as the examples do,
// with the simulator warm start: each op is profiled on one kind by the start, the all-on-GPU
// candidate adds the GPU's times, and the warm start searches on those and the CPU times they
// predict. (On an H200 it was skipped: "no profile for every device kind", docs/gpu-runs.)
TEST(LiveProfilesWarmStart, RunsOnAJobThatStartsSpreadOverACpuAndAGpu) {
  if (!offline::built_plugins().has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  placement::OpGraph graph = placement::testing::two_chains(6);
  placement::OpGraph timed = graph;  // what the job's steps take: the GPU 5 times as fast
  placement::testing::profile_all(timed, DeviceKind::kCpu, 5e-3);
  placement::testing::profile_all(timed, DeviceKind::kCuda, 1e-3);
  const testing::SessionSetup devices = on_cpu_and_gpu();
  const sim::Simulator truth(timed, devices.devices);

  JobIdentity identity;
  identity.attach.job = "spread";
  identity.uid = ::getuid();
  identity.pid = ::getpid();
  identity.attach.devices = devices.devices;
  identity.protocol_version = placement::protocol::kProfileReportVersion;
  identity.attach.profile_steps = 3;
  testing::TestStore store{"live_profiles_warm_start"};
  LiveSession live(1, std::move(identity), testing::simulator_warm_start_policy(0, 6),
                   offline::built_plugins(), *store);
  std::vector<int> interleaved(graph.ops.size());
  for (size_t u = 0; u < interleaved.size(); ++u) interleaved[u] = static_cast<int>(u % 2);
  live.on_graph(graph, Placement{interleaved}, 0.0);

  msg::Directive d = live.next_directive();
  for (uint64_t step = 0; step < 300; ++step) {
    if (d.profile) {  // the job times each op where it runs, as the SDK's profiler does
      ProfileReport r;
      r.placement_id = d.placement_id;
      r.steps = 3;
      for (size_t u = 0; u < graph.ops.size(); ++u) {
        const std::string kind =
            placement::to_string(devices.devices.devices[d.placement.device_of_op[u]].kind);
        r.ops.push_back({static_cast<int>(u), kind, timed.ops[u].profile.at(kind)});
      }
      live.on_profiles(r);
    }
    std::optional<msg::Directive> next =
        live.on_report({d.placement_id, step, truth.simulate(d.placement).step_time_s, true, ""});
    if (live.has_deferred_work())
      if (auto pushed = live.run_deferred_work()) next = pushed;
    if (next) d = *next;
  }
  const msg::JobInfo info = live.detail();
  ASSERT_TRUE(info.warm_start.is_object()) << "the warm start ran";
  EXPECT_TRUE(info.warm_start["skipped"].is_null()) << info.warm_start.dump();
  EXPECT_GT(info.warm_start.value("search_evaluations", 0), 0) << info.warm_start.dump();
  // Its answer, on the model with the predicted CPU times, is the GPU alone: what the job's steps
  // say too (5 times as fast).
  EXPECT_NEAR(info.warm_start.value("baseline_step_time_s", 0.0),
              truth.simulate(Placement::single(graph, 1)).step_time_s, 1e-9)
      << info.warm_start.dump();
}

}  // namespace
}  // namespace placementd
