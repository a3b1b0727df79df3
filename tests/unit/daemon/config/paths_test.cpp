#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/paths.h"

namespace placementd {
namespace {

namespace fs = std::filesystem;

TEST(Paths, ConfigFollowsTheInstallPrefixOfTheExecutable) {
  EXPECT_EQ(config_path_for_executable("/usr/bin/placementd"),
            fs::path("/etc/placementd/placementd.toml"));
  EXPECT_EQ(config_path_for_executable("/usr/local/bin/placementd"),
            fs::path("/usr/local/etc/placementd/placementd.toml"));
  EXPECT_EQ(config_path_for_executable("/opt/pd/bin/placementd"),
            fs::path("/opt/pd/etc/placementd/placementd.toml"));
}

TEST(Paths, ABinaryOutsideAnInstalledBinHasNoInstallConfig) {
  EXPECT_EQ(config_path_for_executable("/home/me/placementd"), std::nullopt);
  EXPECT_EQ(config_path_for_executable("/usr/lib/placementd/placementd"), std::nullopt);
}

TEST(Paths, ABuildTreeIsNotAnInstall) {
  const fs::path tree = fs::temp_directory_path() / ("pd_paths_" + std::to_string(::getpid()));
  fs::create_directories(tree / "bin");
  std::ofstream(tree / "CMakeCache.txt") << "# a build tree\n";
  EXPECT_EQ(config_path_for_executable(tree / "bin" / "placementd"), std::nullopt);
  fs::remove(tree / "CMakeCache.txt");
  EXPECT_EQ(config_path_for_executable(tree / "bin" / "placementd"),
            tree / "etc" / "placementd" / "placementd.toml");
  fs::remove_all(tree);
}

}  // namespace
}  // namespace placementd
