#include "planning/offline/baseline.h"

#include <random>
#include <stdexcept>

namespace placementd::offline {

BaselinePlacement place_baseline(const std::string& name, const sim::Simulator& simulator,
                                 const PluginRegistry& registry,
                                 const placement::Grouping& grouping, uint64_t seed,
                                 const sim::Simulator* judge) {
  auto placer = registry.create_placer(name, {});
  std::mt19937_64 rng(seed);
  placer->prepare(simulator.graph(), grouping, simulator.devices(), rng);
  BaselinePlacement b;
  b.device_of_group = placer->place(rng);
  b.placement = placement::Placement::from_groups(grouping, b.device_of_group);
  b.placement.enforce_pins(simulator.graph(), simulator.devices());
  b.placement.validate(simulator.graph(), simulator.devices());
  const sim::Simulator& truth = judge ? *judge : simulator;
  const sim::SimulationResult memory = truth.check_memory(b.placement);
  b.fits = memory.valid;
  if (!b.fits) {
    b.why = memory.invalid_reason;
    return b;
  }
  try {
    b.step_time_s = truth.simulate(b.placement).step_time_s;
  } catch (const std::invalid_argument& e) {
    b.why = e.what();  // an op on a device kind it has no profile for
  }
  return b;
}

}  // namespace placementd::offline
