#pragma once

#include <cstdint>

#include "placement/grouper.h"

namespace placement::plugins {

struct ColocationOptions {
  /// A merge that would make a group larger than this is skipped (0: no limit, as in the paper).
  int64_t max_group_ops = 0;
};

/// ColocRL's grouping (Mirhoseini et al., ICML'17 §3): an op joins the group of its only consumer,
/// repeated until nothing changes, so chains of single-consumer ops (and parameters, which are
/// attributes of their consuming op here) are placed as one. Ops pinned to different device
/// kinds never share a group.
class ColocationGrouper : public Grouper {
 public:
  explicit ColocationGrouper(const ColocationOptions& options)
      : max_group_ops_(options.max_group_ops) {}

  Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) override;

 private:
  int64_t max_group_ops_;
};

}  // namespace placement::plugins
