#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <type_traits>

#include <toml++/toml.h>

#include "built_plugins.h"
#include "config/config.h"
#include "config/section_keys.h"
#include "config_errors.h"

namespace placementd {
namespace {

std::vector<std::string> errors_of(const std::string& text) {
  return testing::config_errors([&] { parse_config(text, "t.toml", "/plugins"); });
}

TEST(Config, EmptyFileGivesDefaults) {
  const Config c = parse_config("", "t.toml", "/plugins");
  EXPECT_EQ(c.plugin_dirs, std::vector<std::string>{"/plugins"});
  EXPECT_EQ(c.policy.grouper, "colocation");
  EXPECT_EQ(c.exploration.steps_per_candidate, 15);
  EXPECT_EQ(c.exploration.warmup_steps, 5);
  EXPECT_EQ(c.max_frame_bytes, 64u << 20);
  EXPECT_EQ(c.socket_mode, 0660u);
}

// The shipped file documents every key with its default: parsing it must give exactly the
// built-in defaults, and every schema key must appear in it.
TEST(Config, ShippedFileHoldsEveryKeyWithItsDefault) {
  const Config shipped = load_config(SHIPPED_CONFIG, "/plugins");
  const Config defaults = default_config("/plugins");
  EXPECT_EQ(shipped.socket, defaults.socket);
  EXPECT_EQ(shipped.socket_mode, defaults.socket_mode);
  EXPECT_EQ(shipped.admin_group, defaults.admin_group);
  EXPECT_EQ(shipped.state_dir, defaults.state_dir);
  EXPECT_EQ(shipped.max_frame_bytes, defaults.max_frame_bytes);
  EXPECT_EQ(shipped.max_connections, defaults.max_connections);
  EXPECT_EQ(shipped.max_buffered_bytes, defaults.max_buffered_bytes);
  EXPECT_EQ(shipped.frame_timeout_ms, defaults.frame_timeout_ms);
  EXPECT_EQ(shipped.idle_timeout_ms, defaults.idle_timeout_ms);
  EXPECT_EQ(shipped.max_connections_per_uid, defaults.max_connections_per_uid);
  EXPECT_EQ(shipped.stop_timeout_ms, defaults.stop_timeout_ms);
  EXPECT_EQ(shipped.max_state_bytes_per_uid, defaults.max_state_bytes_per_uid);
  EXPECT_EQ(shipped.max_pending_bytes_per_uid, defaults.max_pending_bytes_per_uid);
  EXPECT_EQ(shipped.policy_threads, defaults.policy_threads);
  EXPECT_EQ(shipped.log_level, defaults.log_level);
  EXPECT_EQ(shipped.metrics_listen, defaults.metrics_listen);
  EXPECT_EQ(shipped.plugin_dirs, defaults.plugin_dirs);
  EXPECT_EQ(shipped.allow, defaults.allow);
  EXPECT_EQ(shipped.memory_headroom_fraction, defaults.memory_headroom_fraction);
  EXPECT_EQ(shipped.limits.max_graph_ops, defaults.limits.max_graph_ops);
  EXPECT_EQ(shipped.limits.max_graph_bytes, defaults.limits.max_graph_bytes);
  EXPECT_EQ(shipped.limits.max_session_bytes, defaults.limits.max_session_bytes);
  // [exploration]: every key of the table, at its default, and nothing else.
  const toml::table doc = toml::parse_file(SHIPPED_CONFIG);
  const toml::table* shipped_exploration = doc["exploration"].as_table();
  ASSERT_NE(shipped_exploration, nullptr);
  EXPECT_EQ(shipped_exploration->size(), exploration_keys().size());
  // A key's shipped value is its default, and the default is in its range. [policy]'s
  // warm_start is shipped commented out (off by default).
  const auto same_as_default = [](const auto& k, const auto& shipped_section,
                                  const auto& default_section) {
    std::visit(
        [&](auto member) {
          const auto& value = default_section.*member;
          EXPECT_EQ(shipped_section.*member, value) << k.name;
          if constexpr (std::is_arithmetic_v<std::decay_t<decltype(value)>>) {
            EXPECT_GE(static_cast<double>(value), k.min) << k.name;
            EXPECT_LE(static_cast<double>(value), k.max) << k.name;
          }
        },
        k.field);
  };
  for (const ExplorationKey& k : exploration_keys()) {
    EXPECT_TRUE(shipped_exploration->get(k.name)) << "exploration." << k.name << " is not shipped";
    same_as_default(k, shipped.exploration, defaults.exploration);
  }
  const toml::table* shipped_policy = doc["policy"].as_table();
  ASSERT_NE(shipped_policy, nullptr);
  std::ifstream shipped_text(SHIPPED_CONFIG);
  const std::string text((std::istreambuf_iterator<char>(shipped_text)),
                         std::istreambuf_iterator<char>());
  EXPECT_EQ(shipped_policy->size() + 1, policy_keys().size());
  for (const PolicyKey& k : policy_keys()) {
    EXPECT_TRUE(shipped_policy->get(k.name) ||
                text.find("\n# " + std::string(k.name) + " = ") != std::string::npos)
        << "policy." << k.name << " is not shipped";
    same_as_default(k, shipped.policy, defaults.policy);
  }
  for (const char* key : {"daemon.socket",
                          "daemon.socket_mode",
                          "daemon.admin_group",
                          "daemon.state_dir",
                          "daemon.max_frame_bytes",
                          "daemon.max_connections",
                          "daemon.max_connections_per_uid",
                          "daemon.frame_timeout_ms",
                          "daemon.idle_timeout_ms",
                          "daemon.stop_timeout_ms",
                          "daemon.max_state_bytes_per_uid",
                          "daemon.max_pending_bytes_per_uid",
                          "daemon.policy_threads",
                          "daemon.max_buffered_bytes",
                          "logging.level",
                          "metrics.listen",
                          "devices.allow",
                          "devices.memory_headroom_fraction",
                          "policy.grouper",
                          "policy.placer",
                          "policy.algorithm",
                          "policy.warm_start_seconds",
                          "policy.refits",
                          "policy.max_groups",
                          "limits.max_graph_ops",
                          "limits.max_graph_bytes",
                          "limits.max_session_bytes"})
    EXPECT_TRUE(doc.at_path(key)) << key << " is missing from etc/placementd.toml";
}

// The shipped file's [params.<kind>.<name>] sections show every hyperparameter of every plugin this
// build loads, with its default, and nothing else: an admin reads the whole choice there.
TEST(Config, ShippedFileShowsEveryPluginsHyperparametersWithTheirDefaults) {
  const toml::table doc = toml::parse_file(SHIPPED_CONFIG);
  const PluginRegistry& registry = offline::built_plugins();
  ASSERT_FALSE(registry.plugins().empty());
  for (const auto& plugin : registry.plugins()) {
    const std::string where = std::string("[params.") + placement::to_string(plugin.info.kind) +
                              "." + plugin.info.name + "]";
    const toml::table* section =
        doc["params"][placement::to_string(plugin.info.kind)][plugin.info.name].as_table();
    if (plugin.info.hyperparameters.empty()) {
      EXPECT_EQ(section, nullptr) << where << ": the plugin has no hyperparameters";
      continue;
    }
    ASSERT_NE(section, nullptr) << where << " is missing from etc/placementd.toml";
    EXPECT_EQ(section->size(), plugin.info.hyperparameters.size())
        << where << " holds keys the plugin lacks";
    for (const auto& h : plugin.info.hyperparameters) {
      const toml::node* value = section->get(h.name);
      ASSERT_NE(value, nullptr) << where << " lacks " << h.name;
      placement::ParamValue shown;
      if (value->is_boolean())
        shown = value->as_boolean()->get();
      else if (value->is_integer())
        shown = value->as_integer()->get();
      else if (value->is_floating_point())
        shown = value->as_floating_point()->get();
      else if (value->is_string())
        shown = value->as_string()->get();
      // TOML may write a float default as an integer (1 for 1.0); the daemon reads it as a float.
      if (std::holds_alternative<double>(h.default_value) && std::holds_alternative<int64_t>(shown))
        shown = static_cast<double>(std::get<int64_t>(shown));
      EXPECT_EQ(shown, h.default_value)
          << where << " " << h.name << " = " << placement::format_param(shown)
          << ", the plugin's default is " << placement::format_param(h.default_value);
    }
  }
}

// The node's cost-model figures: a preset by name, or a table as a topology device takes.
TEST(Config, DeviceSpecsAreAPresetOrFiguresAndBadOnesAreNamed) {
  const Config c = parse_config(
      "[devices]\ncpu_spec = \"xeon-8480-2s\"\ncuda_spec = { spec = \"h100-sxm\", launch_us = 8 "
      "}\n",
      "t.toml", "/plugins");
  ASSERT_TRUE(c.cpu_spec && c.cuda_spec);
  EXPECT_EQ(c.cpu_spec->preset, "xeon-8480-2s");
  EXPECT_EQ(c.cuda_spec->preset, "h100-sxm (modified)");
  EXPECT_DOUBLE_EQ(c.cuda_spec->launch_s, 8e-6);
  EXPECT_GT(c.cuda_spec->tf32_flops, c.cuda_spec->fp32_flops);
  const Config figures =
      parse_config("[devices]\ncpu_spec = { fp32_tflops = 2, memory_bandwidth_gbs = 100 }\n",
                   "t.toml", "/plugins");
  ASSERT_TRUE(figures.cpu_spec);
  EXPECT_DOUBLE_EQ(figures.cpu_spec->fp32_flops, 2e12);
  EXPECT_FALSE(figures.cuda_spec) << "unset: unprofiled ops are not predicted";

  const auto errors = errors_of(
      "[devices]\n"
      "cuda_spec = \"h200\"\n"
      "cpu_spec = \"h100-sxm\"\n");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find(
                "t.toml:2:13: devices.cuda_spec: unknown device preset 'h200' (known: h100-sxm, "),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("t.toml:3:12: devices.cpu_spec: 'h100-sxm' is a cuda preset"),
            std::string::npos)
      << errors[1];
  const auto more = errors_of("[devices]\ncuda_spec = { fp32_tflops = 60 }\ncpu_spec = 3\n");
  ASSERT_EQ(more.size(), 2u);
  EXPECT_NE(more[0].find("gives cost-model figures but no memory_bandwidth_gbs"), std::string::npos)
      << more[0];
  EXPECT_NE(more[1].find("t.toml:3:12: devices.cpu_spec must be a preset's name or a table of "
                         "figures, got an integer"),
            std::string::npos)
      << more[1];
}

TEST(Config, ErrorsCarryFileLineColumnAndAreAllCollected) {
  const auto errors = errors_of(
      "[daemon]\n"
      "max_frame_bytes = \"big\"\n"
      "colour = 1\n"
      "[exploration]\n"
      "steps_per_candidate = 0\n"
      "[logging]\n"
      "level = \"loud\"\n");
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0], "t.toml:2:19: daemon.max_frame_bytes must be an integer, got a string");
  EXPECT_EQ(errors[1].rfind("t.toml:3:1: unknown key 'colour' in [daemon]", 0), 0u) << errors[1];
  EXPECT_EQ(errors[2],
            "t.toml:5:23: exploration.steps_per_candidate must be in [2, 100000], got 0");
  EXPECT_EQ(errors[3].rfind("t.toml:7:9: logging.level must be one of", 0), 0u) << errors[3];
}

TEST(Config, SyntaxErrorHasAPosition) {
  const auto errors = errors_of("[daemon\nsocket = 1\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.toml:1:", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("TOML syntax"), std::string::npos);
}

TEST(Config, MetricsListenIsAnAddressOrASocketPathWithItsFaultNamed) {
  EXPECT_TRUE(errors_of("[metrics]\nlisten = \"127.0.0.1:9464\"\n").empty());
  EXPECT_TRUE(errors_of("[metrics]\nlisten = \"[::1]:9464\"\n").empty());
  EXPECT_TRUE(errors_of("[metrics]\nlisten = \"/run/placementd/metrics.sock\"\n").empty());
  EXPECT_EQ(parse_config("[metrics]\nlisten = \"localhost:9464\"\n", "t.toml", "/p").metrics_listen,
            "localhost:9464");
  const auto no_port = errors_of("[metrics]\nlisten = \"127.0.0.1\"\n");
  ASSERT_EQ(no_port.size(), 1u);
  EXPECT_NE(no_port[0].find("t.toml:2:10: metrics.listen: '127.0.0.1' is neither HOST:PORT"),
            std::string::npos)
      << no_port[0];
  const auto name = errors_of("[metrics]\nlisten = \"prometheus.example:9464\"\n");
  ASSERT_EQ(name.size(), 1u);
  EXPECT_NE(name[0].find("names are not resolved"), std::string::npos) << name[0];
  const auto port = errors_of("[metrics]\nlisten = \"127.0.0.1:99999\"\n");
  ASSERT_EQ(port.size(), 1u);
  EXPECT_NE(port[0].find("port '99999'"), std::string::npos) << port[0];
  EXPECT_EQ(errors_of("[metrics]\nlisten = \"/" + std::string(120, 'x') + "\"\n").size(), 1u);
  EXPECT_EQ(errors_of("[metrics]\nport = 9464\n").size(), 1u);
}

TEST(Config, MissingFileIsNamed) {
  try {
    load_config("/nonexistent/placementd.toml", "/plugins");
    FAIL();
  } catch (const ConfigInvalid& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/placementd.toml: cannot open config file");
  }
}

TEST(Config, BufferCapMustHoldOneLargestFrame) {
  const auto errors =
      errors_of("[daemon]\nmax_frame_bytes = 1048576\nmax_buffered_bytes = 65536\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("t.toml:3:22: daemon.max_buffered_bytes (65536) must be at least "
                           "daemon.max_frame_bytes (1048576)"),
            std::string::npos)
      << errors[0];
}

// [policy] max_groups reaches every job; [limits] are bounded, and a graph-size limit no frame
// could reach is refused where it is written.
TEST(Config, MaxGroupsAndLimitsAreCheckedAndReachTheDaemon) {
  const Config c = parse_config(
      "[policy]\nmax_groups = 64\n[limits]\nmax_graph_ops = 1000\nmax_graph_bytes = 1048576\n"
      "max_session_bytes = 268435456\n",
      "t.toml", "/plugins");
  EXPECT_EQ(effective_policy(c, "any-job", 1000).max_groups, 64);
  EXPECT_EQ(c.limits.max_graph_ops, 1000);
  EXPECT_EQ(c.limits.max_graph_bytes, 1 << 20);
  EXPECT_EQ(c.limits.max_session_bytes, 256 << 20);
  const Config d = parse_config("", "t.toml", "/plugins");
  EXPECT_EQ(effective_policy(d, "any-job", 1000).max_groups, 256) << "the Hierarchical Planner's";
  EXPECT_EQ(d.limits.max_graph_ops, 200000);
  EXPECT_EQ(errors_of("[policy]\nmax_groups = 0\n"),
            std::vector<std::string>{"t.toml:2:14: policy.max_groups must be in [1, 4096], got 0"});
  EXPECT_EQ(errors_of("[limits]\nmax_graph_ops = 0\n"),
            std::vector<std::string>{
                "t.toml:2:17: limits.max_graph_ops must be in [1, 100000000], got 0"});
  EXPECT_EQ(errors_of("[limits]\nmax_graph_bytes = 134217728\n"),
            std::vector<std::string>{
                "t.toml:2:19: limits.max_graph_bytes (134217728) is larger than "
                "daemon.max_frame_bytes (67108864): no frame that large is read; raise both"});
  EXPECT_TRUE(errors_of("[daemon]\nmax_frame_bytes = 134217728\nmax_buffered_bytes = 134217728\n"
                        "[limits]\nmax_graph_bytes = 134217728\n")
                  .empty());
  EXPECT_EQ(errors_of("[limits]\nmax_ops = 5\n").size(), 1u) << "unknown keys are errors";
}

TEST(Config, WarmupMustLeaveStepsToMeasure) {
  const auto errors = errors_of("[exploration]\nsteps_per_candidate = 5\nwarmup_steps = 5\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("warmup_steps (5) must be smaller than steps_per_candidate (5)"),
            std::string::npos);
}

// The live simulator search's time limit reaches every job's policy; a limit that would stall a
// policy thread for long, or never let it search, is refused where it is written.
TEST(Config, WarmStartSearchTimeIsBoundedAndReachesTheJobs) {
  const Config c = parse_config("[policy]\nwarm_start = \"simulator\"\nwarm_start_seconds = 4.5\n",
                                "t.toml", "/plugins");
  EXPECT_EQ(effective_policy(c, "any-job", 1000).warm_start_seconds, 4.5);
  EXPECT_EQ(
      effective_policy(parse_config("", "t.toml", "/plugins"), "any-job", 1000).warm_start_seconds,
      1.0);
  const auto errors = errors_of("[policy]\nwarm_start_seconds = 3600\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "t.toml:2:22: policy.warm_start_seconds must be in [0.01, 600], got 3600");
  EXPECT_EQ(errors_of("[policy]\nwarm_start_seconds = 0\n").size(), 1u);
  EXPECT_EQ(errors_of("[policy]\nwarm_start_seconds = \"1s\"\n").size(), 1u);
}

TEST(Config, WrongTypesAreNotSilentlyDefaulted) {
  EXPECT_EQ(errors_of("[devices]\nallow = \"cuda:*\"\n").size(), 1u);
  EXPECT_EQ(errors_of("[devices]\nallow = [\"tpu:*\"]\n").size(), 1u);
  EXPECT_EQ(errors_of("[policy]\ngrouper = 3\n").size(), 1u);
  EXPECT_EQ(errors_of("daemon = 3\n").size(), 1u);
  EXPECT_EQ(errors_of("[params.grouper.colocation]\nmax_group_ops = [1]\n").size(), 1u);
  EXPECT_EQ(errors_of("[params.widget.x]\n").size(), 1u);
  EXPECT_EQ(errors_of("[[rules]]\nalgorithm = \"reinforce\"\n").size(), 1u)
      << "a rule must match something";
}

TEST(Config, RulesOverrideDefaultsForMatchingJobs) {
  const Config c = parse_config(
      "[params.algorithm.reinforce]\nlearning_rate = 0.1\nclip_norm = 2.0\n"
      "[exploration]\nmax_candidates = 100\n"
      "[[rules]]\njob = \"bert-*\"\nplacer = \"metis\"\n"
      "[rules.exploration]\nmax_candidates = 50\n"
      "[rules.params.algorithm.reinforce]\nlearning_rate = 0.05\n"
      "[[rules]]\nuid = 1000\nalgorithm = \"ppo\"\n",
      "t.toml", "/plugins");
  const EffectivePolicy bert = effective_policy(c, "bert-large", 0);
  EXPECT_EQ(bert.rule, 0);
  EXPECT_EQ(bert.placer, "metis");
  EXPECT_EQ(bert.grouper, "colocation");
  EXPECT_EQ(bert.exploration.max_candidates, 50);
  EXPECT_DOUBLE_EQ(std::get<double>(bert.algorithm_params.at("learning_rate")), 0.05);
  EXPECT_DOUBLE_EQ(std::get<double>(bert.algorithm_params.at("clip_norm")), 2.0)
      << "untouched keys keep the global value";
  const EffectivePolicy other = effective_policy(c, "gnmt", 1000);
  EXPECT_EQ(other.rule, 1);
  EXPECT_EQ(other.algorithm, "ppo");
  EXPECT_EQ(other.exploration.max_candidates, 100);
  EXPECT_EQ(effective_policy(c, "gnmt", 0).rule, -1);
}

// What a key's default looks like in docs/configuration.md's table ("15", "0.05",
// "\"colocation\"").
template <typename Section>
std::string shown_default(const SectionKey<Section>& k) {
  const Section defaults;
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = defaults.*member;
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
          return v.empty() ? "empty" : "\"" + v + "\"";
        } else {
          std::ostringstream out;
          out << v;
          return out.str();
        }
      },
      k.field);
}

template <typename Section>
std::string shown_range(const SectionKey<Section>& k) {
  if (std::holds_alternative<std::string Section::*>(k.field))
    return k.min > 0 ? "not empty" : "any";
  std::ostringstream out;
  if (std::holds_alternative<int64_t Section::*>(k.field))
    out << static_cast<int64_t>(k.min) << " to " << static_cast<int64_t>(k.max);
  else
    out << k.min << " to " << k.max;
  return out.str();
}

// docs/configuration.md shows each key of the tables as the table declares it: its default, its
// range, whether a rule may set it, and what it does.
TEST(Config, TheDocsShowEveryPolicyAndExplorationKeyAsTheTableDeclaresIt) {
  std::ifstream in(CONFIGURATION_DOC);
  ASSERT_TRUE(in) << CONFIGURATION_DOC;
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto check = [&](const char* section, const auto& keys) {
    for (const auto& k : keys) {
      const std::string row = std::string("| `") + section + "." + k.name + "` | " +
                              shown_default(k) + " | " + shown_range(k) + " | " +
                              (k.per_rule ? "yes" : "no") + " | " + k.summary + " |";
      EXPECT_NE(doc.find(row), std::string::npos) << "docs/configuration.md lacks the row\n" << row;
    }
  };
  check("policy", policy_keys());
  check("exploration", exploration_keys());
}

TEST(Config, ThePolicyKeysAreReadThroughTheirTableAndARuleSetsOnlyThePluginNames) {
  // Each [policy] key, set to a value other than its default, is read; positions are kept for
  // the plugin checks that follow.
  const Config c = parse_config(
      "[policy]\ngrouper = \"metis\"\nplacer = \"list_scheduling\"\nalgorithm = \"ppo\"\n"
      "warm_start = \"metis\"\nwarm_start_seconds = 2.5\nmax_groups = 64\n"
      "[[rules]]\njob = \"lm-*\"\nplacer = \"hierarchical\"\n",
      "t.toml", "/plugins");
  EXPECT_EQ(c.policy.grouper, "metis");
  EXPECT_EQ(c.policy.placer, "list_scheduling");
  EXPECT_EQ(c.policy.algorithm, "ppo");
  EXPECT_EQ(c.policy.warm_start, "metis");
  EXPECT_EQ(c.policy.warm_start_seconds, 2.5);
  EXPECT_EQ(c.policy.max_groups, 64);
  EXPECT_EQ(c.policy.grouper_pos.line, 2u);
  EXPECT_EQ(c.policy.max_groups_pos.line, 7u);
  const EffectivePolicy lm = effective_policy(c, "lm-7", 0);
  EXPECT_EQ(lm.placer, "hierarchical");
  EXPECT_EQ(lm.grouper, "metis") << "what the rule does not set comes from [policy]";
  EXPECT_EQ(lm.max_groups, 64);
  EXPECT_EQ(effective_policy(c, "other", 0).placer, "list_scheduling");
  // Ranges, emptiness and the keys a rule may not set are refused with the key's name.
  EXPECT_EQ(errors_of("[policy]\nmax_groups = 5000\n").size(), 1u);
  EXPECT_EQ(errors_of("[policy]\ngrouper = \"\"\n").at(0),
            "t.toml:2:11: policy.grouper must not be empty");
  const std::vector<std::string> rule = errors_of("[[rules]]\njob = \"a\"\nmax_groups = 8\n");
  ASSERT_EQ(rule.size(), 1u);
  EXPECT_NE(rule[0].find("unknown key 'max_groups'"), std::string::npos) << rule[0];
}

TEST(Config, ARuleMayOverrideEveryExplorationKey) {
  // Each key of the table, set by a rule to a value in its range other than its default, reaches
  // the job's policy; the global section stays as it was.
  const ExplorationConfig defaults;
  std::string rule = "[[rules]]\njob = \"all\"\n[rules.exploration]\n";
  for (const ExplorationKey& k : exploration_keys()) {
    if (const auto* integer = std::get_if<int64_t ExplorationConfig::*>(&k.field))
      rule += std::string(k.name) + " = " + std::to_string(defaults.**integer + 1) + "\n";
    else
      rule +=
          std::string(k.name) + " = " +
          std::to_string((defaults.*std::get<double ExplorationConfig::*>(k.field) + k.min) / 2) +
          "\n";
  }
  const Config c = parse_config(rule, "t.toml", "/plugins");
  const EffectivePolicy all = effective_policy(c, "all", 0);
  for (const ExplorationKey& k : exploration_keys())
    std::visit(
        [&](auto member) {
          EXPECT_NE(all.exploration.*member, defaults.*member) << k.name;
          EXPECT_EQ(c.exploration.*member, defaults.*member) << k.name;
        },
        k.field);
  EXPECT_EQ(errors_of("[[rules]]\njob = \"a\"\n[rules.exploration]\nno_such_key = 1\n").size(), 1u);
}

TEST(Config, TrialKeysAreCheckedAndARuleMayLoosenThemForANoisyJob) {
  const Config c = parse_config(
      "[exploration]\nconfidence = 0.95\ntrial_window_steps = 20\n"
      "[[rules]]\njob = \"noisy-*\"\n[rules.exploration]\nmin_gain = 0.05\nmax_trial_steps = "
      "8000\n",
      "t.toml", "/plugins");
  const EffectivePolicy noisy = effective_policy(c, "noisy-bert", 0);
  EXPECT_DOUBLE_EQ(noisy.exploration.min_gain, 0.05);
  EXPECT_EQ(noisy.exploration.max_trial_steps, 8000);
  EXPECT_DOUBLE_EQ(noisy.exploration.confidence, 0.95) << "the global value";
  EXPECT_EQ(noisy.exploration.trial_window_steps, 20);
  const std::vector<std::string> errors =
      errors_of("[exploration]\nconfidence = 1.0\nmax_trial_steps = 8\n");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "t.toml:2:14: exploration.confidence must be in [0.5, 0.9999], got 1");
  EXPECT_EQ(errors[1],
            "t.toml:3:19: exploration.max_trial_steps must be in [16, 100000000], got 8");
  // A trial's statistics grow with the cube of its pairs: their number is capped.
  const std::vector<std::string> too_long = errors_of("[exploration]\nmax_trial_steps = 100000\n");
  ASSERT_EQ(too_long.size(), 1u);
  EXPECT_NE(too_long[0].find(
                "exploration.max_trial_steps (100000) allows 5000 pairs of trial_window_steps (10) "
                "windows; at most 500"),
            std::string::npos)
      << too_long[0];
}

}  // namespace
}  // namespace placementd
