// The daemon as jobs use it: real placementd, real clients, many at once.

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <fstream>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "placement/job_channel.h"
#include "placement/serialization.h"
#include "test_graphs.h"

namespace placement::testing {
namespace {

using nlohmann::json;
using protocol::MessageType;
namespace msg = messages;

DeviceSet two_cpus() {
  return DeviceSet::uniform(
      {{DeviceKind::kCpu, 0, 1ull << 32, 1.0}, {DeviceKind::kCpu, 1, 1ull << 32, 1.0}}, 1e10, 1e-5);
}

// One job's whole control-plane flow; returns the placement id it got.
msg::GraphAccepted attach_and_upload(Client& c, const std::string& name, const OpGraph& graph) {
  msg::Attach attach;
  attach.job = name;
  attach.devices = two_cpus();
  c.request(attach.kType, attach.to_json(), msg::Attached::kType);
  const msg::GraphUpload upload{graph, std::nullopt};
  return msg::GraphAccepted::from_json(
      c.request(upload.kType, upload.to_json(two_cpus()), msg::GraphAccepted::kType));
}

msg::Directive first_directive(Client& c, const OpGraph& graph) {
  return msg::Directive::from_json(
      c.request(msg::PlacementRequest::kType, msg::PlacementRequest{}.to_json(),
                msg::Directive::kType),
      graph, two_cpus());
}

uint64_t run_job(Client& c, const std::string& name, const OpGraph& graph, int reports,
                 double step_time) {
  EXPECT_EQ(attach_and_upload(c, name, graph).fingerprint, graph.fingerprint());
  const msg::Directive directive = first_directive(c, graph);
  EXPECT_EQ(directive.placement.device_of_op.size(), graph.ops.size());
  const uint64_t id = directive.placement_id;
  for (int i = 0; i < reports; ++i)
    EXPECT_TRUE(c.send_oneway(
        MessageType::kStepReport,
        messages::StepReport{id, static_cast<uint64_t>(i), step_time, true, ""}.to_json()));
  return id;
}

TEST(Daemon, SixtyFourConcurrentJobs) {
  DaemonProcess daemon;
  daemon.start();
  const OpGraph graph = load_graph_file(example_graph());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 64; ++t)
    threads.emplace_back([&, t] {
      try {
        Client c = daemon.client(20000);
        run_job(c, "job-" + std::to_string(t), graph, 20, 0.01 * (t + 1));
        const json jobs = c.request(MessageType::kListJobs, json::object(), MessageType::kJobList);
        EXPECT_GE(jobs["jobs"].size(), 1u);
        c.request(MessageType::kDetach, json::object(), MessageType::kDetached);
        ++ok;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "job " << t << ": " << e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 64);
  const json status =
      daemon.client().request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  EXPECT_EQ(status["reports_received"].get<int>(), 64 * 20);
  EXPECT_EQ(status["jobs_total"].get<int>(), 0);
  EXPECT_EQ(daemon.stop(), 0) << daemon.log();
}

TEST(Daemon, ReportsAreCountedAndTheBestPlacementSurvivesARestart) {
  DaemonProcess daemon;
  daemon.start();
  const OpGraph graph = load_graph_file(example_graph());
  {
    Client c = daemon.client();
    // One report short of steps_per_candidate (15): the start placement is still being profiled,
    // its median (after 5 warm-up steps) already known.
    run_job(c, "persisted", graph, 14, 0.02);
    const json jobs = c.request(MessageType::kListJobs, json::object(), MessageType::kJobList);
    ASSERT_EQ(jobs["jobs"].size(), 1u);
    const json& j = jobs["jobs"][0];
    EXPECT_EQ(j["steps"].get<int>(), 14);
    EXPECT_EQ(j["state"].get<std::string>(), "profiling");
    EXPECT_DOUBLE_EQ(j["best_step_time_s"].get<double>(), 0.02);
    EXPECT_EQ(j["candidates_tried"].get<int>(), 1);
    // SIGTERM while the job is attached: the daemon persists and exits 0.
    EXPECT_EQ(daemon.stop(SIGTERM), 0) << daemon.log();
  }
  EXPECT_NE(daemon.log().find("persisted the state of 1 job(s)"), std::string::npos)
      << daemon.log();
  EXPECT_NE(daemon.log().find("(1 new best placement(s))"), std::string::npos) << daemon.log();
  // This uid's next run of the model finds it (and starts on its own placement, which the stored
  // one must beat as a candidate: exploration_test).
  daemon.start();
  Client c = daemon.client();
  EXPECT_TRUE(attach_and_upload(c, "persisted", graph).cached);
  EXPECT_EQ(first_directive(c, graph).reason, msg::Reason::kStart);
  EXPECT_TRUE(
      std::filesystem::exists(daemon.state_dir + "/placements/" + std::to_string(::getuid())))
      << "kept per uid";
}

// A daemon whose placer takes 3 s per sample (tests/plugins/slow_placer), two steps per candidate.
DaemonOptions with_slow_placer() {
  DaemonOptions options;
  options.plugin_dirs = {plugin_dir(), test_plugin_dir()};
  options.extra =
      "[policy]\ngrouper = \"none\"\nplacer = \"slow\"\n[params.placer.slow]\nseconds = 3.0\n"
      "[exploration]\nsteps_per_candidate = 2\nwarmup_steps = 0\n";
  return options;
}

// Policy work holds a session for as long as the policy takes (seconds for a big seq2seq); the
// daemon's I/O thread never waits for it: other jobs, placementctl and this job's own reports go
// on.
TEST(Daemon, SlowPolicyWorkStallsNoOtherConnection) {
  DaemonProcess daemon(with_slow_placer());
  daemon.start();
  const OpGraph graph = load_graph_file(example_graph());
  Client slow = daemon.client();
  // Two reports finish the start candidate: the placer now takes 3 s to propose the next.
  run_job(slow, "slow", graph, 2, 0.02);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto started = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
        .count();
  };
  Client other = daemon.client();
  const json status =
      other.request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  EXPECT_EQ(status["jobs_visible"].get<int>(), 1);
  // Inspection shows the session's last view rather than wait for its lock: two `placementctl
  // jobs` answer at once, and hold none of the policy threads the other job needs.
  std::vector<CommandResult> looked(2);
  std::vector<std::thread> lookers;
  for (size_t i = 0; i < looked.size(); ++i)
    lookers.emplace_back([&, i] {
      looked[i] = run_command({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs"});
    });
  for (std::thread& t : lookers) t.join();
  for (const CommandResult& r : looked) {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).size(), 1u) << r.out;
  }
  // Another job attaches, uploads its graph and gets its first placement meanwhile.
  run_job(other, "other", graph, 3, 0.01);
  // The slow job's reports are taken too (they wait on its strand, not on the I/O thread).
  for (int i = 0; i < 20; ++i)
    EXPECT_TRUE(slow.send_oneway(
        MessageType::kStepReport,
        messages::StepReport{1, static_cast<uint64_t>(10 + i), 0.02, true, ""}.to_json()));
  const json again =
      daemon.client().request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  EXPECT_LT(elapsed_ms(), 1500.0) << "the daemon answered only after the slow policy step";
  EXPECT_GE(again["reports_received"].get<int>(), 25);
  // And the slow job's next placement does come, once the placer has answered.
  ASSERT_TRUE(slow.poll_readable(10000));
  protocol::Header header;
  const json pushed = slow.read_frame(&header);
  EXPECT_EQ(header.type, static_cast<uint16_t>(MessageType::kPlacementDirective));
  EXPECT_EQ(pushed["reason"].get<std::string>(), "policy");
  EXPECT_GE(elapsed_ms(), 2000.0);
  EXPECT_EQ(daemon.stop(), 0) << daemon.log();
}

// SIGTERM while a job's policy step takes seconds: the session persists after that step, and the
// I/O thread serves the open connections meanwhile instead of waiting for the session's lock.
TEST(Daemon, ShutdownWaitsForPolicyWorkWithoutStallingConnections) {
  DaemonProcess daemon(with_slow_placer());
  daemon.start();
  const OpGraph graph = load_graph_file(example_graph());
  Client slow = daemon.client();
  run_job(slow, "slow", graph, 2, 0.02);  // the placer now takes 3 s to propose the next candidate
  Client other = daemon.client();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto signalled = std::chrono::steady_clock::now();
  daemon.signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const json status =
      other.request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(),
            1.5)
      << "the I/O thread waited for the policy step";
  EXPECT_EQ(status["jobs_visible"].get<int>(), 1);
  EXPECT_EQ(daemon.stop(0), 0)
      << daemon.log();  // waits for the exit (a second SIGTERM would end it at once)
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(),
            2.0)
      << "the daemon stopped before the policy step it had to persist after";
  EXPECT_NE(daemon.log().find("persisted the state of 1 job(s)"), std::string::npos)
      << daemon.log();
}

// A stop has a deadline and a second signal ends it at once: policy work that runs for minutes (a
// 30 s placer step here) or a hung disk never holds a stop until systemd's SIGKILL.
TEST(Daemon, AStopEndsByItsDeadlineOrASecondSignalWhateverPolicyWorkIsRunning) {
  for (const bool second_signal : {false, true}) {
    DaemonOptions options = with_slow_placer();
    options.extra.replace(options.extra.find("seconds = 3.0"), 13, "seconds = 30.0");
    options.daemon_keys = second_signal ? "" : "stop_timeout_ms = 1000\n";
    DaemonProcess daemon(options);
    daemon.start();
    const OpGraph graph = load_graph_file(example_graph());
    Client slow = daemon.client();
    run_job(slow, "slow", graph, 2,
            0.02);  // the placer now takes 30 s to propose the next candidate
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto signalled = std::chrono::steady_clock::now();
    daemon.signal(SIGTERM);
    if (second_signal) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      daemon.signal(SIGINT);
    }
    EXPECT_EQ(daemon.stop(0), 1) << daemon.log();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(),
              5.0);
    EXPECT_NE(
        daemon.log().find(
            second_signal
                ? "a second SIGINT: exiting now"
                : "the daemon had not stopped 1000 ms after the signal (daemon.stop_timeout_ms"),
        std::string::npos)
        << daemon.log();
  }
}

// Plugin code that throws (here something that is not even a std::exception, from the placer's
// place()) on a policy thread ends that job's exploration, and nothing else: the job keeps its
// placement, `jobs show` says why, another job explores on, the daemon answers and stops cleanly.
TEST(Daemon, APluginThatThrowsEndsOneJobsExplorationAndNothingElse) {
  DaemonOptions options;
  options.plugin_dirs = {plugin_dir(), test_plugin_dir()};
  options.extra =
      "[policy]\ngrouper = \"none\"\nplacer = \"throwing\"\nalgorithm = \"throwing\"\n"
      "[exploration]\nsteps_per_candidate = 2\nwarmup_steps = 0\n"
      "[[rules]]\njob = \"bad\"\n[rules.params.placer.throwing]\nentry = \"place\"\nexception = "
      "\"other\"\n";
  DaemonProcess daemon(options);
  daemon.start();
  const OpGraph graph = load_graph_file(example_graph());
  Client bad = daemon.client();
  const uint64_t bad_placement = run_job(bad, "bad", graph, 6, 0.02);
  Client good = daemon.client();
  run_job(good, "good", graph, 2, 0.02);
  // The good job's next candidate is the policy's sample.
  ASSERT_TRUE(good.poll_readable(10000)) << daemon.log();
  protocol::Header header;
  const json pushed = good.read_frame(&header);
  EXPECT_EQ(header.type, static_cast<uint16_t>(MessageType::kPlacementDirective));
  EXPECT_EQ(pushed["reason"].get<std::string>(), "policy");
  EXPECT_EQ(pushed["after_step"], 1)
      << "the push names the report that completed the start candidate";

  Client admin = daemon.client();
  json shown;
  for (int i = 0; i < 100; ++i) {
    const json jobs = admin.request(MessageType::kListJobs, json::object(), MessageType::kJobList);
    for (const json& j : jobs["jobs"])
      if (j["name"] == "bad")
        shown = admin.request(MessageType::kJobShow, {{"id", j["id"]}}, MessageType::kJobInfo);
    if (shown.is_object() && shown["policy_error"].is_string()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(shown.is_object() && shown["policy_error"].is_string())
      << shown.dump() << daemon.log();
  EXPECT_NE(shown["policy_error"].get<std::string>().find("not a std::exception"),
            std::string::npos);
  EXPECT_EQ(shown["state"], "exploiting");
  const CommandResult ctl =
      run_command({placementctl_bin(), "jobs", "show", std::to_string(shown["id"].get<uint64_t>()),
                   "--socket", daemon.socket});
  EXPECT_EQ(ctl.exit_code, 0) << ctl.err;
  EXPECT_NE(ctl.out.find("plugin failed"), std::string::npos) << ctl.out;
  EXPECT_NE(
      ctl.out.find("policy step: an exception that is not a std::exception; exploration ended"),
      std::string::npos)
      << ctl.out;
  // The bad job runs its start placement on: nothing was pushed to it.
  EXPECT_FALSE(bad.poll_readable(200));
  EXPECT_TRUE(bad.send_oneway(MessageType::kStepReport,
                              messages::StepReport{bad_placement, 99, 0.02, true, ""}.to_json()));
  const msg::Detached detached = msg::Detached::from_json(
      bad.request(msg::Detach::kType, msg::Detach{}.to_json(), msg::Detached::kType));
  EXPECT_TRUE(detached.persisted);
  EXPECT_TRUE(daemon.alive());
  EXPECT_NE(daemon.log().find("policy step failed"), std::string::npos) << daemon.log();
  EXPECT_EQ(daemon.stop(), 0) << daemon.log();
}

TEST(Daemon, AFreshPolicyIsWarmStartedFromTheConfiguredBaseline) {
  if (!learned_plugins_built()) GTEST_SKIP() << "built without LibTorch";
  DaemonOptions options;
  options.extra = "[policy]\nplacer = \"feedforward\"\nwarm_start = \"metis\"\n";
  DaemonProcess daemon(options);
  daemon.start();
  Client c = daemon.client();
  const OpGraph graph = load_graph_file(example_graph());
  run_job(c, "warm", graph, 3, 0.02);
  const json jobs = c.request(MessageType::kListJobs, json::object(), MessageType::kJobList);
  ASSERT_EQ(jobs["jobs"].size(), 1u);
  const json shown =
      c.request(MessageType::kJobShow, {{"id", jobs["jobs"][0]["id"]}}, MessageType::kJobInfo);
  const json& w = shown["warm_start"];
  ASSERT_TRUE(w.is_object()) << shown.dump();
  EXPECT_EQ(w["baseline"], "metis");
  EXPECT_TRUE(w["skipped"].is_null()) << w.dump();
  EXPECT_GT(w["steps"].get<int>(), 0);
  EXPECT_GE(w["probability_after"].get<double>(), 0.9);
  EXPECT_NE(daemon.log().find("policy warm-started from metis"), std::string::npos) << daemon.log();
}

TEST(Daemon, TheSimulatorWarmStartSearchesAProfiledGraphAndSaysWhyNotOtherwise) {
  if (!learned_plugins_built()) GTEST_SKIP() << "built without LibTorch";
  DaemonOptions options;
  options.extra =
      "[policy]\ngrouper = \"name_prefix\"\nplacer = \"feedforward\"\nwarm_start = \"simulator\"\n";
  DaemonProcess daemon(options);
  daemon.start();
  auto warm_start_of = [&](const std::string& job, const OpGraph& graph) {
    Client c = daemon.client();
    run_job(c, job, graph, 1, 0.02);
    const json jobs = c.request(MessageType::kListJobs, json::object(), MessageType::kJobList);
    json shown;
    for (const json& j : jobs["jobs"])
      if (j["name"] == job)
        shown = c.request(MessageType::kJobShow, {{"id", j["id"]}}, MessageType::kJobInfo);
    c.request(MessageType::kDetach, json::object(), MessageType::kDetached);
    return shown["warm_start"];
  };
  // Inception-V3 with the CPU profiles of tests/data/graphs, on two logical CPU devices.
  const json searched =
      warm_start_of("profiled", load_graph_file(std::string(GRAPH_DIR) + "/inception_v3.json.gz"));
  ASSERT_TRUE(searched.is_object());
  EXPECT_TRUE(searched["skipped"].is_null()) << searched.dump();
  EXPECT_EQ(searched["baseline"], "simulator");
  EXPECT_GT(searched["search_evaluations"].get<int64_t>(), 0);
  EXPECT_TRUE(searched["baseline_step_time_s"].is_number());
  // The heuristics' placements after its answer, then its copies with two devices swapped: each
  // offered with what the model predicts of it, or said why not.
  ASSERT_TRUE(searched["heuristics"].is_array()) << searched.dump();
  std::set<std::string> placers;
  size_t swapped = 0;
  for (const json& h : searched["heuristics"]) {
    const std::string placer = h.value("placer", std::string());
    if (placer.rfind("the warm start's answer with ", 0) == 0)
      ++swapped;
    else
      placers.insert(placer);
    EXPECT_TRUE(h.contains("not_offered") ||
                (h["predicted_step_time_s"].is_number() && h["placement_fingerprint"].is_string()))
        << h.dump();
  }
  EXPECT_EQ(placers, (std::set<std::string>{"list_scheduling", "metis", "expert"}))
      << searched.dump();
  // Two logical CPUs alike: the one swap moves ops unless the answer is all on one of them.
  EXPECT_LE(swapped, 1u) << searched.dump();
  EXPECT_NE(daemon.log().find("policy warm-started from simulator"), std::string::npos)
      << daemon.log();
  // The example graph carries no profile: nothing to search, and the job is told why.
  const json skipped = warm_start_of("unprofiled", load_graph_file(example_graph()));
  ASSERT_TRUE(skipped.is_object());
  EXPECT_NE(skipped["skipped"].get<std::string>().find("has no profile"), std::string::npos)
      << skipped.dump();
}

// A job whose cpu:1 is three times slower than the profiles say, followed through its directives:
// the simulator warm start's model is refitted to its steps, and placementctl jobs show says how.
TEST(Daemon, TheSimulatorWarmStartsModelIsRefittedToTheJobsStepsAndJobsShowSaysHow) {
  if (!learned_plugins_built()) GTEST_SKIP() << "built without LibTorch";
  DaemonOptions options = fast_exploration(24);
  const std::string grouper = "[policy]\ngrouper = \"none\"\n";
  ASSERT_EQ(options.extra.rfind(grouper, 0), 0u) << options.extra;
  options.extra.erase(0, grouper.size());
  options.extra += grouper + "placer = \"feedforward\"\nwarm_start = \"simulator\"\nrefits = 2\n";
  DaemonProcess daemon(options);
  daemon.start();
  OpGraph graph = two_chains(6);
  profile_all(graph, DeviceKind::kCpu, 1e-3);
  Client c = daemon.client();
  attach_and_upload(c, "slow-cpu1", graph);
  msg::Directive directive = first_directive(c, graph);
  // On a connection of its own: the job's reads every directive the daemon pushes.
  Client admin = daemon.client();
  const json jobs = admin.request(MessageType::kListJobs, json::object(), MessageType::kJobList);
  ASSERT_EQ(jobs["jobs"].size(), 1u);
  const std::string id = std::to_string(jobs["jobs"][0]["id"].get<uint64_t>());
  json shown;
  // Steps until the first refit (after 3 measured placements), at most 2 000: the warm start runs
  // beside the job, and on a loaded machine its start runs many steps meanwhile.
  for (uint64_t step = 0; step < 2000; ++step) {
    double t = 0;
    for (int d : directive.placement.device_of_op) t += (d == 1 ? 3 : 1) * 3e-3;
    c.send_oneway(MessageType::kStepReport,
                  msg::StepReport{directive.placement_id, step, t, true, ""}.to_json());
    while (c.poll_readable(step % 10 == 0 ? 50 : 0)) {
      protocol::Header header;
      const json body = c.read_frame(&header);
      if (header.type == static_cast<uint16_t>(MessageType::kPlacementDirective))
        directive = msg::Directive::from_json(body, graph, two_cpus());
    }
    if (step % 100 != 99) continue;
    shown = admin.request(MessageType::kJobShow, {{"id", jobs["jobs"][0]["id"]}},
                          MessageType::kJobInfo);
    if (shown["refits"].is_array() && !shown["refits"].empty()) break;
  }
  ASSERT_TRUE(shown["refits"].is_array()) << shown.dump();
  ASSERT_GE(shown["refits"].size(), 1u) << shown.dump() << daemon.log();
  EXPECT_LE(shown["refits"].size(), 2u) << "[policy] refits = 2";
  const json& first = shown["refits"][0];
  EXPECT_GE(first["measured"].get<int>(), 3);
  EXPECT_EQ(first["baseline"], "simulator");
  std::map<std::string, double> scale;
  for (const json& f : first["factors"]) scale[f["what"]] = f["scale"];
  ASSERT_TRUE(scale.count("compute on cpu:1")) << first.dump();
  EXPECT_GT(scale["compute on cpu:1"] /
                (scale.count("compute on cpu:0") ? scale["compute on cpu:0"] : 1.0),
            2.0)
      << first.dump();
  EXPECT_NE(daemon.log().find("planning model refitted to "), std::string::npos) << daemon.log();
  const CommandResult text =
      run_command({placementctl_bin(), "--socket", daemon.socket, "jobs", "show", id});
  EXPECT_NE(text.out.find("refit 1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("list_scheduling: "), std::string::npos)
      << "the heuristics' row names each\n"
      << text.out;
  EXPECT_NE(text.out.find("measured placements: log error "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("compute on cpu:1 x"), std::string::npos) << text.out;
  // Its search, on the refitted model; the answer is imitated and run, or said to have run already.
  EXPECT_NE(text.out.find("); searched "), std::string::npos) << text.out;
  const bool offered = text.out.find("on the refitted model, imitated in") != std::string::npos;
  const bool ran = text.out.find("on the refitted model; not offered: its answer ran already") !=
                   std::string::npos;
  EXPECT_TRUE(offered || ran) << text.out;
  c.request(MessageType::kDetach, json::object(), MessageType::kDetached);
}

TEST(Daemon, JobThatDiesIsCleanedUp) {
  DaemonProcess daemon;
  daemon.start();
  Child job({hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job",
             "doomed", "--reports", "8"});
  ASSERT_TRUE(job.wait_for_output("ready")) << job.err();
  Client admin = daemon.client();
  EXPECT_EQ(
      admin.request(MessageType::kListJobs, json::object(), MessageType::kJobList)["jobs"].size(),
      1u);
  job.signal(SIGKILL);
  job.wait();
  for (int i = 0; i < 200; ++i) {
    if (admin.request(MessageType::kListJobs, json::object(), MessageType::kJobList)["jobs"]
            .empty())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(
      admin.request(MessageType::kListJobs, json::object(), MessageType::kJobList)["jobs"].empty());
  EXPECT_NE(daemon.log().find("job 1 'doomed' disconnected without detach"), std::string::npos)
      << daemon.log();
}

TEST(Daemon, SecondInstanceOnTheSameSocketIsRefusedAndStaleSocketsAreReplaced) {
  DaemonProcess first;
  first.start();
  const CommandResult second = run_command({placementd_bin(), "--config", first.config_path});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("placementd already runs on " + first.socket), std::string::npos)
      << second.err;
  EXPECT_TRUE(first.alive());
  // A daemon killed with SIGKILL leaves its socket file behind; the next one replaces it.
  first.stop(SIGKILL);
  ASSERT_TRUE(std::filesystem::exists(first.socket));
  first.start();
  EXPECT_EQ(first.stop(), 0);
  EXPECT_FALSE(std::filesystem::exists(first.socket)) << "a clean stop removes the socket";
}

TEST(Daemon, ASecondDaemonOnTheSameStateDirectoryIsRefusedOnAnotherSocketToo) {
  // An admin's daemon started by hand beside systemd's would overwrite its results, and they its.
  DaemonProcess first;
  first.start();
  const CommandResult second = run_command(
      {placementd_bin(), "--config", first.config_path, "--socket", first.dir + "/other.sock"});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("another placementd uses the state directory " + first.state_dir +
                            " (pid " + std::to_string(first.pid) + ", lock " + first.state_dir +
                            "/placementd.lock)"),
            std::string::npos)
      << second.err;
  EXPECT_FALSE(std::filesystem::exists(first.dir + "/other.sock")) << "it did not start serving";
  EXPECT_TRUE(first.alive());
}

TEST(Daemon, InvalidConfigAtStartIsReportedWithPositions) {
  DaemonProcess daemon({"", "[policy]\nalgorithm = \"telepathy\"\n"});
  EXPECT_THROW(daemon.start(), std::runtime_error);
  EXPECT_NE(daemon.log().find(
                "policy.algorithm: no algorithm plugin named 'telepathy' is loaded (loaded: "),
            std::string::npos)
      << daemon.log();
  EXPECT_NE(daemon.log().find(daemon.config_path + ":"), std::string::npos);
}

TEST(Daemon, DevicesOutsideThePoolAreRefused) {
  DaemonProcess daemon({"", "[devices]\nallow = [\"cpu:0\"]\n"});
  daemon.start();
  Client c = daemon.client();
  try {
    c.request(MessageType::kAttach, {{"job", "greedy"}, {"devices", to_json(two_cpus())}},
              MessageType::kAttached);
    FAIL() << "cpu:1 is not in the pool";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.code(), protocol::error::kPermissionDenied);
    EXPECT_NE(std::string(e.what()).find("device cpu:1 is not in this node's device pool"),
              std::string::npos);
  }
}

// [limits]: a graph over one is refused from what the upload says of itself, before it is built,
// with the limit and the figure; the session and the daemon go on, and a reload can raise them.
TEST(Daemon, GraphsOverTheLimitsAreRefusedBeforeTheyAreBuilt) {
  DaemonProcess daemon({"",
                        "[limits]\nmax_graph_ops = 1000\nmax_session_bytes = "
                        "16777216\nmax_graph_bytes = 1048576\n"});
  daemon.start();
  auto refused = [&](const OpGraph& graph, const std::string& message) {
    Client c = daemon.client();
    try {
      attach_and_upload(c, "big", graph);
      ADD_FAILURE() << graph.ops.size() << " ops were accepted";
    } catch (const ServerError& e) {
      EXPECT_EQ(e.code(), protocol::error::kOverLimit);
      EXPECT_EQ(e.what(), "over_limit: " + message);
      EXPECT_FALSE(e.fatal());
    }
    // The connection still answers; the session has no graph, so it has no placement to give.
    EXPECT_NO_THROW(c.request(MessageType::kStatus, json::object(), MessageType::kStatusReply));
    EXPECT_THROW(first_directive(c, graph), ServerError);
  };
  refused(unrolled_stack(1200), "graph has 1200 ops; [limits] max_graph_ops = 1000");
  refused(unrolled_stack(800),
          "graph of 800 ops and 1396 edges needs about 18 MiB in the daemon; [limits] "
          "max_session_bytes = 16777216 "
          "(16 MiB)");
  OpGraph named = chain(300);
  for (Op& op : named.ops) op.name = std::string(4000, 'x') + std::to_string(op.id);
  const size_t bytes =
      json::to_cbor(msg::GraphUpload{named, std::nullopt}.to_json(two_cpus())).size();
  // Too many bytes: its payload is dropped unread as it arrives, and the connection goes on.
  refused(named, "graph upload of " + std::to_string(bytes) +
                     " bytes; [limits] max_graph_bytes = 1048576");
  EXPECT_TRUE(daemon.alive());
  const std::string log = daemon.log();
  EXPECT_NE(log.find("graph refused: graph has 1200 ops; [limits] max_graph_ops = 1000"),
            std::string::npos)
      << log;

  // With the defaults (64 MiB both), a daemon whose frames are smaller refuses the same way.
  DaemonProcess small_frames({"max_frame_bytes = 1048576\n"});
  small_frames.start();
  {
    Client c = small_frames.client();
    try {
      attach_and_upload(c, "big", named);
      ADD_FAILURE() << "a graph over max_frame_bytes was accepted";
    } catch (const ServerError& e) {
      EXPECT_EQ(std::string(e.what()), "over_limit: graph upload of " + std::to_string(bytes) +
                                           " bytes; daemon.max_frame_bytes = 1048576");
      EXPECT_FALSE(e.fatal());
    }
    EXPECT_NO_THROW(c.request(MessageType::kStatus, json::object(), MessageType::kStatusReply));
  }

  // Within the limits, the same daemon takes a graph.
  Client c = daemon.client();
  EXPECT_EQ(attach_and_upload(c, "small", unrolled_stack(400)).ops, 400u);
  EXPECT_EQ(first_directive(c, unrolled_stack(400)).placement.device_of_op.size(), 400u);
}

// A job whose graph is over the limits keeps training without the daemon and offers the graph
// again only after the long pause: a retry every second would only repeat the upload.
TEST(Daemon, AJobRefusedForItsSizeWaitsBeforeOfferingItsGraphAgain) {
  DaemonProcess daemon({"", "[limits]\nmax_graph_ops = 100\n"});
  daemon.start();
  JobChannelOptions options;
  options.socket_path = daemon.socket;
  options.attach.job = "too-big";
  options.attach.devices = two_cpus();
  options.graph = unrolled_stack(400);
  options.start.device_of_op.assign(400, 0);
  options.reconnect_interval_ms = 20;
  options.refused_retry_interval_ms = 60000;
  JobChannel channel(options);
  EXPECT_FALSE(channel.wait_for_directive(5000));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const JobChannel::Status status = channel.status();
  EXPECT_EQ(status.attempts, 1u)
      << "at the 20 ms reconnect pause it would have tried hundreds of times";
  EXPECT_FALSE(status.connected);
  EXPECT_EQ(status.last_error, "over_limit: graph has 400 ops; [limits] max_graph_ops = 100");
}

// A follower's channel (rank 1 of a replica group) attaches without a graph, gets no directive and
// reports every step; its daemon lists it as following with those steps, and the detach ends it.
TEST(Daemon, AFollowerAttachesWithoutAGraphAndReportsItsSteps) {
  DaemonProcess daemon;
  daemon.start();
  JobChannelOptions options;
  options.socket_path = daemon.socket;
  options.attach.job = "replica";
  options.attach.devices = two_cpus();
  options.attach.replica = msg::ReplicaInfo{1, 2, "127.0.0.1:29500/0badf00d"};
  JobChannel channel(options);
  for (int i = 0; i < 200 && !channel.status().connected; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(channel.status().connected) << channel.status().last_error;
  for (uint64_t step = 0; step < 30; ++step)
    channel.report(0, messages::StepReport{5, step, 0.01, true, ""});
  json listed;
  for (int i = 0; i < 200 && !(listed.is_object() && listed["steps"] == 30); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const json jobs =
        daemon.client().request(MessageType::kListJobs, json::object(), MessageType::kJobList);
    if (!jobs["jobs"].empty()) listed = jobs["jobs"][0];
  }
  ASSERT_TRUE(listed.is_object()) << daemon.log();
  EXPECT_EQ(listed["steps"], 30) << listed.dump(2);
  EXPECT_EQ(listed["state"], "following");
  EXPECT_EQ(listed["replica"]["group"], "127.0.0.1:29500/0badf00d");
  EXPECT_FALSE(channel.take_directive()) << "a follower is sent no placement";
  const JobChannel::Status closed = channel.close();
  ASSERT_TRUE(closed.detached) << closed.last_error;
  EXPECT_FALSE(closed.detached->persisted);
  EXPECT_EQ(closed.reports_sent, 30u);
}

// A daemon of protocol 3 would take a follower for a job of its own: the follower does not attach,
// says why, and tries again only after refused_retry_interval_ms. The "daemon" here answers the
// handshake with version 3 and records whatever comes after it.
TEST(Daemon, AFollowerDoesNotAttachToADaemonOlderThanProtocol4) {
  const std::string path = make_temp_dir() + "/v3.sock";
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  std::atomic<int> connections{0}, frames_after_hello{0};
  std::atomic<bool> stop{false};
  std::thread server([&] {
    while (!stop) {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      ++connections;
      uint8_t head[protocol::kHeaderSize];
      bool welcomed = false;
      while (!stop) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 20) <= 0) continue;
        if (::recv(fd, head, sizeof(head), MSG_WAITALL) != static_cast<ssize_t>(sizeof(head)))
          break;
        protocol::Header h;
        protocol::decode_header(head, &h);
        std::vector<uint8_t> payload(h.length);
        if (h.length > 0 && ::recv(fd, payload.data(), payload.size(), MSG_WAITALL) !=
                                static_cast<ssize_t>(h.length))
          break;
        if (welcomed) {
          ++frames_after_hello;
          continue;
        }
        msg::Welcome w;
        w.version = 3;
        w.server = "placementd 0.0.3";
        const auto bytes =
            protocol::encode_frame(msg::Welcome::kType, h.request_id, w.to_json(), 3);
        ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        welcomed = true;
      }
      ::close(fd);
    }
  });
  {
    JobChannelOptions options;
    options.socket_path = path;
    options.attach.job = "replica";
    options.attach.devices = two_cpus();
    options.attach.replica = msg::ReplicaInfo{1, 2, "127.0.0.1:29500/0badf00d"};
    options.reconnect_interval_ms = 10;
    options.refused_retry_interval_ms = 60000;
    JobChannel channel(options);
    for (int i = 0; i < 200 && channel.status().attempts == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const JobChannel::Status status = channel.status();
    EXPECT_FALSE(status.connected);
    EXPECT_EQ(status.attempts, 1u)
        << "at the 10 ms reconnect pause it would have tried again and again";
    EXPECT_EQ(status.last_error,
              "placementd speaks protocol 3; a follower rank attaches only to protocol 4 or later");
  }
  stop = true;
  server.join();
  ::close(listener);
  EXPECT_EQ(connections.load(), 1);
  EXPECT_EQ(frames_after_hello.load(), 0) << "no attach went to the old daemon";
}

// The policy threads run at nice 19 ([daemon] policy_nice), the rest of the daemon at its own.
TEST(Daemon, PolicyThreadsAreNicedAndTheIoThreadIsNot) {
  DaemonProcess daemon({"policy_threads = 3\n"});
  daemon.start();
  std::map<int, int> nice = threads_by_nice(daemon.pid);
  EXPECT_EQ(nice[19], 3);
  EXPECT_GE(nice[0], 1) << "the main thread, which runs the I/O";
  DaemonProcess unniced({"policy_threads = 3\npolicy_nice = 0\n"});
  unniced.start();
  EXPECT_EQ(threads_by_nice(unniced.pid)[19], 0);
}

}  // namespace
}  // namespace placement::testing
