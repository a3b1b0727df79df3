// Control-plane figures against a real placementd process on a temporary socket:
//   - request/response round trip (status) p50/p99, with 1 and with 64 attached jobs
//   - one-way step reports/s, 1 job and 64 jobs sending at once
//   - daemon RSS with 64 jobs attached
// Targets (issue #2): p99 <= 100 us, >= 50k reports/s, RSS <= 200 MiB.
//
//   control_plane_bench [--round-trips N] [--reports N]   (defaults 5000 and 200000; --help)

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_daemon.h"
#include "command_line.h"
#include "placement/serialization.h"

using placement::Client;
using placement::protocol::MessageType;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long value = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> value;
      return value;
    }
    in.ignore(4096, '\n');
  }
  return -1;
}

// A job's connection: attached, graph uploaded, first placement received.
uint64_t attach(Client& c, const placement::OpGraph& graph, const std::string& name) {
  const auto devices =
      placement::DeviceSet::uniform({{placement::DeviceKind::kCpu, 0, 1ull << 32, 1.0, {}},
                                     {placement::DeviceKind::kCpu, 1, 1ull << 32, 1.0, {}}},
                                    1e10, 1e-5);
  namespace msg = placement::messages;
  msg::Attach a;
  a.job = name;
  a.devices = devices;
  c.request(a.kType, a.to_json(), msg::Attached::kType);
  const msg::GraphUpload upload{graph, std::nullopt};
  c.request(upload.kType, upload.to_json(devices), msg::GraphAccepted::kType);
  return msg::Directive::from_json(
             c.request(msg::PlacementRequest::kType, msg::PlacementRequest{}.to_json(),
                       msg::Directive::kType),
             graph, devices)
      .placement_id;
}

std::vector<double> round_trips(Client& c, int n) {
  std::vector<double> us;
  us.reserve(n);
  for (int i = 0; i < n + 200; ++i) {
    const auto t0 = Clock::now();
    c.request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
    if (i >= 200)
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return us;
}

// Sends `n` reports one-way, then one request: its reply comes after the daemon read every report.
double send_reports(Client& c, uint64_t placement_id, int n, uint64_t* dropped) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i)
    if (!c.send_oneway(
            MessageType::kStepReport,
            placement::messages::StepReport{placement_id, static_cast<uint64_t>(i), 0.01, true, ""}
                .to_json(),
            64u << 20))
      ++*dropped;
  c.request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Every client's send and receive timeout: under a parallel test run the daemon can leave a report
// storm's socket full for over the SDK's default 5 s (docs.command_lines once failed so). A stall
// shorter than this is measured as latency rather than failing the run.
constexpr int kClientTimeoutMs = 30000;

// Prints the table: `trips` status round trips per measure, `reports` one-way reports per storm.
int measure(int trips, int reports) {
  // The daemon's default frame timeout: 64 senders on two cores stall mid-frame.
  placement::bench::BenchDaemon daemon;
  const placement::OpGraph graph =
      placement::load_graph_file(placement::bench::example_graph_path());
  std::printf("placementd control plane, %u cores, graph %s (%zu ops)\n",
              std::thread::hardware_concurrency(), graph.name.c_str(), graph.ops.size());
  std::printf("%-44s %12s %12s\n", "measure", "1 job", "64 jobs");

  Client probe = daemon.client(kClientTimeoutMs);
  Client first = daemon.client(kClientTimeoutMs);
  const uint64_t first_id = attach(first, graph, "bench-0");
  const auto rt1 = round_trips(probe, trips);
  uint64_t dropped = 0;
  const double t1 = send_reports(first, first_id, reports, &dropped);

  std::vector<std::unique_ptr<Client>> jobs;
  std::vector<uint64_t> ids;
  for (int j = 1; j < 64; ++j) {
    jobs.push_back(std::make_unique<Client>(
        placement::ClientOptions{daemon.socket, "bench", kClientTimeoutMs}));
    ids.push_back(attach(*jobs.back(), graph, "bench-" + std::to_string(j)));
  }
  const long rss64_idle = rss_kib(daemon.pid);
  const auto rt64 = round_trips(probe, trips);
  // 64 jobs report at once; each sends reports/64.
  std::atomic<uint64_t> dropped64{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int j = 0; j < 64; ++j)
    threads.emplace_back([&, j] {
      uint64_t d = 0;
      if (j == 0)
        send_reports(first, first_id, reports / 64, &d);
      else
        send_reports(*jobs[j - 1], ids[j - 1], reports / 64, &d);
      dropped64 += d;
    });
  for (auto& t : threads) t.join();
  const double t64 = std::chrono::duration<double>(Clock::now() - t0).count();
  const long rss64 = rss_kib(daemon.pid);

  std::printf("%-44s %12.1f %12.1f\n", "status round trip p50 (us)", percentile(rt1, 0.5),
              percentile(rt64, 0.5));
  std::printf("%-44s %12.1f %12.1f\n", "status round trip p99 (us)", percentile(rt1, 0.99),
              percentile(rt64, 0.99));
  std::printf("%-44s %12.0f %12.0f\n", "step reports/s (one-way, received)", reports / t1,
              (reports / 64 * 64) / t64);
  std::printf("%-44s %12llu %12llu\n", "reports dropped by the client (queue full)",
              static_cast<unsigned long long>(dropped),
              static_cast<unsigned long long>(dropped64.load()));
  std::printf("%-44s %12s %12.1f\n", "daemon RSS, 64 jobs attached (MiB)", "-",
              rss64_idle / 1024.0);
  std::printf("%-44s %12s %12.1f\n", "daemon RSS after the report storm (MiB)", "-",
              rss64 / 1024.0);
  const json status =
      probe.request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  std::printf("daemon counted %llu reports\n",
              static_cast<unsigned long long>(status["reports_received"].get<uint64_t>()));
  return daemon.stop() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "placementd control-plane figures against a placementd of this build on a temporary socket: "
      "status "
      "round-trip p50/p99, one-way step reports/s and daemon RSS, with 1 and with 64 attached "
      "jobs.",
      "control_plane_bench"};
  int trips = 5000, reports = 200000;
  app.add_option("--round-trips", trips, "status round trips timed per measure (after 200 warm-up)")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  // At least one report per job in the 64-job storm, which splits them evenly.
  app.add_option("--reports", reports,
                 "step reports sent one-way by 1 job, then by 64 jobs at once (N/64 each)")
      ->capture_default_str()
      ->check(examples::command_line::at_least(64));
  return examples::command_line::run(app, argc, argv, [&] { return measure(trips, reports); });
}
