#include "config/config.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/listen_address.h"
#include "config/section_keys.h"
#include "planning/sim/device_presets.h"
#include "planning/sim/device_spec_toml.h"
#include "toml/toml_checker.h"

namespace placementd {

using placement::ParamValue;
using placement::PluginKind;

bool JobRule::matches(const std::string& job, uid_t job_uid) const {
  if (job_glob && ::fnmatch(job_glob->c_str(), job.c_str(), 0) != 0) return false;
  if (uid && *uid != job_uid) return false;
  return true;
}

namespace {

// [devices] cpu_spec / cuda_spec: a preset's name, or a table with a topology device's figures.
void read_node_spec(TomlChecker& c, const toml::table& devices, const char* key,
                    placement::DeviceKind kind, std::optional<placement::DeviceSpec>& out) {
  const toml::node* node = devices.get(key);
  if (!node) return;
  const std::string where = std::string("devices.") + key;
  placement::Device d;
  d.kind = kind;
  if (const auto* name = node->as_string()) {
    const sim::DevicePreset* preset = sim::find_device_preset(name->get());
    if (!preset)
      c.error(*node,
              where + ": unknown device preset '" + name->get() +
                  "' (known: " + sim::preset_names() +
                  "; or a table of figures: { fp32_tflops = ..., memory_bandwidth_gbs = ... })");
    else if (preset->kind != kind)
      c.error(*node, where + ": '" + name->get() + "' is a " + placement::to_string(preset->kind) +
                         " preset");
    else
      out = preset->spec;
    return;
  }
  const toml::table* t = node->as_table();
  if (!t) {
    c.error(*node, where + " must be a preset's name or a table of figures, got " +
                       TomlChecker::type_name(*node));
    return;
  }
  c.only(*t, where, sim::device_spec_keys({}));
  sim::read_device_spec(c, *t, where, d);
  if (d.spec)
    out = d.spec;
  else if (!t->get("spec") && !t->get("fp32_tflops") && !t->get("memory_bandwidth_gbs"))
    c.error(*t, where +
                    ": give spec = \"<preset>\" or the device's figures (fp32_tflops, "
                    "memory_bandwidth_gbs, ...)");
}

const char* kLogLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};

// The names of a section's keys (those a rule may set, for a rule).
template <typename Section>
std::vector<const char*> key_names(const std::vector<SectionKey<Section>>& keys,
                                   bool rule = false) {
  std::vector<const char*> names;
  for (const SectionKey<Section>& k : keys)
    if (!rule || k.per_rule) names.push_back(k.name);
  return names;
}

// The config's own sections, on top of the generic checks.
class Checker : public TomlChecker {
 public:
  using TomlChecker::TomlChecker;

  // [params.<kind>.<name>] tables: each value becomes a plugin hyperparameter.
  void plugin_params(const toml::table& params, const std::string& where, PluginParamTables& out) {
    only(params, where, {"grouper", "placer", "algorithm"});
    for (const char* kind_name : {"grouper", "placer", "algorithm"}) {
      const toml::table* kind_table = table(params, kind_name, where + "." + kind_name);
      if (!kind_table) continue;
      const PluginKind kind = placement::plugin_kind_from_string(kind_name);
      for (const auto& [plugin, node] : *kind_table) {
        const std::string name = where + "." + kind_name + "." + std::string(plugin.str());
        if (!node.is_table()) {
          error(node, name + " must be a table of hyperparameters, got " + type_name(node));
          continue;
        }
        PluginParamTable& entry = out[{kind, std::string(plugin.str())}];
        entry.table = pos(node);
        for (const auto& [key, value] : *node.as_table()) {
          ParamValue v;
          if (value.is_boolean())
            v = value.value_exact<bool>().value();
          else if (value.is_integer())
            v = value.value_exact<int64_t>().value();
          else if (value.is_floating_point())
            v = value.value_exact<double>().value();
          else if (value.is_string())
            v = value.value_exact<std::string>().value();
          else {
            error(value, name + "." + std::string(key.str()) +
                             " must be a boolean, integer, float or string, got " +
                             type_name(value));
            continue;
          }
          entry.values[std::string(key.str())] = v;
          entry.where[std::string(key.str())] = pos(value);
        }
      }
    }
  }

  // The keys of a section's table (section_keys.h) that `t` holds, into `out`: each in its range,
  // noted in `set` when given. A rule (`rule`) reads only the keys a rule may set.
  template <typename Section>
  void section(const toml::table& t, const std::string& where,
               const std::vector<SectionKey<Section>>& keys, Section& out,
               std::set<std::string>* set = nullptr, bool rule = false) {
    for (const SectionKey<Section>& k : keys) {
      if (rule && !k.per_rule) continue;
      bool read = false;
      if (const auto* integer = std::get_if<int64_t Section::*>(&k.field)) {
        read = get_int(t, k.name, where, out.**integer, static_cast<int64_t>(k.min),
                       static_cast<int64_t>(k.max));
      } else if (const auto* number = std::get_if<double Section::*>(&k.field)) {
        read = get_float(t, k.name, where, out.**number, k.min, k.max);
      } else {
        std::string& text = out.*std::get<std::string Section::*>(k.field);
        read = get_string(t, k.name, where, text);
        if (read && text.size() < static_cast<size_t>(k.min)) {
          error(*t.get(k.name), where + "." + k.name + " must not be empty");
          read = false;
        }
      }
      if (!read) continue;
      if (k.where) out.*(k.where) = pos(*t.get(k.name));
      if (set) set->insert(k.name);
    }
  }
};

void check_exploration_consistency(const ExplorationConfig& e, const SourcePos& where,
                                   std::vector<ConfigError>& errors) {
  if (e.warmup_steps >= e.steps_per_candidate)
    errors.push_back({where, "exploration.warmup_steps (" + std::to_string(e.warmup_steps) +
                                 ") must be smaller than steps_per_candidate (" +
                                 std::to_string(e.steps_per_candidate) +
                                 "): no step would be left to measure"});
  // A trial's statistics grow with the square (interval) and cube (null distribution) of its pairs.
  const int64_t pairs = e.max_trial_steps / (2 * std::max<int64_t>(e.trial_window_steps, 1));
  if (pairs > kMaxTrialPairs)
    errors.push_back(
        {where, "exploration.max_trial_steps (" + std::to_string(e.max_trial_steps) + ") allows " +
                    std::to_string(pairs) + " pairs of trial_window_steps (" +
                    std::to_string(e.trial_window_steps) + ") windows; at most " +
                    std::to_string(kMaxTrialPairs) + ": lower it or widen the windows"});
}

void read_document(const toml::table& root, const std::string& file, Config& config,
                   std::vector<ConfigError>& errors) {
  Checker c(file, errors);
  c.only(root, "the top level",
         {"daemon", "logging", "metrics", "plugins", "devices", "policy", "exploration", "limits",
          "memory", "params", "rules"});

  if (const toml::table* t = c.table(root, "daemon", "[daemon]")) {
    c.only(
        *t, "[daemon]",
        {"socket", "socket_mode", "admin_group", "state_dir", "max_frame_bytes", "max_connections",
         "max_connections_per_uid", "max_buffered_bytes", "frame_timeout_ms", "idle_timeout_ms",
         "stop_timeout_ms", "max_state_bytes_per_uid", "max_pending_bytes_per_uid",
         "policy_threads", "policy_threads_per_uid", "policy_nice"});
    c.get_string(*t, "socket", "daemon", config.socket);
    if (config.socket.size() >= 108)
      c.error(*t->get("socket"),
              "daemon.socket is longer than the 107 bytes a Unix socket path may have");
    int64_t mode = config.socket_mode;
    if (c.get_int(*t, "socket_mode", "daemon", mode, 0, 0777))
      config.socket_mode = static_cast<uint32_t>(mode);
    c.get_string(*t, "admin_group", "daemon", config.admin_group);
    c.get_string(*t, "state_dir", "daemon", config.state_dir);
    int64_t frame = config.max_frame_bytes;
    if (c.get_int(*t, "max_frame_bytes", "daemon", frame, 4096, int64_t{1} << 30))
      config.max_frame_bytes = static_cast<uint32_t>(frame);
    c.get_int(*t, "max_connections", "daemon", config.max_connections, 1, 1000000);
    c.get_int(*t, "max_connections_per_uid", "daemon", config.max_connections_per_uid, 1, 1000000);
    if (c.get_int(*t, "max_buffered_bytes", "daemon", config.max_buffered_bytes, 4096,
                  int64_t{1} << 40) &&
        config.max_buffered_bytes < static_cast<int64_t>(config.max_frame_bytes))
      c.error(*t->get("max_buffered_bytes"),
              "daemon.max_buffered_bytes (" + std::to_string(config.max_buffered_bytes) +
                  ") must be at least daemon.max_frame_bytes (" +
                  std::to_string(config.max_frame_bytes) + "): one largest frame must fit");
    c.get_int(*t, "frame_timeout_ms", "daemon", config.frame_timeout_ms, 10, 3600000);
    c.get_int(*t, "idle_timeout_ms", "daemon", config.idle_timeout_ms, 100, 86400000);
    c.get_int(*t, "stop_timeout_ms", "daemon", config.stop_timeout_ms, 100, 3600000);
    c.get_int(*t, "max_state_bytes_per_uid", "daemon", config.max_state_bytes_per_uid,
              int64_t{1} << 20, int64_t{1} << 50);
    c.get_int(*t, "max_pending_bytes_per_uid", "daemon", config.max_pending_bytes_per_uid,
              int64_t{1} << 20, int64_t{1} << 50);
    c.get_int(*t, "policy_threads", "daemon", config.policy_threads, 1, 256);
    c.get_int(*t, "policy_threads_per_uid", "daemon", config.policy_threads_per_uid, 0, 256);
    c.get_int(*t, "policy_nice", "daemon", config.policy_nice, 0, 19);
  }

  if (const toml::table* t = c.table(root, "logging", "[logging]")) {
    c.only(*t, "[logging]", {"level"});
    std::string level;
    if (c.get_string(*t, "level", "logging", level)) {
      bool ok = false;
      for (const char* l : kLogLevels) ok = ok || level == l;
      if (ok)
        config.log_level = level;
      else
        c.error(
            *t->get("level"),
            "logging.level must be one of trace, debug, info, warn, error, critical, off; got '" +
                level + "'");
    }
  }

  if (const toml::table* t = c.table(root, "metrics", "[metrics]")) {
    c.only(*t, "[metrics]", {"listen"});
    std::string listen;
    if (c.get_string(*t, "listen", "metrics", listen)) {
      try {
        if (!listen.empty()) parse_listen_address(listen);
        config.metrics_listen = listen;
      } catch (const std::invalid_argument& e) {
        c.error(*t->get("listen"), std::string("metrics.listen: ") + e.what());
      }
    }
  }

  if (const toml::table* t = c.table(root, "plugins", "[plugins]")) {
    c.only(*t, "[plugins]", {"dirs"});
    c.get_strings(*t, "dirs", "plugins", config.plugin_dirs);
  }

  if (const toml::table* t = c.table(root, "devices", "[devices]")) {
    c.only(*t, "[devices]", {"allow", "memory_headroom_fraction", "cpu_spec", "cuda_spec"});
    std::vector<std::string> allow;
    if (c.get_strings(*t, "allow", "devices", allow)) {
      bool ok = true;
      for (const std::string& glob : allow) {
        if (glob.rfind("cpu", 0) != 0 && glob.rfind("cuda", 0) != 0) {
          c.error(*t->get("allow"), "devices.allow entry '" + glob +
                                        "' must start with cpu or cuda (e.g. \"cuda:*\")");
          ok = false;
        }
      }
      if (ok) config.allow = allow;
    }
    c.get_float(*t, "memory_headroom_fraction", "devices", config.memory_headroom_fraction, 0.0,
                0.9);
    read_node_spec(c, *t, "cpu_spec", placement::DeviceKind::kCpu, config.cpu_spec);
    read_node_spec(c, *t, "cuda_spec", placement::DeviceKind::kCuda, config.cuda_spec);
  }

  if (const toml::table* t = c.table(root, "policy", "[policy]")) {
    c.only(*t, "[policy]", key_names(policy_keys()));
    c.section(*t, "policy", policy_keys(), config.policy);
  }

  if (const toml::table* t = c.table(root, "exploration", "[exploration]")) {
    c.only(*t, "exploration", key_names(exploration_keys()));
    c.section(*t, "exploration", exploration_keys(), config.exploration);
    check_exploration_consistency(config.exploration, c.pos(*t), errors);
  }

  if (const toml::table* t = c.table(root, "limits", "[limits]")) {
    c.only(*t, "[limits]", {"max_graph_ops", "max_graph_bytes", "max_session_bytes"});
    c.get_int(*t, "max_graph_ops", "limits", config.limits.max_graph_ops, 1, 100000000);
    if (c.get_int(*t, "max_graph_bytes", "limits", config.limits.max_graph_bytes, 4096,
                  int64_t{1} << 40) &&
        config.limits.max_graph_bytes > static_cast<int64_t>(config.max_frame_bytes))
      c.error(*t->get("max_graph_bytes"), "limits.max_graph_bytes (" +
                                              std::to_string(config.limits.max_graph_bytes) +
                                              ") is larger than daemon.max_frame_bytes (" +
                                              std::to_string(config.max_frame_bytes) +
                                              "): no frame that large is read; raise both");
    c.get_int(*t, "max_session_bytes", "limits", config.limits.max_session_bytes, int64_t{1} << 20,
              int64_t{1} << 50);
  }

  if (const toml::table* t = c.table(root, "memory", "[memory]")) {
    c.only(*t, "[memory]", {"host_pinned_bytes"});
    c.get_int(*t, "host_pinned_bytes", "memory", config.host_pinned_bytes, 0, int64_t{1} << 50);
  }

  if (const toml::table* t = c.table(root, "params", "[params]"))
    c.plugin_params(*t, "params", config.params);

  if (const toml::node* rules = root.get("rules")) {
    const toml::array* array = rules->as_array();
    if (!array) {
      c.error(*rules,
              "rules must be an array of tables ([[rules]]), got " + Checker::type_name(*rules));
    } else {
      for (size_t i = 0; i < array->size(); ++i) {
        const toml::node& node = *array->get(i);
        const std::string where = "rules[" + std::to_string(i) + "]";
        if (!node.is_table()) {
          c.error(node, where + " must be a table");
          continue;
        }
        const toml::table& t = *node.as_table();
        std::vector<const char*> allowed = key_names(policy_keys(), true);
        for (const char* key : {"job", "uid", "exploration", "params"}) allowed.push_back(key);
        c.only(t, where, allowed);
        JobRule rule;
        rule.where = c.pos(node);
        std::string glob;
        if (c.get_string(t, "job", where, glob)) rule.job_glob = glob;
        int64_t uid = 0;
        if (c.get_int(t, "uid", where, uid, 0, 4294967294LL)) rule.uid = static_cast<uid_t>(uid);
        if (!t.get("job") && !t.get("uid"))
          c.error(node, where + " matches every job: give it a job glob and/or a uid");
        c.section(t, where, policy_keys(), rule.policy.values, &rule.policy.keys, true);
        if (const toml::table* e = c.table(t, "exploration", where + ".exploration")) {
          const std::string name = where + ".exploration";
          c.only(*e, name, key_names(exploration_keys(), true));
          rule.exploration.values = config.exploration;
          c.section(*e, name, exploration_keys(), rule.exploration.values, &rule.exploration.keys,
                    true);
          check_exploration_consistency(rule.exploration.values, c.pos(*e), errors);
        }
        if (const toml::table* p2 = c.table(t, "params", where + ".params"))
          c.plugin_params(*p2, where + ".params", rule.params);
        config.rules.push_back(std::move(rule));
      }
    }
  }
}

}  // namespace

int64_t Config::policy_share_per_uid() const {
  const int64_t share = policy_threads_per_uid > 0 ? policy_threads_per_uid : policy_threads - 1;
  return std::clamp<int64_t>(share, 1, policy_threads);
}

uint64_t Config::host_pinned_budget() const {
  if (host_pinned_bytes > 0) return static_cast<uint64_t>(host_pinned_bytes);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 30;  // unknown: 1 GiB
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4;
}

Config default_config(const std::string& default_plugin_dir) {
  Config config;
  config.plugin_dirs = {default_plugin_dir};
  return config;
}

Config parse_config_collecting(const std::string& text, const std::string& name,
                               const std::string& default_plugin_dir,
                               std::vector<ConfigError>& errors) {
  Config config = default_config(default_plugin_dir);
  config.path = name;
  try {
    const toml::table root = toml::parse(text, name);
    read_document(root, name, config, errors);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    errors.push_back({{name, b.line, b.column}, "TOML syntax: " + std::string(e.description())});
  }
  sort_by_position(errors);
  return config;
}

Config load_config_collecting(const std::string& path, const std::string& default_plugin_dir,
                              std::vector<ConfigError>& errors) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back(file_error(path, "cannot open config file"));
    return default_config(default_plugin_dir);
  }
  std::ostringstream text;
  text << in.rdbuf();
  // An absolute path keeps messages and reloads right whatever the working directory becomes.
  std::error_code ec;
  const std::string absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
  return parse_config_collecting(text.str(), ec ? path : absolute, default_plugin_dir, errors);
}

Config parse_config(const std::string& text, const std::string& name,
                    const std::string& default_plugin_dir) {
  std::vector<ConfigError> errors;
  Config config = parse_config_collecting(text, name, default_plugin_dir, errors);
  if (!errors.empty()) throw ConfigInvalid(std::move(errors));
  return config;
}

Config load_config(const std::string& path, const std::string& default_plugin_dir) {
  std::vector<ConfigError> errors;
  Config config = load_config_collecting(path, default_plugin_dir, errors);
  if (!errors.empty()) throw ConfigInvalid(std::move(errors));
  return config;
}

EffectivePolicy effective_policy(const Config& config, const std::string& job, uid_t uid) {
  EffectivePolicy out;
  static_cast<PolicyChoice&>(out) = config.policy;
  out.exploration = config.exploration;
  auto params_for = [](const PluginParamTables& tables, PluginKind kind, const std::string& name) {
    auto it = tables.find({kind, name});
    return it == tables.end() ? placement::Params{} : it->second.values;
  };
  const JobRule* rule = nullptr;
  for (size_t i = 0; i < config.rules.size() && !rule; ++i) {
    if (config.rules[i].matches(job, uid)) {
      rule = &config.rules[i];
      out.rule = static_cast<int>(i);
    }
  }
  if (rule) {
    for (const PolicyKey& k : policy_keys())
      if (rule->policy.has(k.name))
        copy_key(k, rule->policy.values, static_cast<PolicyChoice&>(out));
    for (const ExplorationKey& k : exploration_keys())
      if (rule->exploration.has(k.name)) copy_key(k, rule->exploration.values, out.exploration);
  }
  out.grouper_params = params_for(config.params, PluginKind::kGrouper, out.grouper);
  out.placer_params = params_for(config.params, PluginKind::kPlacer, out.placer);
  out.algorithm_params = params_for(config.params, PluginKind::kAlgorithm, out.algorithm);
  if (rule) {
    // A rule's table overrides individual keys of the global one.
    for (auto& [kind, target] : {std::pair{PluginKind::kGrouper, &out.grouper_params},
                                 std::pair{PluginKind::kPlacer, &out.placer_params},
                                 std::pair{PluginKind::kAlgorithm, &out.algorithm_params}}) {
      const std::string& name = kind == PluginKind::kGrouper  ? out.grouper
                                : kind == PluginKind::kPlacer ? out.placer
                                                              : out.algorithm;
      for (const auto& [key, value] : params_for(rule->params, kind, name)) (*target)[key] = value;
    }
  }
  return out;
}

std::string default_state_dir() {
  if (const char* dir = std::getenv("STATE_DIRECTORY"); dir && *dir) return dir;  // systemd
  if (::geteuid() == 0) return "/var/lib/placementd";
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/placementd";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.local/state/placementd";
  throw std::runtime_error("cannot derive a state directory (no HOME): pass --state-dir");
}

}  // namespace placementd
