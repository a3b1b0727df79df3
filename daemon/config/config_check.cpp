#include "config/config_check.h"

#include "planning/offline/warm_start.h"

#include <algorithm>

namespace placementd {

using placement::PluginKind;

namespace {

void check_table(const PluginRegistry& registry, PluginKind kind, const std::string& name,
                 const PluginParamTable& table, const std::string& where, std::vector<ConfigError>& errors) {
  for (const placement::ParamError& e : registry.check_params(kind, name, table.values)) {
    auto it = table.where.find(e.name);
    const SourcePos pos = it != table.where.end() ? it->second : table.table;
    errors.push_back({pos, where + (e.name.empty() ? "" : "." + e.name) + ": " + e.message});
  }
}

void check_name(const PluginRegistry& registry, PluginKind kind, const std::string& name,
                const SourcePos& pos, const std::string& where, std::vector<ConfigError>& errors) {
  if (registry.has(kind, name)) return;
  std::string known;
  for (const PluginEntry& p : registry.plugins())
    if (p.info.kind == kind) known += (known.empty() ? "" : ", ") + p.info.name;
  errors.push_back({pos, where + ": no " + to_string(kind) + " plugin named '" + name +
                             "' is loaded (loaded: " + (known.empty() ? std::string("none") : known) + ")"});
}

void check_tables(const PluginRegistry& registry, const PluginParamTables& tables,
                  const std::string& prefix, std::vector<ConfigError>& errors) {
  for (const auto& [key, table] : tables) {
    const std::string where = prefix + "." + to_string(key.first) + "." + key.second;
    if (!registry.has(key.first, key.second)) {
      check_name(registry, key.first, key.second, table.table, where, errors);
      continue;
    }
    check_table(registry, key.first, key.second, table, where, errors);
  }
}

}  // namespace

std::vector<ConfigError> check_plugins(const Config& config, const PluginRegistry& registry) {
  std::vector<ConfigError> errors;
  const SourcePos file{config.path, 0, 0};
  auto pos_or_file = [&](const SourcePos& p) { return p.line ? p : file; };
  check_name(registry, PluginKind::kGrouper, config.policy.grouper, pos_or_file(config.policy.grouper_pos), "policy.grouper", errors);
  check_name(registry, PluginKind::kPlacer, config.policy.placer, pos_or_file(config.policy.placer_pos), "policy.placer", errors);
  check_name(registry, PluginKind::kAlgorithm, config.policy.algorithm, pos_or_file(config.policy.algorithm_pos), "policy.algorithm", errors);
  // "simulator" is the search, not a placer; it needs the placers it may start from, not a plugin of its own.
  if (!config.policy.warm_start.empty() && config.policy.warm_start != offline::kSimulatorWarmStart)
    check_name(registry, PluginKind::kPlacer, config.policy.warm_start, pos_or_file(config.policy.warm_start_pos),
               "policy.warm_start", errors);
  check_tables(registry, config.params, "params", errors);
  for (size_t i = 0; i < config.rules.size(); ++i) {
    const JobRule& rule = config.rules[i];
    const std::string where = "rules[" + std::to_string(i) + "]";
    if (rule.grouper) check_name(registry, PluginKind::kGrouper, *rule.grouper, rule.grouper_pos, where + ".grouper", errors);
    if (rule.placer) check_name(registry, PluginKind::kPlacer, *rule.placer, rule.placer_pos, where + ".placer", errors);
    if (rule.algorithm) check_name(registry, PluginKind::kAlgorithm, *rule.algorithm, rule.algorithm_pos, where + ".algorithm", errors);
    check_tables(registry, rule.params, where + ".params", errors);
  }
  return errors;
}

}  // namespace placementd

namespace placementd {

Config load_and_check(const std::string& path, const std::string& default_plugin_dir, PluginRegistry& registry,
                      std::vector<ConfigError>& errors) {
  const size_t first = errors.size();
  Config config = load_config_collecting(path, default_plugin_dir, errors);
  const bool readable = std::none_of(errors.begin() + static_cast<long>(first), errors.end(), [](const ConfigError& e) {
    return e.where.line == 0 || e.message.rfind("TOML syntax", 0) == 0;
  });
  if (readable) {
    registry.scan(config.plugin_dirs);
    for (ConfigError& e : check_plugins(config, registry)) errors.push_back(std::move(e));
  }
  sort_by_position(errors, first);
  return config;
}

std::vector<std::string> check_config_file(const std::string& path, const std::string& default_plugin_dir,
                                           PluginRegistry& registry) {
  std::vector<ConfigError> errors;
  load_and_check(path, default_plugin_dir, registry, errors);
  std::vector<std::string> out;
  for (const ConfigError& e : errors) out.push_back(e.str());
  return out;
}

}  // namespace placementd
