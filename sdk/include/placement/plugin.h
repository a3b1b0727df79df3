#pragma once
// What every plugin library declares about itself. Read before anything else is called in it.

#include <cstdint>
#include <string>
#include <vector>

#include "placement/params.h"

namespace placement {

enum class PluginKind { kGrouper, kPlacer, kAlgorithm };

/// "grouper", "placer", "algorithm".
const char* to_string(PluginKind kind);
/// Inverse of to_string(PluginKind); throws std::invalid_argument otherwise.
PluginKind plugin_kind_from_string(const std::string& text);

/// Bumped whenever an interface in this directory changes in a way a built plugin would notice.
inline constexpr uint32_t kPluginApiVersion = 2;

/// The API version folded with what else decides binary compatibility: the libstdc++ string ABI
/// (std::string and std::vector cross the boundary) and the compiler's major version. A plugin
/// whose tag differs from the daemon's is refused before any other symbol of it is used.
inline constexpr uint32_t plugin_abi_tag() {
  return (kPluginApiVersion << 16) | (static_cast<uint32_t>(_GLIBCXX_USE_CXX11_ABI) << 15) |
         static_cast<uint32_t>(__GNUC__);
}

/// Metadata a plugin exports.
struct PluginInfo {
  /// Unique within its kind; what admins write in TOML ("colocation", "reinforce").
  std::string name;
  PluginKind kind = PluginKind::kGrouper;
  std::string version;
  /// One line for `placementctl plugins`.
  std::string summary;
  std::vector<HyperParameter> hyperparameters;
  /// The LibTorch version the plugin links, or empty. Two LibTorch builds cannot share a process,
  /// so the registry refuses a plugin whose version differs from the daemon's.
  std::string torch_version;
};

}  // namespace placement
