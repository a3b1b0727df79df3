#pragma once
// Persistent state under the state directory: the best placement measured for each
// (graph fingerprint, device set), so the next run of the same model starts there.

#include <optional>
#include <string>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/placement.h"

namespace placementd {

struct StoredPlacement {
  placement::Placement placement;
  double step_time_s = 0.0;
  std::string job;
};

/// Files are written atomically (temp + fsync + rename); a damaged file is reported and ignored,
/// never fatal. Thread-safe: every call works on its own file.
class Store {
 public:
  /// Creates `state_dir`/placements if needed; throws std::runtime_error naming the directory.
  explicit Store(std::string state_dir);

  const std::string& dir() const { return dir_; }

  /// The stored placement for this graph and device set, if any and if it still fits them.
  std::optional<StoredPlacement> best(const placement::OpGraph& graph, const placement::DeviceSet& devices) const;

  /// Records `candidate` if it beats what is stored (or nothing is). Returns true if written.
  bool offer(const placement::OpGraph& graph, const placement::DeviceSet& devices, const StoredPlacement& candidate);

  /// A learned policy's parameters and optimiser state (TrainablePolicy::save_state) for this graph,
  /// device set and `key` (grouper+placer+algorithm), so the next run resumes learning.
  void save_policy_state(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                         const std::string& key, const std::string& state);
  std::optional<std::string> policy_state(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                                          const std::string& key) const;

 private:
  std::string path_for(const placement::OpGraph& graph, const placement::DeviceSet& devices) const;
  std::string policy_path(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                          const std::string& key) const;
  std::string dir_;
};

}  // namespace placementd
