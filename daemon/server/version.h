#pragma once

namespace placementd {
/// The project version (CMake's PROJECT_VERSION).
inline constexpr const char* kVersion = PLACEMENT_VERSION;
/// What this build was configured with, e.g. "systemd=ON cuda=ON nccl=ON".
inline constexpr const char* kBuildFeatures = PLACEMENT_BUILD_FEATURES;
}  // namespace placementd
