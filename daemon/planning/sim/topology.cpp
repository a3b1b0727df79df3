#include "planning/sim/topology.h"

#include <fstream>
#include <map>
#include <sstream>

#include "planning/sim/device_presets.h"
#include "planning/sim/device_spec_toml.h"

namespace placementd::sim {

namespace {

constexpr double kGB = 1e9;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct LinkSpec {
  double bandwidth = 0, latency = 0;
};

struct Figure {
  const char* key;
  double scale;
  double placement::DeviceSpec::*field;
  double min, max;
};

const Figure kFigures[] = {
    {"fp32_tflops", 1e12, &placement::DeviceSpec::fp32_flops, 1e-6, 1e6},
    {"tf32_tflops", 1e12, &placement::DeviceSpec::tf32_flops, 0, 1e6},
    {"bf16_tflops", 1e12, &placement::DeviceSpec::bf16_flops, 0, 1e6},
    {"fp16_tflops", 1e12, &placement::DeviceSpec::fp16_flops, 0, 1e6},
    {"memory_bandwidth_gbs", 1e9, &placement::DeviceSpec::memory_bandwidth, 1e-6, 1e6},
    {"launch_us", 1e-6, &placement::DeviceSpec::launch_s, 0, 1e6},
    {"compute_efficiency", 1, &placement::DeviceSpec::compute_efficiency, 1e-3, 1},
    {"memory_efficiency", 1, &placement::DeviceSpec::memory_efficiency, 1e-3, 1},
    {"conv_efficiency", 1, &placement::DeviceSpec::conv_efficiency, 1e-3, 1},
    {"conv_layout_gbs", 1e9, &placement::DeviceSpec::conv_layout_bandwidth, 0, 1e6},
    {"pool_efficiency", 1, &placement::DeviceSpec::pool_efficiency, 1e-6, 1},
    {"rnn_layer_us", 1e-6, &placement::DeviceSpec::rnn_layer_s, 0, 1e6},
    {"rnn_step_us", 1e-6, &placement::DeviceSpec::rnn_step_s, 0, 1e6},
    {"step_us", 1e-6, &placement::DeviceSpec::step_s, 0, 1e6},
};

}  // namespace

std::vector<const char*> device_spec_keys(std::initializer_list<const char*> others) {
  std::vector<const char*> keys(others);
  keys.push_back("spec");
  for (const Figure& f : kFigures) keys.push_back(f.key);
  return keys;
}

std::string preset_names() {
  std::string names;
  for (const DevicePreset& p : device_presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

void read_device_spec(TomlChecker& c, const toml::table& t, const std::string& where,
                      placement::Device& d) {
  std::optional<placement::DeviceSpec> spec;
  std::string preset_name;
  if (c.get_string(t, "spec", where, preset_name)) {
    const DevicePreset* preset = find_device_preset(preset_name);
    if (!preset) {
      c.error(*t.get("spec"),
              where + ".spec: unknown device preset '" + preset_name +
                  "' (known: " + preset_names() +
                  "; or give the device's figures: fp32_tflops, memory_bandwidth_gbs, ...)");
      return;
    }
    if (preset->kind != d.kind) {
      c.error(*t.get("spec"), where + ".spec: '" + preset_name + "' is a " +
                                  to_string(preset->kind) + " preset, but " + d.name() + " is a " +
                                  to_string(d.kind) + " device");
      return;
    }
    spec = preset->spec;
    if (!t.get("memory_gib")) d.memory_bytes = preset->memory_bytes;
  }
  bool given = false;
  for (const Figure& f : kFigures) given = given || t.get(f.key);
  if (!given) {
    d.spec = spec;
    return;
  }
  const bool from_preset = spec.has_value();
  if (!spec) spec.emplace();
  bool ok = true;
  for (const Figure& f : kFigures) {
    double value = 0;
    if (c.get_float(t, f.key, where, value, f.min, f.max))
      (*spec).*(f.field) = value * f.scale;
    else if (t.get(f.key))
      ok = false;
  }
  if (!from_preset) {
    std::string missing;
    for (const char* required : {"fp32_tflops", "memory_bandwidth_gbs"})
      if (!t.get(required)) missing += (missing.empty() ? "" : " and ") + std::string(required);
    if (!missing.empty()) {
      c.error(t, "device " + d.name() + " gives cost-model figures but no " + missing +
                     " (give them, or spec = \"<preset>\" to start from a preset)");
      ok = false;
    }
  }
  if (from_preset) spec->preset += " (modified)";
  if (ok) d.spec = spec;
}

namespace {

// A [[link]]'s figures; nullopt (its errors reported) when its bandwidth is missing or wrong.
std::optional<LinkSpec> read_link(TomlChecker& c, const toml::table& t, const std::string& where,
                                  const std::string& hint) {
  LinkSpec spec;
  if (!c.get_float(t, "bandwidth_gbs", where, spec.bandwidth, 1e-6, 1e6)) {
    if (!t.get("bandwidth_gbs")) c.error(t, where + " needs bandwidth_gbs" + hint);
    return std::nullopt;
  }
  spec.bandwidth *= kGB;
  double latency_us = 0;
  c.get_float(t, "latency_us", where, latency_us, 0, 1e6);
  spec.latency = latency_us * 1e-6;
  return spec;
}

}  // namespace

Topology parse_topology_text(const std::string& text, const std::string& name) {
  std::vector<ConfigError> errors;
  Topology topology;
  placement::DeviceSet& set = topology.devices;
  try {
    const toml::table root = toml::parse(text, name);
    TomlChecker c(name, errors);
    c.only(root, "the topology", {"name", "defaults", "device", "link"});
    std::string description;
    c.get_string(root, "name", "topology", description);

    std::optional<LinkSpec> defaults;
    if (const toml::table* t = c.table(root, "defaults", "[defaults]")) {
      c.only(*t, "[defaults]", {"bandwidth_gbs", "latency_us"});
      LinkSpec d;
      const bool bw = c.get_float(*t, "bandwidth_gbs", "defaults", d.bandwidth, 1e-6, 1e6);
      double latency_us = 0;
      c.get_float(*t, "latency_us", "defaults", latency_us, 0, 1e6);
      d.latency = latency_us * 1e-6;
      d.bandwidth *= kGB;
      if (bw)
        defaults = d;
      else if (!t->get("bandwidth_gbs"))
        c.error(*t, "[defaults] needs bandwidth_gbs");
    }

    std::map<std::string, toml::source_position> device_pos;
    const toml::node* devices = root.get("device");
    if (!devices)
      errors.push_back(
          file_error(name, "no [[device]] entries: a topology needs at least one device"));
    else if (!devices->is_array_of_tables())
      c.error(*devices, "device must be an array of tables ([[device]])");
    else {
      const auto& array = *devices->as_array();
      for (size_t i = 0; i < array.size(); ++i) {
        const toml::table& t = *array.get(i)->as_table();
        const std::string where = "device[" + std::to_string(i) + "]";
        c.only(t, where, device_spec_keys({"name", "memory_gib", "speed"}));
        placement::Device d;
        std::string device_name;
        if (!c.get_string(t, "name", where, device_name)) {
          c.error(t, where + " needs a name such as \"cuda:0\"");
          continue;
        }
        try {
          d = placement::parse_device_name(device_name);
        } catch (const std::invalid_argument& e) {
          c.error(*t.get("name"), where + ".name: " + e.what());
          continue;
        }
        double memory = 0;
        if (c.get_float(t, "memory_gib", where, memory, 1e-6, 1e9))
          d.memory_bytes = static_cast<uint64_t>(memory * kGiB);
        c.get_float(t, "speed", where, d.speed, 1e-6, 1e6);
        read_device_spec(c, t, where, d);
        if (d.memory_bytes == 0 && !t.get("memory_gib"))
          c.error(t,
                  "device " + d.name() + " has no memory_gib (and no spec preset to take it from)");
        if (device_pos.count(d.name())) {
          c.error(*t.get("name"), "device " + d.name() + " appears twice");
          continue;
        }
        device_pos[d.name()] = t.source().begin;
        set.devices.push_back(d);
      }
    }

    const size_t n = set.devices.size();
    std::vector<std::vector<std::optional<LinkSpec>>> links(
        n, std::vector<std::optional<LinkSpec>>(n));
    if (const toml::node* list = root.get("link")) {
      if (!list->is_array_of_tables())
        c.error(*list, "link must be an array of tables ([[link]])");
      else {
        const auto& array = *list->as_array();
        for (size_t i = 0; i < array.size(); ++i) {
          const toml::table& t = *array.get(i)->as_table();
          const std::string where = "link[" + std::to_string(i) + "]";
          c.only(t, where, {"between", "bandwidth_gbs", "latency_us"});
          std::vector<std::string> ends;
          if (!c.get_strings(t, "between", where, ends) || ends.size() != 2) {
            c.error(t.get("between") ? *t.get("between") : static_cast<const toml::node&>(t),
                    where + ".between must name two devices, e.g. [\"cpu:0\", \"cuda:0\"]");
            continue;
          }
          const bool node_a = ends[0] == "node", node_b = ends[1] == "node";
          if (node_a != node_b) {
            c.error(*t.get("between"),
                    where +
                        ": \"node\" stands for a whole node: the link between nodes is "
                        "between = [\"node\", \"node\"]");
            continue;
          }
          if (node_a) {
            if (topology.node_link) {
              c.error(*t.get("between"), where + ": a second link between nodes (one is enough)");
              continue;
            }
            if (const auto node = read_link(c, t, where, " (400 Gb/s: 50)"))
              topology.node_link = NodeLink{node->bandwidth, node->latency};
            continue;
          }
          const int a = set.index_of(ends[0]), b = set.index_of(ends[1]);
          if (a < 0 || b < 0) {
            c.error(*t.get("between"),
                    where + ": no device named '" + (a < 0 ? ends[0] : ends[1]) + "'");
            continue;
          }
          if (a == b) {
            c.error(*t.get("between"), where + ": a link needs two different devices");
            continue;
          }
          if (const auto spec = read_link(c, t, where, "")) links[a][b] = links[b][a] = spec;
        }
      }
    }
    set.bandwidth.assign(n, std::vector<double>(n, 0.0));
    set.latency.assign(n, std::vector<double>(n, 0.0));
    for (size_t a = 0; a < n; ++a)
      for (size_t b = 0; b < n; ++b) {
        if (a == b) continue;
        const std::optional<LinkSpec>& spec = links[a][b] ? links[a][b] : defaults;
        if (!spec) {
          if (a < b)
            errors.push_back(file_error(
                name, "no link between " + set.devices[a].name() + " and " + set.devices[b].name() +
                          " (add a [[link]] for them, or bandwidth_gbs in [defaults])"));
          continue;
        }
        set.bandwidth[a][b] = spec->bandwidth;
        set.latency[a][b] = spec->latency;
      }
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    errors.push_back({{name, b.line, b.column}, "TOML syntax: " + std::string(e.description())});
  }
  sort_by_position(errors);
  if (!errors.empty()) throw ConfigInvalid(std::move(errors));
  return topology;
}

placement::DeviceSet parse_topology(const std::string& text, const std::string& name) {
  return parse_topology_text(text, name).devices;
}

placement::DeviceSet load_topology(const std::string& path) {
  return load_topology_file(path).devices;
}

Topology load_topology_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigInvalid({file_error(path, "cannot open topology file")});
  std::ostringstream text;
  text << in.rdbuf();
  return parse_topology_text(text.str(), path);
}

}  // namespace placementd::sim
