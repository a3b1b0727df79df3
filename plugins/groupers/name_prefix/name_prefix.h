#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "placement/grouper.h"

namespace placement::plugins {

struct NamePrefixOptions {
  int64_t levels = 2;  // Spotlight's two-level prefix
};

/// Spotlight (Gao et al., ICML'18, §5): ops whose names share the same two-level prefix form one
/// group ("super operation"). Names are split at '.' and '/'; a numeric component (a ModuleList or
/// Sequential index) belongs to the level before it, so "encoder.layers.0.self_attn/linear" has the
/// levels encoder / layers.0 / self_attn / linear and the two-level prefix "encoder.layers.0".
class NamePrefixGrouper : public Grouper {
 public:
  explicit NamePrefixGrouper(const NamePrefixOptions& options) : levels_(options.levels) {}

  Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) override;

  /// The name's levels as described above.
  static std::vector<std::string> levels_of(const std::string& name);

 private:
  int64_t levels_;
};

}  // namespace placement::plugins
