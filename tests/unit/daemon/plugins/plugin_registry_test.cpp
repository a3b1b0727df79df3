#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "plugins/plugin_registry.h"

namespace placementd {
namespace {

namespace fs = std::filesystem;
using placement::PluginKind;

TEST(PluginRegistry, LoadsTheBuiltPlugins) {
  PluginRegistry registry;
  EXPECT_TRUE(registry.scan({PLUGIN_DIR}).empty());
  EXPECT_TRUE(registry.has(PluginKind::kGrouper, "colocation"));
  EXPECT_TRUE(registry.has(PluginKind::kPlacer, "single_device"));
  EXPECT_TRUE(registry.has(PluginKind::kAlgorithm, "reinforce"));
  const auto info = registry.info(PluginKind::kAlgorithm, "reinforce");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->hyperparameters.size(), 6u);
  EXPECT_NE(registry.create_grouper("colocation", {}), nullptr);
}

TEST(PluginRegistry, SkipsBrokenLibrariesWithAReasonAndKeepsTheRest) {
  const fs::path dir = fs::temp_directory_path() / ("reg." + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "garbage.so") << "this is not an ELF file";
  fs::copy_file(fs::path(PLUGIN_DIR) / "groupers" / "colocation.so", dir / "colocation_copy.so");
  fs::copy_file(fs::path(PLUGIN_DIR) / "groupers" / "colocation.so", dir / "colocation_again.so");
  fs::copy_file(TEST_PLUGIN_DIR "/wrong_abi.so", dir / "wrong_abi.so");
  fs::copy_file(TEST_PLUGIN_DIR "/throwing_info.so", dir / "throwing_info.so");
  PluginRegistry registry;
  const auto skipped = registry.scan({dir.string()});
  std::map<std::string, std::string> reasons;
  for (const auto& s : skipped) reasons[fs::path(s.file).filename()] = s.reason;
  ASSERT_EQ(reasons.size(), 4u);
  EXPECT_EQ(reasons["garbage.so"].rfind("cannot load:", 0), 0u) << reasons["garbage.so"];
  EXPECT_EQ(reasons["colocation_copy.so"].rfind(
                "duplicate grouper name 'colocation': already provided by", 0),
            0u)
      << reasons["colocation_copy.so"];
  EXPECT_EQ(reasons["wrong_abi.so"].rfind("plugin ABI tag 57005 does not match", 0), 0u)
      << reasons["wrong_abi.so"];
  EXPECT_EQ(reasons["throwing_info.so"], "entry point failed: info exploded");
  EXPECT_TRUE(registry.has(PluginKind::kGrouper, "colocation"));
  fs::remove_all(dir);
}

TEST(PluginRegistry, MissingDirectoryIsNotFatal) {
  PluginRegistry registry;
  EXPECT_TRUE(registry.scan({"/nonexistent/plugins"}).empty());
  EXPECT_TRUE(registry.plugins().empty());
}

TEST(PluginRegistry, ParametersAreCheckedBeforeCreation) {
  PluginRegistry registry;
  registry.scan({PLUGIN_DIR});
  EXPECT_THROW(registry.create_algorithm("reinforce", {{"learning_rate", -1.0}}), PluginError);
  EXPECT_THROW(registry.create_placer("single_device", {{"device", std::string("tpu:0")}}),
               PluginError);
  EXPECT_THROW(registry.create_grouper("nonexistent", {}), PluginError);
  EXPECT_NO_THROW(registry.create_placer("single_device", {{"device", std::string("cuda:1")}}));
  const auto errors =
      registry.check_params(PluginKind::kAlgorithm, "reinforce", {{"lerning_rate", 0.1}});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].name, "lerning_rate");
}

}  // namespace
}  // namespace placementd
