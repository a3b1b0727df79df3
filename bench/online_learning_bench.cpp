// What learning online adds (issue #45): the live phase against a planning model that is wrong the
// way real planning models are wrong, on the papers' graphs and topologies.
//
// A *true* model (the simulator with the topology's figures) times every step of a simulated job,
// with log-normal noise per step. The daemon plans on a *planning* model: the truth perturbed in
// one structured way per scenario. The real LiveSession (exploration, trials, the configured
// grouper, placer and algorithm, the simulator warm start) drives the job through the calls the
// socket server makes, deterministically per seed. Figures, per scenario:
//   gap recovered = (T_warm - T_final) / (T_warm - T_best)
// T_warm: the true step time of the warm start's answer (the planning model's best guess);
// T_final: of the placement the job is left on after its exploration; T_best: the best a long
// search of the truth itself finds (annealing over the same groups, from the best heuristic).
// Runs whose warm start is already within 1% of T_best have no gap to recover and are counted
// apart. Also: whether the job ends slower than its start (in truth), the candidates it ran, and
// T_tried, the fastest of them in truth (near T_best: the gain ran and was not kept; far above it:
// it was never proposed).
//
//   online_learning_bench [--models NAME ...] [--topologies NAME ...] [--scenarios NAME ...]
//                         [--seeds N] [--noise SIGMA] [--config FILE] [--log] [--check]
//   (every option and its default: online_learning_bench --help; docs/benchmarks.md)

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "command_line.h"
#include "config/config.h"
#include "live/live_session.h"
#include "live/store.h"
#include "papers_data.h"
#include "placement/serialization.h"
#include "planning/group_cap.h"
#include "planning/offline/baseline.h"
#include "planning/offline/warm_start.h"
#include "planning/sim/annealing.h"
#include "planning/sim/simulator.h"
#include "planning/sim/topology.h"

namespace {

namespace msg = placement::messages;
using placement::bench::graph_file;
using placement::bench::median;
using placement::bench::shipped;
using placement::bench::topology_file;
using placementd::sim::Simulator;

// What the daemon plans with: a graph whose profiles it believes and the links it believes.
struct Planning {
  placement::OpGraph graph;
  placement::DeviceSet devices;
};

// One way of being wrong. `truth_devices` may differ from the topology (the launch scenario's truth
// pays more per op than the preset says); `plan` makes the planning model from the truth.
struct Scenario {
  std::string name, what;
  placement::DeviceSet (*truth_devices)(placement::DeviceSet topology);
  Planning (*plan)(const placement::OpGraph& capture, const Simulator& truth,
                   const placement::DeviceSet& topology, std::mt19937_64& rng);
  /// The truth's devices that share an execution resource (SimulatorOptions::shared_with); nullptr:
  /// none do.
  std::vector<size_t> (*shared_with)(const placement::DeviceSet& devices) = nullptr;
};

placement::DeviceSet as_given(placement::DeviceSet topology) { return topology; }

// The truth's profiles as the job would report them: measured, not predicted.
placement::OpGraph measured(const Simulator& truth) {
  placement::OpGraph graph = truth.graph();
  for (auto& op : graph.ops)
    for (auto& [kind, p] : op.profile) p.predicted = false;
  return graph;
}

void scale(placement::OpProfile& p, double f) {
  p.forward_s *= f;
  p.backward_s *= f;
  p.update_s *= f;
}

Planning op_noise(const placement::OpGraph&, const Simulator& truth,
                  const placement::DeviceSet& topology, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  Planning p{measured(truth), topology};
  for (auto& op : p.graph.ops)
    for (auto& [kind, profile] : op.profile) scale(profile, std::exp(0.3 * normal(rng)));
  return p;
}

Planning kind_bias(const placement::OpGraph&, const Simulator& truth,
                   const placement::DeviceSet& topology, std::mt19937_64& rng) {
  // One factor per (op kind, device kind), log-uniform in [0.2, 2]: the cost model's efficiency for
  // a kind of kernel is off the same way wherever that kernel runs.
  std::uniform_real_distribution<double> u(std::log(0.2), std::log(2.0));
  std::map<std::pair<std::string, std::string>, double> bias;
  Planning p{measured(truth), topology};
  for (auto& op : p.graph.ops)
    for (auto& [kind, profile] : op.profile) {
      auto [at, fresh] = bias.emplace(std::make_pair(op.kind, kind), 0.0);
      if (fresh) at->second = std::exp(u(rng));
      scale(profile, at->second);
    }
  return p;
}

Planning links(const placement::OpGraph&, const Simulator& truth,
               const placement::DeviceSet& topology, std::mt19937_64& rng) {
  // Each link believed 2-4x faster or slower than it is (bandwidth and latency alike), one factor
  // per pair of devices in both directions.
  std::uniform_real_distribution<double> u(std::log(2.0), std::log(4.0));
  std::bernoulli_distribution faster(0.5);
  Planning p{measured(truth), topology};
  for (size_t a = 0; a < p.devices.size(); ++a)
    for (size_t b = a + 1; b < p.devices.size(); ++b) {
      const double f = std::exp(u(rng));
      const double bandwidth = faster(rng) ? f : 1.0 / f;
      for (auto [i, j] : {std::make_pair(a, b), std::make_pair(b, a)}) {
        p.devices.bandwidth[i][j] *= bandwidth;
        p.devices.latency[i][j] /= bandwidth;
      }
    }
  return p;
}

placement::DeviceSet launch_3x(placement::DeviceSet topology) {
  for (auto& d : topology.devices)
    if (d.spec) d.spec->launch_s *= 3.0;
  return topology;
}

Planning preset_launch(const placement::OpGraph& capture, const Simulator& truth,
                       const placement::DeviceSet& topology, std::mt19937_64&) {
  // The planner's cost model with the preset's launch cost, where the truth pays three times it
  // (what the 2026-11-26 GPU runs measured: 10-19 us an op where the preset says 5).
  const Simulator planner(capture, topology, truth.options());
  Planning p{planner.graph(), topology};
  for (auto& op : p.graph.ops)
    for (auto& [kind, profile] : op.profile) profile.predicted = false;
  return p;
}

// The planner's model is the truth's, measured, but for one thing it cannot see in the profiles:
// the GPUs pair up on one execution resource each (slices of one card time-sliced, or two jobs'
// worth of GPUs under MPS), so what two of a pair run does not overlap.
Planning profiles_only(const placement::OpGraph&, const Simulator& truth,
                       const placement::DeviceSet& topology, std::mt19937_64&) {
  return Planning{measured(truth), topology};
}

std::vector<size_t> gpus_in_pairs(const placement::DeviceSet& devices) {
  std::vector<size_t> shared(devices.size());
  std::optional<size_t> unpaired;
  for (size_t d = 0; d < devices.size(); ++d) {
    shared[d] = d;
    if (devices.devices[d].kind != placement::DeviceKind::kCuda) continue;
    if (unpaired) {
      shared[d] = *unpaired;
      unpaired.reset();
    } else {
      unpaired = d;
    }
  }
  return shared;
}

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = {
      {"op-noise", "each op's time off by a log-normal factor, sigma 0.3", as_given, op_noise},
      {"kind-bias", "each op kind's time off by one factor in [0.2, 2] per device kind", as_given,
       kind_bias},
      {"links", "each link's bandwidth and latency off by 2-4x, either way", as_given, links},
      {"launch", "the truth pays 3x the preset's host launch cost per op", launch_3x,
       preset_launch},
      {"overlap",
       "the planner has every GPU compute at once; in truth they pair up on one execution "
       "resource each, and what a pair runs does not overlap",
       as_given, profiles_only, gpus_in_pairs},
  };
  return all;
}

struct Options {
  std::vector<std::string> models = {"inception_v3", "resnet50_bs64", "gnmt4_bs128", "rnnlm_bs64",
                                     "bert_base_mlm_bs24"};
  std::vector<std::string> topologies = {"4xh100_cpu_pcie5", "4xh100_nvlink", "2xk40_cpu"};
  std::vector<std::string> scenarios;
  int64_t seeds = 20;
  int64_t threads = 2;
  double noise = 0.2;
  int64_t job_steps = 200000;
  int64_t best_evaluations = 100000;
  std::vector<int64_t> budgets = {30, 100};
  std::string config;
  bool check = false;
  bool log = false;
  // The median gap recovered --check asks of every budget (nullopt: the targets).
  std::optional<double> floor;
};

struct Run {
  double start = 0, warm = 0, final_time = 0, best = 0;
  // The fastest placement the job ran, in truth: far above T_best, the live phase never proposed
  // the gain; near it, it ran it and did not keep it.
  double tried = INFINITY;
  uint64_t candidates = 0, steps = 0;
  // Pairs of devices the job's refits found taking turns (sim::RefitResult::shared; each refit
  // starts from the planning model, so one that finds a pair again counts again): pairs that do
  // in truth, and pairs that do not.
  uint64_t turns_right = 0, turns_wrong = 0;
  // The job's mean true step time over all its steps (those after the run's end on the placement it
  // ended on): what it gained, exploration's cost included.
  double mean_step = 0;
  // (T_warm - T_final) / (T_warm - T_best); nullopt when the warm start left no gap (within 1%).
  std::optional<double> recovered() const {
    if (warm - best <= 0.01 * best) return std::nullopt;
    return (warm - final_time) / (warm - best);
  }
};

// The true time of placements, remembered by placement id.
class TrueClock {
 public:
  explicit TrueClock(const Simulator& truth) : truth_(truth) {}
  // nullopt: the truth's memory model rejects it (the job would fail the step).
  std::optional<double> time(const placement::Placement& p) {
    const std::string key = p.fingerprint();
    if (auto at = seen_.find(key); at != seen_.end()) return at->second;
    const placementd::sim::SimulationResult r = truth_.simulate(p);
    return seen_[key] = r.valid ? std::optional<double>(r.step_time_s) : std::nullopt;
  }
  // The true time of a placement the job ran, by its fingerprint; nullopt when it never ran (or
  // did not fit).
  std::optional<double> ran(const std::string& fingerprint) const {
    const auto at = seen_.find(fingerprint);
    return at == seen_.end() ? std::nullopt : at->second;
  }

 private:
  const Simulator& truth_;
  std::map<std::string, std::optional<double>> seen_;
};

// "cuda:0 and cuda:1" for each pair of the truth's devices that share an execution resource, as
// the refit names them.
std::set<std::string> pairs_taking_turns(const Simulator& truth) {
  const placement::DeviceSet& devices = truth.devices();
  const std::vector<size_t> group = placementd::sim::execution_resources(truth.options(), devices);
  std::set<std::string> out;
  for (size_t b = 0; b < group.size(); ++b)
    for (size_t a = 0; a < b; ++a)
      if (group[a] == group[b])
        out.insert(devices.devices[a].name() + " and " + devices.devices[b].name());
  return out;
}

// A state directory of the job's own, so that no run starts from what another one stored.
struct StateDir {
  std::string path = placement::bench::make_temp_dir("online-learning");
  StateDir() = default;
  ~StateDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  StateDir(const StateDir&) = delete;
  StateDir& operator=(const StateDir&) = delete;
};

// One job, start to end, under `policy` with at most `budget` candidates.
Run run_job(const Simulator& truth, const Planning& planning, placementd::EffectivePolicy policy,
            int64_t budget, const placement::Placement& start, uint64_t seed, const Options& o,
            const placementd::PluginRegistry& registry) {
  const StateDir dir;
  Run run;
  {
    placementd::Store store(dir.path);
    placementd::JobIdentity job;
    job.attach.job = "online-learning";
    job.uid = ::getuid();
    job.pid = ::getpid();
    job.attach.expected_steps = static_cast<uint64_t>(o.job_steps);
    job.attach.devices = planning.devices;
    policy.exploration.max_candidates = budget;
    placementd::LiveSession live(seed, job, policy, registry, store);
    live.on_graph(planning.graph, start, 0.0);
    TrueClock clock(truth);
    std::mt19937_64 rng(seed * 1000003);
    std::normal_distribution<double> normal(0.0, 1.0);
    msg::Directive in_force = live.next_directive();
    run.start = clock.time(start).value();
    uint64_t exploiting_since = 0;
    double true_time = 0;
    // The true time of the placement in force, looked up when it changes (not every step).
    std::optional<double> t = clock.time(in_force.placement);
    if (t) run.tried = *t;
    for (uint64_t step = 0; step < static_cast<uint64_t>(o.job_steps); ++step) {
      // A failed step is retried on the last good placement: it costs about two steps.
      true_time += t ? *t : 2 * run.start;
      placement::messages::StepReport m{
          in_force.placement_id, step, t ? *t * std::exp(o.noise * normal(rng)) : 0.0,
          t.has_value(), t ? "" : "out of memory (the true memory model)"};
      std::optional<msg::Directive> next = live.on_report(m);
      if (live.has_deferred_work())
        if (auto pushed = live.run_deferred_work()) next = pushed;
      if (next) {
        in_force = *next;
        t = clock.time(in_force.placement);
        if (t) run.tried = std::min(run.tried, *t);
      }
      run.steps = step + 1;
      // Exploitation is for good once the placement in force is the kept best for a while.
      if (in_force.state == msg::JobState::kExploiting) {
        if (exploiting_since == 0) exploiting_since = step;
        if (step - exploiting_since > 1000) break;
      } else {
        exploiting_since = 0;
      }
    }
    run.final_time = t.value_or(run.start);
    // The warm start's answer, whatever reason it ran under (the start or all on one device, when
    // the search found what ran already); one that never ran leaves the job where it started.
    const msg::JobInfo detail = live.detail();
    const nlohmann::json answer =
        detail.warm_start.is_object()
            ? detail.warm_start.value("placement_fingerprint", nlohmann::json())
            : nlohmann::json();
    run.warm =
        answer.is_string() ? clock.ran(answer.get<std::string>()).value_or(run.start) : run.start;
    const msg::JobSummary summary = live.summary();
    run.candidates = summary.candidates_tried;
    const std::set<std::string> true_turns = pairs_taking_turns(truth);
    for (const nlohmann::json& refit : detail.refits)
      for (const nlohmann::json& pair : refit.value("shared", nlohmann::json::array()))
        ++(true_turns.count(pair.get<std::string>()) ? run.turns_right : run.turns_wrong);
    run.mean_step = (true_time + static_cast<double>(o.job_steps - run.steps) * run.final_time) /
                    static_cast<double>(o.job_steps);
    live.on_detach();
  }
  return run;
}

// The best a long search of the truth finds over `grouping`: annealing from each heuristic that
// fits, the searches side by side (each is deterministic: the result does not depend on it).
double best_on_truth(const Simulator& truth, const placementd::PluginRegistry& registry,
                     const placement::Grouping& grouping, int64_t evaluations) {
  std::vector<std::vector<int>> starts;
  for (const std::string& name : placementd::offline::kSearchStarts) {
    if (!registry.has(placement::PluginKind::kPlacer, name)) continue;
    placementd::offline::BaselinePlacement b;
    try {
      b = placementd::offline::place_baseline(name, truth, registry, grouping, 1);
    } catch (const std::exception&) {
      continue;
    }
    if (b.fits && b.step_time_s) starts.push_back(std::move(b.device_of_group));
  }
  std::vector<double> found(starts.size(), INFINITY);
  std::vector<std::thread> searches;
  for (size_t i = 0; i < starts.size(); ++i)
    searches.emplace_back([&, i] {
      placementd::sim::AnnealOptions anneal;
      anneal.evaluations = evaluations;
      anneal.seed = 1;
      found[i] = placementd::sim::anneal(truth, grouping, starts[i], anneal).step_time_s;
    });
  for (std::thread& t : searches) t.join();
  return found.empty() ? INFINITY : *std::min_element(found.begin(), found.end());
}

// Where the job starts: its first GPU, as a job written for one GPU does, or where the first
// heuristic that fits puts it when one GPU cannot hold the model (a job split by hand).
placement::Placement start_placement(const Simulator& truth,
                                     const placementd::PluginRegistry& registry,
                                     const placement::Grouping& grouping) {
  const placement::DeviceSet& devices = truth.devices();
  int gpu = 0;
  for (size_t d = 0; d < devices.size(); ++d)
    if (devices.devices[d].kind == placement::DeviceKind::kCuda) {
      gpu = static_cast<int>(d);
      break;
    }
  placement::Placement start = placement::Placement::single(truth.graph(), gpu);
  start.enforce_pins(truth.graph(), devices);
  if (truth.simulate(start).valid) return start;
  for (const std::string& name : placementd::offline::kSearchStarts) {
    if (!registry.has(placement::PluginKind::kPlacer, name)) continue;
    try {
      placementd::offline::BaselinePlacement b =
          placementd::offline::place_baseline(name, truth, registry, grouping, 1);
      if (b.fits && b.step_time_s) return b.placement;
    } catch (const std::exception&) {
    }
  }
  throw std::runtime_error(
      "no start placement fits: not one GPU, nor any of the heuristics' placements");
}

double percent(double x) { return 100.0 * x; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "What learning online adds: the live phase against a planning model that is wrong in "
      "structured ways, "
      "on the papers' graphs and topologies (issue #45).",
      "online_learning_bench"};
  Options o;
  std::vector<std::string> scenario_names;
  for (const Scenario& s : scenarios()) scenario_names.push_back(s.name);
  o.scenarios = scenario_names;
  app.add_option("--models", o.models, "graphs under tests/data/graphs/papers (NAME.json.gz)")
      ->capture_default_str()
      ->check(shipped(graph_file));
  app.add_option("--topologies", o.topologies, "topologies under tests/data/topologies (NAME.toml)")
      ->capture_default_str()
      ->check(shipped(topology_file));
  std::string scenario_help = "how the planning model is wrong:";
  for (const Scenario& sc : scenarios()) scenario_help += " " + sc.name + " (" + sc.what + ");";
  scenario_help.pop_back();
  app.add_option("--scenarios", o.scenarios, scenario_help)
      ->capture_default_str()
      ->check(CLI::IsMember(scenario_names));
  app.add_option("--seeds", o.seeds, "seeds per model, topology and scenario")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  app.add_option("--threads", o.threads, "runs at once (each a session of its own)")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  app.add_option("--noise", o.noise, "log-normal sigma of each step's time around the truth")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--job-steps", o.job_steps,
                 "steps the job says it will run (its exploration budget is a share)")
      ->capture_default_str()
      ->check(examples::command_line::at_least(100));
  app.add_option("--best-evaluations", o.best_evaluations,
                 "placements the search of the truth simulates, per start")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  app.add_option("--budgets", o.budgets, "[exploration] max_candidates, one run each")
      ->capture_default_str()
      ->check(examples::command_line::at_least(1));
  app.add_option("--config", o.config,
                 "placementd.toml whose [policy] and [exploration] the job gets (default: the "
                 "built-in defaults with "
                 "warm_start = \"simulator\")")
      ->check(CLI::ExistingFile);
  app.add_flag("--log", o.log, "print the sessions' decisions (the daemon's info log)");
  app.add_flag("--check", o.check,
               "exit 1 when a target is not met (CI runs a short seeded version)");
  app.add_option("--floor", o.floor,
                 "with --check: the median gap recovered (percent) every budget must reach, "
                 "instead of the issue's "
                 "targets (50 at 30 candidates, 80 at 100)")
      ->check(CLI::Range(0.0, 100.0));
  return examples::command_line::run(app, argc, argv, [&] {
    const placementd::Config config =
        o.config.empty() ? placementd::parse_config("[policy]\nwarm_start = \"simulator\"\n",
                                                    "defaults", PLUGIN_DIR)
                         : placementd::load_config(o.config, PLUGIN_DIR);
    placementd::EffectivePolicy policy =
        placementd::effective_policy(config, "online-learning", ::getuid());
    // The search's wall-time limit would make a run depend on the machine; its evaluation count
    // bounds it instead.
    policy.warm_start_seconds = 0.0;
    placementd::PluginRegistry registry;
    registry.scan(config.plugin_dirs);
    // Each run's session logs its every trial: --log shows them (with --threads 1, in order).
    spdlog::set_level(o.log ? spdlog::level::info : spdlog::level::err);
    for (const auto& [kind, name] :
         {std::make_pair(placement::PluginKind::kGrouper, policy.grouper),
          std::make_pair(placement::PluginKind::kPlacer, policy.placer),
          std::make_pair(placement::PluginKind::kAlgorithm, policy.algorithm)})
      if (!name.empty() && !registry.has(kind, name))
        throw std::runtime_error("the policy's plugin '" + name + "' is not among the plugins in " +
                                 CLI::detail::join(config.plugin_dirs, ", ") +
                                 " (the LibTorch plugins need a build with LibTorch)");
    std::printf(
        "policy %s + %s + %s, warm start %s, %lld refits; noise sigma %.2f; job of %lld steps, "
        "%.0f%% for exploration; refinement: %lld contenders within %.0f%% of the steps, for "
        "gains of %.1f%%\n",
        policy.grouper.c_str(), policy.placer.c_str(), policy.algorithm.c_str(),
        policy.warm_start.empty() ? "none" : policy.warm_start.c_str(),
        static_cast<long long>(policy.refits), o.noise, static_cast<long long>(o.job_steps),
        percent(policy.exploration.max_overhead_fraction),
        static_cast<long long>(policy.exploration.refine_contenders),
        percent(policy.exploration.refine_fraction), percent(policy.exploration.refine_min_gain));
    std::printf(
        "T_best: annealing of the truth over the job's groups, %lld evaluations from each "
        "heuristic\n\n",
        static_cast<long long>(o.best_evaluations));
    std::printf("%-10s %-18s %-20s %4s %6s %10s %10s %10s %10s %9s %6s %7s %10s\n", "scenario",
                "topology", "model", "seed", "budget", "T_start", "T_warm", "T_final", "T_best",
                "recovered", "cands", "gained", "T_tried");
    // Per scenario and budget: gaps recovered, final-beats-warm where warm is >= 5% off, slower
    // ends.
    struct Tally {
      std::vector<double> recovered;
      // Each run with a gap: how far its warm start was off T_best (T_warm / T_best - 1), and
      // what it recovered.
      std::vector<std::pair<double, double>> by_gap;
      int no_gap = 0, off = 0, beat = 0, slower = 0, runs = 0;
      // Sums of log(T_start / T) over the runs, for geometric means of the speed-ups: the warm
      // start's answer, where the job ends, the whole job (exploration included), T_best.
      double log_warm = 0, log_final = 0, log_job = 0, log_best = 0;
      uint64_t candidates = 0, most_candidates = 0, turns_right = 0, turns_wrong = 0;
    };
    std::map<std::pair<std::string, int64_t>, Tally> tally;
    for (const std::string& topology_name : o.topologies) {
      const placement::DeviceSet topology =
          placementd::sim::load_topology(topology_file(topology_name));
      for (const std::string& model : o.models) {
        const placement::OpGraph graph = placement::load_graph_file(graph_file(model));
        // T_best of each truth: the scenarios whose planning model alone is wrong share one (the
        // search is deterministic), so it is searched once.
        std::map<std::pair<const void*, const void*>, double> best_of_truth;
        for (const Scenario& scenario : scenarios()) {
          if (std::find(o.scenarios.begin(), o.scenarios.end(), scenario.name) == o.scenarios.end())
            continue;
          const placement::DeviceSet truth_devices = scenario.truth_devices(topology);
          placementd::sim::SimulatorOptions truth_options;
          if (scenario.shared_with) truth_options.shared_with = scenario.shared_with(truth_devices);
          const Simulator truth(graph, truth_devices, truth_options);
          if (!truth.memory_floor().fits_all_devices) {
            std::printf("%-10s %-18s %-20s no placement fits: skipped\n", scenario.name.c_str(),
                        topology_name.c_str(), model.c_str());
            continue;
          }
          // The job's groups, as the session makes them (the grouper reads the graph's structure).
          auto grouper = registry.create_grouper(policy.grouper, policy.grouper_params);
          std::mt19937_64 group_rng(1);
          const placement::Grouping grouping = placementd::cap_groups(
              truth.graph(), grouper->group(truth.graph(), truth.devices(), group_rng),
              policy.max_groups);
          const auto truth_key =
              std::make_pair(reinterpret_cast<const void*>(scenario.truth_devices),
                             reinterpret_cast<const void*>(scenario.shared_with));
          if (!best_of_truth.count(truth_key))
            best_of_truth[truth_key] = best_on_truth(truth, registry, grouping, o.best_evaluations);
          const double best = best_of_truth.at(truth_key);
          const placement::Placement start = start_placement(truth, registry, grouping);
          // Every seed and budget of this case, on --threads threads; printed in their order.
          std::vector<std::pair<int64_t, int64_t>> jobs;
          for (int64_t seed = 1; seed <= o.seeds; ++seed)
            for (const int64_t budget : o.budgets) jobs.emplace_back(seed, budget);
          std::vector<Run> runs(jobs.size());
          std::vector<std::string> errors(jobs.size());
          std::atomic<size_t> next{0};
          auto work = [&] {
            for (size_t i = next++; i < jobs.size(); i = next++) {
              const auto [seed, budget] = jobs[i];
              try {
                std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919);
                const Planning planning = scenario.plan(graph, truth, topology, rng);
                runs[i] = run_job(truth, planning, policy, budget, start,
                                  static_cast<uint64_t>(seed), o, registry);
              } catch (const std::exception& e) {
                errors[i] = e.what();
              }
            }
          };
          std::vector<std::thread> threads;
          for (int64_t t = 1; t < o.threads; ++t) threads.emplace_back(work);
          work();
          for (std::thread& t : threads) t.join();
          for (size_t i = 0; i < jobs.size(); ++i) {
            const auto [seed, budget] = jobs[i];
            if (!errors[i].empty())
              throw std::runtime_error(scenario.name + " " + topology_name + " " + model +
                                       " seed " + std::to_string(seed) + ": " + errors[i]);
            Run& r = runs[i];
            r.best = std::min({best, r.final_time, r.warm, r.start, r.tried});
            Tally& t = tally[{scenario.name, budget}];
            ++t.runs;
            t.log_warm += std::log(r.start / r.warm);
            t.log_final += std::log(r.start / r.final_time);
            t.log_job += std::log(r.start / r.mean_step);
            t.log_best += std::log(r.start / r.best);
            t.candidates += r.candidates;
            t.most_candidates = std::max(t.most_candidates, r.candidates);
            t.turns_right += r.turns_right;
            t.turns_wrong += r.turns_wrong;
            const std::optional<double> recovered = r.recovered();
            if (recovered) {
              t.recovered.push_back(*recovered);
              t.by_gap.emplace_back(r.warm / r.best - 1.0, *recovered);
            } else
              ++t.no_gap;
            if (r.warm >= 1.05 * r.best) {
              ++t.off;
              if (r.final_time < r.warm) ++t.beat;
            }
            if (r.final_time > 1.01 * r.start) ++t.slower;
            std::printf(
                "%-10s %-18s %-20s %4lld %6lld %10.3f %10.3f %10.3f %10.3f %9s %6llu %6.3fx "
                "%10.3f\n",
                scenario.name.c_str(), topology_name.c_str(), model.c_str(),
                static_cast<long long>(seed), static_cast<long long>(budget), r.start * 1e3,
                r.warm * 1e3, r.final_time * 1e3, r.best * 1e3,
                recovered
                    ? (std::to_string(static_cast<int>(std::lround(percent(*recovered)))) + "%")
                          .c_str()
                    : "no gap",
                static_cast<unsigned long long>(r.candidates), r.start / r.mean_step,
                r.tried * 1e3);
          }
          std::fflush(stdout);
        }
      }
    }
    std::printf("\n%-10s %6s %6s %16s %14s %14s %22s %16s\n", "scenario", "budget", "runs",
                "median recovered", "(<0 / 0 / >0)", "warm no gap", "beats warm (warm >=5%)",
                "ends slower");
    bool met = true;
    for (const auto& [key, t] : tally) {
      const double med = t.recovered.empty() ? NAN : median(t.recovered);
      char recovered[32] = "-";
      if (!t.recovered.empty()) std::snprintf(recovered, sizeof(recovered), "%.0f%%", percent(med));
      // As the runs' lines print them: "0%" is no change.
      const auto count = [&](auto keep) {
        return std::count_if(t.recovered.begin(), t.recovered.end(), keep);
      };
      const std::string signs =
          std::to_string(count([](double x) { return std::lround(percent(x)) < 0; })) + " / " +
          std::to_string(count([](double x) { return std::lround(percent(x)) == 0; })) + " / " +
          std::to_string(count([](double x) { return std::lround(percent(x)) > 0; }));
      std::printf("%-10s %6lld %6d %16s %14s %14d %15d of %-4d %16d\n", key.first.c_str(),
                  static_cast<long long>(key.second), t.runs, recovered, signs.c_str(), t.no_gap,
                  t.beat, t.off, t.slower);
      const double target = o.floor             ? *o.floor / 100.0
                            : key.second >= 100 ? 0.8
                            : key.second >= 30  ? 0.5
                                                : 0.0;
      if (!t.recovered.empty() && med < target) met = false;
      // A refit that has devices take turns which compute at once plans around a fault they do
      // not have.
      if (t.slower > 0 || t.turns_wrong > 0) met = false;
    }
    // Small gaps are near what the job's noise lets a trial show: the smallest gain a long trial
    // of refinement (its steps, refine_fraction of the job's, in equal shares among its
    // contenders; half on each placement) shows at 95% (one-sided) with 80% power, for log-normal
    // step times of sigma --noise.
    const placementd::ExplorationConfig& e = policy.exploration;
    const double trial_steps = e.refine_fraction * static_cast<double>(o.job_steps) /
                               static_cast<double>(std::max<int64_t>(1, e.refine_contenders));
    const double resolvable = std::expm1((1.645 + 0.842) * o.noise * 2.0 / std::sqrt(trial_steps));
    std::printf(
        "\nmedian recovered by how far the warm start was off T_best (runs); a long trial of %.0f "
        "steps (refinement's share per contender) shows a gain of %.1f%% at 95%% with 80%% "
        "power:\n%-10s %6s %16s %16s %16s\n",
        trial_steps, percent(resolvable), "scenario", "budget", "1-2% off", "2-5% off",
        ">= 5% off");
    for (const auto& [key, t] : tally) {
      std::string cells[3];
      const double bounds[4] = {0.0, 0.02, 0.05, INFINITY};
      for (int band = 0; band < 3; ++band) {
        std::vector<double> in;
        for (const auto& [gap, recovered] : t.by_gap)
          if (gap >= bounds[band] && gap < bounds[band + 1]) in.push_back(recovered);
        char cell[32] = "-";
        if (!in.empty())
          std::snprintf(cell, sizeof(cell), "%.0f%% (%zu)", percent(median(in)), in.size());
        cells[band] = cell;
      }
      std::printf("%-10s %6lld %16s %16s %16s\n", key.first.c_str(),
                  static_cast<long long>(key.second), cells[0].c_str(), cells[1].c_str(),
                  cells[2].c_str());
    }
    std::printf(
        "\nspeed-up over the start, geometric mean over the runs; pairs of devices the refits "
        "found "
        "taking turns, right (wrong):\n%-10s %6s %12s %12s %12s %8s %18s %12s\n",
        "scenario", "budget", "warm start", "job ends", "whole job", "T_best",
        "candidates (mean, most)", "turns found");
    for (const auto& [key, t] : tally) {
      const double n = t.runs;
      std::printf("%-10s %6lld %11.3fx %11.3fx %11.3fx %7.3fx %12.1f, %-5llu %5llu (%llu)\n",
                  key.first.c_str(), static_cast<long long>(key.second), std::exp(t.log_warm / n),
                  std::exp(t.log_final / n), std::exp(t.log_job / n), std::exp(t.log_best / n),
                  static_cast<double>(t.candidates) / n,
                  static_cast<unsigned long long>(t.most_candidates),
                  static_cast<unsigned long long>(t.turns_right),
                  static_cast<unsigned long long>(t.turns_wrong));
    }
    if (o.floor)
      std::printf(
          "\nmedian recovered >= %.0f%% at every budget (over the runs with a gap); no run ends "
          "slower; no refit finds turns where none are taken: %s\n",
          *o.floor, met ? "met" : "not met");
    else
      std::printf(
          "\ntargets (issue #45): median recovered >= 80%% at 100 candidates, >= 50%% at 30 (over "
          "the runs "
          "with a gap); no run ends slower; no refit finds turns where none are taken: %s\n",
          met ? "met" : "not met");
    return o.check && !met ? 1 : 0;
  });
}
