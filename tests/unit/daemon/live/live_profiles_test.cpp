#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "live/exploration.h"
#include "live/live_profiles.h"
#include "placement/protocol.h"
#include "test_graphs.h"

namespace placementd {
namespace {

using placement::DeviceKind;
using placement::Placement;
using placement::messages::ProfileReport;

// A four-op chain on one CPU and one GPU, the graph unprofiled, a job speaking protocol 2 that
// profiles 3 steps when asked.
void on_cpu_and_gpu(Session& s) {
  s.graph = placement::testing::chain(4, 1024);
  placement::DeviceSet cpu = placement::testing::devices(1, DeviceKind::kCpu);
  placement::DeviceSet gpu = placement::testing::devices(1, DeviceKind::kCuda);
  s.devices = placement::DeviceSet::uniform({cpu.devices[0], gpu.devices[0]}, 10e9, 1e-5);
  s.memory_model.emplace(*s.graph, s.devices);
  s.protocol_version = placement::protocol::kProfileReportVersion;
  s.job_profile_steps = 3;
  s.candidates[1].placement = Placement::single(*s.graph, 0);
}

ProfileReport all_ops(const Session& s, const char* kind, uint64_t activation_bytes) {
  ProfileReport r;
  r.placement_id = 1;
  r.steps = 3;
  for (size_t i = 0; i < s.graph->ops.size(); ++i)
    r.ops.push_back({static_cast<int>(i), kind, {0.001, 0.002, 0.0, activation_bytes}});
  return r;
}

TEST(LiveProfiles, AJobIsAskedToProfileWherePlacementsReachAnUnprofiledKind) {
  Session s;
  on_cpu_and_gpu(s);
  const Placement on_cpu = Placement::single(*s.graph, 0), on_gpu = Placement::single(*s.graph, 1);
  EXPECT_TRUE(wants_profile(s, on_cpu));
  EXPECT_FALSE(fully_profiled(s));
  apply_profiles(s, all_ops(s, "cpu", 0));
  EXPECT_FALSE(wants_profile(s, on_cpu)) << "cpu has profiles now";
  EXPECT_TRUE(wants_profile(s, on_gpu));
  EXPECT_TRUE(wants_profile(s, Placement{{0, 0, 1, 0}})) << "one op on the GPU is enough to ask";
  EXPECT_FALSE(fully_profiled(s));
  apply_profiles(s, all_ops(s, "cuda", 0));
  EXPECT_FALSE(wants_profile(s, on_gpu));
  EXPECT_TRUE(fully_profiled(s));
  EXPECT_EQ(s.profiled_kinds(), (std::set<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(s.profile_reports, 2u);

  Session fresh;
  on_cpu_and_gpu(fresh);
  EXPECT_TRUE(wants_profile(fresh, on_cpu));
  // A job that does not profile, or speaks protocol 1, is never asked.
  fresh.job_profile_steps = 0;
  EXPECT_FALSE(wants_profile(fresh, on_cpu));
  fresh.job_profile_steps = 3;
  fresh.protocol_version = 1;
  EXPECT_FALSE(wants_profile(fresh, on_cpu));
}

TEST(LiveProfiles, ASplitIsProfiledOnlyWhenNoAllOnOneCandidateFollows) {
  // Two logical CPUs and an interleaved start: its op times would include the copies between
  // cpu:0 and cpu:1, so the all-on-cpu:0 candidate that comes next is profiled instead.
  for (uint64_t memory : {uint64_t{1} << 30, uint64_t{5000}}) {
    Session s;
    s.graph = placement::testing::chain(4, 1024);
    s.devices = placement::testing::devices(2, DeviceKind::kCpu, memory);
    s.memory_model.emplace(*s.graph, s.devices);
    s.protocol_version = placement::protocol::kProfileReportVersion;
    s.job_profile_steps = 3;
    const Placement split{{0, 1, 0, 1}};
    s.candidates[1].placement = split;
    const bool single_fits = s.memory_model->check_memory(Placement::single(*s.graph, 0)).valid;
    EXPECT_EQ(single_fits, memory > 5000) << "the second device set is too small for all-on-one";
    EXPECT_EQ(wants_profile(s, split), !single_fits) << memory << " bytes per device";
    s.single_device_tried = true;
    EXPECT_TRUE(wants_profile(s, split))
        << "nothing cleaner follows once the single device was offered";
    EXPECT_TRUE(wants_profile(s, Placement::single(*s.graph, 0)));
  }
}

TEST(LiveProfiles, MeasuredActivationsReachTheMemoryModel) {
  Session s;
  on_cpu_and_gpu(s);
  const Placement on_cpu = Placement::single(*s.graph, 0);
  const uint64_t before = s.memory_model->check_memory(on_cpu).memory[0].activations;
  apply_profiles(s, all_ops(s, "cpu", 1u << 20));
  const uint64_t after = s.memory_model->check_memory(on_cpu).memory[0].activations;
  EXPECT_EQ(after, 4u * (1u << 20)) << "before: outputs' bytes, " << before;
  EXPECT_EQ(s.graph->ops[2].profile.at("cpu").forward_s, 0.001);
}

TEST(LiveProfiles, AReportThatDoesNotFitTheSessionChangesNothing) {
  Session s;
  on_cpu_and_gpu(s);
  ProfileReport unknown_op = all_ops(s, "cpu", 0);
  unknown_op.ops.push_back({9, "cpu", {}});
  EXPECT_THROW(apply_profiles(s, unknown_op), std::invalid_argument);
  ProfileReport foreign = all_ops(s, "cpu", 0);
  foreign.placement_id = 5;
  try {
    apply_profiles(s, foreign);
    ADD_FAILURE() << "a placement never issued was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "placement_id 5 was never issued to this job");
  }
  Session cpu_only;
  on_cpu_and_gpu(cpu_only);
  cpu_only.devices = placement::testing::devices(2, DeviceKind::kCpu);
  EXPECT_THROW(apply_profiles(cpu_only, all_ops(cpu_only, "cuda", 0)), std::invalid_argument);
  EXPECT_TRUE(s.profiled_kinds().empty());
  EXPECT_EQ(s.profile_reports, 0u);
}

}  // namespace
}  // namespace placementd
