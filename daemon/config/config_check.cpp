#include "config/config_check.h"

#include "planning/offline/warm_start.h"

#include <algorithm>
#include <variant>

namespace placementd {

using placement::PluginKind;

namespace {

void check_table(const PluginRegistry& registry, PluginKind kind, const std::string& name,
                 const PluginParamTable& table, const std::string& where,
                 std::vector<ConfigError>& errors) {
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
  errors.push_back(
      {pos, where + ": no " + to_string(kind) + " plugin named '" + name +
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

// A grouper that takes its group count as a hyperparameter (fluid, metis, feedforward: `groups`)
// and asks for more than [policy] max_groups would have its partition merged away by the cap or,
// learned, could not run at all. `tables` are searched in order; the plugin's default comes last.
void check_group_count(const PluginRegistry& registry, const Config& config,
                       const std::string& grouper, const SourcePos& grouper_pos,
                       const std::vector<const PluginParamTables*>& tables,
                       std::vector<ConfigError>& errors) {
  const auto info = registry.info(PluginKind::kGrouper, grouper);
  if (!info) return;
  const auto declared =
      std::find_if(info->hyperparameters.begin(), info->hyperparameters.end(),
                   [](const placement::HyperParameter& h) { return h.name == "groups"; });
  if (declared == info->hyperparameters.end() ||
      !std::holds_alternative<int64_t>(declared->default_value))
    return;
  int64_t groups = std::get<int64_t>(declared->default_value);
  SourcePos pos = grouper_pos;
  std::string from = "its default";
  for (const PluginParamTables* t : tables) {
    const auto table = t->find({PluginKind::kGrouper, grouper});
    if (table == t->end()) continue;
    const auto value = table->second.values.find("groups");
    if (value == table->second.values.end() || !std::holds_alternative<int64_t>(value->second))
      continue;
    groups = std::get<int64_t>(value->second);
    const auto where = table->second.where.find("groups");
    if (where != table->second.where.end()) pos = where->second;
    from = "groups";
    break;
  }
  if (groups <= config.policy.max_groups) return;
  ConfigError e{
      pos, "grouper '" + grouper + "' makes " + std::to_string(groups) + " groups (" + from +
               "), more than [policy] max_groups = " + std::to_string(config.policy.max_groups) +
               ": lower its groups or raise max_groups"};
  // A rule that picks the global grouper and table again would repeat the global error.
  if (std::none_of(errors.begin(), errors.end(),
                   [&](const ConfigError& o) { return o.str() == e.str(); }))
    errors.push_back(std::move(e));
}

}  // namespace

std::vector<ConfigError> check_plugins(const Config& config, const PluginRegistry& registry) {
  std::vector<ConfigError> errors;
  const SourcePos file{config.path, 0, 0};
  auto pos_or_file = [&](const SourcePos& p) { return p.line ? p : file; };
  check_name(registry, PluginKind::kGrouper, config.policy.grouper,
             pos_or_file(config.policy.grouper_pos), "policy.grouper", errors);
  check_name(registry, PluginKind::kPlacer, config.policy.placer,
             pos_or_file(config.policy.placer_pos), "policy.placer", errors);
  check_name(registry, PluginKind::kAlgorithm, config.policy.algorithm,
             pos_or_file(config.policy.algorithm_pos), "policy.algorithm", errors);
  // "simulator" is the search, not a placer; it needs the placers it may start from, not a plugin
  // of its own.
  if (!config.policy.warm_start.empty() && config.policy.warm_start != offline::kSimulatorWarmStart)
    check_name(registry, PluginKind::kPlacer, config.policy.warm_start,
               pos_or_file(config.policy.warm_start_pos), "policy.warm_start", errors);
  check_tables(registry, config.params, "params", errors);
  check_group_count(registry, config, config.policy.grouper, pos_or_file(config.policy.grouper_pos),
                    {&config.params}, errors);
  for (size_t i = 0; i < config.rules.size(); ++i) {
    const JobRule& rule = config.rules[i];
    const std::string where = "rules[" + std::to_string(i) + "]";
    const PolicyChoice& picks = rule.policy.values;
    if (rule.policy.has("grouper"))
      check_name(registry, PluginKind::kGrouper, picks.grouper, picks.grouper_pos,
                 where + ".grouper", errors);
    if (rule.policy.has("placer"))
      check_name(registry, PluginKind::kPlacer, picks.placer, picks.placer_pos, where + ".placer",
                 errors);
    if (rule.policy.has("algorithm"))
      check_name(registry, PluginKind::kAlgorithm, picks.algorithm, picks.algorithm_pos,
                 where + ".algorithm", errors);
    check_tables(registry, rule.params, where + ".params", errors);
    // Only a rule that picks the grouper or its own count can add to what the global check said.
    const bool own_grouper = rule.policy.has("grouper");
    const std::string& grouper = own_grouper ? picks.grouper : config.policy.grouper;
    if (own_grouper || rule.params.count({PluginKind::kGrouper, grouper}))
      check_group_count(registry, config, grouper, own_grouper ? picks.grouper_pos : rule.where,
                        {&rule.params, &config.params}, errors);
  }
  return errors;
}

}  // namespace placementd

namespace placementd {

Config load_and_check(const std::string& path, const std::string& default_plugin_dir,
                      PluginRegistry& registry, std::vector<ConfigError>& errors) {
  const size_t first = errors.size();
  Config config = load_config_collecting(path, default_plugin_dir, errors);
  const bool readable = std::none_of(
      errors.begin() + static_cast<long>(first), errors.end(), [](const ConfigError& e) {
        return e.where.line == 0 || e.message.rfind("TOML syntax", 0) == 0;
      });
  if (readable) {
    registry.scan(config.plugin_dirs);
    for (ConfigError& e : check_plugins(config, registry)) errors.push_back(std::move(e));
  }
  sort_by_position(errors, first);
  return config;
}

std::vector<std::string> check_config_file(const std::string& path,
                                           const std::string& default_plugin_dir,
                                           PluginRegistry& registry) {
  std::vector<ConfigError> errors;
  load_and_check(path, default_plugin_dir, registry, errors);
  std::vector<std::string> out;
  for (const ConfigError& e : errors) out.push_back(e.str());
  return out;
}

}  // namespace placementd
