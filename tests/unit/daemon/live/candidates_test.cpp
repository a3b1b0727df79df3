// Which candidates run (daemon/live/candidates.cpp): after a "simulator" warm start, the
// heuristics' placements the planning model does not rule out, and of the policy's samples the one
// the planning model predicts fastest of [policy] screened_samples.
// Real plugins (none + feedforward + reinforce) driven as the server drives a session.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "built_plugins.h"
#include "live/live_session.h"
#include "planning/offline/baseline.h"
#include "planning/offline/warm_start.h"
#include "planning/sim/simulator.h"
#include "test_graphs.h"
#include "test_session.h"
#include "test_store.h"

namespace placementd {
namespace {

namespace msg = placement::messages;
using placement::DeviceKind;

// A job of this process's uid named `name` on `devices`.
JobIdentity job_on(const char* name, const placement::DeviceSet& devices) {
  JobIdentity identity;
  identity.attach.job = name;
  identity.uid = ::getuid();
  identity.pid = ::getpid();
  identity.attach.devices = devices;
  return identity;
}

// The simulator warm start without convergence, `screened` of the policy's samples ranked.
EffectivePolicy ranking_policy(int64_t screened) {
  EffectivePolicy policy = testing::simulator_warm_start_policy(0, 30);
  policy.exploration.converge_candidates = 0;
  policy.screened_samples = screened;
  return policy;
}

// Runs `steps` steps of the job under the session's directives, each taking `time_of` its
// placement; `moved` sees each directive that moves the job.
void run_job(LiveSession& live, uint64_t steps,
             const std::function<double(const placement::Placement&)>& time_of,
             const std::function<void(const msg::Directive&)>& moved) {
  msg::Directive in_force = live.next_directive();
  for (uint64_t step = 0; step < steps; ++step) {
    std::optional<msg::Directive> next =
        live.on_report({in_force.placement_id, step, time_of(in_force.placement), true, ""});
    if (live.has_deferred_work())
      if (auto pushed = live.run_deferred_work()) next = pushed;
    if (!next) continue;
    in_force = *next;
    moved(in_force);
  }
}

// The planning model's mean step time of the policy's candidates (each placement once) in a job of
// 2000 steps timed by that model itself, with `screened` samples ranked per candidate, until the
// policy proposes only placements it measured (9 candidates as drawn, 4 ranked: drawing more
// samples per candidate scores the policy on more repeats of what it measured, so it settles
// sooner).
double mean_time_of_policy_candidates(int64_t screened, const char* store_name) {
  placement::OpGraph graph = placement::testing::two_chains(6);
  const placement::DeviceSet devices = placement::testing::devices(2, DeviceKind::kCuda);
  placement::testing::profile_all(graph, DeviceKind::kCuda, 1e-3);
  const sim::Simulator model(graph, devices);
  testing::TestStore store{store_name};
  LiveSession live(1, job_on("screened", devices), ranking_policy(screened),
                   offline::built_plugins(), *store);
  live.on_graph(graph, std::nullopt, 0.0);
  std::set<uint64_t> seen;
  double sum = 0;
  const auto time_of = [&](const placement::Placement& p) { return model.simulate(p).step_time_s; };
  run_job(live, 2000, time_of, [&](const msg::Directive& d) {
    if (d.reason == msg::Reason::kPolicy && seen.insert(d.placement_id).second)
      sum += time_of(d.placement);
  });
  EXPECT_GE(seen.size(), 2u) << "the policy proposed candidates";
  return seen.empty() ? 0.0 : sum / static_cast<double>(seen.size());
}

TEST(Candidates, ThePlanningModelPicksWhichOfThePolicysSamplesRuns) {
  if (!offline::built_plugins().has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  const double as_drawn = mean_time_of_policy_candidates(1, "candidates_test_drawn");
  const double ranked = mean_time_of_policy_candidates(32, "candidates_test_ranked");
  EXPECT_LT(ranked, 0.98 * as_drawn)
      << "the candidates the model ranked are faster by it than the samples as drawn";
}

// Heuristic `placer`'s placement of `graph` on `devices`, one group per op (the "none" grouper's).
placement::Placement heuristic_placement(const char* placer, const placement::OpGraph& graph,
                                         const placement::DeviceSet& devices) {
  placement::Grouping each_op;
  for (const placement::Op& op : graph.ops) each_op.group_of_op.push_back(op.id);
  each_op.num_groups = static_cast<int>(graph.ops.size());
  return offline::place_baseline(placer, sim::Simulator(graph, devices), offline::built_plugins(),
                                 each_op, 1)
      .placement;
}

// Two chains of six ops, each 1 ms on a GPU, on three GPUs; METIS's cut of them is not the
// warm start's answer (a chain a GPU).
struct TwoChainsOnThreeGpus {
  placement::OpGraph graph = placement::testing::two_chains(6);
  placement::DeviceSet devices = placement::testing::devices(3, DeviceKind::kCuda);
  TwoChainsOnThreeGpus() { placement::testing::profile_all(graph, DeviceKind::kCuda, 1e-3); }
};

// What inspection says of heuristic `placer`'s placement (JobInfo's warm_start.heuristics); null
// when it names none.
nlohmann::json heuristic_report(const msg::JobInfo& info, const std::string& placer) {
  for (const nlohmann::json& h : info.warm_start.value("heuristics", nlohmann::json::array()))
    if (h.value("placer", std::string()) == placer) return h;
  return nullptr;
}

// The planning model is right about every placement but METIS's, which runs in 60% of the time it
// predicts (28% over the warm start's answer): the model's search has no reason to go there, and no
// policy sample is likely to land on it. METIS's placement runs as the candidate after the warm
// start's answer, wins its trial, and is what the job keeps. The expert's is the start's
// placement, which ran already, and inspection says so.
TEST(Candidates, TheHeuristicsPlacementsRunAfterTheWarmStartsAnswer) {
  const auto& plugins = offline::built_plugins();
  if (!plugins.has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  ASSERT_TRUE(plugins.has(placement::PluginKind::kPlacer, "metis"));
  const TwoChainsOnThreeGpus job;
  const placement::OpGraph& graph = job.graph;
  const placement::DeviceSet& devices = job.devices;
  const sim::Simulator model(graph, devices);
  const placement::Placement metis = heuristic_placement("metis", graph, devices);
  const auto time_of = [&](const placement::Placement& p) {
    const double t = model.simulate(p).step_time_s;
    return p.fingerprint() == metis.fingerprint() ? 0.6 * t : t;
  };
  testing::TestStore store{"candidates_test_heuristics"};
  LiveSession live(1, job_on("heuristics", devices), testing::simulator_warm_start_policy(0, 30),
                   plugins, *store);
  live.on_graph(graph, std::nullopt, 0.0);
  std::vector<msg::Directive> moves;
  run_job(live, 3000, time_of, [&](const msg::Directive& d) { moves.push_back(d); });

  const msg::JobInfo info = live.detail();
  const double answer_s = info.warm_start["baseline_step_time_s"].get<double>();
  ASSERT_GT(model.simulate(metis).step_time_s, answer_s) << "premise: the model ranks it lower";
  ASSERT_LT(model.simulate(metis).step_time_s, Session::kHeuristicWithin * answer_s);
  std::optional<uint64_t> metis_id;
  for (const msg::CandidateInfo& c : info.candidates)
    if (c.placement_fingerprint == metis.fingerprint()) metis_id = c.id;
  ASSERT_TRUE(metis_id) << "METIS's placement ran";
  // The warm start's answer first, then METIS's, and no policy sample before it.
  const std::string answer = info.warm_start["placement_fingerprint"].get<std::string>();
  bool answer_ran = false;
  for (const msg::Directive& d : moves) {
    if (d.placement_id == *metis_id) {
      EXPECT_EQ(d.reason, msg::Reason::kWarmStart) << "it ran as the warm start's candidates do";
      break;
    }
    answer_ran = answer_ran || d.placement.fingerprint() == answer;
    EXPECT_NE(d.reason, msg::Reason::kPolicy) << "no policy sample ran before it";
  }
  EXPECT_TRUE(answer_ran) << "the warm start's answer ran before it";
  EXPECT_EQ(info.job.state, msg::JobState::kExploiting);
  EXPECT_EQ(info.job.best_placement, *metis_id) << "the job keeps METIS's placement";
  const nlohmann::json metis_report = heuristic_report(info, "metis");
  const nlohmann::json expert_report = heuristic_report(info, "expert");
  ASSERT_TRUE(metis_report.is_object() && expert_report.is_object()) << info.warm_start.dump();
  EXPECT_EQ(metis_report.value("candidate", uint64_t{0}), *metis_id) << metis_report.dump();
  EXPECT_NEAR(metis_report.value("predicted_step_time_s", 0.0), model.simulate(metis).step_time_s,
              1e-12);
  // The expert's is the start's (all on the first GPU), which ran already.
  EXPECT_EQ(expert_report.value("not_offered", std::string()),
            "the same as a candidate that ran already")
      << expert_report.dump();
}

// Over links whose latency is a second, METIS's balanced cut of two chains over three GPUs (one of
// them cut) sends a tensor between GPUs, and the planning model predicts it far slower than the
// warm start's answer: it does not run, and inspection says why.
TEST(Candidates, AHeuristicsPlacementTheModelPredictsFarSlowerDoesNotRun) {
  const auto& plugins = offline::built_plugins();
  if (!plugins.has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  ASSERT_TRUE(plugins.has(placement::PluginKind::kPlacer, "metis"));
  TwoChainsOnThreeGpus job;
  for (auto& row : job.devices.latency)
    for (double& l : row) l = 1.0;
  const placement::OpGraph& graph = job.graph;
  const placement::DeviceSet& devices = job.devices;
  const sim::Simulator model(graph, devices);
  const placement::Placement metis = heuristic_placement("metis", graph, devices);
  testing::TestStore store{"candidates_test_heuristic_too_slow"};
  LiveSession live(1, job_on("heuristics", devices), testing::simulator_warm_start_policy(0, 30),
                   plugins, *store);
  live.on_graph(graph, std::nullopt, 0.0);
  run_job(
      live, 1000, [&](const placement::Placement& p) { return model.simulate(p).step_time_s; },
      [](const msg::Directive&) {});

  const msg::JobInfo info = live.detail();
  const nlohmann::json report = heuristic_report(info, "metis");
  ASSERT_TRUE(report.is_object()) << info.warm_start.dump();
  const std::string why = report.value("not_offered", std::string());
  EXPECT_EQ(why.rfind("the planning model predicts ", 0), 0u) << info.warm_start.dump();
  EXPECT_NE(why.find("x the warm start's answer"), std::string::npos) << why;
  EXPECT_GT(model.simulate(metis).step_time_s,
            Session::kHeuristicWithin * info.warm_start["baseline_step_time_s"].get<double>())
      << "premise: the model predicts METIS's placement far slower";
  for (const msg::CandidateInfo& c : info.candidates)
    EXPECT_NE(c.placement_fingerprint, metis.fingerprint()) << "candidate " << c.id;
}

// A job whose exploration ends at three candidates (the start, the warm start's answer, list
// scheduling's placement) never reaches METIS's, and inspection says so instead of "not run yet".
TEST(Candidates, AHeuristicsPlacementExplorationNeverReachedSaysSo) {
  const auto& plugins = offline::built_plugins();
  if (!plugins.has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  ASSERT_TRUE(plugins.has(placement::PluginKind::kPlacer, "metis"));
  const TwoChainsOnThreeGpus job;
  const placement::OpGraph& graph = job.graph;
  const placement::DeviceSet& devices = job.devices;
  const sim::Simulator model(graph, devices);
  testing::TestStore store{"candidates_test_heuristic_never_reached"};
  LiveSession live(1, job_on("heuristics", devices), testing::simulator_warm_start_policy(0, 3),
                   plugins, *store);
  live.on_graph(graph, std::nullopt, 0.0);
  run_job(
      live, 1000, [&](const placement::Placement& p) { return model.simulate(p).step_time_s; },
      [](const msg::Directive&) {});

  const msg::JobInfo info = live.detail();
  ASSERT_EQ(info.job.state, msg::JobState::kExploiting);
  const nlohmann::json report = heuristic_report(info, "metis");
  ASSERT_TRUE(report.is_object()) << info.warm_start.dump();
  EXPECT_EQ(report.value("not_offered", std::string()), "exploration ended before its turn")
      << report.dump();
  EXPECT_FALSE(report.contains("candidate")) << report.dump();
}

// The planning model has three GPUs compute at once; in truth the two the warm start's answer puts
// the chains on take turns (slices of one card), so the answer runs its chains one after the
// other. The model predicts the answer with a GPU swapped for the third exactly as fast (a tie it
// cannot break), so such a copy runs after the heuristics' placements, and the job keeps one that
// runs the chains at once.
TEST(Candidates, TheWarmStartsAnswerWithTwoDevicesSwappedBreaksTheModelsTie) {
  const auto& plugins = offline::built_plugins();
  if (!plugins.has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  const TwoChainsOnThreeGpus job;
  const placement::OpGraph& graph = job.graph;
  const placement::DeviceSet& devices = job.devices;
  const sim::Simulator model(graph, devices);
  // Where the answer puts the chains: the same session (id, seed, store) answers the same.
  const auto run = [&](const char* store_name,
                       const std::function<double(const placement::Placement&)>& time_of,
                       std::vector<msg::Directive>& moves) {
    testing::TestStore store{store_name};
    LiveSession live(1, job_on("swaps", devices), testing::simulator_warm_start_policy(0, 30),
                     plugins, *store);
    live.on_graph(graph, std::nullopt, 0.0);
    run_job(live, 3000, time_of, [&](const msg::Directive& d) { moves.push_back(d); });
    return live.detail();
  };
  std::vector<msg::Directive> first_moves;
  const msg::JobInfo first = run(
      "candidates_test_swaps_model",
      [&](const placement::Placement& p) { return model.simulate(p).step_time_s; }, first_moves);
  const std::string answer_fingerprint = first.warm_start["placement_fingerprint"];
  const auto answer = std::find_if(first_moves.begin(), first_moves.end(), [&](const auto& d) {
    return d.placement.fingerprint() == answer_fingerprint;
  });
  ASSERT_NE(answer, first_moves.end()) << "the warm start's answer ran";
  const std::set<int> used(answer->placement.device_of_op.begin(),
                           answer->placement.device_of_op.end());
  ASSERT_EQ(used.size(), 2u) << "premise: the answer runs the two chains on two GPUs";

  sim::SimulatorOptions turns;
  turns.shared_with = {0, 1, 2};
  turns.shared_with[static_cast<size_t>(*used.rbegin())] = static_cast<size_t>(*used.begin());
  const sim::Simulator truth(graph, devices, turns);
  const double answer_true_s = truth.simulate(answer->placement).step_time_s;
  std::vector<msg::Directive> moves;
  const msg::JobInfo info = run(
      "candidates_test_swaps_truth",
      [&](const placement::Placement& p) { return truth.simulate(p).step_time_s; }, moves);

  const double answer_s = info.warm_start["baseline_step_time_s"].get<double>();
  std::set<uint64_t> swapped;
  for (const nlohmann::json& h : info.warm_start["heuristics"]) {
    const std::string placer = h.value("placer", std::string());
    if (placer.rfind("the warm start's answer with ", 0) != 0) continue;
    EXPECT_NE(placer.find(" swapped"), std::string::npos) << placer;
    EXPECT_LE(h.value("predicted_step_time_s", 0.0), (1 + Session::kRelabelingTie) * answer_s)
        << "only a tie is offered: " << h.dump();
    if (h.contains("candidate")) swapped.insert(h["candidate"].get<uint64_t>());
  }
  ASSERT_FALSE(swapped.empty()) << info.warm_start.dump();
  EXPECT_LE(swapped.size(), Session::kMaxRelabelings);
  std::set<uint64_t> seen;  // each swapped copy's first directive (its trial's windows say kBest)
  for (const msg::Directive& d : moves)
    if (swapped.count(d.placement_id) && seen.insert(d.placement_id).second) {
      EXPECT_EQ(d.reason, msg::Reason::kWarmStart);
      EXPECT_NEAR(model.simulate(d.placement).step_time_s, answer_s,
                  Session::kRelabelingTie * answer_s)
          << "the planning model cannot tell it from the answer";
    }
  EXPECT_EQ(info.job.state, msg::JobState::kExploiting);
  const auto kept = std::find_if(moves.rbegin(), moves.rend(), [&](const auto& d) {
    return d.placement_id == info.job.best_placement;
  });
  ASSERT_NE(kept, moves.rend());
  EXPECT_LT(truth.simulate(kept->placement).step_time_s, 0.9 * answer_true_s)
      << "the job keeps a placement that runs the chains at once";
  EXPECT_TRUE(swapped.count(info.job.best_placement)) << "the job keeps a swapped copy";
}

// A job spread over a CPU and a GPU whose start profiled each op on the one kind it runs on (and
// no device spec predicts the rest) under `policy`, for 600 steps: what inspection shows of it
// after, and how many candidates the policy proposed. The CPU's ops are the slow ones.
std::pair<msg::JobInfo, size_t> run_on_half_profiles(const EffectivePolicy& policy,
                                                     const char* store_name) {
  placement::OpGraph graph = placement::testing::two_chains(6);
  placement::DeviceSet devices = placement::testing::devices(2, DeviceKind::kCuda);
  devices.devices[0].kind = DeviceKind::kCpu;
  placement::Placement start;
  for (placement::Op& op : graph.ops) {
    start.device_of_op.push_back(op.id % 2);
    op.profile[op.id % 2 ? "cuda" : "cpu"] = {1e-3, 2e-3, 0.0, op.output_bytes()};
  }
  testing::TestStore store{store_name};
  LiveSession live(1, job_on("unranked", devices), policy, offline::built_plugins(), *store);
  live.on_graph(graph, start, 0.0);
  std::set<uint64_t> policy_candidates;
  const auto time_of = [](const placement::Placement& p) {
    double t = 1e-3;
    for (int d : p.device_of_op) t += d == 0 ? 1e-3 : 0.0;
    return t;
  };
  run_job(live, 600, time_of, [&](const msg::Directive& d) {
    if (d.reason == msg::Reason::kPolicy) policy_candidates.insert(d.placement_id);
  });
  return {live.detail(), policy_candidates.size()};
}

// On the GPU machine a ranking by a model that could not time the samples failed the policy step,
// and exploration ended after two candidates (docs/gpu-runs/2026-11-27-3.md): a ranking is never a
// reason to stop exploring.
TEST(Candidates, AfterASkippedWarmStartThePolicysSamplesRunAsDrawn) {
  if (!offline::built_plugins().has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  EffectivePolicy policy = ranking_policy(8);
  // Two groups, each with ops profiled on the CPU alone and ops profiled on the GPU alone: no
  // heuristic placement of them can be timed, and the warm start is skipped.
  policy.grouper = "metis";
  policy.grouper_params = {{"groups", int64_t{2}}};
  const auto [info, proposed] = run_on_half_profiles(policy, "candidates_test_skipped");
  EXPECT_TRUE(info.warm_start.is_object() && info.warm_start["skipped"].is_string())
      << info.warm_start.dump();
  EXPECT_FALSE(info.job.policy_error.has_value()) << *info.job.policy_error;
  EXPECT_GT(proposed, 0u) << "the policy proposed a candidate";
}

// A warm start that ran, on a job profiled on the GPU alone (no CPU spec either): the planning
// model cannot time a sample with an op on the CPU. The first such sample ends the ranking, and
// it and the samples after it run as drawn.
TEST(Candidates, FromTheFirstSampleTheModelCannotTimeTheSamplesRunAsDrawn) {
  testing::TestStore store{"candidates_test_untimeable"};
  testing::SessionSetup setup;
  setup.devices = placement::testing::devices(2, DeviceKind::kCuda);
  setup.devices.devices[0].kind = DeviceKind::kCpu;
  placement::testing::profile_all(setup.graph, DeviceKind::kCuda, 1e-3);
  setup.start = placement::Placement{{1, 1, 1, 1}};
  setup.warm_start = offline::kSimulatorWarmStart;
  setup.exploration.steps_per_candidate = 2;
  setup.exploration.warmup_steps = 0;
  setup.exploration.converge_candidates = 0;
  setup.exploration.max_overhead_fraction = 1.0;
  std::unique_ptr<Session> s = testing::make_test_session(std::move(setup), *store);
  offline::ImitationResult warm;  // its answer is the start, which ran
  warm.baseline = offline::kSimulatorWarmStart;
  warm.action = {1, 1, 1, 1};
  warm.placement = placement::Placement{{1, 1, 1, 1}};
  s->warm_started(warm);
  ASSERT_THROW(s->memory_model()->step_time_s(placement::Placement{{0, 1, 1, 1}}),
               std::invalid_argument)
      << "premise: the model cannot time an op on the CPU";

  // The job's steps: uniform logits put ops on the CPU, where they are slow.
  msg::Directive d = s->start();
  size_t on_the_cpu = 0;
  for (uint64_t step = 0; step < 400 && on_the_cpu < 3; ++step) {
    const int ops_on_cpu = static_cast<int>(
        std::count(d.placement.device_of_op.begin(), d.placement.device_of_op.end(), 0));
    if (!s->record({d.placement_id, step, 1.0 + ops_on_cpu, true, ""})) continue;
    std::optional<msg::Directive> next;
    ASSERT_NO_THROW(next = s->advance(*store));
    if (!next) continue;
    d = *next;
    if (d.reason == msg::Reason::kPolicy &&
        std::count(d.placement.device_of_op.begin(), d.placement.device_of_op.end(), 0) > 0)
      ++on_the_cpu;
  }
  EXPECT_TRUE(s->policy_error().empty()) << s->policy_error();
  EXPECT_EQ(on_the_cpu, 3u) << "policy candidates with ops the model cannot time ran";
}

}  // namespace
}  // namespace placementd
