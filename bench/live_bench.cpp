// Live placement costs, measured side by side in one run:
//  1. per-step SDK overhead when nothing changes: the same training step through PlacedModule
//     directly, through Job::step without a daemon, and through Job::step attached to a real
//     placementd that has settled on its best placement (reports sent, directives polled).
//     Rounds alternate between the three so machine noise hits all alike. Target (issue #5): <= 50
//     µs.
//  2. migration throughput: PlacedModule::set_placement moving every parameter between two logical
//     devices, against copying the same bytes into a buffer that exists (the "link" on one host
//     is memcpy; migration also allocates its destination).
//     Target: >= 80% of the copy bandwidth.
//
//     With --devices A,B (e.g. cpu,cuda:0 on the GPU machine) migration runs between those two and
//     the copy goes from a buffer on A (pinned, when A is the host) into one on B, so the link is
//     the real one. The first move to the GPU stages the job's pageable parameters; after that
//     they come back into pinned memory and move in one DMA.
//
//   live_bench [MODEL_DIR] [--devices A,B]   (default: traces the small test models; cpu:0,cpu:1)
//   (every option: live_bench --help; docs/benchmarks.md)

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <CLI/CLI.hpp>

#include "bench_daemon.h"
#include "bench_util.h"
#include "command_line.h"
#include "placement/capture.h"
#include "placement/job.h"

using Clock = std::chrono::steady_clock;
using placement::bench::median;

namespace {

using Model = placement::bench::TracedModel;
using placement::bench::load_traced_model;

at::Tensor loss_of(const std::vector<c10::IValue>& out) {
  return out.at(0).toTensor().pow(2).mean();
}

double seconds(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void overhead(const std::string& dir, const std::string& name, const std::string& socket) {
  Model direct_model = load_traced_model(dir, name), plain_model = load_traced_model(dir, name),
        live_model = load_traced_model(dir, name);
  const placement::DeviceSet devices = placement::job_devices({}, 0);
  placement::PlacedModule direct(
      direct_model.module, placement::capture(direct_model.module, direct_model.inputs), devices);
  placement::JobOptions alone;
  alone.use_daemon = false;
  placement::Job plain(name, plain_model.module, plain_model.inputs, alone);
  placement::JobOptions attached;
  attached.socket_path = socket;
  placement::Job live(name, live_model.module, live_model.inputs, attached);
  torch::optim::Adam o1(direct.parameters()), o2(plain.parameters()), o3(live.parameters());
  const std::vector<c10::IValue> inputs(direct_model.inputs.begin(), direct_model.inputs.end());
  auto direct_step = [&] {
    loss_of(direct.forward(inputs)).backward();
    o1.step();
    o1.zero_grad();
  };
  // Let the daemon measure the start placement and settle (max_candidates = 1 in its config).
  for (int i = 0; i < 200 || live.stats().state != "exploiting"; ++i) {
    live.step(inputs, loss_of, o3);
    if (i > 20000)
      throw std::runtime_error("placementd never settled: state " + live.stats().state);
  }
  std::vector<double> t_direct, t_plain, t_live;
  for (int round = 0; round < 30; ++round)
    for (int which = 0; which < 3; ++which) {
      std::vector<double> times;
      for (int i = 0; i < 50; ++i) {
        const auto t = Clock::now();
        if (which == 0)
          direct_step();
        else if (which == 1)
          plain.step(inputs, loss_of, o2);
        else
          live.step(inputs, loss_of, o3);
        times.push_back(seconds(t));
      }
      (which == 0 ? t_direct : which == 1 ? t_plain : t_live).push_back(median(times));
    }
  const double d = median(t_direct), p = median(t_plain), l = median(t_live);
  std::printf("%-12s %10.1f %10.1f %10.1f %14.1f %14.1f   (%llu reports sent, %s)\n", name.c_str(),
              d * 1e6, p * 1e6, l * 1e6, (p - d) * 1e6, (l - d) * 1e6,
              static_cast<unsigned long long>(live.daemon().reports_sent),
              live.daemon().connected ? "attached" : "NOT attached");
  live.detach();
}

void migration(const std::string& dir, const std::string& name,
               const std::vector<std::string>& devices) {
  Model m = load_traced_model(dir, name);
  const placement::OpGraph graph = placement::capture(m.module, m.inputs);
  // Memory only matters to placementd's memory model, which this does not consult.
  placement::PlacedModule placed(m.module, graph, placement::job_devices(devices, 1ull << 30));
  const bool cuda = placed.physical_device(0).is_cuda() || placed.physical_device(1).is_cuda();
  const placement::Placement on0 = placement::Placement::single(graph, 0),
                             on1 = placement::Placement::single(graph, 1);
  uint64_t bytes = 0;
  for (const at::Tensor& p : placed.parameters())
    bytes += static_cast<uint64_t>(p.numel()) * p.element_size();
  std::vector<double> migrate_bw, copy_bw;
  at::Tensor block = at::empty({static_cast<int64_t>(bytes)},
                               at::TensorOptions(placed.physical_device(0)).dtype(at::kByte))
                         .fill_(1);
  // The link's bandwidth between a host and a GPU is a DMA from pinned memory.
  if (cuda && !placed.physical_device(0).is_cuda()) block = block.pin_memory();
  at::Tensor target = at::zeros({static_cast<int64_t>(bytes)},
                                at::TensorOptions(placed.physical_device(1)).dtype(at::kByte));
  auto sync = [cuda] {
    if (cuda) torch::cuda::synchronize();
  };
  for (int round = 0; round < 20; ++round) {
    sync();
    auto t = Clock::now();
    const placement::MigrationStats s = placed.set_placement(round % 2 == 0 ? on1 : on0);
    sync();
    migrate_bw.push_back(s.bytes / seconds(t));
    t = Clock::now();
    target.copy_(block);
    sync();
    copy_bw.push_back(bytes / seconds(t));
  }
  const double mb = median(migrate_bw), cb = median(copy_bw);
  std::printf("%-12s %10.1f %14.2f %14.2f %8.0f%%\n", name.c_str(), bytes / 1e6, mb / 1e9, cb / 1e9,
              100 * mb / cb);
}

// Both tables: SDK overhead on the models in `dir` (traced into a new directory when empty), then
// migration between `devices`.
int run_tables(std::string dir, const std::vector<std::string>& devices) {
  if (dir.empty()) dir = placement::bench::trace_models(SOURCE_DIR, "live_bench");
  placement::bench::BenchDaemon daemon("[exploration]\nmax_candidates = 1\n");
  std::printf("per-step time, median µs (30 alternating rounds of 50 steps)\n");
  std::printf("%-12s %10s %10s %10s %14s %14s\n", "model", "engine", "job alone", "job live",
              "SDK overhead", "with daemon");
  for (const char* name : {"mlp", "two_tower", "gnmt_small"}) overhead(dir, name, daemon.socket);
  std::printf("\nmigration %s -> %s and back (all parameters), median of 20\n", devices[0].c_str(),
              devices[1].c_str());
  std::printf("%-12s %10s %14s %14s %9s\n", "model", "MB", "migrate GB/s", "copy GB/s", "ratio");
  for (const char* name : {"two_tower", "gnmt_example", "resnet18", "bert_small"})
    migration(dir, name, devices);
  return 0;
}

// Accepts "A,B": two device names placement::parse_device_name accepts.
CLI::Validator two_devices() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::vector<std::string> names = CLI::detail::split(text, ',');
        if (names.size() != 2) return "takes two devices, e.g. cpu,cuda:0, not '" + text + "'";
        for (std::string name : names)
          if (std::string error = examples::command_line::device_name()(name); !error.empty())
            return error;
        return "";
      },
      "");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Live placement costs: per-step SDK overhead with and without a placementd of this build, "
      "and "
      "migration throughput between two devices against a plain copy.",
      "live_bench"};
  std::string dir;
  std::string devices = "cpu:0,cpu:1";
  app.add_option("MODEL_DIR", dir,
                 "models as tests/models/make_models.py writes them (default: the small test "
                 "models, traced into a "
                 "new directory under /tmp)")
      ->check(CLI::ExistingDirectory);
  // One argument, A,B: a second word after it stays MODEL_DIR, as `live_bench --devices A,B DIR`
  // has it.
  app.add_option("--devices", devices, "the two devices migration moves between, e.g. cpu,cuda:0")
      ->capture_default_str()
      ->check(two_devices());
  return examples::command_line::run(
      app, argc, argv, [&] { return run_tables(dir, CLI::detail::split(devices, ',')); });
}
