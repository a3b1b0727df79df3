// Policy cost on this machine: one sample and one update (a batch of 10 samples: a PPO epoch) for
// each learned placer at 16, 64 and 256 groups, loaded from the built plugins as the daemon loads
// them. Target (issue #4): sample + update ≤ 20 ms at 256 groups on 2 cores.
//
//   policy_bench [--only PLACER ...] [--groups N ...] [--repeats N]   (every option: --help)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "command_line.h"
#include "placement/placement.h"
#include "plugins/plugin_registry.h"

namespace {

using placement::bench::median;

using Clock = std::chrono::steady_clock;

placement::OpGraph layered_graph(int groups) {
  placement::OpGraph g;
  g.name = "layers";
  for (int i = 0; i < groups; ++i) {
    placement::Op op;
    op.id = i;
    op.name = "layer." + std::to_string(i);
    op.kind = i % 3 == 0 ? "aten::linear" : (i % 3 == 1 ? "aten::relu" : "aten::add");
    op.outputs.push_back({{64, 1024}, "float32", 64 * 1024 * 4});
    op.profile["cuda"] = {1e-4, 2e-4, 0.0, 0};
    g.ops.push_back(op);
    if (i > 0) g.edges.push_back({i - 1, i, 64 * 1024 * 4});
    if (i > 3) g.edges.push_back({i - 4, i, 64 * 1024 * 4});
  }
  return g;
}

// Prints a row per placer of `only` (every learned placer built when empty) and group count.
int time_placers(const std::vector<std::string>& only, const std::vector<int>& group_counts,
                 int repeats) {
  placementd::PluginRegistry registry;
  registry.scan({PLUGIN_DIR});
  std::vector<placement::Device> list;
  for (int d = 0; d < 4; ++d)
    list.push_back({placement::DeviceKind::kCuda, d, 80ull << 30, 1.0, std::nullopt});
  const placement::DeviceSet devices = placement::DeviceSet::uniform(list, 50e9, 1e-5);
  std::printf("%-22s %7s %12s %14s %14s\n", "placer", "groups", "sample_ms", "update10_ms",
              "sample+update");
  struct Variant {
    const char* label;
    const char* placer;
    placement::Params params;
  };
  const std::vector<Variant> variants = {
      {"feedforward", "feedforward", {}},
      {"gcn", "gcn", {}},
      {"seq2seq (after, 256)", "seq2seq", {{"attention", std::string("after")}}},
      {"seq2seq (before, 256)", "seq2seq", {{"attention", std::string("before")}}},
  };
  for (const Variant& v : variants) {
    if (!registry.has(placement::PluginKind::kPlacer, v.placer)) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), v.placer) == only.end()) continue;
    for (int groups : group_counts) {
      const placement::OpGraph g = layered_graph(groups);
      placement::Grouping grouping;
      grouping.num_groups = groups;
      for (int i = 0; i < groups; ++i) grouping.group_of_op.push_back(i);
      auto placer = registry.create_placer(v.placer, v.params);
      std::mt19937_64 rng(1);
      placer->prepare(g, grouping, devices, rng);
      placement::TrainablePolicy* policy = placer->policy();
      std::vector<double> sample_ms, update_ms;
      for (int rep = 0; rep < repeats; ++rep) {
        auto t0 = Clock::now();
        std::vector<placement::Action> batch;
        for (int s = 0; s < 10; ++s) batch.push_back(placer->place(rng));
        auto t1 = Clock::now();
        const std::vector<double> weights(batch.size(), 0.1);
        policy->log_probs(batch);
        policy->accumulate_gradient(batch, weights, 0.01);
        policy->apply_gradient({0.01, 1.0});
        auto t2 = Clock::now();
        sample_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() / 10);
        update_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      const double s = median(sample_ms), u = median(update_ms);
      std::printf("%-22s %7d %12.2f %14.2f %14.2f\n", v.label, groups, s, u, s + u);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Learned placers' cost: one sample and one update (a batch of 10 samples) at each group "
      "count, "
      "loaded from the built plugins.",
      "policy_bench"};
  std::vector<std::string> only;
  std::vector<int> group_counts = {16, 64, 256};
  int repeats = 7;
  app.add_option("--only", only, "placers to run (default: every one built)")
      ->check(CLI::IsMember({"feedforward", "gcn", "seq2seq"}));
  app.add_option("--groups", group_counts, "group counts")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  app.add_option("--repeats", repeats, "repetitions; medians are printed")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  return examples::command_line::run(app, argc, argv,
                                     [&] { return time_placers(only, group_counts, repeats); });
}
