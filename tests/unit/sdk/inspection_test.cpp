// The inspection replies survive the wire, an older placementctl reads a newer daemon's replies,
// and a field of the wrong type is named.

#include <gtest/gtest.h>

#include "placement/inspection.h"
#include "placement/serialization.h"

namespace placement::messages {
namespace {

using nlohmann::json;

JobSummary measured_job() {
  JobSummary s;
  s.id = 7;
  s.name = "bert";
  s.uid = 1000;
  s.pid = 4242;
  s.state = JobState::kReexploring;
  s.fingerprint = "abc";
  s.ops = 120;
  s.groups = 16;
  s.devices = 2;
  s.grouper = "metis";
  s.placer = "feedforward";
  s.algorithm = "ppo";
  s.steps = 900;
  s.failed_steps = 1;
  s.candidates_tried = 12;
  s.max_candidates = 100;
  s.start_step_time_s = 0.4;
  s.best_step_time_s = 0.25;
  s.start_step_time_interval_s = std::array<double, 2>{0.38, 0.43};
  s.best_step_time_interval_s = std::array<double, 2>{0.24, 0.27};
  s.exploration_overhead = 0.04;
  s.job_s = 300.0;
  s.realized_speedup = 1.2;
  s.realized_speedup_interval = std::array<double, 2>{1.14, 1.29};
  s.start_mean_step_time_s = 0.41;
  s.beyond_best_s = 42.0;
  s.current_placement = 9;
  s.best_placement = 5;
  s.exploration_finished = true;
  s.exploration_steps = 180;
  s.expected_steps = 10000;
  s.budget_used = 0.36;
  s.paused = true;
  s.speedup = 1.6;
  s.steps_to_within_2pct = 300;
  s.seconds_to_within_2pct = 95.5;
  s.rejected = 3;
  s.repeats_scored = 2;
  s.reexplorations = 1;
  s.profiled_kinds = {"cpu", "cuda"};
  s.profiled_steps = 20;
  s.profiling_overhead_s = 1.5;
  s.policy_error = "placer 'feedforward' threw: boom";
  s.attached_s = 321.0;
  return s;
}

TEST(Inspection, AJobSurvivesTheWireWithItsUnmeasuredTimesAsNull) {
  const JobSummary s = measured_job();
  const JobSummary back = JobSummary::from_json(s.to_json());
  EXPECT_EQ(back.to_json(), s.to_json());
  EXPECT_EQ(back.state, JobState::kReexploring);
  EXPECT_EQ(back.policy_error, s.policy_error);
  EXPECT_EQ(back.profiled_kinds, s.profiled_kinds);
  EXPECT_EQ(back.best_step_time_interval_s, s.best_step_time_interval_s);
  EXPECT_FALSE(back.replica.has_value());
  EXPECT_TRUE(s.to_json().at("replica").is_null());

  JobSummary follower = s;
  follower.state = JobState::kFollowing;
  follower.replica = ReplicaInfo{2, 8, "10.0.0.1:29500/3fa2c1d0"};
  const JobSummary followed = JobSummary::from_json(follower.to_json());
  EXPECT_EQ(followed.state, JobState::kFollowing);
  ASSERT_TRUE(followed.replica.has_value());
  EXPECT_EQ(followed.replica->rank, 2);
  EXPECT_EQ(followed.replica->world_size, 8);
  EXPECT_EQ(followed.replica->group, "10.0.0.1:29500/3fa2c1d0");
  json out_of_range = follower.to_json();
  out_of_range["replica"]["rank"] = 8;
  EXPECT_THROW(JobSummary::from_json(out_of_range), FormatError);

  JobSummary fresh;
  fresh.id = 1;
  fresh.name = "new";
  const json j = fresh.to_json();
  EXPECT_TRUE(j.at("best_step_time_s").is_null());
  EXPECT_TRUE(j.at("policy_error").is_null());
  EXPECT_EQ(j.at("state"), "attached");
  const JobSummary decoded = JobSummary::from_json(j);
  EXPECT_FALSE(decoded.best_step_time_s);
  EXPECT_FALSE(decoded.speedup);
  EXPECT_FALSE(decoded.policy_error);
  EXPECT_FALSE(decoded.start_step_time_interval_s);

  json bad = s.to_json();
  bad["best_step_time_interval_s"] = {0.2};
  try {
    JobSummary::from_json(bad);
    FAIL() << "an interval of one number was accepted";
  } catch (const placement::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("best_step_time_interval_s"), std::string::npos)
        << e.what();
  }
}

TEST(Inspection, AJobInfoCarriesTheSummaryAtTheTopLevelAndItsCandidates) {
  JobInfo info;
  info.job = measured_job();
  CandidateInfo c;
  c.id = 3;
  c.reason = Reason::kPolicy;
  c.placement_fingerprint = "p3";
  c.ops_per_device = {70, 50};
  c.steps = 15;
  c.failures = 1;
  c.error = "CUDA out of memory";
  c.trial = "faster than 1: -4.1% (-6.0% to -2.2%), 64 pairs";
  info.candidates = {c};
  info.trials = {{3, 1, 420, "faster", false}, {3, 1, 900, "not faster", true}};
  info.timeline = {{0, 20, 1, 1, 0.4}, {20, 15, 3, 1, 0.3}};
  info.device_names = {"cuda:0", "cuda:1"};
  info.stray_reports = 2;
  info.profile_reports = 1;
  info.rejected_by_device = {{"cuda:1", 3}};
  info.warm_start = {{"baseline", "metis"}, {"steps", 200}};
  info.refits = {{{"measured", 3},
                  {"factors", json::array({{{"what", "compute on cuda:1"}, {"scale", 2.9}}})}},
                 {{"measured", 6}, {"skipped", "its answer ran already"}}};
  const json j = info.to_json();
  EXPECT_EQ(j.at("name"), "bert")
      << "placementctl jobs --json and jobs show --json share the summary's keys";
  EXPECT_EQ(j.at("candidates")[0].at("reason"), "policy");
  const JobInfo back = JobInfo::from_json(j);
  EXPECT_EQ(back.to_json(), j);
  ASSERT_EQ(back.candidates.size(), 1u);
  EXPECT_EQ(back.candidates[0].ops_per_device, (std::vector<int64_t>{70, 50}));
  EXPECT_FALSE(back.candidates[0].median_step_time_s);
  EXPECT_EQ(back.rejected_by_device.at("cuda:1"), 3u);
  ASSERT_EQ(back.trials.size(), 2u);
  EXPECT_EQ(back.trials[1].step, 900u);
  EXPECT_EQ(back.trials[1].verdict, "not faster");
  EXPECT_TRUE(back.trials[1].final_check);
  ASSERT_EQ(back.refits.size(), 2u);
  EXPECT_EQ(back.refits[0]["factors"][0]["what"], "compute on cuda:1");
  EXPECT_EQ(back.refits[1]["skipped"], "its answer ran already");
  ASSERT_EQ(back.timeline.size(), 2u);
  EXPECT_EQ(back.timeline[1].first_step, 20u);
  EXPECT_EQ(back.timeline[1].placement, 3u);
  EXPECT_DOUBLE_EQ(back.timeline[1].mean_step_time_s, 0.3);
  // An older daemon's job_info has no timeline, no verdict steps and no refits.
  json older = j;
  older.erase("timeline");
  older.erase("trials");
  older.erase("refits");
  const JobInfo old_info = JobInfo::from_json(older);
  EXPECT_TRUE(old_info.timeline.empty());
  EXPECT_TRUE(old_info.trials.empty());
  EXPECT_TRUE(old_info.refits.empty());
}

TEST(Inspection, StatusAndPluginListsSurviveTheWire) {
  StatusReply s;
  s.version = "0.1.0";
  s.pid = 99;
  s.config = "/etc/placementd/placementd.toml";
  s.jobs_visible = 1;
  s.plugins = {6, 9, 5};
  s.policy = {"colocation", "feedforward", "reinforce"};
  s.peer.uid = 1000;
  const json j = s.to_json();
  EXPECT_TRUE(j.at("jobs_total").is_null()) << "only an admin sees every job's count";
  EXPECT_EQ(StatusReply::from_json(j).to_json(), j);
  s.jobs_total = 4;
  EXPECT_EQ(StatusReply::from_json(s.to_json()).jobs_total, 4u);

  PluginList list;
  list.plugins.push_back({"metis", "grouper", "1.0.0", "EAGLE", "/lib/metis.so", "", {}});
  list.plugins[0].hyperparameters.push_back(
      {"groups", "int", "256", "number of groups", 1.0, 100000.0, {}});
  list.plugins[0].hyperparameters.push_back(
      {"mode", "string", "\"fast\"", "how", std::nullopt, std::nullopt, {"fast", "slow"}});
  list.skipped.push_back({"/lib/old.so", "plugin ABI tag 1 does not match"});
  const json p = list.to_json();
  EXPECT_FALSE(p.at("plugins")[0].at("hyperparameters")[1].contains("min"));
  EXPECT_EQ(PluginList::from_json(p).to_json(), p);
}

TEST(Inspection, KeysANewerDaemonAddsAreIgnoredAndAWrongTypeIsNamed) {
  json j = measured_job().to_json();
  j["gpu_hours_saved"] = 12.5;
  EXPECT_EQ(JobSummary::from_json(j).name, "bert");
  JobList list;
  list.jobs = {measured_job()};
  json wire = list.to_json();
  wire["jobs"][0]["steps"] = "many";
  try {
    JobList::from_json(wire);
    ADD_FAILURE() << "a string step count was taken";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("job_list.jobs[0].steps"), std::string::npos) << e.what();
  }
  json bad_state = measured_job().to_json();
  bad_state["state"] = "dreaming";
  EXPECT_THROW(JobSummary::from_json(bad_state), FormatError);
}

}  // namespace
}  // namespace placement::messages
