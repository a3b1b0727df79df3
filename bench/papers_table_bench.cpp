// The papers' table, in simulation: the papers' models at the papers' batch sizes
// (tests/data/graphs/papers, scripts/make-graph-data.sh --papers) on "4×H100 + CPU over PCIe 5",
// "4×H100 NVLink" and "2×K40 + CPU" (tests/data/topologies), every deterministic baseline and the
// four papers' configurations (plus Post), 3 seeds each. Prints best simulated step time,
// placements evaluated to come within 2% of it, wall time and the ratio to the lower bound.
//
// The graphs carry shapes and op work, no profiles: every op is timed by the cost model from its
// device's spec (docs/simulator.md), so the figures are predictions for those GPUs, not
// measurements.
//
// --imitate BASELINE runs every configuration a second time with the policy warm-started from that
// baseline's placement (same seeds) and prints, for both, the evaluations until the run is within
// 2% of the cold run's final best: what the warm start saves. --imitate simulator warm-starts from
// a search of a planning model that is --model-error off the simulator the candidates are timed on;
// the baselines plan on the same model. A warm row also shows the warm start's own answer (its
// first candidate) on the truth and the fastest baseline planned on each seed's model.
//
//   papers_table_bench [--models NAME ...] [--topologies NAME ...] [--seeds N] [--budget N] [--only
//   PREFIX ...]
//                      [--imitate BASELINE]
//   (every option and its default: papers_table_bench --help; docs/benchmarks.md)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "command_line.h"
#include "papers_data.h"
#include "placement/serialization.h"
#include "planning/offline/optimize.h"
#include "planning/sim/simulator.h"
#include "planning/sim/topology.h"

namespace {

using placement::bench::graph_file;
using placement::bench::median;
using placement::bench::shipped;
using placement::bench::topology_file;

using placementd::offline::OptimizeOptions;
using placementd::offline::OptimizeResult;

// The table reproduces each paper's own grouping: configurations over this many groups are skipped
// rather than merged down to the daemon's [policy] max_groups (256).
constexpr int kMaxGroups = 1024;

// "list_scheduling 39.26" for the fastest valid baseline of a run (the baselines place the run's
// own grouping: a finer grouping helps them as much as the policy).
std::pair<std::string, double> fastest_baseline(const OptimizeResult& r) {
  std::string name;
  double best = 0;
  for (const auto& [n, t] : r.baselines)
    if (t && (name.empty() || *t < best)) {
      name = n;
      best = *t;
    }
  return {name, best};
}

std::string best_baseline(const OptimizeResult& r) {
  const auto [name, best] = fastest_baseline(r);
  if (name.empty()) return "none valid";
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s %.3f", name.c_str(), best * 1e3);
  return buf;
}

struct Configuration {
  std::string label;
  std::string grouper, placer, algorithm;
  placement::Params grouper_params, placer_params;
};

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The papers' table in simulation: every deterministic baseline and the papers' "
      "configurations on the "
      "papers' models (tests/data/graphs/papers), timed by the cost model on the shipped "
      "topologies.",
      "papers_table_bench"};
  int64_t budget = 200, seeds = 3, hidden = 64;
  std::vector<std::string> models = {
      "inception_v3",         "inception_v3_bs32",   "resnet50_bs64",        "gnmt4_bs128",
      "gnmt4_unrolled_bs128", "gnmt8_bs256",         "gnmt8_unrolled_bs256", "rnnlm_bs64",
      "bert_base_mlm_bs24",   "bert_large_mlm_bs24", "gnmt8_vocab1m_bs256",  "gpt2_xl_bs8"};
  std::vector<std::string> topologies = {"4xh100_cpu_pcie5", "4xh100_nvlink", "2xk40_cpu"};
  app.add_option("--budget", budget, "candidates per run")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  app.add_option("--seeds", seeds, "seeds per configuration")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  app.add_option("--hidden", hidden, "seq2seq hidden units (papers: 256)")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  app.add_option("--models", models, "graphs under tests/data/graphs/papers (NAME.json.gz)")
      ->capture_default_str()
      ->check(shipped(graph_file));
  app.add_option("--topologies", topologies, "topologies under tests/data/topologies (NAME.toml)")
      ->capture_default_str()
      ->check(shipped(topology_file));
  std::string imitate;
  std::vector<std::string> only;
  app.add_option(
      "--imitate", imitate,
      "also run each configuration warm-started from this baseline placer's placement, or from a "
      "simulator search with 'simulator' (default: cold runs only)");
  app.add_option("--only", only,
                 "configurations whose label starts with one of these (default: all)");
  double model_error = OptimizeOptions{}.model_error;
  int64_t search_evaluations = placementd::sim::AnnealOptions{}.evaluations;
  int64_t search_ensemble = placementd::offline::ImitationOptions{}.search_ensemble;
  app.add_option("--model-error", model_error,
                 "the planning model's log-normal error (warm start and baselines)")
      ->capture_default_str();
  app.add_option("--search-ensemble", search_ensemble,
                 "--imitate simulator: model copies the search also times on")
      ->capture_default_str();
  app.add_option("--search-evaluations", search_evaluations,
                 "--imitate simulator: placements the search simulates")
      ->capture_default_str();
  std::string selection = placementd::offline::name_of(OptimizeOptions{}.selection);
  app.add_option("--selection", selection, "how a run's best is chosen among noisy measurements")
      ->capture_default_str()
      ->check(CLI::IsMember(placementd::offline::selection_names()));
  return examples::command_line::run(app, argc, argv, [&] {
    placementd::PluginRegistry registry;
    registry.scan({PLUGIN_DIR});
    const placement::Params s2s_after = {{"attention", std::string("after")}, {"hidden", hidden}};
    const placement::Params s2s_before = {{"attention", std::string("before")}, {"hidden", hidden}};
    // HP and EAGLE train the feed-forward grouper jointly with the placer; G = 64 rather than HP's
    // 256 keeps seq2seq affordable on 2 cores. The METIS rows are EAGLE's alternative grouping.
    const placement::Params groups64 = {{"groups", int64_t{64}}};
    const std::vector<Configuration> configurations = {
        {"ColocRL (colocation+seq2seq+reinforce)",
         "colocation",
         "seq2seq",
         "reinforce",
         {},
         s2s_after},
        {"HP (feedforward+seq2seq-after+reinforce)", "feedforward", "seq2seq", "reinforce",
         groups64, s2s_after},
        {"Spotlight (name_prefix+seq2seq+spotlight)",
         "name_prefix",
         "seq2seq",
         "spotlight",
         {},
         s2s_after},
        {"EAGLE (feedforward+seq2seq-before+ppo)", "feedforward", "seq2seq", "ppo", groups64,
         s2s_before},
        {"Post (colocation+feedforward+post)", "colocation", "feedforward", "post", {}, {}},
        {"EAGLE-GCN (feedforward+gcn+ppo)", "feedforward", "gcn", "ppo", groups64, {}},
        {"EAGLE-GCN (metis+gcn+ppo)", "metis", "gcn", "ppo", groups64, {}},
        // Not the papers': EAGLE's placer and algorithm on finer groups, which the simulator warm
        // start
        // (--imitate simulator) can place well; METIS stops short of 256 parts on small graphs.
        {"EAGLE-GCN (name_prefix+gcn+ppo)", "name_prefix", "gcn", "ppo", {}, {}},
        {"EAGLE-GCN (metis-256+gcn+ppo)", "metis", "gcn", "ppo", {{"groups", int64_t{256}}}, {}},
    };

    std::vector<std::pair<std::string, std::string>> runs;
    for (const std::string& topology : topologies)
      for (const std::string& model : models) runs.emplace_back(topology, model);
    std::printf(
        "budget %lld candidates, %lld seeds, seq2seq hidden %lld; every op timed by the cost "
        "model\n\n",
        static_cast<long long>(budget), static_cast<long long>(seeds),
        static_cast<long long>(hidden));
    for (const auto& [topology, model] : runs) {
      const placement::DeviceSet devices = placementd::sim::load_topology(topology_file(topology));
      const placementd::sim::Simulator simulator(placement::load_graph_file(graph_file(model)),
                                                 devices);
      // The simulator's graph: with the predicted profiles that groupers and placers read.
      const placement::OpGraph& graph = simulator.graph();
      const auto floor = simulator.memory_floor();
      std::printf("== %s on %s: %zu ops, needs %.1f GiB%s", model.c_str(), topology.c_str(),
                  graph.ops.size(), gib(floor.bytes),
                  floor.fits_one_device ? "" : " (more than any one device)");
      if (!floor.fits_all_devices) {
        std::printf("; the devices hold %.1f GiB together: no placement fits, skipped\n\n",
                    gib(floor.all_devices_bytes));
        continue;
      }
      const double bound = simulator.lower_bound_s();
      if (!std::isfinite(bound)) {
        std::printf(
            "; the ops only one kind of device can hold need more than it has: no placement fits, "
            "skipped\n\n");
        continue;
      }
      std::printf(", lower bound %.3f ms\n", bound * 1e3);
      std::printf("%-44s %7s %12s %10s %14s %9s %9s %13s  %s\n", "configuration", "groups",
                  "best_ms", "vs_bound", "evals_to_2pct", "wall_s", "rejected", "to_cold_2pct",
                  "best baseline on these groups");
      {
        // The baselines place ColocRL's colocation groups, whichever configurations run (a learned
        // grouper's first grouping is random, so baselines on it would say little).
        OptimizeOptions o;
        o.max_groups = kMaxGroups;
        o.grouper = {"colocation", {}};
        o.placer = {"single_device", {}};
        o.budget = 1;
        const OptimizeResult r = placementd::offline::optimize(simulator, registry, o);
        for (const auto& [name, t] : r.baselines)
          if (t)
            std::printf("%-44s %7d %12.3f %10.2f %14s %9s %9s\n", ("baseline " + name).c_str(),
                        r.num_groups, *t * 1e3, *t / bound, "-", "-", "-");
          else
            std::printf("%-44s %7d %12s %10s %14s %9s %9s\n", ("baseline " + name).c_str(),
                        r.num_groups, "invalid", "-", "-", "-", "-");
      }
      for (const Configuration& c : configurations) {
        if (!registry.has(placement::PluginKind::kPlacer, c.placer)) continue;
        if (!only.empty() && std::none_of(only.begin(), only.end(), [&](const std::string& prefix) {
              return c.label.rfind(prefix, 0) == 0;
            }))
          continue;
        {
          // A learned placer over thousands of groups (name_prefix on the unrolled GNMT) costs
          // minutes per update on 2 cores; such a run says nothing the coarser groupings do not.
          auto grouper = registry.create_grouper(c.grouper, c.grouper_params);
          std::mt19937_64 rng(1);
          const int n = grouper->policy() ? 0 : grouper->group(graph, devices, rng).num_groups;
          if (n > kMaxGroups) {
            std::printf("%-44s %7d skipped (more than %d groups)\n", c.label.c_str(), n,
                        kMaxGroups);
            continue;
          }
        }
        // Index 0: cold; 1: warm-started from --imitate.
        std::vector<double> best[2], evals[2], to_cold[2], wall[2], rejected[2];
        // Warm runs: the warm start's own answer (the first candidate) on the truth, and the
        // fastest baseline planned on the same seed's model. The policy's best is picked by one
        // noisy measurement per candidate among ~100, so it can be slower than the answer it
        // started from.
        std::vector<double> answer, seed_baseline;
        std::string skipped;  // why the warm start did not run, when it did not
        int groups = 0;
        OptimizeResult last;
        for (int64_t seed = 1; seed <= seeds; ++seed) {
          double cold_best = 0;
          for (int warm = 0; warm < (imitate.empty() ? 1 : 2); ++warm) {
            OptimizeOptions o;
            o.max_groups = kMaxGroups;
            o.grouper = {c.grouper, c.grouper_params};
            o.placer = {c.placer, c.placer_params};
            o.algorithm = {c.algorithm, {}};
            o.budget = budget;
            o.seed = static_cast<uint64_t>(seed);
            if (warm) o.imitation.baseline = imitate;
            o.imitation.search.evaluations = search_evaluations;
            o.imitation.search_ensemble = search_ensemble;
            o.model_error = model_error;
            o.selection = placementd::offline::selection_names().at(selection);
            last = placementd::offline::optimize(simulator, registry, o);
            if (!warm) cold_best = last.policy_best_s.value_or(0.0);
            // A run whose candidates all failed the memory check has no best: counted apart.
            if (last.policy_best_s) best[warm].push_back(*last.policy_best_s);
            if (warm && last.imitation && !last.imitation->skipped.empty())
              skipped = last.imitation->skipped;
            evals[warm].push_back(
                static_cast<double>(last.evaluations_to_within_2pct.value_or(budget)));
            double n = static_cast<double>(budget);
            for (size_t i = 0; i < last.curve.size(); ++i)
              if (last.curve[i].best_so_far_s && *last.curve[i].best_so_far_s <= 1.02 * cold_best) {
                n = static_cast<double>(i + 1);
                break;
              }
            to_cold[warm].push_back(n);
            wall[warm].push_back(last.wall_s);
            rejected[warm].push_back(static_cast<double>(last.invalid_rejected));
            groups = last.num_groups;
            if (warm && !last.curve.empty() && last.curve[0].step_time_s && last.imitation &&
                last.imitation->skipped.empty()) {
              answer.push_back(*last.curve[0].step_time_s);
              if (const auto [name, t] = fastest_baseline(last); !name.empty())
                seed_baseline.push_back(t);
            }
          }
        }
        for (int warm = 0; warm < (imitate.empty() ? 1 : 2); ++warm) {
          const std::string label = warm ? "  + warm start (" + imitate + ")" : c.label;
          std::string note = warm ? "" : best_baseline(last);
          if (warm && !answer.empty()) {
            char buf[128];
            std::snprintf(
                buf, sizeof(buf), "its answer %.3f; fastest baseline per seed %.3f (medians)",
                median(answer) * 1e3, seed_baseline.empty() ? 0.0 : median(seed_baseline) * 1e3);
            note = buf;
          }
          if (warm && answer.empty() && !skipped.empty()) note = "warm start skipped: " + skipped;
          if (best[warm].size() < static_cast<size_t>(seeds))
            note = "valid in " + std::to_string(best[warm].size()) + " of " +
                   std::to_string(seeds) + " seeds; " + note;
          if (best[warm].empty()) {
            std::printf("%-44s %7d %12s %10s %14s %9.1f %9.0f %13s  %s\n", label.c_str(), groups,
                        "none valid", "-", "-", median(wall[warm]), median(rejected[warm]), "-",
                        note.c_str());
            continue;
          }
          std::printf("%-44s %7d %12.3f %10.2f %14.0f %9.1f %9.0f %13.0f  %s\n", label.c_str(),
                      groups, median(best[warm]) * 1e3, median(best[warm]) / bound,
                      median(evals[warm]), median(wall[warm]), median(rejected[warm]),
                      median(to_cold[warm]), note.c_str());
        }
        std::fflush(stdout);
      }
      std::printf("\n");
    }
    return 0;
  });
}
