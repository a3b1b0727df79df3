#include "single_device.h"

#include <stdexcept>

namespace placement::plugins {

void SingleDevicePlacer::prepare(const OpGraph&, const Grouping& grouping, const DeviceSet& devices,
                                 std::mt19937_64&) {
  num_groups_ = grouping.num_groups;
  if (devices.devices.empty())
    throw std::invalid_argument("single_device: the device set is empty");
  if (device_ != "fastest") {
    chosen_ = devices.index_of(device_);
    if (chosen_ < 0)
      throw std::invalid_argument("single_device: device '" + device_ +
                                  "' is not in the job's device set");
    return;
  }
  chosen_ = 0;
  for (size_t i = 1; i < devices.size(); ++i) {
    const Device& best = devices.devices[chosen_];
    const Device& d = devices.devices[i];
    const bool faster = d.speed > best.speed;
    const bool tie_prefers =
        d.speed == best.speed && d.kind == DeviceKind::kCuda && best.kind != DeviceKind::kCuda;
    if (faster || tie_prefers) chosen_ = static_cast<int>(i);
  }
}

std::vector<int> SingleDevicePlacer::place(std::mt19937_64&) {
  if (chosen_ < 0) throw std::logic_error("single_device: place() before prepare()");
  return std::vector<int>(static_cast<size_t>(num_groups_), chosen_);
}

}  // namespace placement::plugins
