#include "config/paths.h"

#include <filesystem>

namespace placementd {

namespace fs = std::filesystem;

std::string default_plugin_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path candidate = exe.parent_path() / ".." / "lib" / "placementd" / "plugins";
    if (fs::is_directory(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return PLACEMENT_DEFAULT_PLUGIN_DIR;
}

std::string default_config_path() { return PLACEMENT_DEFAULT_CONFIG; }

}  // namespace placementd
