#pragma once
// placementctl's subcommands. Each returns the process exit code and prints either aligned
// tables or, with --json, one JSON document on stdout.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "placement/graph.h"
#include "planning/offline/optimize.h"
#include "planning/sim/simulator.h"

namespace placementctl {

struct Globals {
  std::string socket;
  bool json = false;
  int timeout_ms = 5000;
};

int status(const Globals& g);
int jobs(const Globals& g, bool all, bool finished);
/// `plot`: where to write the learning curve as SVG (empty: none).
int job_show(const Globals& g, uint64_t id, const std::string& plot);
int plugins(const Globals& g);
int reload(const Globals& g);
/// Reads a graph for the offline planners (simulate, optimize). A graph in which no op has a
/// profile or the work capture counts cannot be timed: it is refused with what to do about it
/// instead of simulating every placement at zero seconds.
placement::OpGraph load_timeable_graph(const std::string& path);
/// Says on stderr which devices of the topology file some ops cannot be timed on, and why.
void warn_untimeable(const placementd::sim::Simulator& sim, const std::string& topology_file);
/// Data-parallel replicas for simulate and optimize: the placement runs on `replicas` nodes whose
/// gradients a ring all-reduce averages over the topology's link between nodes.
struct ReplicaArgs {
  int replicas = 1;
  double bucket_mib = 25.0;
  /// Overlap the all-reduce with backward (torch's DDP) instead of running it after (the SDK's).
  bool overlap = false;
};
/// The simulator's replicas for `args` on `topology` (read from `topology_file`); throws
/// std::invalid_argument naming the file when more than one replica has no link between nodes.
placementd::sim::SimulatorOptions::Replicas replica_options(
    const ReplicaArgs& args, const placementd::sim::Topology& topology,
    const std::string& topology_file);
/// " x 8 nodes (ring all-reduce over 50.0 GB/s, 25 MiB buckets, after backward)"; "" for one.
std::string describe_replicas(const placementd::sim::SimulatorOptions::Replicas& replicas);
/// Works offline: no daemon needed.
int config_check(const Globals& g, const std::string& file);
/// Offline: predicted step time and memory of a placement (or, without one, of every
/// single-device placement), and the lower bound.
int simulate(const Globals& g, const std::string& graph, const std::string& topology,
             const std::string& placement, const placementd::sim::MathModes& math,
             const ReplicaArgs& replicas);
/// Offline: the cost model's forward and backward time per op kind against the graph's measured
/// profiles, for each device of the topology with a spec and a profile of its kind.
int compare_costs(const Globals& g, const std::string& graph, const std::string& topology,
                  const placementd::sim::MathModes& math);

// Defaults are the library's own (OptimizeOptions and what it holds), so the two cannot drift.
struct OptimizeArgs {
  std::string graph, topology;
  placementd::sim::MathModes math;
  ReplicaArgs replicas;
  std::string grouper = placementd::offline::OptimizeOptions{}.grouper.name,
              placer = placementd::offline::OptimizeOptions{}.placer.name,
              algorithm = placementd::offline::OptimizeOptions{}.algorithm.name;
  int max_groups = placementd::offline::OptimizeOptions{}.max_groups;
  int64_t budget = placementd::offline::OptimizeOptions{}.budget;
  uint64_t seed = placementd::offline::OptimizeOptions{}.seed;
  double noise = placementd::offline::OptimizeOptions{}.noise;
  /// Warm start: the baseline placer the policy imitates first, or "simulator" for a search of the
  /// planning model ("": none), and its step limit.
  std::string imitate;
  int64_t imitation_steps = placementd::offline::ImitationOptions{}.max_steps;
  /// The simulator warm start: placements it simulates, the model copies it also times on, and the
  /// planning model's log-normal error.
  int64_t search_evaluations = placementd::sim::AnnealOptions{}.evaluations;
  int64_t search_ensemble = placementd::offline::ImitationOptions{}.search_ensemble;
  double model_error = placementd::offline::OptimizeOptions{}.model_error;
  /// A name of placementd::offline::selection_names().
  std::string selection =
      placementd::offline::name_of(placementd::offline::OptimizeOptions{}.selection);
  /// KIND.KEY=VALUE plugin hyperparameters.
  std::vector<std::string> settings;
  std::vector<std::string> plugin_dirs;
  std::string out, plot;
  /// "auto" (when stderr is a terminal), "on", "off".
  std::string progress = "auto";
};
/// Offline: trains the policy against the simulator and compares it with the baselines.
int optimize(const Globals& g, const OptimizeArgs& args);

/// One line on what a warm start did, from its JSON (jobs show, optimize): "imitated metis in 12
/// steps; per-group probability 0.50 -> 0.91", "searched N simulated placements from ... imitated
/// in ..." for the simulator warm start, or "skipped: <why>".
std::string describe_warm_start(const nlohmann::json& warm_start);

}  // namespace placementctl
