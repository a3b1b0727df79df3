#include "planning/offline/warm_start.h"

#include "planning/offline/baseline.h"
#include "planning/sim/model_error.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <stdexcept>

namespace placementd::offline {

namespace {

double per_group_probability(placement::TrainablePolicy& policy, const std::vector<int>& target) {
  if (target.empty()) return 1.0;
  return std::exp(policy.log_prob(target) / static_cast<double>(target.size()));
}

}  // namespace

nlohmann::json to_json(const ImitationResult& r) {
  using nlohmann::json;
  json j = {{"baseline", r.baseline},
            {"baseline_step_time_s",
             r.baseline_step_time_s ? json(*r.baseline_step_time_s) : json(nullptr)},
            {"steps", r.steps},
            {"probability_before", r.probability_before},
            {"probability_after", r.probability_after},
            {"skipped", r.skipped.empty() ? json(nullptr) : json(r.skipped)}};
  if (r.search_evaluations > 0) {
    j["search_start"] = r.search_start;
    j["search_start_step_time_s"] =
        r.search_start_step_time_s ? json(*r.search_start_step_time_s) : json(nullptr);
    j["search_evaluations"] = r.search_evaluations;
    j["search_ensemble"] = r.search_ensemble;
  }
  return j;
}

void imitate(placement::TrainablePolicy& policy, const std::vector<int>& target,
             const ImitationOptions& options, ImitationResult& r) {
  r.action = target;
  r.steps = 0;
  r.probability_before = per_group_probability(policy, target);
  r.probability_after = r.probability_before;
  const placement::OptimizerSettings settings{options.learning_rate, 1.0};
  while (r.steps < options.max_steps && r.probability_after < options.target_probability) {
    policy.accumulate_gradient({target}, {1.0}, 0.0);
    policy.apply_gradient(settings);
    ++r.steps;
    r.probability_after = per_group_probability(policy, target);
  }
}

namespace {

// The placement of the placer `name` and its simulated time (nullopt when the graph is not
// profiled for it); throws with the reason when the placer fails or its placement does not fit.
BaselinePlacement fitting_baseline(const std::string& name, const sim::Simulator& simulator,
                                   const PluginRegistry& registry,
                                   const placement::Grouping& grouping, uint64_t seed,
                                   const sim::Simulator* judge = nullptr) {
  BaselinePlacement b = place_baseline(name, simulator, registry, grouping, seed, judge);
  if (!b.fits) throw std::invalid_argument(name + "'s placement does not fit: " + b.why);
  return b;
}

// The simulator warm start's target: annealing from the fastest heuristic placement that fits, or
// from options.search_from when the model says it is faster still.
std::vector<int> search(const sim::Simulator& simulator, const PluginRegistry& registry,
                        const placement::Grouping& grouping, const ImitationOptions& options,
                        uint64_t seed, ImitationResult& r) {
  const auto& ops = simulator.graph().ops;
  if (std::none_of(ops.begin(), ops.end(),
                   [](const placement::Op& op) { return !op.profile.empty(); }))
    throw std::invalid_argument(
        "the graph has no profile, so the simulator cannot time its placements "
        "(capture it with profiles: placementctl capture MODEL --profile cpu)");
  std::vector<int> start;
  std::string why;
  if (options.search_from) {
    try {
      placement::Placement p =
          placement::Placement::from_groups(grouping, options.search_from->second);
      p.enforce_pins(simulator.graph(), simulator.devices());
      const sim::SimulationResult s = simulator.simulate(p);
      if (s.valid) {
        r.search_start = options.search_from->first;
        r.search_start_step_time_s = s.step_time_s;
        start = options.search_from->second;
      }
    } catch (const std::invalid_argument&) {
      // The model cannot time it (an op on a device kind it has no profile for): not a start.
    }
  }
  for (const std::string& name : kSearchStarts) {
    if (!registry.has(placement::PluginKind::kPlacer, name)) continue;
    try {
      BaselinePlacement b = fitting_baseline(name, simulator, registry, grouping, seed);
      if (!b.step_time_s) {
        why =
            "the graph has no profile for every device kind it may use, so the simulator cannot "
            "time it "
            "(capture it with profiles for these devices)";
        continue;
      }
      if (!r.search_start_step_time_s || *b.step_time_s < *r.search_start_step_time_s) {
        r.search_start = name;
        r.search_start_step_time_s = b.step_time_s;
        start = std::move(b.device_of_group);
      }
    } catch (const std::exception& e) {
      if (why.empty()) why = e.what();
    }
  }
  if (start.empty())
    throw std::invalid_argument("no heuristic placement to start the search from" +
                                (why.empty() ? "" : ": " + why));
  sim::AnnealOptions anneal = options.search;
  anneal.seed = seed;
  // The model's own uncertainty: copies of it off the way it may be off from the truth.
  std::vector<sim::Simulator> ensemble;
  ensemble.reserve(static_cast<size_t>(std::max<int64_t>(options.search_ensemble, 0)));
  for (int64_t i = 0; i < options.search_ensemble; ++i)
    ensemble.push_back(sim::with_model_error(simulator, options.search_ensemble_sigma,
                                             seed * 7919 + static_cast<uint64_t>(i) + 1));
  for (const sim::Simulator& model : ensemble) anneal.ensemble.push_back(&model);
  sim::AnnealResult found = sim::anneal(simulator, grouping, std::move(start), anneal);
  r.search_evaluations = found.evaluations;
  r.search_ensemble = static_cast<int64_t>(ensemble.size());
  // On the model itself, as the start's time is (the search minimised the ensemble's mean).
  placement::Placement answer = placement::Placement::from_groups(grouping, found.device_of_group);
  answer.enforce_pins(simulator.graph(), simulator.devices());
  r.baseline_step_time_s = simulator.simulate(answer).step_time_s;
  return std::move(found.device_of_group);
}

}  // namespace

ImitationResult imitate_baseline(placement::TrainablePolicy* policy,
                                 const sim::Simulator& simulator, const PluginRegistry& registry,
                                 const placement::Grouping& grouping,
                                 const ImitationOptions& options, uint64_t seed,
                                 const placement::Action& prefix, const sim::Simulator* judge) {
  ImitationResult found;
  found.baseline = options.baseline;
  if (options.baseline.empty()) {
    found.skipped = "no baseline to imitate";
    return found;
  }
  if (!policy) {
    found.skipped = "the placer is deterministic: nothing to warm-start";
    return found;
  }
  const bool searching = options.baseline == kSimulatorWarmStart;
  if (!searching && !registry.has(placement::PluginKind::kPlacer, options.baseline)) {
    found.skipped = "placer plugin '" + options.baseline + "' is not loaded";
    return found;
  }
  std::vector<int> target;
  try {
    if (searching) {
      target = search(simulator, registry, grouping, options, seed, found);
    } else {
      BaselinePlacement b =
          fitting_baseline(options.baseline, simulator, registry, grouping, seed, judge);
      target = std::move(b.device_of_group);
      found.baseline_step_time_s = b.step_time_s;
    }
  } catch (const std::exception& e) {
    found.skipped = searching ? std::string("simulator search: ") + e.what() : e.what();
    return found;
  }
  placement::Action action = prefix;
  action.insert(action.end(), target.begin(), target.end());
  found.placement = placement::Placement::from_groups(grouping, target);
  found.placement.enforce_pins(simulator.graph(), simulator.devices());
  if (options.skip_target && options.skip_target(found.placement)) {
    found.action = std::move(action);
    found.skipped = options.why_skipped;
    return found;
  }
  imitate(*policy, action, options, found);
  return found;
}

}  // namespace placementd::offline
