// Issue #18's load figures: --jobs jobs (64) attached to one real placementd with the default
// config at once, each exploring with a graph of about --ops ops (2 000: an unrolled 4-layer
// recurrent stack, a few ops longer per job so that every job is a session and a stored file of its
// own) on 4 GPUs and a CPU. A job's step takes --step-ms (its start placement's simulated time,
// scaled; other placements in proportion, 5% noise; one that does not fit fails, as out of memory
// would) and it applies the daemon's pushes between steps, as the SDK does.
// Prints the daemon's RSS, the latency from a step report to the directive it causes (a pushed
// directive's after_step names that report), each job's longest such wait and how many directives
// it got (no job starved: the longest wait of any job is the bound), and the daemon's CPU.
//
// --check (CI runs it, shorter) fails when a job cannot attach, a job gets no directive after its
// first, a directive names a step the job never reported or does not place every op, a report is
// lost, or the daemon dies; never on a time.
//
//   load_bench [--jobs N] [--ops N] [--step-ms N] [--seconds N] [--check]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "../../examples/common/command_line.h"
#include "attach_flow.h"
#include "daemon_process.h"
#include "placement/client.h"
#include "placement/serialization.h"
#include "planning/sim/simulator.h"
#include "planning/sim/topology.h"
#include "process_stats.h"
#include "test_graphs.h"

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using placement::protocol::MessageType;
using placement::testing::percentile;
using placement::testing::status_mib;
namespace msg = placement::messages;

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct JobFigures {
  double first_directive_ms = 0;
  std::vector<double> latency_ms;
  uint64_t reports = 0, failed_steps = 0;
  std::vector<std::string> problems;
};

// One job's training loop against the daemon, until `end`.
JobFigures run_job(const placement::testing::DaemonProcess& daemon, int index, int ops,
                   double step_ms, const placement::DeviceSet& devices, Clock::time_point end,
                   std::atomic<int>* attached) {
  JobFigures f;
  const placement::OpGraph graph = placement::testing::unrolled_stack(ops + 4 * index);
  const placementd::sim::Simulator simulator(graph, devices);
  placement::Client client = daemon.client(60000);
  const auto asked = Clock::now();
  // expected_steps: long enough that the exploration budget never ends exploring within the run.
  msg::Directive directive = placement::testing::attach_and_place(
      client, "load-" + std::to_string(index), graph, devices, 10000000);
  f.first_directive_ms = ms_between(asked, Clock::now());
  attached->fetch_add(1);

  auto time_of = [&](const placement::Placement& p) -> std::optional<double> {
    const auto r = simulator.simulate(p);
    return r.valid ? std::optional<double>(r.step_time_s) : std::nullopt;
  };
  const std::optional<double> start_time = time_of(directive.placement);
  if (!start_time) {
    f.problems.push_back("the first directive does not fit the devices");
    return f;
  }
  const double scale = step_ms / 1000.0 / *start_time;
  std::optional<double> current = start_time;
  std::mt19937_64 rng(static_cast<uint64_t>(index) + 1);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  std::vector<Clock::time_point> sent;  // by step
  auto step_end = Clock::now();
  for (uint64_t step = 0; step_end < end; ++step) {
    const double seconds = current ? *current * scale * noise(rng) : step_ms / 1000.0;
    step_end += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    // While the step runs, the daemon's pushes arrive; the next step runs under the newest.
    for (auto now = Clock::now(); now < step_end; now = Clock::now()) {
      const int wait_ms = static_cast<int>(ms_between(now, step_end)) + 1;
      if (!client.poll_readable(wait_ms)) continue;
      placement::protocol::Header header;
      const json body = client.read_frame(&header);
      const auto arrived = Clock::now();
      if (header.type != static_cast<uint16_t>(MessageType::kPlacementDirective)) continue;
      directive = msg::Directive::from_json(body, graph, devices);
      if (!directive.after_step || *directive.after_step >= sent.size()) {
        f.problems.push_back("a pushed directive names no step the job reported");
        continue;
      }
      f.latency_ms.push_back(ms_between(sent[*directive.after_step], arrived));
      if (directive.placement.device_of_op.size() != graph.ops.size())
        f.problems.push_back("a directive does not place every op");
      current = time_of(directive.placement);
    }
    placement::messages::StepReport m{directive.placement_id, step, seconds, current.has_value(),
                                      ""};
    if (!current) {
      m.error = "simulated out of memory";
      ++f.failed_steps;
    }
    sent.push_back(Clock::now());
    client.send_oneway(MessageType::kStepReport, m.to_json());
    ++f.reports;
  }
  client.request(MessageType::kDetach, json::object(), MessageType::kDetached);
  return f;
}

int run(int jobs, int ops, double step_ms, int seconds, bool check) {
  const std::string topology = TOPOLOGY_DIR "/4xh100_cpu_pcie5.toml";
  const placement::DeviceSet devices = placementd::sim::load_topology(topology);
  placement::testing::DaemonOptions options;
  options.log_level = "warn";
  options.frame_timeout_ms = 0;
  placement::testing::DaemonProcess daemon(options);
  daemon.start();
  const double idle_mib = status_mib(daemon.pid, "VmRSS:");
  std::printf(
      "%d jobs of %d-%d ops on %s, steps of %.0f ms, %d s; the daemon's default config on %u "
      "cores\n\n",
      jobs, ops, ops + 4 * (jobs - 1), topology.c_str(), step_ms, seconds,
      std::thread::hardware_concurrency());

  const auto started = Clock::now();
  const auto end = started + std::chrono::seconds(seconds);
  std::atomic<int> attached{0};
  std::vector<JobFigures> figures(static_cast<size_t>(jobs));
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j)
    threads.emplace_back([&, j] {
      try {
        figures[static_cast<size_t>(j)] = run_job(daemon, j, ops, step_ms, devices, end, &attached);
      } catch (const std::exception& e) {
        figures[static_cast<size_t>(j)].problems.push_back(std::string("the job failed: ") +
                                                           e.what());
      }
    });
  // Once every job trains, the daemon's footprint with all of them attached and exploring.
  while (attached.load() < jobs && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double all_attached_s = std::chrono::duration<double>(Clock::now() - started).count();
  const double cpu_start = placement::testing::cpu_seconds(daemon.pid);
  const auto cpu_from = Clock::now();
  std::this_thread::sleep_until(end - std::chrono::milliseconds(500));
  const double exploring_mib = status_mib(daemon.pid, "VmRSS:");
  // Where the sessions are: still exploring, or settled on their best.
  std::map<std::string, int> states;
  double candidates = 0;
  const json listed =
      daemon.client().request(MessageType::kListJobs, json::object(), MessageType::kJobList);
  for (const json& j : listed.at("jobs")) {
    ++states[j.at("state").get<std::string>()];
    candidates += j.at("candidates_tried").get<double>();
  }
  const double cores = (placement::testing::cpu_seconds(daemon.pid) - cpu_start) /
                       std::chrono::duration<double>(Clock::now() - cpu_from).count();
  for (auto& t : threads) t.join();
  const double peak_mib = status_mib(daemon.pid, "VmHWM:"),
               detached_mib = status_mib(daemon.pid, "VmRSS:");

  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (ok) return;
    std::printf("CHECK FAILED: %s\n", what.c_str());
    ++failures;
  };
  std::vector<double> all_latency, first_ms, longest_ms, directives;
  uint64_t reports = 0, failed_steps = 0;
  for (size_t j = 0; j < figures.size(); ++j) {
    const JobFigures& f = figures[j];
    for (const std::string& p : f.problems) expect(false, "job " + std::to_string(j) + ": " + p);
    expect(!f.latency_ms.empty(), "job " + std::to_string(j) + " got no directive after its first");
    all_latency.insert(all_latency.end(), f.latency_ms.begin(), f.latency_ms.end());
    first_ms.push_back(f.first_directive_ms);
    longest_ms.push_back(percentile(f.latency_ms, 1.0));
    directives.push_back(static_cast<double>(f.latency_ms.size()));
    reports += f.reports;
    failed_steps += f.failed_steps;
  }
  const json status =
      daemon.client().request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  expect(status["reports_received"].get<uint64_t>() == reports,
         "the daemon counted " + status["reports_received"].dump() + " reports of " +
             std::to_string(reports) + " sent");
  expect(daemon.alive(), "the daemon died");

  std::printf("%-58s %s\n", "", "figure");
  std::printf("%-58s %.0f / %.0f / %.0f MiB (idle %.0f)\n",
              "daemon RSS exploring / peak / after the detaches", exploring_mib, peak_mib,
              detached_mib, idle_mib);
  std::printf("%-58s %.2f s\n", "every job attached and training after", all_attached_s);
  std::printf("%-58s %.0f / %.0f ms\n", "first directive (attach -> placement) p50 / max",
              percentile(first_ms, 0.5), percentile(first_ms, 1.0));
  std::printf(
      "%-58s %.0f (per job min %.0f, median %.0f, max %.0f)\n", "directives pushed",
      [&] {
        double n = 0;
        for (double d : directives) n += d;
        return n;
      }(),
      percentile(directives, 0.0), percentile(directives, 0.5), percentile(directives, 1.0));
  std::printf("%-58s %.1f / %.1f / %.1f ms\n", "report -> the directive it causes p50 / p99 / max",
              percentile(all_latency, 0.5), percentile(all_latency, 0.99),
              percentile(all_latency, 1.0));
  std::printf("%-58s %.1f / %.1f ms\n", "a job's longest wait: median job / worst job (starvation)",
              percentile(longest_ms, 0.5), percentile(longest_ms, 1.0));
  std::string by_state;
  for (const auto& [state, n] : states)
    by_state += (by_state.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  std::printf("%-58s %s; %.0f candidates tried in all\n", "sessions near the end", by_state.c_str(),
              candidates);
  std::printf("%-58s %.2f cores\n", "daemon CPU while every job explores", cores);
  std::printf("%-58s %llu (%llu failed, as out of memory; mean step %.1f ms)\n", "step reports",
              static_cast<unsigned long long>(reports),
              static_cast<unsigned long long>(failed_steps),
              1000.0 * seconds * jobs / static_cast<double>(std::max<uint64_t>(reports, 1)));
  return check && failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cl = examples::command_line;
  CLI::App app{
      "Many jobs exploring at once against one real placementd (issue #18's load figures).",
      "load_bench"};
  int jobs = 64, ops = 2000, seconds = 60;
  double step_ms = 100;
  bool check = false;
  app.add_option("--jobs", jobs, "jobs attached at once")
      ->check(cl::at_least(1))
      ->capture_default_str();
  app.add_option("--ops", ops, "ops in each job's graph (a multiple of 4)")
      ->check(cl::at_least(8))
      ->capture_default_str();
  app.add_option("--step-ms", step_ms, "a job's step time on its start placement")
      ->check(CLI::Range(1.0, 60000.0))
      ->capture_default_str();
  app.add_option("--seconds", seconds, "how long the jobs train")
      ->check(cl::at_least(5))
      ->capture_default_str();
  app.add_flag("--check", check, "exit 1 when a functional check fails (never on a time)");
  return cl::run(app, argc, argv, [&] { return run(jobs, ops, step_ms, seconds, check); });
}
