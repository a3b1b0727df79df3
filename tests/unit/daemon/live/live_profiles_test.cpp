#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "live/session.h"
#include "placement/protocol.h"
#include "test_graphs.h"
#include "test_session.h"
#include "test_store.h"

namespace placementd {
namespace {

using placement::DeviceKind;
using placement::Placement;
using placement::messages::ProfileReport;

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
  EXPECT_TRUE(s->profiled_kinds().empty());
  EXPECT_EQ(s->counters().profile_reports, 0u);
}

}  // namespace
}  // namespace placementd
