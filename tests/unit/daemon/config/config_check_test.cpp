// check_plugins(): the config's plugin names and hyperparameters against the loaded plugins.
#include <gtest/gtest.h>

#include "config/config_check.h"
#include "daemon_process.h"
#include "plugins/plugin_registry.h"

namespace placementd {
namespace {

TEST(ConfigCheck, NamesUnknownPluginsAndBadHyperparametersWithPositions) {
  const Config c = parse_config(
      "[policy]\nplacer = \"magic\"\n[params.algorithm.reinforce]\nlearning_rate = \"fast\"\n"
      "[[rules]]\njob = \"x\"\ngrouper = \"nope\"\n",
      "t.toml", PLUGIN_DIR);
  PluginRegistry registry;
  registry.scan(c.plugin_dirs);
  const auto errors = check_plugins(c, registry);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(
      errors[0].str().rfind(
          "t.toml:2:10: policy.placer: no placer plugin named 'magic' is loaded (loaded: ", 0),
      0u)
      << errors[0].str();
  EXPECT_NE(errors[0].str().find("single_device"), std::string::npos)
      << "the loaded placers are listed";
  EXPECT_EQ(
      errors[1].str(),
      "t.toml:4:17: params.algorithm.reinforce.learning_rate: expected float, got string \"fast\"");
  EXPECT_EQ(errors[2].str().rfind("t.toml:7:11: rules[0].grouper: no grouper plugin named 'nope' "
                                  "is loaded (loaded: colocation",
                                  0),
            0u)
      << errors[2].str();
}

TEST(ConfigCheck, WarmStartNamesALoadedPlacer) {
  if (!placement::testing::learned_plugins_built())
    GTEST_SKIP() << "built without LibTorch: the default placer is not loaded";
  PluginRegistry registry;
  const Config good = parse_config("[policy]\nwarm_start = \"metis\"\n", "t.toml", PLUGIN_DIR);
  registry.scan(good.plugin_dirs);
  EXPECT_EQ(good.policy.warm_start, "metis");
  EXPECT_TRUE(check_plugins(good, registry).empty());
  EXPECT_EQ(effective_policy(good, "any", 0).warm_start, "metis");
  const Config bad = parse_config("[policy]\nwarm_start = \"teacher\"\n", "t.toml", PLUGIN_DIR);
  const auto errors = check_plugins(bad, registry);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].str().rfind(
                "t.toml:2:14: policy.warm_start: no placer plugin named 'teacher' is loaded", 0),
            0u)
      << errors[0].str();
  EXPECT_TRUE(default_config(PLUGIN_DIR).policy.warm_start.empty()) << "off unless configured";
  // The simulator search is not a placer plugin, and is accepted.
  const Config search =
      parse_config("[policy]\nwarm_start = \"simulator\"\n", "t.toml", PLUGIN_DIR);
  EXPECT_TRUE(check_plugins(search, registry).empty());
}

TEST(ConfigCheck, AGrouperThatAsksForMoreGroupsThanMaxGroupsIsAnError) {
  if (!placement::testing::learned_plugins_built())
    GTEST_SKIP() << "built without LibTorch: the default placer is not loaded";
  PluginRegistry registry;
  const Config fits = parse_config("[policy]\ngrouper = \"metis\"\n", "t.toml", PLUGIN_DIR);
  registry.scan(fits.plugin_dirs);
  EXPECT_TRUE(check_plugins(fits, registry).empty())
      << "metis's default 256 groups fit the default max_groups";

  // Its own key, at its position.
  const Config set = parse_config(
      "[policy]\ngrouper = \"metis\"\nmax_groups = 300\n[params.grouper.metis]\ngroups = 512\n",
      "t.toml", PLUGIN_DIR);
  auto errors = check_plugins(set, registry);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(
      errors[0].str(),
      "t.toml:5:10: grouper 'metis' makes 512 groups (groups), more than [policy] max_groups = "
      "300: lower its groups or raise max_groups");

  // The plugin's default, blamed on the line that chose the grouper.
  const Config lowered =
      parse_config("[policy]\nmax_groups = 64\n[[rules]]\njob = \"big-*\"\ngrouper = \"fluid\"\n",
                   "t.toml", PLUGIN_DIR);
  errors = check_plugins(lowered, registry);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].str(),
            "t.toml:5:11: grouper 'fluid' makes 256 groups (its default), more than [policy] "
            "max_groups = 64: lower its groups or raise max_groups");

  // A rule that picks neither the grouper nor its count adds nothing to the global error.
  const Config quiet = parse_config(
      "[policy]\ngrouper = \"metis\"\nmax_groups = 64\n[[rules]]\njob = \"a\"\n"
      "placer = \"single_device\"\n",
      "t.toml", PLUGIN_DIR);
  errors = check_plugins(quiet, registry);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].str().rfind("t.toml:2:11: grouper 'metis' makes 256 groups (its default)", 0),
            0u)
      << errors[0].str();

  // A rule's own table is what its jobs get; the global grouper (colocation) has no count.
  const Config rule = parse_config(
      "[policy]\nmax_groups = 64\n[params.grouper.metis]\ngroups = 32\n"
      "[[rules]]\njob = \"x\"\ngrouper = \"metis\"\n[rules.params.grouper.metis]\ngroups = 100\n",
      "t.toml", PLUGIN_DIR);
  errors = check_plugins(rule, registry);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].str().rfind("t.toml:9:10: grouper 'metis' makes 100 groups", 0), 0u)
      << errors[0].str();
}

}  // namespace
}  // namespace placementd
