#pragma once
// Results of the policy: groupings and placements.

#include <cstdint>
#include <string>
#include <vector>

namespace placement {

class OpGraph;
class DeviceSet;

/// Assignment of every op to one of `num_groups` groups.
struct Grouping {
  /// group_of_op[op id] in [0, num_groups).
  std::vector<int> group_of_op;
  int num_groups = 0;

  /// Throws std::invalid_argument if sizes or group ids do not fit the graph.
  void validate(const OpGraph& graph) const;
  /// For each group, its op ids in ascending order.
  std::vector<std::vector<int>> members() const;
  bool operator==(const Grouping& other) const;
};

/// Assignment of every op to a device of a DeviceSet (by index into DeviceSet::devices).
struct Placement {
  std::vector<int> device_of_op;

  /// Every op on device `device`.
  static Placement single(const OpGraph& graph, int device);
  /// Expands a per-group device choice to ops.
  static Placement from_groups(const Grouping& grouping, const std::vector<int>& device_of_group);

  /// Throws std::invalid_argument naming the op at fault: wrong size, an unknown device, or a
  /// pinned op on a device of another kind.
  void validate(const OpGraph& graph, const DeviceSet& devices) const;
  /// Moves every pinned op that sits on a device of the wrong kind to the first device of its kind.
  /// Returns how many ops moved. Throws std::invalid_argument if no device of that kind exists.
  int enforce_pins(const OpGraph& graph, const DeviceSet& devices);
  /// Number of ops on each device.
  std::vector<int> ops_per_device(size_t num_devices) const;
  /// Stable short identity of the assignment (16 hex digits).
  std::string fingerprint() const;
  bool operator==(const Placement& other) const;
};

}  // namespace placement
