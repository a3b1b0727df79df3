#pragma once
// The messages of a ConfigInvalid, one string each ("FILE:LINE:COL: message"), for assertions.

#include <functional>
#include <string>
#include <vector>

#include "toml/source_pos.h"

namespace placementd::testing {

/// Runs `parse` and returns the errors it throws as ConfigInvalid (empty if it does not throw).
inline std::vector<std::string> config_errors(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ConfigInvalid& e) {
    std::vector<std::string> out;
    for (const auto& err : e.errors()) out.push_back(err.str());
    return out;
  }
  return {};
}

}  // namespace placementd::testing
