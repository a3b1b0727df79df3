#include "mincut_placer.h"

#include <stdexcept>

#include "placement_helpers.h"
#include "scotch_mapping.h"

namespace placement::plugins {

void MincutPlacer::prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
                           std::mt19937_64&) {
  const std::vector<int> usable = usable_devices(devices, gpus_only_);
  if (usable.empty()) throw std::invalid_argument("mincut placer: the device set is empty");
  // A complete machine of equal processors: Scotch's mapping reduces to a balanced k-way min-cut.
  TargetMachine uniform;
  uniform.power.assign(usable.size(), 1.0);
  uniform.distance.assign(usable.size(), std::vector<double>(usable.size(), 1.0));
  const std::vector<int> part =
      scotch_map(group_graph(graph, grouping), uniform, imbalance_, seed_);
  device_of_group_.clear();
  for (int p : part) device_of_group_.push_back(usable[p]);
}

}  // namespace placement::plugins
