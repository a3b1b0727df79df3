// LiveSession as the server drives it, without a socket: real plugin libraries from this build's
// plugin directory, and the test plugins that throw from each entry point.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "built_plugins.h"
#include "live/live_session.h"
#include "live/request_error.h"
#include "test_graphs.h"
#include "test_store.h"

namespace placementd {
namespace {

namespace msg = placement::messages;
using nlohmann::json;
using placement::DeviceKind;
using placement::Params;

struct Policy {
  std::string grouper = "none", placer = "throwing", algorithm = "throwing";
  Params grouper_params, placer_params, algorithm_params;
  std::string warm_start;
};

class LiveSessionTest : public ::testing::Test {
 protected:
  std::unique_ptr<LiveSession> make(const Policy& p, uint64_t id = 1,
                                    std::optional<msg::ReplicaInfo> replica = std::nullopt,
                                    uid_t uid = ::getuid()) {
    JobIdentity job;
    job.attach.replica = std::move(replica);
    job.attach.job = "job" + std::to_string(id);
    job.uid = uid;
    job.pid = ::getpid();
    job.attach.devices = placement::testing::devices(2, DeviceKind::kCpu);
    EffectivePolicy policy;
    policy.grouper = p.grouper;
    policy.placer = p.placer;
    policy.algorithm = p.algorithm;
    policy.grouper_params = p.grouper_params;
    policy.placer_params = p.placer_params;
    policy.algorithm_params = p.algorithm_params;
    policy.warm_start = p.warm_start;
    policy.exploration.steps_per_candidate = 2;
    policy.exploration.warmup_steps = 0;
    policy.exploration.max_candidates = 12;
    policy.exploration.converge_candidates = 0;
    policy.exploration.max_overhead_fraction = 1.0;
    policy.exploration.trial_window_steps = 2;
    return std::make_unique<LiveSession>(id, std::move(job), std::move(policy),
                                         built_and_test_plugins(), *store);
  }

  // The "job": an op on cpu:1 takes 1 time unit, on cpu:0 2. Runs `steps` steps under what the
  // session says, as the server would (deferred work after each answer); returns the placement in
  // force and counts the directives it got.
  msg::Directive train(LiveSession& live, msg::Directive in_force, int steps) {
    for (int i = 0; i < steps; ++i) {
      double t = 0;
      for (int d : in_force.placement.device_of_op) t += d == 1 ? 1.0 : 2.0;
      if (auto next = live.on_report({in_force.placement_id, step++, t, true, ""})) {
        in_force = *next;
        ++directives;
      }
      if (live.has_deferred_work())
        if (auto next = live.run_deferred_work()) {
          in_force = *next;
          ++directives;
        }
    }
    return in_force;
  }

  testing::TestStore store{"live_session_test"};
  const placement::OpGraph graph = placement::testing::chain(4, 1024);
  uint64_t step = 0;
  int directives = 0;
};

TEST_F(LiveSessionTest, TakesAJobFromItsGraphToItsDetachAndTheNextRunStartsFromItsBest) {
  auto live = make({});
  EXPECT_THROW(live->next_directive(), RequestError) << "no placement before the graph";
  const msg::GraphAccepted accepted = live->on_graph(graph, std::nullopt, 0.1);
  EXPECT_EQ(accepted.ops, 4u);
  EXPECT_EQ(accepted.groups, 4);
  EXPECT_FALSE(accepted.cached);
  try {
    live->on_graph(graph, std::nullopt, 0.1);
    ADD_FAILURE() << "a second graph was taken";
  } catch (const RequestError& e) {
    EXPECT_STREQ(e.code, placement::protocol::error::kUnexpected);
  }

  const msg::Directive first = live->next_directive();
  EXPECT_EQ(first.reason, msg::Reason::kStart);
  EXPECT_EQ(first.state, msg::JobState::kProfiling);
  EXPECT_FALSE(first.profile) << "this job does not profile";
  EXPECT_EQ(first.placement.device_of_op, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(live->next_directive().placement_id, first.placement_id)
      << "asked again: the placement in force";

  train(*live, first, 200);
  const msg::JobSummary summary = live->summary();
  EXPECT_EQ(summary.state, msg::JobState::kExploiting) << summary.to_json().dump();
  EXPECT_FALSE(summary.policy_error);
  EXPECT_GT(directives, 2);
  EXPECT_GT(summary.speedup.value(), 1.0) << "the placer's samples include faster placements";

  const msg::Detached detached = live->on_detach();
  EXPECT_TRUE(detached.persisted);
  ASSERT_TRUE(detached.best_step_time_s);
  EXPECT_TRUE(live->detached());
  EXPECT_FALSE(live->on_report({first.placement_id, step++, 1.0, true, ""}))
      << "nothing after the detach";
  EXPECT_EQ(live->summary().state, msg::JobState::kDetached);
  // Kept among the finished jobs, the session lets go of its graph and plugins; its record stays.
  const msg::JobInfo record = live->detail();
  EXPECT_FALSE(record.candidates.empty());
  live->retire();
  EXPECT_EQ(live->detail().to_json(), record.to_json());
  EXPECT_EQ(live->summary().to_json(), record.job.to_json());

  const std::optional<StoredPlacement> stored = store->best(::getuid(), graph, live->devices());
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->step_time_s, *detached.best_step_time_s);

  // The next run of this uid starts on its own placement; what the last one stored is its first
  // candidate, which must beat that start in a trial to be kept.
  auto next = make({}, 2);
  EXPECT_TRUE(next->on_graph(graph, std::nullopt, 0.1).cached);
  const msg::Directive start = next->next_directive();
  EXPECT_EQ(start.reason, msg::Reason::kStart);
  EXPECT_EQ(start.placement.device_of_op, (std::vector<int>{0, 0, 0, 0}));
  std::optional<msg::Directive> second;
  for (int i = 0; i < 10 && !second; ++i)
    second = next->on_report({start.placement_id, step++, 8.0, true, ""});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->reason, msg::Reason::kCached);
  EXPECT_EQ(second->placement.device_of_op, stored->placement.device_of_op);

  // Another uid's job of the same model on the same devices starts from nothing of this one's.
  auto stranger = make({}, 3, std::nullopt, ::getuid() + 1);
  const msg::GraphAccepted theirs = stranger->on_graph(graph, std::nullopt, 0.1);
  EXPECT_FALSE(theirs.cached);
  EXPECT_FALSE(theirs.policy_resumed);
}

// A replica of rank > 0 follows rank 0's daemon: its session takes only step reports, which it
// counts for `placementctl jobs`, and refuses what would make it place anything.
// Inspection never waits for the session's lock, which policy work may hold for seconds, and what
// it shows then is recent: the job as of its last swap. It showed the job as it attached (0 steps)
// whenever nothing had inspected it while the lock was free, and `jobs show` did until this stop.
TEST_F(LiveSessionTest, InspectedWhilePolicyWorkHoldsItsLockAJobShowsItsStepsUpToItsLastSwap) {
  Policy p;
  p.algorithm_params = {
      {"entry", "observe"}, {"after", 4}, {"exception", "none"}, {"stall_ms", 2000}};
  auto live = make(p);
  live->on_graph(graph, std::nullopt, 0.1);
  std::atomic<uint64_t> reported{0};
  std::atomic<bool> stop{false};
  std::thread job([&] {
    msg::Directive in_force = live->next_directive();
    for (uint64_t i = 0; i < 200 && !stop; ++i) {
      double t = 0;
      for (int d : in_force.placement.device_of_op) t += d == 1 ? 1.0 : 2.0;
      reported = i + 1;
      if (auto next = live->on_report({in_force.placement_id, i, t, true, ""})) in_force = *next;
    }
  });
  // The job is inside the stalled observe once its reports stop for 0.4 s.
  uint64_t seen = 0;
  auto quiet_since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - quiet_since < std::chrono::milliseconds(400)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (reported != seen) {
      seen = reported;
      quiet_since = std::chrono::steady_clock::now();
    }
  }
  const auto asked = std::chrono::steady_clock::now();
  const msg::JobSummary summary = live->summary();
  const auto waited = std::chrono::steady_clock::now() - asked;
  // `jobs show` too, whose candidate list was made when the lock was last free: its job figures
  // are the summary's (they were the attach's, 0 steps, and a Python job's summary said so).
  const msg::JobInfo detail = live->detail();
  stop = true;
  job.join();
  EXPECT_LT(waited, std::chrono::milliseconds(1000)) << "inspection waited for the policy work";
  // Every report before the stalled one was handled, the last swap at most two steps before it
  // (steps_per_candidate 2, no warm-up).
  EXPECT_GE(summary.steps + 3, seen) << summary.to_json().dump();
  EXPECT_LT(summary.steps, seen);
  EXPECT_GE(summary.candidates_tried, 2u);
  EXPECT_EQ(detail.job.to_json(), summary.to_json());
}

TEST_F(LiveSessionTest, AFollowerCountsItsStepsAndRefusesGraphsPlacementsAndProfiles) {
  auto live = make({}, 1, msg::ReplicaInfo{1, 2, "127.0.0.1:29500/0000beef"});
  EXPECT_TRUE(live->follower());
  EXPECT_EQ(live->summary().state, msg::JobState::kFollowing);
  const auto refused = [](auto&& call) {
    try {
      call();
    } catch (const RequestError& e) {
      EXPECT_STREQ(e.code, placement::protocol::error::kUnexpected);
      return std::string(e.what());
    }
    return std::string("not refused");
  };
  EXPECT_EQ(refused([&] { live->on_graph(graph, std::nullopt, 0.1); }),
            "rank 1 of replica group 127.0.0.1:29500/0000beef follows the placement rank 0's "
            "daemon decides: a "
            "follower does not upload a graph");
  EXPECT_NE(refused([&] { live->next_directive(); }).find("a follower does not request placements"),
            std::string::npos);
  placement::messages::ProfileReport profiles;
  profiles.placement_id = 1;
  EXPECT_NE(refused([&] { live->on_profiles(profiles); }).find("a follower does not send profiles"),
            std::string::npos);

  // Rank 0's placement ids; the follower's step time is the median of its latest steps.
  for (int i = 0; i < 100; ++i)
    EXPECT_FALSE(live->on_report({7, step++, i < 50 ? 9.0 : 0.02, true, ""}));
  EXPECT_FALSE(live->on_report({7, step++, 0.5, false, "out of memory"}));
  EXPECT_FALSE(live->on_report({7, step++, 0.5, true, "", true}))
      << "a profiled step is no measurement";
  msg::JobSummary summary = live->summary();
  EXPECT_EQ(summary.state, msg::JobState::kFollowing);
  EXPECT_EQ(summary.steps, 102u);
  EXPECT_EQ(summary.failed_steps, 1u);
  EXPECT_DOUBLE_EQ(summary.current_step_time_s.value(), 0.02)
      << "the latest 64 steps, not the first 50";
  EXPECT_FALSE(summary.best_step_time_s);
  EXPECT_EQ(summary.candidates_tried, 0u);
  ASSERT_TRUE(summary.replica);
  EXPECT_EQ(summary.replica->rank, 1);
  EXPECT_EQ(summary.replica->group, "127.0.0.1:29500/0000beef");
  EXPECT_EQ(summary.grouper, "") << "a follower explores nothing";
  EXPECT_EQ(live->detail().candidates.size(), 0u);

  EXPECT_FALSE(live->persist()) << "rank 0's daemon stores the group's placement";
  const msg::Detached detached = live->on_detach();
  EXPECT_FALSE(detached.persisted);
  EXPECT_FALSE(detached.best_step_time_s);
  EXPECT_EQ(live->summary().state, msg::JobState::kDetached);

  // Rank 0 is a job like any other, its replica shown.
  auto leader = make({}, 2, msg::ReplicaInfo{0, 2, "127.0.0.1:29500/0000beef"});
  EXPECT_FALSE(leader->follower());
  leader->on_graph(graph, std::nullopt, 0.1);
  train(*leader, leader->next_directive(), 10);
  EXPECT_EQ(leader->summary().replica->rank, 0);
  EXPECT_EQ(leader->summary().steps, 10u);
  EXPECT_NE(leader->summary().state, msg::JobState::kFollowing);
}

// Where a plugin throws, what it throws, and what the session is expected to say.
struct Failure {
  std::string kind;   // "grouper", "placer", "algorithm"
  std::string entry;  // the entry point that throws
  std::string exception;
  std::string warm_start;
  /// On the graph: the upload is refused. Later: exploration ends, with this label.
  std::string when;
};

void PrintTo(const Failure& f, std::ostream* os) {
  *os << f.kind << "." << f.entry << " throws " << f.exception
      << (f.warm_start.empty() ? "" : " in the warm start");
}

std::string name_of(const ::testing::TestParamInfo<Failure>& info) {
  return info.param.kind + "_" + info.param.entry + "_" + info.param.exception +
         (info.param.warm_start.empty() ? "" : "_warm_start");
}

class PluginFailure : public LiveSessionTest, public ::testing::WithParamInterface<Failure> {
 protected:
  Policy throwing() const {
    const Failure& f = GetParam();
    Policy p;
    const Params params = {{"entry", f.entry}, {"exception", f.exception}};
    if (f.kind == "grouper") {
      p.grouper = "throwing";
      p.grouper_params = params;
    }
    if (f.kind == "placer") p.placer_params = params;
    if (f.kind == "algorithm") p.algorithm_params = params;
    p.warm_start = f.warm_start;
    return p;
  }
  std::string message() const {
    return GetParam().exception == "std" ? "test plugin: " + GetParam().entry + " exploded"
                                         : "not a std::exception";
  }
};

TEST_P(PluginFailure, IsTheJobsErrorAndNeverEscapes) {
  auto live = make(throwing());
  if (GetParam().when == "graph") {
    try {
      live->on_graph(graph, std::nullopt, 0.1);
      FAIL() << "the graph was taken";
    } catch (const RequestError& e) {
      EXPECT_NE(std::string(e.what()).find(message()), std::string::npos) << e.what();
    }
    EXPECT_THROW(live->next_directive(), RequestError) << "the session is as before the upload";
    EXPECT_FALSE(live->on_detach().persisted);
    return;
  }
  live->on_graph(graph, std::nullopt, 0.1);
  const msg::Directive first = live->next_directive();
  const msg::Directive in_force = train(*live, first, 40);
  const msg::JobSummary summary = live->summary();
  ASSERT_TRUE(summary.policy_error.has_value()) << summary.to_json().dump();
  const std::string error = summary.policy_error.value();
  EXPECT_EQ(error.rfind(GetParam().when + ": ", 0), 0u) << error;
  EXPECT_NE(error.find(message()), std::string::npos) << error;
  EXPECT_EQ(summary.state, msg::JobState::kExploiting);
  // The job runs its best placement (the start, or a candidate measured before the failure) and
  // nothing moves it any more.
  EXPECT_TRUE(in_force.reason == msg::Reason::kBest || in_force.reason == msg::Reason::kStart)
      << to_string(in_force.reason);
  const int before = directives;
  EXPECT_EQ(train(*live, in_force, 30).placement_id, in_force.placement_id);
  EXPECT_EQ(directives, before);
  EXPECT_FALSE(live->has_deferred_work());
  // Detaching still keeps what was measured.
  const msg::Detached detached = live->on_detach();
  EXPECT_TRUE(detached.persisted);
  EXPECT_TRUE(store->best(::getuid(), graph, live->devices()));
}

INSTANTIATE_TEST_SUITE_P(
    EachEntryPoint, PluginFailure,
    ::testing::Values(Failure{"grouper", "group", "std", "", "graph"},
                      Failure{"grouper", "group", "other", "", "graph"},
                      Failure{"placer", "prepare", "std", "", "graph"},
                      Failure{"placer", "prepare", "other", "", "graph"},
                      Failure{"algorithm", "reset", "std", "", "graph"},
                      Failure{"algorithm", "reset", "other", "", "graph"},
                      Failure{"placer", "place", "std", "", "policy step"},
                      Failure{"placer", "place", "other", "", "policy step"},
                      Failure{"algorithm", "observe", "std", "", "policy step"},
                      Failure{"algorithm", "observe", "other", "", "policy step"},
                      Failure{"placer", "accumulate_gradient", "std", "", "policy step"},
                      Failure{"placer", "apply_gradient", "other", "", "policy step"},
                      Failure{"placer", "save_state", "std", "", "policy step"},
                      Failure{"placer", "save_state", "other", "", "policy step"},
                      Failure{"placer", "log_prob", "std", "single_device", "warm start"},
                      Failure{"placer", "apply_gradient", "other", "single_device", "warm start"}),
    name_of);

TEST_F(LiveSessionTest, AStoredPolicyStateThePluginCannotLoadIsIgnored) {
  for (const std::string exception : {"std", "other"}) {
    auto first = make({});
    first->on_graph(graph, std::nullopt, 0.1);
    train(*first, first->next_directive(), 10);
    first->on_detach();
    Policy p;
    p.placer_params = {{"entry", std::string("load_state")}, {"exception", exception}};
    auto next = make(p, 2);
    const msg::GraphAccepted accepted = next->on_graph(graph, std::nullopt, 0.1);
    EXPECT_TRUE(accepted.cached);
    EXPECT_FALSE(accepted.policy_resumed) << exception;
    EXPECT_FALSE(next->summary().policy_error);
  }
}

TEST_F(LiveSessionTest, SavingThePolicyAtDetachFailsAloneTheBestIsStillWritten) {
  Policy p;
  // The first save (after the start placement is measured) goes well; the one at detach throws.
  p.placer_params = {{"entry", std::string("save_state")},
                     {"after", int64_t{1}},
                     {"exception", std::string("other")}};
  p.grouper = "none";
  auto live = make(p);
  live->on_graph(graph, std::nullopt, 0.1);
  const msg::Directive first = live->next_directive();
  train(*live, first, 2);
  EXPECT_FALSE(live->summary().policy_error);
  const msg::Detached detached = live->on_detach();
  EXPECT_TRUE(detached.persisted);
  const msg::JobSummary summary = live->summary();
  ASSERT_TRUE(summary.policy_error.has_value()) << summary.to_json().dump();
  EXPECT_EQ(summary.policy_error->rfind("saving the policy state: ", 0), 0u);
}

}  // namespace
}  // namespace placementd
