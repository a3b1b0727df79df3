#include "planning/sim/annealing.h"

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

namespace placementd::sim {

namespace {

// Step time, or nullopt when the placement cannot be a candidate; `why` says why.
std::optional<double> step_time(const Simulator& simulator, const placement::Placement& p,
                                std::string* why = nullptr) {
  try {
    const SimulationResult r = simulator.simulate(p);
    if (r.valid) return r.step_time_s;
    if (why) *why = r.invalid_reason;
  } catch (const std::invalid_argument& e) {
    if (why) *why = e.what();
  }
  return std::nullopt;
}

// The mean over `simulator` and `ensemble`; nullopt when `simulator` rejects the placement or one
// of them cannot time it. Memory is `simulator`'s to check (AnnealOptions::ensemble).
std::optional<double> mean_step_time(const Simulator& simulator,
                                     const std::vector<const Simulator*>& ensemble,
                                     const placement::Placement& p, std::string* why = nullptr) {
  std::optional<double> total = step_time(simulator, p, why);
  for (const Simulator* model : ensemble) {
    if (!total) return std::nullopt;
    try {
      *total += model->step_time_s(p);
    } catch (const std::invalid_argument& e) {
      if (why) *why = e.what();
      return std::nullopt;
    }
  }
  if (total) *total /= static_cast<double>(1 + ensemble.size());
  return total;
}

}  // namespace

AnnealResult anneal(const Simulator& simulator, const placement::Grouping& grouping,
                    std::vector<int> start, const AnnealOptions& options) {
  const placement::OpGraph& graph = simulator.graph();
  const placement::DeviceSet& devices = simulator.devices();
  grouping.validate(graph);
  if (start.size() != static_cast<size_t>(grouping.num_groups))
    throw std::invalid_argument("annealing start has " + std::to_string(start.size()) +
                                " devices for " + std::to_string(grouping.num_groups) + " groups");
  const auto members = grouping.members();
  auto placement_of = [&](const std::vector<int>& device_of_group) {
    placement::Placement p = placement::Placement::from_groups(grouping, device_of_group);
    p.enforce_pins(graph, devices);
    return p;
  };
  std::string why;
  const std::optional<double> first =
      mean_step_time(simulator, options.ensemble, placement_of(start), &why);
  if (!first)
    throw std::invalid_argument("the start of the search is not a valid placement: " + why);

  AnnealResult result;
  result.device_of_group = start;
  result.step_time_s = result.start_step_time_s = *first;
  const int D = static_cast<int>(devices.size());
  if (D < 2 || grouping.num_groups == 0) return result;

  // Where Placement::enforce_pins sends an op pinned to another kind: the first device of its kind.
  std::map<placement::DeviceKind, int> first_of_kind;
  for (int d = D - 1; d >= 0; --d) first_of_kind[devices.devices[d].kind] = d;
  auto device_for = [&](int op, int device) {
    const auto& pinned = graph.ops[op].pinned;
    return !pinned || devices.devices[device].kind == *pinned ? device : first_of_kind.at(*pinned);
  };

  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int> pick_group(0, grouping.num_groups - 1), pick_other(1, D - 1);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<int> current = std::move(start);
  placement::Placement placement = placement_of(current);
  double current_time = *first;
  const double t0 = options.start_temperature * *first;
  const auto started = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < options.evaluations; ++i) {
    if (options.max_seconds > 0 && i % 64 == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() >
            options.max_seconds)
      break;
    const double temperature =
        t0 * std::pow(options.cooling,
                      static_cast<double>(i) /
                          static_cast<double>(std::max<int64_t>(options.evaluations, 1)));
    // Half the moves send one group elsewhere; half swap two groups' devices, which keeps the
    // load balanced and so gets out of the minima where every single move would overload a device.
    int g = pick_group(rng), h = -1;
    int to = (current[g] + pick_other(rng)) % D;  // any other device, uniformly
    if (grouping.num_groups > 1 && uniform(rng) < 0.5) {
      h = pick_group(rng);
      if (current[h] == current[g]) continue;
      to = current[h];
    }
    const int was = current[g];
    auto assign = [&](int group, int device) {
      for (int op : members[group]) placement.device_of_op[op] = device_for(op, device);
    };
    assign(g, to);
    if (h >= 0) assign(h, was);
    ++result.evaluations;
    const std::optional<double> t = mean_step_time(simulator, options.ensemble, placement);
    const bool accept =
        t && (*t <= current_time || uniform(rng) < std::exp((current_time - *t) / temperature));
    if (!accept) {
      assign(g, was);
      if (h >= 0) assign(h, to);
      continue;
    }
    current[g] = to;
    if (h >= 0) current[h] = was;
    current_time = *t;
    if (current_time < result.step_time_s) {
      result.step_time_s = current_time;
      result.device_of_group = current;
    }
  }
  return result;
}

}  // namespace placementd::sim
