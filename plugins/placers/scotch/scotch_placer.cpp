#include "scotch_placer.h"

#include <stdexcept>

#include "placement_helpers.h"
#include "scotch_mapping.h"

namespace placement::plugins {

void ScotchPlacer::prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices, std::mt19937_64&) {
  const std::vector<int> usable = usable_devices(devices, gpus_only_);
  if (usable.empty()) throw std::invalid_argument("scotch placer: the device set is empty");
  const std::vector<int> processor =
      scotch_map(group_graph(graph, grouping), target_machine(graph, devices, usable), imbalance_, seed_);
  device_of_group_.clear();
  for (int p : processor) device_of_group_.push_back(usable[p]);
}

}  // namespace placement::plugins
