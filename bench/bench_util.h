#pragma once
// What several benchmarks need: medians, and the test models traced into a fresh directory.

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace placement::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

#ifdef MODEL_PYTHON  // defined for the benchmarks that trace models (bench/CMakeLists.txt)
/// Traces tests/models/make_models.py into a new directory under /tmp (with MODEL_PYTHON, the Python
/// whose torch the build links) and returns it; throws std::runtime_error saying which step failed.
inline std::string trace_models(const std::string& source_dir, const std::string& prefix) {
  std::string dir = "/tmp/" + prefix + ".XXXXXX";  // mkdtemp(3) turns the six X's into a unique name
  if (::mkdtemp(dir.data()) == nullptr)
    throw std::runtime_error("cannot create a directory under /tmp for " + prefix + ": " + std::strerror(errno));
  const std::string cmd = std::string(MODEL_PYTHON) + " " + source_dir + "/tests/models/make_models.py " + dir + " > /dev/null";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("tracing the test models failed: " + cmd);
  return dir;
}
#endif

}  // namespace placement::bench
