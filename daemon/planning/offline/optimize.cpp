#include "planning/offline/optimize.h"

#include "planning/offline/baseline.h"
#include "planning/policy_pipeline.h"
#include "planning/sim/model_assisted_selection.h"
#include "planning/sim/model_error.h"

#include <chrono>
#include <cmath>
#include <random>

namespace placementd::offline {

namespace {

using placement::Placement;

// What a candidate costs, or nullopt when it cannot be one: the memory model rejects it (devices
// at fault counted), or an op sits on a device kind it has no profile for.
std::optional<double> evaluate(const sim::Simulator& simulator, const Placement& placement,
                               std::map<std::string, int64_t>& rejected_on) {
  const sim::SimulationResult memory = simulator.check_memory(placement);
  if (!memory.valid) {
    for (size_t d : memory.over_capacity()) ++rejected_on[simulator.devices().devices[d].name()];
    return std::nullopt;
  }
  try {
    return simulator.simulate(placement).step_time_s;
  } catch (const std::invalid_argument&) {
    ++rejected_on["unprofiled device kind"];  // its cost is unknown, so it is not a candidate
    return std::nullopt;
  }
}

}  // namespace

const std::map<std::string, OptimizeOptions::Selection>& selection_names() {
  static const std::map<std::string, OptimizeOptions::Selection> names = {
      {"model", OptimizeOptions::Selection::kModelAssisted},
      {"measured", OptimizeOptions::Selection::kMeasured}};
  return names;
}

std::string name_of(OptimizeOptions::Selection selection) {
  for (const auto& [name, s] : selection_names())
    if (s == selection) return name;
  return "unknown";
}

OptimizeResult optimize(const sim::Simulator& simulator, const PluginRegistry& registry,
                        const OptimizeOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const placement::OpGraph& graph = simulator.graph();
  const placement::DeviceSet& devices = simulator.devices();
  std::mt19937_64 rng(options.seed);

  auto grouper = registry.create_grouper(options.grouper.name, options.grouper.params);
  auto placer = registry.create_placer(options.placer.name, options.placer.params);
  auto algorithm = registry.create_algorithm(options.algorithm.name, options.algorithm.params);
  PolicyPipeline pipeline(*grouper, *placer, graph, devices, rng, options.max_groups);
  // With a learned grouper, baselines and the warm start use its first grouping.
  const placement::Grouping grouping = pipeline.grouping();
  placement::TrainablePolicy* policy = pipeline.policy();
  algorithm->reset({policy, options.failing_reward});

  OptimizeResult result;
  result.num_groups = grouping.num_groups;
  result.lower_bound_s = simulator.lower_bound_s();
  // What every planner sees — the warm start's search, the baseline placers — is a model of the
  // truth off by options.model_error, as profiles are off from real steps; the truth only times
  // the placements they choose. The seed's complement: the model's errors must not correlate with
  // the measurement noise.
  const sim::Simulator model = sim::with_model_error(simulator, options.model_error, ~options.seed);
  if (!options.imitation.baseline.empty())
    result.imitation = imitate_baseline(policy, model, registry, grouping, options.imitation,
                                        options.seed, pipeline.action_for({}), &simulator);
  // A warm-started policy's first candidate is what it imitated (its mode), not a sample around it.
  std::optional<PolicyPipeline::Sample> first;
  if (result.imitation && result.imitation->skipped.empty())
    first = PolicyPipeline::Sample{result.imitation->action, result.imitation->placement};

  // The policy's candidates. A deterministic placer has one answer: evaluating it again teaches
  // nothing, so it is evaluated once.
  std::normal_distribution<double> noise(0.0, 1.0);
  const bool assisted = options.selection == OptimizeOptions::Selection::kModelAssisted;
  sim::ModelAssistedSelection selection;  // tagged with the evaluation's index in result.curve
  std::optional<double> best_measured;
  const int64_t budget = policy ? options.budget : std::min<int64_t>(options.budget, 1);
  for (int64_t i = 0; i < budget; ++i) {
    const PolicyPipeline::Sample sample = i == 0 && first ? *first : pipeline.sample(rng);
    const std::vector<int>& action = sample.action;
    const Placement& candidate = sample.placement;
    Evaluation e;
    e.step_time_s = evaluate(simulator, candidate, result.invalid_by_device);
    if (!e.step_time_s) {
      ++result.invalid_rejected;
      algorithm->observe(action, options.failing_reward, false);
    } else {
      e.valid = true;
      // Measurement noise of a real step time; never below a tenth of the truth.
      e.measured_s = *e.step_time_s * std::max(0.1, 1.0 + options.noise * noise(rng));
      algorithm->observe(action, -std::sqrt(*e.measured_s), true);
      // The best is chosen on what was measured (and what the planners' model predicts), as a
      // live session must; its true time is reported.
      if (assisted) {
        selection.add(candidate.device_of_op, model.simulate(candidate).step_time_s, *e.measured_s,
                      options.noise, result.curve.size());
        const auto best = *selection.best();
        result.policy_best_s =
            best.tag == result.curve.size() ? e.step_time_s : result.curve[best.tag].step_time_s;
        result.best.device_of_op = *best.device_of_op;
      } else if (!best_measured || *e.measured_s < *best_measured) {
        best_measured = e.measured_s;
        result.policy_best_s = e.step_time_s;
        result.best = candidate;
      }
    }
    e.best_so_far_s = result.policy_best_s;
    result.curve.push_back(e);
    if (options.progress) options.progress(i + 1, budget, result.policy_best_s);
  }
  result.evaluations = static_cast<int64_t>(result.curve.size());
  result.estimated_model_error = selection.model_error();
  if (result.policy_best_s)
    for (size_t i = 0; i < result.curve.size(); ++i)
      if (result.curve[i].best_so_far_s &&
          *result.curve[i].best_so_far_s <= 1.02 * *result.policy_best_s) {
        result.evaluations_to_within_2pct = static_cast<int64_t>(i + 1);
        break;
      }

  // Baselines, over the same grouping; the answer is never worse than the best of them.
  if (result.policy_best_s) {
    result.best_step_time_s = *result.policy_best_s;
    result.best_source = "policy";
  }
  for (const std::string& name : options.baselines) {
    if (!registry.has(placement::PluginKind::kPlacer, name)) continue;
    try {
      const BaselinePlacement b =
          place_baseline(name, model, registry, grouping, options.seed, &simulator);
      const std::optional<double>& t = b.step_time_s;
      const Placement& p = b.placement;
      result.baselines[name] = t;
      if (!t) result.baseline_errors[name] = b.why;
      if (t && (result.best_source.empty() || *t < result.best_step_time_s)) {
        result.best_step_time_s = *t;
        result.best = p;
        result.best_source = "baseline:" + name;
      }
    } catch (const std::exception& e) {
      result.baselines[name] = std::nullopt;
      result.baseline_errors[name] = e.what();
    }
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace placementd::offline
