#include "config/paths.h"

namespace placementd {

namespace fs = std::filesystem;

namespace {

fs::path this_executable() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

}  // namespace

std::string default_plugin_dir() {
  const fs::path exe = this_executable();
  if (!exe.empty()) {
    std::error_code ec;
    const fs::path candidate = exe.parent_path() / ".." / "lib" / "placementd" / "plugins";
    if (fs::is_directory(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return PLACEMENT_DEFAULT_PLUGIN_DIR;
}

std::optional<fs::path> config_path_for_executable(const fs::path& exe) {
  const fs::path bin = exe.parent_path();
  if (bin.filename() != "bin") return std::nullopt;
  const fs::path prefix = bin.parent_path();
  std::error_code ec;
  if (prefix.empty() || fs::exists(prefix / "CMakeCache.txt", ec)) return std::nullopt;
  // The rule the install follows (GNUInstallDirs' special case): /usr's config is in /etc.
  const fs::path sysconf = prefix == "/usr" ? fs::path("/etc") : prefix / "etc";
  return sysconf / "placementd" / "placementd.toml";
}

std::string default_config_path() {
  // Installed binaries follow their install, so `cmake --install --prefix P` of a build configured
  // for another prefix still reads the config that install laid out.
  if (const auto installed = config_path_for_executable(this_executable()))
    return installed->string();
  return PLACEMENT_DEFAULT_CONFIG;
}

}  // namespace placementd
