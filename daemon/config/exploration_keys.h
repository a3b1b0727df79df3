#pragma once
// The [exploration] keys, declared once: each key's name, the ExplorationConfig member it sets
// (whose initializer is its default) and its range. The config parser, a [[rules]] entry's
// overrides (effective_policy) and the test that holds etc/placementd.toml to the defaults all
// read this table; a new key is a member, a row here, and its commented line in the shipped file.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"

namespace placementd {

struct ExplorationKey {
  const char* name;
  std::variant<int64_t ExplorationConfig::*, double ExplorationConfig::*> field;
  /// The accepted range, both ends included.
  double min, max;
};

/// Every [exploration] key, in the shipped file's order.
const std::vector<ExplorationKey>& exploration_keys();

/// Sets `name` in `e` to `value` (an integer key takes it as an integer); false when no key has
/// that name.
bool set_exploration_key(ExplorationConfig& e, const std::string& name, double value);

}  // namespace placementd
