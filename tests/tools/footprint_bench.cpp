// Issue #18's footprint figure: how much of a CPU-bound job's speed an exploring placementd takes
// when both share the cores. The "job" is this process's arithmetic threads, one per core, counting
// the work they finish per window; a daemon with policy_threads jobs attached explores as fast as
// those jobs report (their steps are 10 ms of sleep, so they take no CPU themselves). Windows
// alternate between the daemon exploring and idle (its jobs stop reporting), in the order
// B I | I B | B I ..., so drift in the machine hits both; each pair gives a log ratio of the job's
// work, and the signed-rank test's Hodges-Lehmann estimate and 95% interval say what the daemon
// costs. Run for the shipped policy_nice (19) and, side by side, for 0.
// Target: a CPU-bound job loses <= 2% of its speed to the daemon while it explores.
//
//   footprint_bench [--pairs N] [--window-ms N] [--ops N]

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "../../examples/common/command_line.h"
#include "attach_flow.h"
#include "daemon_process.h"
#include "live/trial.h"
#include "placement/client.h"
#include "placement/serialization.h"
#include "process_stats.h"
#include "test_graphs.h"

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using placement::protocol::MessageType;
using placement::testing::cpu_seconds;

namespace {

struct Result {
  double estimate = 0, low = 0, high = 0, daemon_cores = 0;
};

Result measure(int nice, int pairs, int window_ms, int ops) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  placement::testing::DaemonOptions options;
  options.log_level = std::getenv("FOOTPRINT_LOG") ? "info" : "warn";
  options.frame_timeout_ms = 0;
  options.daemon_keys = "policy_threads = " + std::to_string(cores) +
                        "\npolicy_nice = " + std::to_string(nice) + "\n";
  // Exploration that never pauses or ends, with the shortest trials: every few steps a new
  // candidate, sampled and learned from.
  options.extra =
      "[exploration]\nsteps_per_candidate = 3\nwarmup_steps = 1\nmax_candidates = "
      "10000000\nconverge_candidates = 0\n"
      "max_overhead_fraction = 1.0\ntrial_window_steps = 1\nmax_trial_steps = 16\n";
  placement::testing::DaemonProcess daemon(options);
  daemon.start();

  // One exploring job per policy thread.
  const placement::OpGraph graph = placement::testing::unrolled_stack(ops);
  const placement::DeviceSet devices =
      placement::testing::devices(4, placement::DeviceKind::kCpu, 64ull << 30);
  std::atomic<bool> exploring{false}, done{false};
  std::vector<std::thread> jobs;
  for (int j = 0; j < cores; ++j)
    jobs.emplace_back([&, j] {
      placement::Client c = daemon.client(60000);
      uint64_t id =
          placement::testing::attach_and_place(c, "explorer-" + std::to_string(j), graph, devices)
              .placement_id;
      for (uint64_t step = 0; !done; ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (!exploring) continue;
        // Step times that differ by placement, so the policy has something to learn.
        c.send_oneway(MessageType::kStepReport,
                      placement::messages::StepReport{
                          id, step, 0.01 + 0.001 * static_cast<double>(id % 7), true, ""}
                          .to_json());
        while (c.poll_readable(0)) {
          placement::protocol::Header header;
          const json body = c.read_frame(&header);
          if (header.type == static_cast<uint16_t>(MessageType::kPlacementDirective))
            id = body.at("placement_id").get<uint64_t>();
        }
      }
    });

  // The CPU-bound job: one thread per core, counting finished chunks of arithmetic.
  std::atomic<uint64_t> work{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < cores; ++w)
    workers.emplace_back([&] {
      double x = 1.0;
      while (!done) {
        for (int i = 0; i < 20000; ++i) x = std::sqrt(x + static_cast<double>(i));
        work.fetch_add(x > 0 ? 1 : 2, std::memory_order_relaxed);
      }
    });

  auto window = [&](bool busy, double* daemon_cpu) {
    exploring = busy;
    std::this_thread::sleep_for(std::chrono::milliseconds(window_ms / 5));  // the switch settles
    const uint64_t w0 = work.load();
    const double c0 = cpu_seconds(daemon.pid);
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(window_ms));
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    *daemon_cpu += cpu_seconds(daemon.pid) - c0;
    return static_cast<double>(work.load() - w0) / seconds;
  };
  std::vector<double> log_ratios;
  double busy_cpu = 0, idle_cpu = 0, busy_time = 0;
  for (int p = 0; p < pairs; ++p) {
    double busy = 0, idle = 0;
    if (p % 2 == 0) {
      busy = window(true, &busy_cpu);
      idle = window(false, &idle_cpu);
    } else {
      idle = window(false, &idle_cpu);
      busy = window(true, &busy_cpu);
    }
    busy_time += window_ms / 1000.0;
    log_ratios.push_back(std::log(busy / idle));
  }
  done = true;
  for (auto& t : workers) t.join();
  for (auto& t : jobs) t.join();
  if (std::getenv("FOOTPRINT_LOG")) std::fputs(daemon.log().c_str(), stderr);

  Result r;
  r.daemon_cores = busy_cpu / busy_time;
  if (const auto interval = placementd::signed_rank_interval(log_ratios, 0.025)) {
    r.estimate = std::exp(interval->estimate) - 1.0;
    r.low = std::exp(interval->low) - 1.0;
    r.high = std::exp(interval->high) - 1.0;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cl = examples::command_line;
  CLI::App app{
      "How much of a CPU-bound job's speed an exploring placementd takes on the same cores (issue "
      "#18).",
      "footprint_bench"};
  int pairs = 20, window_ms = 1000, ops = 2000;
  app.add_option("--pairs", pairs, "window pairs per setting (at least 6 for a 95% interval)")
      ->check(cl::at_least(6))
      ->capture_default_str();
  app.add_option("--window-ms", window_ms, "length of each window")
      ->check(cl::at_least(50))
      ->capture_default_str();
  app.add_option("--ops", ops, "ops in each exploring job's graph")
      ->check(cl::at_least(8))
      ->capture_default_str();
  return cl::run(app, argc, argv, [&] {
    std::printf(
        "%u cores: as many arithmetic threads (the job) and as many exploring jobs of %d ops; %d "
        "pairs of "
        "%d ms windows\n\n",
        std::thread::hardware_concurrency(), ops, pairs, window_ms);
    std::printf("%-22s %14s %24s %22s\n", "policy_nice", "job's speed", "95% interval",
                "daemon CPU exploring");
    for (int nice : {19, 0}) {
      const Result r = measure(nice, pairs, window_ms, ops);
      std::printf("%-22d %+13.2f%% %+11.2f%% to %+6.2f%% %16.2f cores\n", nice, 100 * r.estimate,
                  100 * r.low, 100 * r.high, r.daemon_cores);
    }
    return 0;
  });
}
