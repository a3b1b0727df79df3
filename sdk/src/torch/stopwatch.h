#pragma once
// Wall-clock timing shared by the profiler and the job API.

#include <chrono>

namespace placement::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace placement::detail
