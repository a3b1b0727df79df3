// placementctl against a real daemon: tables for people, JSON for scripts, exit codes for both.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "placement/serialization.h"
#include "test_graphs.h"

namespace placement::testing {
namespace {

using nlohmann::json;

TEST(Placementctl, StatusJobsAndPlugins) {
  DaemonProcess daemon;
  daemon.start();
  Child job({hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "mlp",
             "--reports", "12", "--step-time", "0.25"});
  ASSERT_TRUE(job.wait_for_output("ready")) << job.err();
  const std::string ctl = placementctl_bin();

  const CommandResult status = run_command({ctl, "--socket", daemon.socket, "--json", "status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const json s = json::parse(status.out);
  EXPECT_EQ(s["jobs_visible"].get<int>(), 1);
  EXPECT_EQ(s["reports_received"].get<int>(), 12);
  EXPECT_EQ(s["plugins"]["grouper"].get<size_t>() + s["plugins"]["placer"].get<size_t>() +
                s["plugins"]["algorithm"].get<size_t>(),
            built_plugin_count());

  // The server counts a report when it arrives and the job's session takes it in turn: under a
  // sanitizer the session may still be a few reports behind.
  json j;
  for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);;) {
    const CommandResult jobs = run_command({ctl, "--socket", daemon.socket, "--json", "jobs"});
    ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
    j = json::parse(jobs.out).at(0);
    if (j["steps"] == 12 || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const char* key : {"name", "state", "steps", "candidates_tried", "start_step_time_s",
                          "best_step_time_s", "exploration_overhead"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["name"], "mlp");
  EXPECT_EQ(j["steps"].get<int>(), 12);
  EXPECT_DOUBLE_EQ(j["best_step_time_s"].get<double>(), 0.25);

  const CommandResult table = run_command({ctl, "--socket", daemon.socket, "jobs"});
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_EQ(table.out.rfind("ID  NAME", 0), 0u) << table.out;
  EXPECT_NE(table.out.find("250.00 ms"), std::string::npos) << table.out;

  const CommandResult show = run_command({ctl, "--socket", daemon.socket, "jobs", "show", "1"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("cpu:0=20 cpu:1=0"), std::string::npos) << show.out;
  // The best is the placement in force (the start, still being profiled), each with its interval.
  EXPECT_NE(show.out.find("250.00 ms ± 0.0 us / 250.00 ms ± 0.0 us (1.00x)"), std::string::npos)
      << show.out;

  // Global options after the subcommand, as the README writes them (and systemctl takes them).
  const CommandResult after =
      run_command({ctl, "jobs", "--json", "--socket", daemon.socket, "--timeout-ms", "3000"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(json::parse(after.out).at(0)["name"], "mlp");
  const CommandResult show_json =
      run_command({ctl, "jobs", "show", "1", "--socket", daemon.socket, "--json"});
  ASSERT_EQ(show_json.exit_code, 0) << show_json.err;
  EXPECT_EQ(json::parse(show_json.out)["candidates"].size(), j["candidates_tried"].get<size_t>())
      << show_json.out;

  const CommandResult plugins = run_command({ctl, "--socket", daemon.socket, "plugins"});
  ASSERT_EQ(plugins.exit_code, 0);
  for (const char* name : {"colocation", "single_device", "reinforce", "learning_rate=0.1"})
    EXPECT_NE(plugins.out.find(name), std::string::npos) << name;
  const json pj =
      json::parse(run_command({ctl, "--socket", daemon.socket, "--json", "plugins"}).out);
  EXPECT_EQ(pj["plugins"].size(), built_plugin_count());
  EXPECT_EQ(json::parse(run_command({ctl, "plugins", "--json", "--socket", daemon.socket}).out),
            pj);
  job.signal(SIGTERM);
  EXPECT_EQ(job.wait(), 0);
}

TEST(Placementctl, NoDaemonIsAClearErrorWithItsOwnExitCode) {
  const CommandResult r =
      run_command({placementctl_bin(), "--socket", "/tmp/nonexistent-placementd.sock", "status"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("cannot connect to placementd at /tmp/nonexistent-placementd.sock"),
            std::string::npos)
      << r.err;
}

TEST(Placementctl, ConfigCheckOfflineAndPlacementdCheckConfigAgree) {
  // The shipped config names the LibTorch plugins.
  if (!learned_plugins_built()) GTEST_SKIP() << "built without LibTorch";
  DaemonProcess paths;  // only for its temp dir and plugin list
  const std::string bad = paths.dir + "/bad.toml";
  std::ofstream(bad)
      << paths.base_config()
      << "[exploration]\nwarmup_steps = -1\n[params.algorithm.reinforce]\nclip_norm = \"x\"\n";
  const CommandResult ctl = run_command({placementctl_bin(), "config", "check", bad});
  EXPECT_EQ(ctl.exit_code, 1);
  const CommandResult daemon = run_command({placementd_bin(), "--check-config", bad});
  EXPECT_EQ(daemon.exit_code, 1);
  EXPECT_EQ(ctl.err, daemon.err);
  EXPECT_NE(ctl.err.find(bad + ":13:16: exploration.warmup_steps must be in [0, 100000], got -1"),
            std::string::npos)
      << ctl.err;
  EXPECT_NE(
      ctl.err.find(
          bad + ":15:13: params.algorithm.reinforce.clip_norm: expected float, got string \"x\""),
      std::string::npos)
      << ctl.err;
  const CommandResult good =
      run_command({placementctl_bin(), "--json", "config", "check", paths.config_path});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_TRUE(json::parse(good.out)["ok"].get<bool>());
  EXPECT_EQ(run_command({placementd_bin(), "--check-config", SHIPPED_CONFIG_FOR_CHECK}).exit_code,
            0);
}

}  // namespace
}  // namespace placement::testing

namespace placement::testing {
namespace {

TEST(Placementd, VersionNamesTheBuildFeatures) {
  const CommandResult r = run_command({placementd_bin(), "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("placementd 0.1.0 (systemd=", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" cuda="), std::string::npos);
  EXPECT_NE(r.out.find(" nccl="), std::string::npos);
}

}  // namespace
}  // namespace placement::testing

namespace placement::testing {
namespace {

TEST(Placementctl, SimulateReportsStepTimeMemoryAndTheBound) {
  DaemonProcess paths;  // only for its temp dir
  OpGraph g = two_chains(3);
  for (auto& op : g.ops) op.profile["cuda"] = {0.001, 0.002, 0.0, 4096};
  write_json_file(paths.dir + "/g.json", to_json(g));
  std::ofstream(paths.dir + "/topo.toml") << "[defaults]\nbandwidth_gbs = 10\n"
                                             "[[device]]\nname = \"cuda:0\"\nmemory_gib = 1\n"
                                             "[[device]]\nname = \"cuda:1\"\nmemory_gib = 1\n";
  Placement split = Placement::single(g, 0);
  for (int i = 3; i < 6; ++i) split.device_of_op[i] = 1;
  const DeviceSet d = devices(2, DeviceKind::kCuda);
  write_json_file(paths.dir + "/p.json", to_json(split, d));
  const CommandResult r =
      run_command({placementctl_bin(), "--json", "simulate", "--graph", paths.dir + "/g.json",
                   "--devices", paths.dir + "/topo.toml", "--placement", paths.dir + "/p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_NEAR(out["lower_bound_s"].get<double>(), 4 * 0.003, 1e-12);
  const json& p = out["placements"][0];
  EXPECT_TRUE(p["valid"].get<bool>());
  EXPECT_GT(p["step_time_s"].get<double>(), 4 * 0.003);
  EXPECT_LT(p["step_time_s"].get<double>(), 7 * 0.003);  // the chains overlap
  EXPECT_EQ(p["devices"].size(), 2u);

  const CommandResult all =
      run_command({placementctl_bin(), "simulate", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/topo.toml"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("all on cuda:0"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("all on cuda:1"), std::string::npos);

  std::ofstream(paths.dir + "/bad.toml") << "[[device]]\nname = \"cpu:0\"\n";  // no memory
  const CommandResult bad =
      run_command({placementctl_bin(), "simulate", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/bad.toml"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(paths.dir + "/bad.toml:1:1: device cpu:0 has no memory_gib"),
            std::string::npos)
      << bad.err;
}

// A placement with a residence: simulate shows, per device, what it keeps where (parameters homed
// on the host, their copies beside the GPU's ops, activations offloaded), and says that its
// figures do not model residence yet.
TEST(Placementctl, SimulateShowsWhereAResidenceKeepsTensorsAndThatItIsNotModelled) {
  DaemonProcess paths;  // only for its temp dir
  OpGraph g = two_chains(3);
  for (auto& op : g.ops) {
    op.profile["cuda"] = {0.001, 0.002, 0.0, 4096};
    op.profile["cpu"] = {0.004, 0.008, 0.0, 4096};
  }
  g.ops[0].parameter_bytes = 1 << 20;
  g.ops[3].parameter_bytes = 2 << 20;
  g.parameters = {{"tower0.layer.0.weight", 1 << 20, {0}}, {"tower1.layer.0.weight", 2 << 20, {3}}};
  write_json_file(paths.dir + "/g.json", to_json(g));
  std::ofstream(paths.dir + "/topo.toml") << "[defaults]\nbandwidth_gbs = 10\n"
                                             "[[device]]\nname = \"cuda:0\"\nmemory_gib = 1\n"
                                             "[[device]]\nname = \"cpu:0\"\nmemory_gib = 4\n";
  const DeviceSet d = DeviceSet::uniform(
      {{DeviceKind::kCuda, 0, 1ull << 30, 1.0}, {DeviceKind::kCpu, 0, 4ull << 30, 1.0}}, 10e9,
      1e-5);
  Placement homed = Placement::single(g, 0);
  homed.residence.parameters = {{1, Fetch::kStream}, {1, Fetch::kPersist}};
  homed.residence.activations.resize(g.ops.size());
  homed.residence.activations[0] = {ActivationPolicy::kOffload, 1};
  homed.residence.activations[1] = {ActivationPolicy::kRecompute, -1};
  write_json_file(paths.dir + "/p.json", to_json(homed, d));
  const CommandResult r =
      run_command({placementctl_bin(), "--json", "simulate", "--graph", paths.dir + "/g.json",
                   "--devices", paths.dir + "/topo.toml", "--placement", paths.dir + "/p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json residence = json::parse(r.out)["placements"][0].at("residence");
  EXPECT_FALSE(residence["modelled"].get<bool>());
  const json& gpu = residence["devices"][0];
  const json& host = residence["devices"][1];
  EXPECT_EQ(gpu["name"], "cuda:0");
  EXPECT_EQ(gpu["parameters_homed_bytes"], 0);
  EXPECT_EQ(gpu["streamed_bytes"], 1 << 20);
  EXPECT_EQ(gpu["persistent_copy_bytes"], 2 << 20);
  EXPECT_EQ(gpu["activation_bytes_offloaded_or_recomputed"], 2 * 4096);
  EXPECT_EQ(host["parameters_homed_bytes"], 3 << 20);
  EXPECT_EQ(host["activation_bytes_offloaded_here"], 4096);
  EXPECT_EQ(host["streamed_bytes"], 0);

  const CommandResult table =
      run_command({placementctl_bin(), "simulate", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/topo.toml", "--placement", paths.dir + "/p.json"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("has a residence, which the simulator does not model yet"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("cpu:0: 3.0 MiB of parameters homed"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("cuda:0: 2.0 MiB of persistent copies, 1.0 MiB streamed in"),
            std::string::npos)
      << table.out;
  // Without a residence, nothing of it is shown.
  write_json_file(paths.dir + "/plain.json", to_json(Placement::single(g, 0), d));
  const CommandResult plain = run_command(
      {placementctl_bin(), "--json", "simulate", "--graph", paths.dir + "/g.json", "--devices",
       paths.dir + "/topo.toml", "--placement", paths.dir + "/plain.json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(json::parse(plain.out)["placements"][0].contains("residence"));
}

// Data-parallel replicas on the shipped ResNet-50 (batch 64) and 4×H100 node, whose topology
// names a 50 GB/s link between nodes: the all-reduce of 98 MiB of gradients grows the step with
// the node count, overlapping it with backward hides part of it, and a topology without a node
// link is refused by name.
TEST(Placementctl, SimulateAndOptimizeWithReplicasChargeTheGradientAllReduce) {
  const std::string graph = std::string(GRAPH_DIR) + "/papers/resnet50_bs64.json.gz";
  const std::string topology = std::string(SOURCE_TOPOLOGY_DIR) + "/4xh100_nvlink.toml";
  const auto simulate = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {placementctl_bin(), "--json", "simulate", "--graph", graph,
                                     "--devices",        topology};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const CommandResult r = run_command(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const json out = json::parse(r.out);
    for (const json& p : out["placements"])
      if (p["name"] == "all on cuda:0") return p;
    ADD_FAILURE() << r.out;
    return json();
  };
  const json one = simulate({});
  const json two = simulate({"--replicas", "2"});
  const json eight = simulate({"--replicas", "8"});
  const json overlapped = simulate({"--replicas", "8", "--overlap"});
  EXPECT_EQ(one["allreduce_buckets"], 0);
  EXPECT_GE(eight["allreduce_buckets"].get<int>(), 4) << "about 98 MiB in 25 MiB buckets";
  EXPECT_LE(eight["allreduce_buckets"].get<int>(), 5);
  EXPECT_GT(eight["allreduce_bytes"].get<double>(), 90e6);
  // A ring: 2 (N − 1) messages a bucket, each 5 us and bytes ÷ N at 50 GB/s.
  const auto ring = [](const json& p, double n) {
    return 2 * (n - 1) *
           (p["allreduce_buckets"].get<double>() * 5e-6 +
            p["allreduce_bytes"].get<double>() / n / 50e9);
  };
  EXPECT_NEAR(two["allreduce_s"].get<double>(), ring(two, 2), 1e-9);
  EXPECT_NEAR(eight["allreduce_s"].get<double>(), ring(eight, 8), 1e-9);
  EXPECT_NEAR(eight["step_time_s"].get<double>() - one["step_time_s"].get<double>(),
              eight["allreduce_s"].get<double>(), 1e-9);
  EXPECT_LT(overlapped["allreduce_exposed_s"].get<double>(),
            0.5 * eight["allreduce_exposed_s"].get<double>());
  EXPECT_LT(overlapped["step_time_s"].get<double>(), eight["step_time_s"].get<double>());

  const CommandResult table = run_command(
      {placementctl_bin(), "simulate", "--graph", graph, "--devices", topology, "--replicas", "8"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("on 5 devices x 8 nodes (ring all-reduce over 50.0 GB/s, 25 MiB "
                           "buckets, after backward)"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("ALL-REDUCE (WAITED)"), std::string::npos) << table.out;

  if (!learned_plugins_built())
    GTEST_SKIP() << "built without LibTorch: no feedforward placer to optimize with";
  const CommandResult optimized =
      run_command({placementctl_bin(), "optimize", "--graph", graph, "--devices", topology,
                   "--replicas", "8", "--grouper", "none", "--placer", "feedforward", "--algorithm",
                   "reinforce", "--budget", "20", "--json"});
  ASSERT_EQ(optimized.exit_code, 0) << optimized.err;
  const json o = json::parse(optimized.out);
  EXPECT_EQ(o["replicas"], 8);
  EXPECT_GT(o["best_allreduce_s"].get<double>(), 0.0);
  EXPECT_GE(o["best_step_time_s"].get<double>(), o["lower_bound_s"].get<double>());

  const CommandResult no_link =
      run_command({placementctl_bin(), "simulate", "--graph", graph, "--devices",
                   std::string(SOURCE_TOPOLOGY_DIR) + "/1xh100_cpu.toml", "--replicas", "4"});
  EXPECT_EQ(no_link.exit_code, 1);
  EXPECT_NE(
      no_link.err.find("--replicas 4: " + std::string(SOURCE_TOPOLOGY_DIR) +
                       "/1xh100_cpu.toml has no link between nodes for the gradients' all-reduce"),
      std::string::npos)
      << no_link.err;
}

TEST(Placementctl, SimulateAndOptimizeRefuseAGraphWithoutProfilesOrWork) {
  DaemonProcess paths;  // only for its temp dir
  write_json_file(paths.dir + "/g.json", to_json(two_chains(3)));
  std::ofstream(paths.dir + "/topo.toml") << "[[device]]\nname = \"cuda:0\"\nmemory_gib = 1\n";
  for (const char* command : {"simulate", "optimize"}) {
    const CommandResult r =
        run_command({placementctl_bin(), command, "--graph", paths.dir + "/g.json", "--devices",
                     paths.dir + "/topo.toml"});
    EXPECT_EQ(r.exit_code, 1) << command << ": " << r.out;
    EXPECT_NE(r.err.find(paths.dir + "/g.json: no op has a profile or recorded work"),
              std::string::npos)
        << command << ": " << r.err;
    EXPECT_NE(r.err.find("capture it again with `placementctl capture MODEL.pt"), std::string::npos)
        << r.err;
  }
}

TEST(Placementctl, SimulateByKindSetsTheCostModelAgainstTheMeasuredProfiles) {
  DaemonProcess paths;  // only for its temp dir
  OpGraph g = two_chains(3);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    Op& op = g.ops[i];
    op.kind = i < 3 ? "aten::mm" : "aten::relu";
    OpWork w;
    w.math = i < 3 ? MathClass::kMatmul : MathClass::kVector;
    w.forward_flops = 1e9;  // 1 ms at 1 TFLOP/s
    w.backward_flops = 2e9;
    w.forward_kernels = w.backward_kernels = 0;
    op.work = w;
    op.profile["cuda"] = {i < 3 ? 0.002 : 0.001, 0.002, 0.0,
                          4096};  // measured: 2 ms and 1 ms forward
  }
  write_json_file(paths.dir + "/g.json", to_json(g));
  std::ofstream(paths.dir + "/topo.toml")
      << "[[device]]\nname = \"cuda:0\"\nmemory_gib = 1\nfp32_tflops = 1\n"
         "memory_bandwidth_gbs = 1000\ncompute_efficiency = 1\n";
  const CommandResult r =
      run_command({placementctl_bin(), "--json", "simulate", "--by-kind", "--graph",
                   paths.dir + "/g.json", "--devices", paths.dir + "/topo.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json kinds = json::parse(r.out).at("devices").at(0).at("kinds");
  ASSERT_EQ(kinds.size(), 3u);  // the two kinds, slower first, then all
  EXPECT_EQ(kinds[0]["kind"], "aten::mm");
  EXPECT_EQ(kinds[0]["ops"], 3);
  EXPECT_NEAR(kinds[0]["measured_forward_s"].get<double>(), 0.006, 1e-12);
  EXPECT_NEAR(kinds[0]["predicted_forward_s"].get<double>(), 0.003, 1e-12);
  const double relus = static_cast<double>(g.ops.size() - 3);
  EXPECT_EQ(kinds[1]["ops"].get<double>(), relus);
  EXPECT_NEAR(kinds[1]["measured_forward_s"].get<double>(), relus * 0.001, 1e-12);
  EXPECT_NEAR(kinds[2]["predicted_backward_s"].get<double>(), (3 + relus) * 0.002, 1e-12);
  EXPECT_EQ(kinds[2]["kind"], "all");
  const CommandResult table =
      run_command({placementctl_bin(), "simulate", "--by-kind", "--graph", paths.dir + "/g.json",
                   "--devices", paths.dir + "/topo.toml"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("-50.0%"), std::string::npos) << table.out;
  // A topology whose devices have no spec has nothing to compare.
  std::ofstream(paths.dir + "/bare.toml") << "[[device]]\nname = \"cuda:0\"\nmemory_gib = 1\n";
  const CommandResult bare =
      run_command({placementctl_bin(), "simulate", "--by-kind", "--graph", paths.dir + "/g.json",
                   "--devices", paths.dir + "/bare.toml"});
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_NE(bare.err.find(paths.dir + "/g.json: no op has a measured profile for a device of " +
                          paths.dir + "/bare.toml with a spec"),
            std::string::npos)
      << bare.err;
}

TEST(Placementctl, AGraphCapturedWithoutProfilesIsTimedByTheCostModel) {
  DaemonProcess paths;  // only for its temp dir
  // What capture records without --profile: work per op, no profile.
  placement::OpGraph g = two_chains(3);
  placement::testing::give_work(g, 4e9, 4e6, 1 << 20);
  write_json_file(paths.dir + "/g.json", to_json(g));
  std::ofstream(paths.dir + "/topo.toml") << "[defaults]\nbandwidth_gbs = 50\n"
                                             "[[device]]\nname = \"cpu:0\"\nmemory_gib = 64\n"
                                             "[[device]]\nname = \"cuda:0\"\nspec = \"h100-sxm\"\n";
  const CommandResult r =
      run_command({placementctl_bin(), "simulate", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/topo.toml", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto& placements = doc.at("placements");
  ASSERT_EQ(placements.size(), 2u);
  // cpu:0 has neither a profile nor a spec: it cannot be timed, and stderr says where to add one.
  EXPECT_FALSE(placements[0].at("timed").get<bool>());
  EXPECT_NE(r.err.find(paths.dir + "/topo.toml: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot be placed on cpu:0; "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cpu:0 has no spec"), std::string::npos) << r.err;
  const auto& gpu = placements[1];
  ASSERT_TRUE(gpu.at("timed").get<bool>());
  EXPECT_EQ(gpu.at("predicted_ops").get<size_t>(), doc.at("ops").get<size_t>());
  EXPECT_GT(gpu.at("step_time_s").get<double>(), 0.0);
  EXPECT_GE(gpu.at("step_time_s").get<double>(),
            doc.at("lower_bound_s").get<double>() * (1 - 1e-9));
  // TF32 matrix products make these compute-bound ops faster.
  const CommandResult tf32 =
      run_command({placementctl_bin(), "simulate", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/topo.toml", "--json", "--matmul-tf32"});
  ASSERT_EQ(tf32.exit_code, 0) << tf32.err;
  EXPECT_LT(nlohmann::json::parse(tf32.out).at("placements")[1].at("step_time_s").get<double>(),
            gpu.at("step_time_s").get<double>());
  // So does optimize: everything lands on the only device it can time.
  if (!learned_plugins_built())
    GTEST_SKIP() << "built without LibTorch: no feedforward placer to optimize with";
  const CommandResult opt = run_command(
      {placementctl_bin(), "optimize", "--graph", paths.dir + "/g.json", "--devices",
       paths.dir + "/topo.toml", "--budget", "8", "--json", "--plugin-dir", PLUGIN_DIR});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
}

// A model larger than all the devices together: simulate says so and has no bound; optimize refuses
// the graph, saying what it needs and what the devices hold.
TEST(Placementctl, AModelNoDevicesCanHoldTogetherIsRefusedWithTheFigures) {
  DaemonProcess paths;  // only for its temp dir
  OpGraph g = two_chains(3);
  for (auto& op : g.ops) {
    op.profile["cuda"] = {0.001, 0.002, 0.0, 4096};
    op.parameter_bytes = 1ull << 28;  // 1 GiB per op with gradients and Adam's states
  }
  write_json_file(paths.dir + "/g.json", to_json(g));
  std::ofstream(paths.dir + "/topo.toml")
      << "[defaults]\nbandwidth_gbs = 10\n[[device]]\nname = \"cuda:0\"\nmemory_gib = 2\n"
         "[[device]]\nname = \"cuda:1\"\nmemory_gib = 2\n";
  const CommandResult sim =
      run_command({placementctl_bin(), "simulate", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/topo.toml"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("lower bound none; needs at least"), std::string::npos) << sim.out;
  EXPECT_NE(sim.out.find("more than all devices have together, no placement fits"),
            std::string::npos)
      << sim.out;
  const CommandResult json_sim =
      run_command({placementctl_bin(), "--json", "simulate", "--graph", paths.dir + "/g.json",
                   "--devices", paths.dir + "/topo.toml"});
  ASSERT_EQ(json_sim.exit_code, 0) << json_sim.err;
  EXPECT_TRUE(json::parse(json_sim.out).at("lower_bound_s").is_null());
  const CommandResult opt =
      run_command({placementctl_bin(), "optimize", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/topo.toml", "--budget", "4", "--plugin-dir", PLUGIN_DIR});
  EXPECT_EQ(opt.exit_code, 1);
  EXPECT_NE(opt.err.find(paths.dir + "/g.json on " + paths.dir +
                         "/topo.toml: no placement fits: the model needs at least 7.0 GiB with its "
                         "optimizer state, "
                         "and the devices hold 4.0 GiB together"),
            std::string::npos)
      << opt.err;

  // Less than both devices together, but two ops too large for the GPU need more than the host has.
  for (auto& op : g.ops) {
    op.parameter_bytes = 0;
    op.profile["cpu"] = {0.01, 0.02, 0.0, 4096};
  }
  g.ops[0].parameter_bytes = g.ops[1].parameter_bytes = 11ull << 28;  // 11 GiB each with Adam
  write_json_file(paths.dir + "/g.json", to_json(g));
  std::ofstream(paths.dir + "/topo.toml")
      << "[defaults]\nbandwidth_gbs = 10\n[[device]]\nname = \"cpu:0\"\nmemory_gib = 21\n"
         "[[device]]\nname = \"cuda:0\"\nmemory_gib = 10\n";
  const CommandResult crowded =
      run_command({placementctl_bin(), "simulate", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/topo.toml"});
  ASSERT_EQ(crowded.exit_code, 0) << crowded.err;
  EXPECT_NE(crowded.out.find("lower bound none; needs at least"), std::string::npos) << crowded.out;
  EXPECT_NE(crowded.out.find(
                "the ops that only one kind of device can hold need more than those devices have"),
            std::string::npos)
      << crowded.out;
  const CommandResult refused =
      run_command({placementctl_bin(), "optimize", "--graph", paths.dir + "/g.json", "--devices",
                   paths.dir + "/topo.toml", "--budget", "4", "--plugin-dir", PLUGIN_DIR});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find(
                "/topo.toml: no placement fits: the ops that only one kind of device can hold"),
            std::string::npos)
      << refused.err;
}

// g.json: two profiled chains of 4 ops and a join; topo.toml: two 1 GiB GPUs over 10 GB/s.
void write_optimize_inputs(const std::string& dir) {
  OpGraph g = two_chains(4);
  profile_all(g, DeviceKind::kCuda, 1e-3);
  write_json_file(dir + "/g.json", to_json(g));
  std::ofstream(dir + "/topo.toml") << "[defaults]\nbandwidth_gbs = 10\n"
                                       "[[device]]\nname = \"cuda:0\"\nmemory_gib = 1\n"
                                       "[[device]]\nname = \"cuda:1\"\nmemory_gib = 1\n";
}

TEST(Placementctl, OptimizeReportsBaselinesBoundAndIsReproducible) {
  DaemonProcess paths;  // only for its temp dir
  write_optimize_inputs(paths.dir);
  const std::vector<std::string> args = {placementctl_bin(),
                                         "optimize",
                                         "--graph",
                                         paths.dir + "/g.json",
                                         "--devices",
                                         paths.dir + "/topo.toml",
                                         "--grouper",
                                         "none",
                                         "--placer",
                                         "feedforward",
                                         "--algorithm",
                                         "ppo",
                                         "--budget",
                                         "60",
                                         "--seed",
                                         "5",
                                         "--json"};
  std::vector<std::string> with_files = args;
  for (const std::string& a : std::vector<std::string>{"--out", paths.dir + "/best.json", "--plot",
                                                       paths.dir + "/curve.svg"})
    with_files.push_back(a);
  const CommandResult r = run_command(with_files);
  if (r.exit_code != 0 && r.err.find("no placer plugin named 'feedforward'") != std::string::npos)
    GTEST_SKIP() << "built without LibTorch";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  for (const char* key : {"best_step_time_s", "baselines", "lower_bound_s", "evaluations",
                          "evaluations_to_within_2pct", "invalid_rejected"})
    EXPECT_TRUE(out.contains(key)) << key;
  EXPECT_EQ(out["evaluations"].get<int>(), 60);
  EXPECT_TRUE(out["baselines"].contains("single_device"));
  const double best = out["best_step_time_s"].get<double>();
  EXPECT_GE(best, out["lower_bound_s"].get<double>());
  for (const auto& [name, t] : out["baselines"].items()) {
    if (!t.is_null()) {
      EXPECT_LE(best, t.get<double>()) << name;
    }
  }

  // The written placement simulates to the reported time; the plot is an SVG.
  const CommandResult sim =
      run_command({placementctl_bin(), "--json", "simulate", "--graph", paths.dir + "/g.json",
                   "--devices", paths.dir + "/topo.toml", "--placement", paths.dir + "/best.json"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(json::parse(sim.out)["placements"][0]["step_time_s"].get<double>(), best);
  std::ifstream svg(paths.dir + "/curve.svg");
  std::string head(5, '\0');
  svg.read(head.data(), 5);
  EXPECT_EQ(head, "<svg ");

  const CommandResult again = run_command(args);
  EXPECT_EQ(json::parse(again.out)["best_so_far_s"], out["best_so_far_s"])
      << "same seed, same curve";

  // The policy's best is chosen with the planning model's help unless asked otherwise.
  EXPECT_EQ(out["selection"], "model");
  EXPECT_TRUE(out.contains("estimated_model_error"));
  std::vector<std::string> measured = args;
  measured.insert(measured.end() - 1, {"--selection", "measured"});
  const json by_measurement = json::parse(run_command(measured).out);
  EXPECT_EQ(by_measurement["selection"], "measured");
  EXPECT_TRUE(by_measurement["estimated_model_error"].is_null());
  measured[measured.size() - 2] = "lowest";
  const CommandResult unknown = run_command(measured);
  EXPECT_EQ(unknown.exit_code, 105) << unknown.err;  // CLI11's validation error
  EXPECT_NE(unknown.err.find("lowest"), std::string::npos) << unknown.err;

  std::vector<std::string> bad = args;
  bad.push_back("--set");
  bad.push_back("placer.hidden=-3");
  const CommandResult refused = run_command(bad);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("hidden"), std::string::npos) << refused.err;
  bad.back() = "hidden=3";
  EXPECT_NE(run_command(bad).err.find("expected KIND.KEY=VALUE"), std::string::npos);
}

TEST(Placementctl, OptimizeJsonIsNotMixedWithWhatLibrariesPrint) {
  // libmetis prints "***Cannot bisect a graph with 0 vertices!" to stdout when asked for 256 parts
  // of the unrolled GNMT; placementctl sends it to stderr, so stdout is the JSON alone.
  const CommandResult r =
      run_command({placementctl_bin(), "optimize", "--graph",
                   std::string(GRAPH_DIR) + "/gnmt4_unrolled.json.gz", "--devices",
                   std::string(SOURCE_TOPOLOGY_DIR) + "/4xh100_cpu_pcie5.toml", "--grouper",
                   "metis", "--set", "grouper.groups=256", "--placer", "metis", "--budget", "1",
                   "--plugin-dir", plugin_dir(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json out;
  ASSERT_NO_THROW(out = json::parse(r.out)) << r.out.substr(0, 300);
  EXPECT_GT(out["groups"].get<int>(), 100);
}

TEST(Placementctl, OptimizeWarmStartsFromABaseline) {
  DaemonProcess paths;  // only for its temp dir
  write_optimize_inputs(paths.dir);
  std::vector<std::string> args = {
      placementctl_bin(),    "optimize",       "--graph",
      paths.dir + "/g.json", "--devices",      paths.dir + "/topo.toml",
      "--grouper",           "none",           "--placer",
      "feedforward",         "--budget",       "5",
      "--imitate",           "list_scheduling"};
  const CommandResult human = run_command(args);
  if (human.exit_code != 0 &&
      human.err.find("no placer plugin named 'feedforward'") != std::string::npos)
    GTEST_SKIP() << "built without LibTorch";
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("warm start: imitated list_scheduling"), std::string::npos) << human.out;
  args.push_back("--json");
  const json out = json::parse(run_command(args).out);
  const json& w = out["warm_start"];
  EXPECT_EQ(w["baseline"], "list_scheduling");
  EXPECT_TRUE(w["skipped"].is_null());
  EXPECT_GE(w["probability_after"].get<double>(), 0.9);
  EXPECT_EQ(w["baseline_step_time_s"], out["baselines"]["list_scheduling"]);
  args[args.size() - 2] = "nope";  // --imitate nope --json
  EXPECT_NE(json::parse(run_command(args).out)["warm_start"]["skipped"].get<std::string>().find(
                "'nope' is not loaded"),
            std::string::npos);

  // The simulator search: its answer is the first candidate, timed on the exact simulator.
  args[args.size() - 2] = "simulator";
  args.insert(args.end() - 1, {"--search-evaluations", "300", "--model-error", "0.1"});
  const json searched = json::parse(run_command(args).out);
  const json& s = searched["warm_start"];
  EXPECT_EQ(s["baseline"], "simulator");
  EXPECT_TRUE(s["skipped"].is_null()) << s.dump();
  EXPECT_GT(s["search_evaluations"].get<int64_t>(), 0);
  EXPECT_LE(s["search_evaluations"].get<int64_t>(), 300);
  EXPECT_TRUE(s["search_start_step_time_s"].is_number());
  EXPECT_EQ(s["search_ensemble"], 4)
      << "by default each placement is also timed on 4 copies of the model";
  args.pop_back();  // human output
  const CommandResult shown = run_command(args);
  EXPECT_NE(shown.out.find("warm start: searched "), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("(each also on 4 perturbed copies of the model)"), std::string::npos)
      << shown.out;
  args.insert(args.end(), {"--search-ensemble", "0", "--json"});
  EXPECT_EQ(json::parse(run_command(args).out)["warm_start"]["search_ensemble"], 0);
  args.resize(args.size() - 3);
  EXPECT_NE(shown.out.find(" on the planning model, imitated in "), std::string::npos) << shown.out;
  args.insert(args.end(), {"--model-error", "-1"});
  EXPECT_NE(run_command(args).exit_code, 0) << "a negative model error is refused";
}

}  // namespace
}  // namespace placement::testing
