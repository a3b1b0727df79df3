#include "metis_placer.h"

#include <algorithm>
#include <stdexcept>

#include "metis_partition.h"
#include "placement_helpers.h"

namespace placement::plugins {

void MetisPlacer::prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
                          std::mt19937_64&) {
  const std::vector<int> usable = usable_devices(devices, gpus_only_);
  if (usable.empty()) throw std::invalid_argument("metis placer: the device set is empty");

  const std::vector<int> part = metis_partition(group_graph(graph, grouping),
                                                static_cast<int>(usable.size()), imbalance_, seed_);
  device_of_group_.clear();
  for (int p : part) device_of_group_.push_back(usable[p]);
}

}  // namespace placement::plugins
