#pragma once

namespace placementd {
/// The project version (CMake's PROJECT_VERSION).
inline constexpr const char* kVersion = PLACEMENT_VERSION;
}  // namespace placementd
