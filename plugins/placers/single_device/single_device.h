#pragma once

#include <string>

#include "placement/placer.h"

namespace placement::plugins {

struct SingleDeviceOptions {
  /// A device name ("cuda:0") or "fastest" (highest speed; a GPU wins ties, then the lowest index).
  std::string device = "fastest";
};

/// The "single device" baseline of all four papers: every group on one device. Pinned ops are
/// moved to their kind by the daemon afterwards, as TensorFlow did for ops without a GPU kernel.
class SingleDevicePlacer : public Placer {
 public:
  explicit SingleDevicePlacer(const SingleDeviceOptions& options) : device_(options.device) {}

  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
  std::vector<int> place(std::mt19937_64& rng) override;

  /// The chosen device index (after prepare()).
  int chosen() const { return chosen_; }

 private:
  std::string device_;
  int chosen_ = -1;
  int num_groups_ = 0;
};

}  // namespace placement::plugins
