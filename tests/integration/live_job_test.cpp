// The job API against a real placementd process: placements change between steps, a failing
// candidate costs no batch and leaves no trace in the parameters, and jobs survive the daemon.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include <c10/util/Exception.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/optim/adam.h>
#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "http_get.h"
#include "placement/capture.h"
#include "placement/job.h"
#include "placement/serialization.h"

namespace placement {
namespace {

using nlohmann::json;
using testing::DaemonOptions;
using testing::DaemonProcess;
using testing::fast_exploration;
using testing::read_file;

struct Model {
  torch::jit::Module module;
  std::vector<at::Tensor> inputs;
};

Model load(const std::string& name) {
  std::ifstream in(std::string(MODEL_DIR) + "/" + name + ".json");
  const auto spec = json::parse(in);
  Model m{torch::jit::load(std::string(MODEL_DIR) + "/" + name + ".pt"), {}};
  at::manual_seed(1);
  m.inputs = example_inputs(spec["inputs"].get<std::vector<std::vector<int64_t>>>(), spec["dtype"]);
  return m;
}

at::Tensor mean_square(const std::vector<c10::IValue>& out) {
  return out.at(0).toTensor().pow(2).mean();
}

std::vector<at::Tensor> snapshot(const Job& job) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : job.parameters()) out.push_back(p.detach().clone());
  return out;
}

void expect_bitwise_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << "parameter " << i;
}

// Trains `steps` steps of a fresh copy of `name`; `loss` may throw to inject failures. With
// `until`, training goes on past `steps` (up to ten times as many) until the job's stats satisfy
// it: the daemon answers while the job trains, and on a loaded machine (CI runs tests in
// parallel) its answers may come later than a fixed number of steps.
std::vector<at::Tensor> train(const std::string& name, JobOptions options, int steps,
                              const LossFunction& loss, JobStats* stats = nullptr,
                              std::vector<uint64_t>* placements = nullptr,
                              std::set<std::string>* reasons = nullptr,
                              const std::function<bool(const JobStats&)>& until = nullptr) {
  Model m = load(name);
  Job job(name, m.module, m.inputs, options);
  torch::optim::Adam optimizer(job.parameters(), torch::optim::AdamOptions(0.01));
  for (int i = 0; i < steps || (until && !until(job.stats()) && i < 10 * steps); ++i) {
    at::manual_seed(100 + i);
    const std::vector<c10::IValue> batch = {at::randn(m.inputs[0].sizes())};
    job.step(batch, loss, optimizer);
    if (placements) placements->push_back(job.stats().placement_id);
    if (reasons) reasons->insert(job.stats().reason);
  }
  if (stats) *stats = job.stats();
  auto out = snapshot(job);
  job.detach();
  return out;
}

bool ran_warm_start(const JobStats& stats) { return stats.reason == "warm start"; }

TEST(LiveJob, PlacementsChangeBetweenStepsAndTrainingMatchesARunWithoutSwaps) {
  DaemonProcess daemon(fast_exploration());
  // The admin's view while it trains: the metrics endpoint, scraped between two steps.
  const std::string metrics = daemon.dir + "/metrics.sock";
  daemon.write_config(daemon.base_config() + "[metrics]\nlisten = \"" + metrics + "\"\n");
  daemon.start();
  std::string mid_run;
  JobOptions live;
  live.socket_path = daemon.socket;
  JobStats stats;
  std::vector<uint64_t> placements;
  // The model is tiny: a few milliseconds per step, as real models take, give placementd time to
  // answer (the job never waits for it).
  auto slow_loss = [](const std::vector<c10::IValue>& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return mean_square(out);
  };
  const auto with_swaps =
      train("two_tower", live, 40, slow_loss, &stats, &placements, nullptr, [&](const JobStats& s) {
        if (mid_run.empty() && s.swaps >= 2) mid_run = testing::scrape(metrics);
        return s.swaps >= 4;
      });
  JobOptions alone;
  alone.use_daemon = false;
  const auto without = train("two_tower", alone, static_cast<int>(stats.steps), mean_square);
  EXPECT_GE(stats.swaps, 4u) << daemon.log();
  EXPECT_EQ(stats.steps, placements.size()) << "every batch trained exactly once";
  EXPECT_GT(stats.migrated_bytes, 0u) << "parameters are copied between logical devices";
  // Four swaps: from the start to a candidate, and A/B trial windows going back and forth (or more
  // candidates, when screenings rule out trials).
  EXPECT_GE(std::set<uint64_t>(placements.begin(), placements.end()).size(), 2u);
  expect_bitwise_equal(with_swaps, without);
  const std::string job = "job_id=\"1\",job_name=\"two_tower\"";
  // Two swaps in, the session is exploring, or already exploiting what it found.
  EXPECT_TRUE(mid_run.find("placementd_job_state{" + job + ",state=\"exploring\"} 1\n") !=
                  std::string::npos ||
              mid_run.find("placementd_job_state{" + job + ",state=\"exploiting\"} 1\n") !=
                  std::string::npos)
      << mid_run;
  const size_t at = mid_run.find("placementd_job_candidates{" + job + "} ");
  ASSERT_NE(at, std::string::npos) << mid_run;
  EXPECT_GE(std::stoi(mid_run.substr(at + mid_run.substr(at).find("} ") + 2)), 2)
      << "the start and a candidate";
  EXPECT_NE(mid_run.find("placementd_job_step_time_seconds{" + job + ",placement=\"start\"} "),
            std::string::npos);
}

TEST(LiveJob, AFailingCandidateLosesNoBatchAndLeavesNoTrace) {
  DaemonProcess daemon(fast_exploration());
  daemon.start();
  // The loss runs out of memory whenever the model's last op runs on cpu:1 under a placement
  // placementd proposed; the job's own placement keeps it on cpu:0.
  Job* current = nullptr;
  auto flaky = [&current](const std::vector<c10::IValue>& out) {
    if (current && current->placement().device_of_op.back() == 1)
      throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                  "injected: cpu:1 is full");
    return mean_square(out);
  };
  Model m = load("two_tower");
  JobOptions live;
  live.socket_path = daemon.socket;
  Job job("flaky", m.module, m.inputs, live);
  current = &job;
  torch::optim::Adam optimizer(job.parameters(), torch::optim::AdamOptions(0.01));
  // 60 steps, or more until a candidate has failed: the daemon answers while the job trains, and
  // this model's steps are far shorter than a policy step, so the bound is time, not steps.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int steps = 0;
  for (; steps < 60 ||
         (job.stats().retried_steps == 0 && std::chrono::steady_clock::now() < deadline);
       ++steps) {
    at::manual_seed(100 + steps);
    const at::Tensor loss = job.step({at::randn(m.inputs[0].sizes())}, flaky, optimizer);
    EXPECT_TRUE(loss.defined());
  }
  const JobStats stats = job.stats();
  const auto with_failures = snapshot(job);
  // What the daemon saw, before the job detaches.
  placement::Client client = daemon.client();
  json info;
  for (int tries = 0; tries < 100; ++tries) {  // the last reports are one-way: give them a moment
    info = client.request(protocol::MessageType::kJobShow, {{"id", job.daemon().session}},
                          protocol::MessageType::kJobInfo);
    if (info["failed_steps"].get<uint64_t>() >= stats.retried_steps) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  job.detach();
  EXPECT_GT(stats.retried_steps, 0u) << "no candidate put the last op on cpu:1; " << daemon.log();
  EXPECT_EQ(info["failed_steps"].get<uint64_t>(), stats.retried_steps);
  EXPECT_EQ(stats.steps, static_cast<uint64_t>(steps)) << "every batch trained exactly once";

  JobOptions alone;
  alone.use_daemon = false;
  expect_bitwise_equal(with_failures, train("two_tower", alone, steps, mean_square));
}

TEST(LiveJob, WhenTheLastGoodPlacementFailsTooTheStepRunsOnTheJobsOwn) {
  DaemonProcess daemon(fast_exploration());
  daemon.start();
  // Once two of placementd's placements have run in turn, every placement of placementd's runs out
  // of memory (as when the job's memory grows past what they leave free): the step under the
  // second falls back to the first, its last good one, which fails as well, and then runs under
  // the job's own placement. Nothing is lost and the job does not die.
  Job* current = nullptr;
  bool full = false;
  auto loss = [&](const std::vector<c10::IValue>& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // time for placementd's answers
    if (full && current->stats().placement_id != 0)
      throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                  "injected: the device is full");
    return mean_square(out);
  };
  Model m = load("two_tower");
  JobOptions live;
  live.socket_path = daemon.socket;
  Job job("falls-back", m.module, m.inputs, live);
  current = &job;
  torch::optim::Adam optimizer(job.parameters(), torch::optim::AdamOptions(0.01));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool fell_back_twice = false;
  int steps = 0;
  for (; steps < 20 || (!fell_back_twice && std::chrono::steady_clock::now() < deadline); ++steps) {
    const JobStats before = job.stats();
    // Two swaps, both to placementd's placements: the one in force now fell back to the other.
    if (!full && before.swaps >= 2 && before.placement_id != 0) full = true;
    at::manual_seed(100 + steps);
    ASSERT_NO_THROW(job.step({at::randn(m.inputs[0].sizes())}, loss, optimizer))
        << "step " << steps;
    if (full && !fell_back_twice && before.placement_id != 0) {
      EXPECT_EQ(job.stats().retried_steps - before.retried_steps, 2u)
          << "to the last good placement, then the own";
      EXPECT_EQ(job.stats().placement_id, 0u);
      fell_back_twice = true;
    }
  }
  ASSERT_TRUE(fell_back_twice) << "placementd's placements never ran in turn; " << daemon.log();
  EXPECT_EQ(job.stats().steps, static_cast<uint64_t>(steps)) << "every batch trained exactly once";
  const auto with_failures = snapshot(job);
  job.detach();
  JobOptions alone;
  alone.use_daemon = false;
  expect_bitwise_equal(with_failures, train("two_tower", alone, steps, mean_square));
}

// Adam, whose update runs out of memory after changing everything it changes (values, moments,
// step counts, the state of a first step), as one failing on its last parameter would, whenever
// `fails` says so.
class UpdateFailsWhen final : public torch::optim::Adam {
 public:
  UpdateFailsWhen(const std::vector<at::Tensor>& parameters, std::function<bool()> fails)
      : torch::optim::Adam(parameters, torch::optim::AdamOptions(0.01)), fails_(std::move(fails)) {}
  at::Tensor step(LossClosure closure = nullptr) override {
    at::Tensor loss = torch::optim::Adam::step(std::move(closure));
    if (!fails_()) return loss;
    ++failures;
    throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                "injected: no room for Adam's temporaries");
  }
  int failures = 0;

 private:
  std::function<bool()> fails_;
};

// Trains a job on two_tower whose update fails under placementd's placements that put the last op
// on cpu:1, for 60 steps or until one did, and returns the step the loop got to; `error`: what a
// step threw (the loop ends there).
struct UpdateFailures {
  JobStats stats;
  int steps = 0;
  int failures = 0;
  std::vector<at::Tensor> parameters;
  std::string error;
};
UpdateFailures train_with_failing_updates(DaemonProcess& daemon, JobOptions live) {
  Model m = load("two_tower");
  live.socket_path = daemon.socket;
  Job job("update-fails", m.module, m.inputs, live);
  UpdateFailsWhen optimizer(job.parameters(), [&job] {
    return job.stats().placement_id != 0 && job.placement().device_of_op.back() == 1;
  });
  UpdateFailures out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (; out.steps < 60 || (optimizer.failures == 0 && std::chrono::steady_clock::now() < deadline);
       ++out.steps) {
    at::manual_seed(100 + out.steps);
    try {
      job.step({at::randn(m.inputs[0].sizes())}, mean_square, optimizer);
    } catch (const c10::OutOfMemoryError& e) {
      out.error = e.what_without_backtrace();
      break;
    }
  }
  out.stats = job.stats();
  out.failures = optimizer.failures;
  out.parameters = snapshot(job);
  // What the daemon saw, before the job detaches: the last reports are one-way.
  placement::Client client = daemon.client();
  for (int tries = 0; tries < 100; ++tries) {
    const json info =
        client.request(protocol::MessageType::kJobShow, {{"id", job.daemon().session}},
                       protocol::MessageType::kJobInfo);
    if (info["failed_steps"].get<uint64_t>() >= out.stats.retried_steps) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  job.detach();
  return out;
}

TEST(LiveJob, AnUpdateThatFailsUnderACandidateIsUndoneAndLosesNoBatch) {
  DaemonProcess daemon(fast_exploration());
  daemon.start();
  const UpdateFailures run = train_with_failing_updates(daemon, {});
  ASSERT_EQ(run.error, "") << "an update failed unguarded";
  ASSERT_GT(run.failures, 0) << "no candidate put the last op on cpu:1; " << daemon.log();
  // Each failed update undone and its step run again on the last good placement, where the update
  // is guarded too (the first after a switch).
  EXPECT_EQ(run.stats.undone_updates, static_cast<uint64_t>(run.failures));
  EXPECT_EQ(run.stats.retried_steps, run.stats.undone_updates);
  EXPECT_GE(run.stats.guarded_updates, run.stats.undone_updates);
  EXPECT_LE(run.stats.guarded_updates, run.stats.swaps + 1)
      << "one guarded update a placement: the start directive's and one after each switch";
  EXPECT_EQ(run.stats.steps, static_cast<uint64_t>(run.steps)) << "every batch trained once";
  EXPECT_NE(daemon.log().find("injected: no room for Adam's temporaries"), std::string::npos)
      << daemon.log();
  // Adam's moments and step counts, put back with the values: training is as without placementd.
  JobOptions alone;
  alone.use_daemon = false;
  expect_bitwise_equal(run.parameters, train("two_tower", alone, run.steps, mean_square));
}

TEST(LiveJob, WithoutGuardedUpdatesAFailedUpdateReachesTheCaller) {
  DaemonProcess daemon(fast_exploration());
  daemon.start();
  JobOptions unguarded;
  unguarded.guarded_updates = 0;
  const UpdateFailures run = train_with_failing_updates(daemon, unguarded);
  ASSERT_GT(run.failures, 0) << "no candidate put the last op on cpu:1; " << daemon.log();
  EXPECT_EQ(run.error, "injected: no room for Adam's temporaries");
  EXPECT_EQ(run.stats.guarded_updates, 0u);
  EXPECT_EQ(run.stats.retried_steps, 0u);
}

TEST(LiveJob, EveryUpdateGuardedTrainsExactlyAsWithoutPlacementd) {
  DaemonProcess daemon(fast_exploration());
  daemon.start();
  JobOptions live;
  live.socket_path = daemon.socket;
  live.guarded_updates = -1;
  auto slow_loss = [](const std::vector<c10::IValue>& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // time for placementd's answers
    return mean_square(out);
  };
  JobStats stats;
  std::vector<uint64_t> placements;
  const auto guarded = train("two_tower", live, 40, slow_loss, &stats, &placements, nullptr,
                             [](const JobStats& s) { return s.swaps >= 2; });
  const auto under_placementd = static_cast<uint64_t>(
      std::count_if(placements.begin(), placements.end(), [](uint64_t id) { return id != 0; }));
  ASSERT_GE(stats.swaps, 2u) << daemon.log();
  EXPECT_EQ(stats.guarded_updates, under_placementd)
      << "every update under placementd's placements";
  EXPECT_GT(stats.guard_seconds, 0.0);
  EXPECT_EQ(stats.undone_updates, 0u);
  JobOptions alone;
  alone.use_daemon = false;
  expect_bitwise_equal(guarded,
                       train("two_tower", alone, static_cast<int>(stats.steps), mean_square));
}

// cpu:1 may hold `limit` bytes — less than two_tower's activations — while placementd plans with
// the host's memory, so its memory model lets candidates through that then run out of memory.
// `live`: the job's options besides (its residence).
void expect_an_engineered_out_of_memory_loses_no_batch(JobOptions live, uint64_t limit) {
  DaemonProcess daemon(fast_exploration());
  daemon.start();
  live.socket_path = daemon.socket;
  live.memory_limit_bytes = {0, limit};
  JobStats stats;
  // A few milliseconds per step, as real models take, so placementd's candidates arrive in time.
  auto slow_loss = [](const std::vector<c10::IValue>& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return mean_square(out);
  };
  std::vector<uint64_t> placements;
  const auto with_oom = train("two_tower", live, 60, slow_loss, &stats, &placements, nullptr,
                              [](const JobStats& s) { return s.retried_steps > 0; });
  EXPECT_GT(stats.retried_steps, 0u) << "no candidate ran out of memory on cpu:1; " << daemon.log();
  EXPECT_EQ(stats.steps, placements.size()) << "every batch trained exactly once";
  EXPECT_NE(daemon.log().find("out of memory on cpu:1 (its memory limit)"), std::string::npos)
      << daemon.log();

  JobOptions alone;
  alone.use_daemon = false;
  alone.memory_limit_bytes = {0, limit};
  expect_bitwise_equal(with_oom,
                       train("two_tower", alone, static_cast<int>(stats.steps), mean_square));
  // The limit is real: the job's own placement on cpu:1 fails outright.
  JobOptions on_small = alone;
  Model m = load("two_tower");
  on_small.start_device_of_op.assign(
      Job("probe", m.module, m.inputs, alone).placement().device_of_op.size(), 1);
  try {
    train("two_tower", on_small, 1, mean_square);
    ADD_FAILURE() << "two_tower trained on cpu:1 within " << limit << " bytes";
  } catch (const std::exception& e) {
    // Refused at attach (its parameters and gradients alone are more) or out of memory at once.
    EXPECT_NE(std::string(e.what()).find("cpu:1"), std::string::npos) << e.what();
  }
}

TEST(LiveJob, AnEngineeredOutOfMemoryOnASmallDeviceLosesNoBatch) {
  expect_an_engineered_out_of_memory_loses_no_batch({}, 64 << 10);
}

TEST(LiveJob, AnOutOfMemoryUnderAResidencePlanIsRetriedAndLosesNoBatch) {
  // Every parameter lives on cpu:0 and is streamed to cpu:1 for each use there: placementd's
  // candidates keep that residence, the ones that run out of memory on cpu:1 are retried on the
  // last good placement, and the job trains bit for bit as one without placementd or residence.
  // cpu:1 then holds no parameter, gradient or Adam state between uses: 64 KiB is room enough,
  // 16 KiB is not.
  JobOptions streamed;
  streamed.start_residence_rules.parameters[""] = {0, Fetch::kStream};
  expect_an_engineered_out_of_memory_loses_no_batch(streamed, 16 << 10);
}

TEST(LiveJob, ProfilesFromACaptureFileLetTheDaemonSearchItsSimulator) {
  // The user's workflow: placementctl capture --profile writes the profiled graph once; jobs pass
  // it.
  DaemonOptions options = fast_exploration(4);
  options.extra +=
      "[policy]\ngrouper = \"none\"\nplacer = \"feedforward\"\nwarm_start = \"simulator\"\n";
  options.extra.erase(0, std::string("[policy]\ngrouper = \"none\"\n").size());
  DaemonProcess daemon(options);
  if (!testing::learned_plugins_built()) GTEST_SKIP() << "built without LibTorch";
  const std::string file = daemon.dir + "/two_tower.profiled.json";
  const testing::CommandResult captured = testing::run_command(
      {testing::placementctl_bin(), "capture", std::string(MODEL_DIR) + "/two_tower.pt", "--input",
       "8x64", "--profile", "cpu", "--profile-steps", "3", "-o", file});
  ASSERT_EQ(captured.exit_code, 0) << captured.err << captured.out;
  daemon.start();
  JobOptions live;
  live.socket_path = daemon.socket;
  live.profile_graph_file = file;
  // On logical CPU devices all-on-one is the fastest, and the job's own placement: give the devices
  // too little memory for that, and start interleaved, so the search has a better split to offer.
  const OpGraph profiled = load_graph_file(file);
  uint64_t need = 0;
  for (const Op& op : profiled.ops) need += 4 * op.parameter_bytes + op.output_bytes();
  live.memory_bytes = need * 3 / 4;
  for (size_t i = 0; i < profiled.ops.size(); ++i)
    live.start_device_of_op.push_back(static_cast<int>(i % 2));
  JobStats stats;
  auto slow_loss = [](const std::vector<c10::IValue>& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return mean_square(out);
  };
  std::set<std::string> reasons;
  train("two_tower", live, 30, slow_loss, &stats, nullptr, &reasons, ran_warm_start);
  EXPECT_NE(daemon.log().find("policy warm-started from simulator"), std::string::npos)
      << daemon.log();
  EXPECT_EQ(reasons.count("warm start"), 1u) << "the search's answer ran as a candidate\n"
                                             << daemon.log();
  EXPECT_GE(stats.steps, 30u);

  // Another model's profiles are refused, naming the file.
  const std::string other = daemon.dir + "/gnmt_small.graph.json";
  const testing::CommandResult other_captured = testing::run_command(
      {testing::placementctl_bin(), "capture", std::string(MODEL_DIR) + "/gnmt_small.pt", "--input",
       "2x6", "--input", "2x5", "--dtype", "int64", "-o", other});
  ASSERT_EQ(other_captured.exit_code, 0) << other_captured.err << other_captured.out;
  JobOptions wrong;
  wrong.use_daemon = false;
  wrong.profile_graph_file = other;
  Model m = load("two_tower");
  try {
    Job job("two_tower", m.module, m.inputs, wrong);
    FAIL() << "a graph of another model was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gnmt_small.graph.json is not a capture of this model"),
              std::string::npos)
        << e.what();
  }
}

// The daemon's simulator warm start, given to a job as it comes: no capture file, the job
// measures its own first steps when the daemon asks.
DaemonOptions simulator_warm_start() {
  DaemonOptions options = fast_exploration(4);
  options.extra +=
      "[policy]\ngrouper = \"none\"\nplacer = \"feedforward\"\nwarm_start = \"simulator\"\n";
  options.extra.erase(0, std::string("[policy]\ngrouper = \"none\"\n").size());
  return options;
}

// As in the capture-file test: too little memory for all-on-one, an interleaved start.
JobOptions tight_interleaved(const std::string& socket, const std::string& model) {
  Model m = load(model);
  const OpGraph graph = capture(m.module, m.inputs, model);
  JobOptions live;
  live.socket_path = socket;
  uint64_t need = 0;
  for (const Op& op : graph.ops) need += 4 * op.parameter_bytes + op.output_bytes();
  live.memory_bytes = need * 3 / 4;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    live.start_device_of_op.push_back(static_cast<int>(i % 2));
  return live;
}

TEST(LiveJob, TheJobProfilesItsOwnStepsSoTheDaemonCanSearchItsSimulator) {
  DaemonProcess daemon(simulator_warm_start());
  if (!testing::learned_plugins_built()) GTEST_SKIP() << "built without LibTorch";
  daemon.start();
  JobOptions live = tight_interleaved(daemon.socket, "two_tower");
  // Limits far above what it holds: the job counts what each logical device holds, and its
  // profile report carries the peaks.
  live.memory_limit_bytes = {1ull << 30, 1ull << 30};
  auto slow_loss = [](const std::vector<c10::IValue>& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return mean_square(out);
  };
  JobStats stats;
  std::set<std::string> reasons;
  const auto with_profiling =
      train("two_tower", live, 30, slow_loss, &stats, nullptr, &reasons, ran_warm_start);
  const std::string log = daemon.log();
  EXPECT_NE(log.find("measured over 3 steps under placement 1"), std::string::npos) << log;
  EXPECT_NE(log.find("policy warm-started from simulator"), std::string::npos) << log;
  EXPECT_EQ(reasons.count("warm start"), 1u) << "the search's answer ran as a candidate\n" << log;
  EXPECT_EQ(stats.profiled_steps, 3u);
  EXPECT_EQ(stats.profiles_sent, 1u);
  EXPECT_GE(stats.steps, 30u);
  const json jobs = daemon.client().request(protocol::MessageType::kListJobs, {{"finished", true}},
                                            protocol::MessageType::kJobList);
  ASSERT_EQ(jobs["jobs"].size(), 1u);
  EXPECT_EQ(jobs["jobs"][0]["profiled_kinds"], json::array({"cpu"}));
  EXPECT_EQ(jobs["jobs"][0]["profiled_steps"], 3);
  // The peaks it measured in those steps, on both devices (its ops interleaved over them), are
  // the profiled placement's, in `jobs show`.
  const uint64_t id = jobs["jobs"][0]["id"];
  const json info = daemon.client().request(protocol::MessageType::kJobShow, {{"id", id}},
                                            protocol::MessageType::kJobInfo);
  ASSERT_GE(info["candidates"].size(), 1u) << info.dump(2);
  const json& profiled = info["candidates"][0];
  EXPECT_EQ(profiled["id"], 1) << info.dump(2);
  ASSERT_EQ(profiled["peak_bytes"].size(), 2u) << info.dump(2);
  for (const json& peak : profiled["peak_bytes"])
    EXPECT_GT(peak.get<uint64_t>(), 0u) << info.dump(2);
  // What lived on each device by kind, over both: every parameter at its home once, a gradient
  // and Adam's two moments for each, and the outputs kept for the backward where their ops ran.
  ASSERT_EQ(profiled["held_bytes"].size(), 2u) << info.dump(2);
  uint64_t parameter_bytes = 0;
  for (const at::Tensor& p : load("two_tower").module.parameters()) parameter_bytes += p.nbytes();
  std::map<std::string, uint64_t> total;
  for (const json& device : profiled["held_bytes"])
    for (const auto& [kind, bytes] : device.items()) total[kind] += bytes.get<uint64_t>();
  EXPECT_EQ(total["parameters"], parameter_bytes) << info.dump(2);
  EXPECT_EQ(total["gradients"], parameter_bytes) << info.dump(2);
  EXPECT_EQ(total["optimizer_state"], 2 * parameter_bytes) << info.dump(2);
  EXPECT_EQ(total["copies"], 0u) << info.dump(2);
  EXPECT_GT(total["activations"], 0u) << info.dump(2);
  const testing::CommandResult shown = testing::run_command(
      {testing::placementctl_bin(), "jobs", "show", std::to_string(id), "--socket", daemon.socket});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(std::regex_search(
      shown.out,
      std::regex("MEASURED PEAK +PARAMETERS +BUFFERS +GRADIENTS +OPTIMIZER STATE +COPIES "
                 "+ACTIVATIONS *\n +1 +cpu:0 +[0-9.]+ [KM]iB +[0-9.]+ [KM]?i?B.*\n +1 "
                 "+cpu:1 +[0-9.]+ [KM]iB")))
      << shown.out;

  // Profiled steps are training steps like any other: the parameters end as without placementd.
  JobOptions alone;
  alone.use_daemon = false;
  expect_bitwise_equal(with_profiling,
                       train("two_tower", alone, static_cast<int>(stats.steps), mean_square));

  // A job that does not profile gets no warm start, and the daemon says why.
  DaemonProcess plain(simulator_warm_start());
  plain.start();
  JobOptions quiet = tight_interleaved(plain.socket, "two_tower");
  quiet.profile_steps = 0;
  train("two_tower", quiet, 12, slow_loss, &stats);
  EXPECT_EQ(stats.profiled_steps, 0u);
  EXPECT_NE(plain.log().find("no warm start: simulator search: the graph has no profile"),
            std::string::npos)
      << plain.log();

  // Given the node's CPU figures ([devices] cpu_spec), the daemon times the job's ops by its cost
  // model, and warm-starts the same job without a single profile.
  DaemonOptions figures = simulator_warm_start();
  figures.extra += "[devices]\ncpu_spec = \"xeon-8480-2s\"\n";
  DaemonProcess predicted(figures);
  predicted.start();
  quiet.socket_path = predicted.socket;
  std::set<std::string> predicted_reasons;
  train("two_tower", quiet, 20, slow_loss, &stats, nullptr, &predicted_reasons, ran_warm_start);
  EXPECT_EQ(stats.profiled_steps, 0u);
  EXPECT_NE(predicted.log().find("policy warm-started from simulator"), std::string::npos)
      << predicted.log();
  EXPECT_EQ(predicted_reasons.count("warm start"), 1u) << predicted.log();
}

TEST(LiveJob, AStoredBestThatNoLongerFitsFailsAsACandidateAndLosesNoBatch) {
  DaemonProcess daemon(fast_exploration());
  daemon.start();
  Model m = load("two_tower");
  const size_t ops = Job("probe", m.module, m.inputs,
                         [] {
                           JobOptions o;
                           o.use_daemon = false;
                           return o;
                         }())
                         .placement()
                         .device_of_op.size();
  // Run 1: cpu:0 holds nothing (1-byte limit), the job starts all on cpu:1, so the best placementd
  // measures — and stores — is all on cpu:1.
  JobOptions first;
  first.socket_path = daemon.socket;
  first.memory_limit_bytes = {1, 0};
  first.start_device_of_op.assign(ops, 1);
  train("two_tower", first, 20, mean_square);
  // Run 2: now cpu:1 is the one without memory. The job starts on its own placement; the stored
  // best is placementd's first candidate, which fails at once; the job falls back to its own
  // placement and loses no batch.
  JobOptions second;
  second.socket_path = daemon.socket;
  second.memory_limit_bytes = {0, 1};
  JobStats stats;
  // A few milliseconds per step, as real models take: the stored best comes once the start is
  // measured, and placementd answers while the job trains.
  auto slow_loss = [](const std::vector<c10::IValue>& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return mean_square(out);
  };
  const auto trained = train("two_tower", second, 100, slow_loss, &stats, nullptr, nullptr,
                             [](const JobStats& s) { return s.retried_steps > 0; });
  EXPECT_NE(daemon.log().find("stored best placement found"), std::string::npos) << daemon.log();
  EXPECT_NE(daemon.log().find("(cached): out of memory on cpu:1"), std::string::npos)
      << daemon.log();
  EXPECT_GE(stats.retried_steps, 1u);
  JobOptions alone;
  alone.use_daemon = false;
  expect_bitwise_equal(trained,
                       train("two_tower", alone, static_cast<int>(stats.steps), mean_square));
}

TEST(LiveJob, KeepsTrainingWithoutTheDaemonAndReattachesWhenItIsBack) {
  DaemonProcess daemon(fast_exploration(1000));
  JobOptions live;
  live.socket_path = daemon.socket;
  live.reconnect_interval_ms = 50;
  Model m = load("two_tower");
  // No daemon yet: attach does not wait, training runs on the job's own placement.
  Job job("patient", m.module, m.inputs, live);
  torch::optim::Adam optimizer(job.parameters(), torch::optim::AdamOptions(0.01));
  auto step = [&](int i) {
    at::manual_seed(100 + i);
    job.step({at::randn(m.inputs[0].sizes())}, mean_square, optimizer);
  };
  int i = 0;
  for (; i < 5; ++i) step(i);
  EXPECT_FALSE(job.daemon().connected);
  EXPECT_EQ(job.stats().placement_id, 0u);

  daemon.start();
  // Trains until `done`, for at most 30 s: the daemon answers while the job trains, and on a loaded
  // machine (CI runs the fault suite beside it) its answers may take many of these tiny steps.
  auto train_until = [&](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (; !done() && std::chrono::steady_clock::now() < deadline; ++i) step(i);
    return done();
  };
  auto wait_attached = [&](uint64_t attaches) {
    return train_until([&] { return job.daemon().attaches >= attaches; });
  };
  ASSERT_TRUE(wait_attached(1)) << job.daemon().last_error;
  // Until the second candidate runs: the first was measured and persisted before it was sent.
  train_until([&] { return job.stats().placement_id >= 2; });
  ASSERT_GE(job.stats().placement_id, 2u) << "runs placementd's placements once attached\n"
                                          << daemon.log();
  EXPECT_EQ(job.stats().profiled_steps, 3u) << "the start placement (all on cpu:0) was profiled";
  EXPECT_EQ(job.daemon().profiles_sent, 1u);
  // The store writes on a thread of its own: the start's file is on disk a moment after the
  // directive that followed it (a kill -9 before that loses it, as it would any write in flight).
  auto stored = [&] {
    std::error_code ec;
    for (const auto& f :
         std::filesystem::recursive_directory_iterator(daemon.state_dir + "/placements", ec))
      if (f.path().extension() == ".json") return true;
    return false;
  };
  ASSERT_TRUE(train_until(stored)) << "the start placement was never persisted\n" << daemon.log();

  // kill -9 mid-exploration: the job notices, keeps stepping, and attaches to the new daemon.
  daemon.stop(SIGKILL);
  const uint64_t before = job.stats().steps;
  for (int n = 0; n < 20; ++n, ++i) step(i);
  EXPECT_EQ(job.stats().steps, before + 20) << "no step lost or blocked while the daemon is gone";
  daemon.start();
  ASSERT_TRUE(wait_attached(2)) << job.daemon().last_error;
  for (int n = 0; n < 10; ++n, ++i) step(i);
  EXPECT_NE(daemon.log().find("stored best placement found"), std::string::npos)
      << "the new session resumes from what the killed daemon persisted\n"
      << daemon.log();
  // The profiles went up with the graph again: the new session has them and asks for none.
  // Inspection shows the session as last seen, which may be from before its graph while the
  // session is busy: ask until it shows the graph.
  json jobs;
  for (int tries = 0; tries < 200; ++tries) {
    jobs = daemon.client().request(protocol::MessageType::kListJobs, json::object(),
                                   protocol::MessageType::kJobList);
    if (jobs["jobs"].size() == 1 && jobs["jobs"][0].value("ops", 0) > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(jobs["jobs"].size(), 1u);
  EXPECT_EQ(jobs["jobs"][0]["profiled_kinds"], json::array({"cpu"}));
  EXPECT_EQ(jobs["jobs"][0]["profiled_steps"], 0);
  EXPECT_EQ(job.stats().profiled_steps, 3u);
  const auto final_params = snapshot(job);
  job.detach();

  JobOptions alone;
  alone.use_daemon = false;
  expect_bitwise_equal(final_params, train("two_tower", alone, i, mean_square));
}

TEST(LiveJob, TwoExampleJobsAtOnceSwapPlacementsAndTrainExactlyLikeRunsWithoutPlacementd) {
  DaemonOptions options = fast_exploration(12, 0.5);
  DaemonProcess daemon(options);
  daemon.start();
  const std::string dir = daemon.dir;
  auto args = [&](const char* bin, const char* model, const std::string& losses, bool live) {
    std::vector<std::string> argv = {bin,       "--model",  std::string(MODEL_DIR) + "/" + model,
                                     "--steps", "40",       "--log-every",
                                     "10",      "--losses", dir + "/" + losses};
    if (live)
      argv.insert(argv.end(), {"--socket", daemon.socket});
    else
      argv.push_back("--no-daemon");
    return argv;
  };
  testing::Child gnmt(args(TRAIN_GNMT_BIN, "gnmt_example.pt", "gnmt.live", true));
  testing::Child inception(
      args(TRAIN_INCEPTION_BIN, "inception_example.pt", "inception.live", true));
  ASSERT_EQ(gnmt.wait(120000), 0) << gnmt.err() << gnmt.out();
  ASSERT_EQ(inception.wait(120000), 0) << inception.err() << inception.out();
  EXPECT_NE(daemon.log().find("'gnmt-example' attached"), std::string::npos);
  EXPECT_NE(daemon.log().find("'inception-example' attached"), std::string::npos);
  for (const testing::Child* job : {&gnmt, &inception}) {
    const std::string out = job->out();
    const size_t at = out.find("placement swaps");
    ASSERT_NE(at, std::string::npos) << out;
    EXPECT_GE(std::stoi(out.substr(out.find_first_of("0123456789", at))), 3) << out << daemon.log();
    EXPECT_NE(out.find("candidates tried"), std::string::npos) << out;
  }
  // placementctl's view of the finished jobs: the keys issue #5 names, and the learning curve.
  const testing::CommandResult listed = testing::run_command(
      {testing::placementctl_bin(), "--socket", daemon.socket, "--json", "jobs", "--finished"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const json jobs = json::parse(listed.out);
  ASSERT_EQ(jobs.size(), 2u) << listed.out;
  for (const json& j : jobs) {
    for (const char* key :
         {"name", "state", "steps", "candidates_tried", "start_step_time_s", "best_step_time_s",
          "exploration_overhead", "speedup", "budget_used", "steps_to_within_2pct"})
      EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["state"], "detached");
    EXPECT_EQ(j["steps"].get<uint64_t>(), 40u);
    EXPECT_GE(j["candidates_tried"].get<uint64_t>(), 2u)
        << "the start and at least one candidate (and its trial)";
    EXPECT_LE(j["best_step_time_s"].get<double>(), j["start_step_time_s"].get<double>())
        << "never worse than the start";
    // What exploration cost beyond the placement in force: 0 when candidates ran faster than it.
    EXPECT_GE(j["exploration_overhead"].get<double>(), 0.0);
    EXPECT_LT(j["exploration_overhead"].get<double>(), 1.0);
    EXPECT_GT(j["exploration_steps"].get<uint64_t>(), 0u);
  }
  const std::string svg = dir + "/curve.svg";
  const testing::CommandResult shown =
      testing::run_command({testing::placementctl_bin(), "--socket", daemon.socket, "jobs", "show",
                            std::to_string(jobs[0]["id"].get<uint64_t>()), "--plot", svg});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("CANDIDATE"), std::string::npos) << shown.out;
  EXPECT_EQ(read_file(svg).rfind("<svg", 0), 0u) << read_file(svg).substr(0, 200);

  testing::Child gnmt_alone(args(TRAIN_GNMT_BIN, "gnmt_example.pt", "gnmt.alone", false));
  testing::Child inception_alone(
      args(TRAIN_INCEPTION_BIN, "inception_example.pt", "inception.alone", false));
  ASSERT_EQ(gnmt_alone.wait(120000), 0) << gnmt_alone.err();
  ASSERT_EQ(inception_alone.wait(120000), 0) << inception_alone.err();
  for (const char* name : {"gnmt", "inception"}) {
    const std::string live = read_file(dir + "/" + name + ".live");
    EXPECT_EQ(std::count(live.begin(), live.end(), '\n'), 40) << name;
    EXPECT_EQ(live, read_file(dir + "/" + name + ".alone"))
        << name << ": the losses differ from the run without swaps";
  }
}

TEST(LiveJob, TheDaemonClosesTheSessionOfAJobThatDies) {
  DaemonProcess daemon(fast_exploration());
  daemon.start();
  testing::Child job({TRAIN_INCEPTION_BIN, "--model",
                      std::string(MODEL_DIR) + "/inception_example.pt", "--socket", daemon.socket,
                      "--steps", "100000", "--log-every", "5"});
  ASSERT_TRUE(job.wait_for_output("step      5", 60000)) << job.err();
  placement::Client client = daemon.client();
  auto jobs = [&client] {
    return client.request(protocol::MessageType::kListJobs, json::object(),
                          protocol::MessageType::kJobList)["jobs"];
  };
  ASSERT_EQ(jobs().size(), 1u);
  job.signal(SIGKILL);
  job.wait();
  // The session closes once the policy step it may be in is over: seconds on a loaded 2-core
  // machine (5 s was not always enough beside other tests), never a wait on the dead job.
  bool gone = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!gone && std::chrono::steady_clock::now() < deadline) {
    gone = jobs().empty();
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << daemon.log();
  EXPECT_NE(daemon.log().find("disconnected without detach"), std::string::npos);
  EXPECT_NE(daemon.log().find("inception-example"), std::string::npos);
}

}  // namespace
}  // namespace placement
