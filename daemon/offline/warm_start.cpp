#include "warm_start.h"

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
  return {{"baseline", r.baseline},
          {"baseline_step_time_s", r.baseline_step_time_s ? json(*r.baseline_step_time_s) : json(nullptr)},
          {"steps", r.steps},
          {"probability_before", r.probability_before},
          {"probability_after", r.probability_after},
          {"skipped", r.skipped.empty() ? json(nullptr) : json(r.skipped)}};
}

ImitationResult imitate(placement::TrainablePolicy& policy, const std::vector<int>& target,
                        const ImitationOptions& options) {
  ImitationResult r;
  r.baseline = options.baseline;
  r.action = target;
  r.probability_before = per_group_probability(policy, target);
  r.probability_after = r.probability_before;
  const placement::OptimizerSettings settings{options.learning_rate, 1.0};
  while (r.steps < options.max_steps && r.probability_after < options.target_probability) {
    policy.accumulate_gradient({target}, {1.0}, 0.0);
    policy.apply_gradient(settings);
    ++r.steps;
    r.probability_after = per_group_probability(policy, target);
  }
  return r;
}

ImitationResult imitate_baseline(placement::TrainablePolicy* policy, const sim::Simulator& simulator,
                                 const PluginRegistry& registry, const placement::Grouping& grouping,
                                 const ImitationOptions& options, uint64_t seed, const placement::Action& prefix) {
  ImitationResult skipped;
  skipped.baseline = options.baseline;
  if (options.baseline.empty()) {
    skipped.skipped = "no baseline to imitate";
    return skipped;
  }
  if (!policy) {
    skipped.skipped = "the placer is deterministic: nothing to warm-start";
    return skipped;
  }
  if (!registry.has(placement::PluginKind::kPlacer, options.baseline)) {
    skipped.skipped = "placer plugin '" + options.baseline + "' is not loaded";
    return skipped;
  }
  std::vector<int> target;
  try {
    auto baseline = registry.create_placer(options.baseline, {});
    std::mt19937_64 rng(seed);
    baseline->prepare(simulator.graph(), grouping, simulator.devices(), rng);
    target = baseline->place(rng);
    placement::Placement p = placement::Placement::from_groups(grouping, target);
    p.enforce_pins(simulator.graph(), simulator.devices());
    const sim::SimulationResult memory = simulator.check_memory(p);
    if (!memory.valid) {
      skipped.skipped = options.baseline + "'s placement does not fit: " + memory.invalid_reason;
      return skipped;
    }
    try {
      skipped.baseline_step_time_s = simulator.simulate(p).step_time_s;
    } catch (const std::invalid_argument&) {
      // Unprofiled ops (a live job before its profile): the baseline is still a sensible start.
    }
  } catch (const std::exception& e) {
    skipped.skipped = options.baseline + ": " + e.what();
    return skipped;
  }
  placement::Action action = prefix;
  action.insert(action.end(), target.begin(), target.end());
  ImitationResult r = imitate(*policy, action, options);
  r.baseline_step_time_s = skipped.baseline_step_time_s;
  return r;
}

}  // namespace placementd::offline
