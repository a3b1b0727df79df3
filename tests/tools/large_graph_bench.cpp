// Issue #18's "graphs of any size" figures, against a real placementd with the default config:
// an unrolled 4-layer recurrent stack of --ops ops (80 000: the Hierarchical Planner's largest
// graph has 83 712) is attached as a job on 4 GPUs and a CPU, the job steps under the daemon's
// directives with step times from the simulator, and `placementctl optimize` runs on the same
// graph. Prints the time to the first directive, the latency from a step report to the directive
// it causes, the daemon's RSS and peak RSS, and optimize's wall time.
// Targets: first directive <= 10 s, daemon RSS <= 1 GiB, optimize <= 30 s.
//
// --check (CI runs it at the defaults) fails when the daemon refuses the graph, places more than
// [policy] max_groups groups, sends a placement the job cannot run, dies, or when optimize fails;
// never on a time.
//
//   large_graph_bench [--ops N] [--steps N] [--budget N] [--check]

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "../../examples/common/command_line.h"
#include "daemon_process.h"
#include "placement/client.h"
#include "placement/serialization.h"
#include "planning/group_cap.h"
#include "planning/sim/simulator.h"
#include "planning/sim/topology.h"
#include "process_stats.h"
#include "server/graph_limits.h"
#include "test_graphs.h"

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using placement::protocol::MessageType;
namespace msg = placement::messages;
using placement::testing::percentile;
using placement::testing::status_mib;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int run(int ops, int steps, int budget, bool check) {
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (ok) return;
    std::printf("CHECK FAILED: %s\n", what.c_str());
    ++failures;
  };

  const auto made = Clock::now();
  const placement::OpGraph graph = placement::testing::unrolled_stack(ops);
  const placement::DeviceSet devices =
      placementd::sim::load_topology(TOPOLOGY_DIR "/4xh100_cpu_pcie5.toml");
  const placementd::sim::Simulator simulator(graph, devices);
  std::printf("graph %s: %zu ops, %zu edges (made and simulator built in %.1f s); devices %s\n",
              graph.name.c_str(), graph.ops.size(), graph.edges.size(), seconds_since(made),
              TOPOLOGY_DIR "/4xh100_cpu_pcie5.toml");

  placement::testing::DaemonOptions options;
  options.log_level = "warn";
  options.frame_timeout_ms = 0;
  placement::testing::DaemonProcess daemon(options);
  daemon.start();
  const std::string graph_file = daemon.dir + "/graph.json";
  placement::write_json_file(graph_file, placement::to_json(graph), -1);
  const double idle_mib = status_mib(daemon.pid, "VmRSS:");

  // The job: attach, upload, ask for its first placement.
  placement::Client client = daemon.client(120000);
  msg::Attach attach;
  attach.job = "large-graph";
  attach.devices = devices;
  client.request(attach.kType, attach.to_json(), msg::Attached::kType);
  const auto upload_start = Clock::now();
  const msg::GraphUpload upload{graph, std::nullopt};
  const json upload_body = upload.to_json(devices);
  const double encode_s = seconds_since(upload_start);
  const auto accepted = msg::GraphAccepted::from_json(
      client.request(upload.kType, upload_body, msg::GraphAccepted::kType));
  const double accepted_s = seconds_since(upload_start);
  msg::Directive directive = msg::Directive::from_json(
      client.request(msg::PlacementRequest::kType, msg::PlacementRequest{}.to_json(),
                     msg::Directive::kType),
      graph, devices);
  const double first_s = seconds_since(upload_start);
  const double attached_mib = status_mib(daemon.pid, "VmRSS:");
  expect(accepted.groups >= 1 && accepted.groups <= placementd::kDefaultMaxGroups,
         "the daemon placed " + std::to_string(accepted.groups) +
             " groups; [policy] max_groups is 256");

  // The job trains: every step runs under the placement in force, its time from the simulator
  // (a placement that does not fit fails, as a step out of memory would), and the daemon's pushes
  // are applied between steps. A directive's latency: from the report that caused it to its
  // arrival.
  std::vector<double> latency_ms;
  int directives = 0, failed_steps = 0;
  double step_s = 0;
  auto time_of = [&](const placement::Placement& p) {
    const auto r = simulator.simulate(p);
    return r.valid ? std::optional<double>(r.step_time_s) : std::nullopt;
  };
  std::optional<double> current = time_of(directive.placement);
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  for (int step = 0; step < steps; ++step) {
    placement::messages::StepReport m{directive.placement_id, static_cast<uint64_t>(step), 0,
                                      current.has_value(), ""};
    if (current)
      m.step_time_s = *current * noise(rng);
    else {
      m.error = "simulated out of memory";
      ++failed_steps;
    }
    step_s += m.step_time_s;
    const auto sent = Clock::now();
    client.send_oneway(MessageType::kStepReport, m.to_json());
    // A directive the report causes arrives while the next step runs; a job that finds none
    // ready goes on training. Here the next step waits a little, so latency is seen when it is
    // short.
    while (client.poll_readable(step == steps - 1 ? 0 : 20)) {
      placement::protocol::Header header;
      const json body = client.read_frame(&header);
      if (header.type != static_cast<uint16_t>(MessageType::kPlacementDirective)) continue;
      latency_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
      directive = msg::Directive::from_json(body, graph, devices);
      expect(directive.placement.device_of_op.size() == graph.ops.size(),
             "a directive does not place every op");
      current = time_of(directive.placement);
      ++directives;
    }
  }
  client.request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  const double explored_mib = status_mib(daemon.pid, "VmRSS:"),
               peak_mib = status_mib(daemon.pid, "VmHWM:");
  expect(daemon.alive(), "the daemon died");
  expect(directives > 0, "no directive after the first in " + std::to_string(steps) + " steps");

  // Offline: placementctl optimize with its defaults on the same graph, as a user would run it.
  const auto optimize_start = Clock::now();
  const auto optimized = placement::testing::run_command(
      {placement::testing::placementctl_bin(), "optimize", "--graph", graph_file, "--devices",
       TOPOLOGY_DIR "/4xh100_cpu_pcie5.toml", "--plugin-dir", placement::testing::plugin_dir(),
       "--budget", std::to_string(budget), "--progress", "off"});
  const double optimize_s = seconds_since(optimize_start);
  expect(optimized.exit_code == 0, "placementctl optimize failed: " + optimized.err);

  std::printf("%-58s %10s\n", "", "figure");
  std::printf("%-58s %10.2f s   (encode %.2f s, accepted after %.2f s; target <= 10 s)\n",
              "first directive, from the start of the upload", first_s, encode_s, accepted_s);
  std::printf("%-58s %10d\n", "groups the placer is given", static_cast<int>(accepted.groups));
  std::printf("%-58s %10.0f MiB (idle %.0f MiB)\n", "daemon RSS with the graph attached",
              attached_mib, idle_mib);
  std::printf("%-58s %10.0f MiB\n", "daemon RSS after the steps", explored_mib);
  std::printf("%-58s %10.0f MiB (target <= 1024 MiB)\n", "daemon peak RSS (VmHWM)", peak_mib);
  const double estimate_mib =
      static_cast<double>(placementd::estimate_session_bytes(
          {graph.ops.size(), graph.edges.size()}, nlohmann::json::to_cbor(upload_body).size(),
          placementd::kDefaultMaxGroups)) /
      (1 << 20);
  std::printf("%-58s %10.0f MiB (estimated %.0f MiB: [limits] max_session_bytes)\n",
              "the session's peak over idle", peak_mib - idle_mib, estimate_mib);
  std::printf("%-58s %10d (%d failed steps, %.0f s of simulated training)\n",
              "directives pushed in the steps", directives, failed_steps, step_s);
  std::printf("%-58s %7.0f/%.0f ms\n", "report -> directive latency p50/p99 (seen within 20 ms)",
              percentile(latency_ms, 0.5), percentile(latency_ms, 0.99));
  std::printf("%-58s %10.2f s   (--budget %d; target <= 30 s)\n", "placementctl optimize wall time",
              optimize_s, budget);
  if (check && failures) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cl = examples::command_line;
  CLI::App app{
      "Attaches a large unrolled recurrent graph to a real placementd and runs placementctl "
      "optimize on it "
      "(issue #18's graph-size figures).",
      "large_graph_bench"};
  int ops = 80000, steps = 400, budget = 500;
  bool check = false;
  app.add_option("--ops", ops, "ops in the graph (a multiple of 4)")
      ->check(cl::at_least(8))
      ->capture_default_str();
  app.add_option("--steps", steps, "training steps the job reports")
      ->check(cl::at_least(1))
      ->capture_default_str();
  app.add_option("--budget", budget, "placementctl optimize --budget")
      ->check(cl::at_least(1))
      ->capture_default_str();
  app.add_flag("--check", check, "exit 1 when a functional check fails (never on a time)");
  return cl::run(app, argc, argv, [&] { return run(ops, steps, budget, check); });
}
