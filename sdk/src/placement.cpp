#include "placement/placement.h"

#include <algorithm>
#include <stdexcept>

#include "hash.h"
#include "placement/devices.h"
#include "placement/graph.h"

namespace placement {

namespace {

// Whether module name `name` is `prefix` or inside it ("a.b" is inside "a", "ab" is not).
bool inside(const std::string& name, const std::string& prefix) {
  return prefix.empty() || name == prefix ||
         (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
          name[prefix.size()] == '.');
}

// The rule of `rules` with the longest prefix covering `name`, or null.
template <typename T>
const T* rule_for(const std::map<std::string, T>& rules, const std::string& name) {
  const T* best = nullptr;
  size_t length = 0;
  for (const auto& [prefix, value] : rules)
    if (inside(name, prefix) && (!best || prefix.size() >= length)) {
      best = &value;
      length = prefix.size();
    }
  return best;
}

}  // namespace

void Grouping::validate(const OpGraph& graph) const {
  if (group_of_op.size() != graph.ops.size())
    throw std::invalid_argument("grouping covers " + std::to_string(group_of_op.size()) +
                                " ops, graph has " + std::to_string(graph.ops.size()));
  if (num_groups <= 0 && !group_of_op.empty())
    throw std::invalid_argument("grouping has no groups");
  for (size_t i = 0; i < group_of_op.size(); ++i)
    if (group_of_op[i] < 0 || group_of_op[i] >= num_groups)
      throw std::invalid_argument("op " + std::to_string(i) + " is in group " +
                                  std::to_string(group_of_op[i]) + ", outside [0, " +
                                  std::to_string(num_groups) + ")");
}

std::vector<std::vector<int>> Grouping::members() const {
  std::vector<std::vector<int>> result(num_groups > 0 ? num_groups : 0);
  for (size_t i = 0; i < group_of_op.size(); ++i)
    result.at(group_of_op[i]).push_back(static_cast<int>(i));
  return result;
}

bool Grouping::operator==(const Grouping& o) const {
  return num_groups == o.num_groups && group_of_op == o.group_of_op;
}

Placement Placement::single(const OpGraph& graph, int device) {
  Placement p;
  p.device_of_op.assign(graph.ops.size(), device);
  return p;
}

Placement Placement::from_groups(const Grouping& grouping,
                                 const std::vector<int>& device_of_group) {
  if (device_of_group.size() != static_cast<size_t>(grouping.num_groups))
    throw std::invalid_argument("placer placed " + std::to_string(device_of_group.size()) +
                                " groups, grouping has " + std::to_string(grouping.num_groups));
  Placement p;
  p.device_of_op.reserve(grouping.group_of_op.size());
  for (int group : grouping.group_of_op) p.device_of_op.push_back(device_of_group.at(group));
  return p;
}

bool ParameterResidence::operator==(const ParameterResidence& o) const {
  return home == o.home && fetch == o.fetch;
}

bool ActivationResidence::operator==(const ActivationResidence& o) const {
  return policy == o.policy && device == o.device;
}

bool Residence::is_default() const {
  return std::all_of(parameters.begin(), parameters.end(),
                     [](const ParameterResidence& p) { return p == ParameterResidence{}; }) &&
         std::all_of(activations.begin(), activations.end(),
                     [](const ActivationResidence& a) { return a == ActivationResidence{}; });
}

Residence ResidenceRules::resolve(const OpGraph& graph) const {
  Residence out;
  if (!parameters.empty()) {
    out.parameters.resize(graph.parameters.size());
    for (size_t k = 0; k < graph.parameters.size(); ++k)
      if (const ParameterResidence* r = rule_for(parameters, graph.parameters[k].name))
        out.parameters[k] = *r;
  }
  if (!activations.empty()) {
    out.activations.resize(graph.ops.size());
    // A rule "m.*" is the rule of each module directly inside m, each on its own (a stack's
    // blocks); the region a recompute checkpoints is the rule's module, or that child.
    std::map<std::string, ActivationResidence> by_prefix;
    for (const auto& [key, rule] : activations) {
      const bool each = key == "*" || (key.size() > 2 && key.compare(key.size() - 2, 2, ".*") == 0);
      by_prefix[each ? key.substr(0, key.size() - (key == "*" ? 1 : 2)) : key] = rule;
    }
    // The longest rule covering `scope`, among those `wanted` takes.
    const auto longest = [&](const std::string& scope, auto wanted) {
      const std::string* matched = nullptr;
      for (const auto& [prefix, rule] : by_prefix)
        if (wanted(rule) && inside(scope, prefix) && (!matched || prefix.size() >= matched->size()))
          matched = &prefix;
      return matched;
    };
    // Each op's region: the module of the longest recompute rule covering it, whatever rule
    // decides its own policy (a batch norm kept inside a checkpointed block is in the block).
    std::vector<std::string> region(graph.ops.size());
    for (size_t i = 0; i < graph.ops.size(); ++i) {
      // An op's module scope: its name up to the last '/' ("" at the top level).
      const std::string& name = graph.ops[i].name;
      const size_t slash = name.rfind('/');
      const std::string scope = slash == std::string::npos ? "" : name.substr(0, slash);
      if (const std::string* decides = longest(scope, [](const auto&) { return true; }))
        out.activations[i] = by_prefix.at(*decides);
      const std::string* recompute = longest(scope, [](const ActivationResidence& r) {
        return r.policy == ActivationPolicy::kRecompute;
      });
      if (!recompute) continue;
      region[i] = *recompute;
      const std::string key = recompute->empty() ? "*" : *recompute + ".*";
      if (activations.count(key) && scope.size() > recompute->size()) {
        const size_t from = recompute->empty() ? 0 : recompute->size() + 1;
        const size_t dot = scope.find('.', from);
        region[i] = scope.substr(0, dot == std::string::npos ? scope.size() : dot);
      }
    }
    // A recomputed region keeps what it hands on: an op whose outputs an op outside its region
    // reads keeps them, and a chain of recomputes stops there (as torch.utils.checkpoint keeps a
    // module's inputs).
    for (const Edge& e : graph.edges) {
      const size_t from = static_cast<size_t>(e.src), to = static_cast<size_t>(e.dst);
      if (out.activations[from].policy == ActivationPolicy::kRecompute &&
          (region[to].empty() || region[to] != region[from]))
        out.activations[from] = ActivationResidence{};
    }
  }
  return out;
}

Residence Residence::carried_to(const std::vector<int>& device_of_op) const {
  Residence out = *this;
  for (size_t i = 0; i < out.activations.size() && i < device_of_op.size(); ++i)
    if (out.activations[i].policy == ActivationPolicy::kOffload &&
        out.activations[i].device == device_of_op[i])
      out.activations[i] = ActivationResidence{};
  return out;
}

bool Residence::operator==(const Residence& o) const {
  // A default residence equals every other spelling of it (empty, or entries all default).
  if (is_default() || o.is_default()) return is_default() && o.is_default();
  return parameters == o.parameters && activations == o.activations;
}

namespace {

void validate_residence(const Residence& r, const Placement& placement, const OpGraph& graph,
                        const DeviceSet& devices) {
  const auto device_name = [&devices](int d) {
    return d >= 0 && static_cast<size_t>(d) < devices.size() ? devices.devices[d].name()
                                                             : std::to_string(d);
  };
  if (!r.parameters.empty() && r.parameters.size() != graph.parameters.size())
    throw std::invalid_argument(
        "residence names " + std::to_string(r.parameters.size()) + " parameters, graph has " +
        std::to_string(graph.parameters.size()) +
        (graph.parameters.empty() ? " (capture it again to list them)" : ""));
  for (size_t k = 0; k < r.parameters.size(); ++k) {
    const int home = r.parameters[k].home;
    if (home < -1 || home >= static_cast<int>(devices.size()))
      throw std::invalid_argument("parameter " + std::to_string(k) + " '" +
                                  graph.parameters[k].name + "' has its home on device index " +
                                  std::to_string(home) + ", outside [0, " +
                                  std::to_string(devices.size()) + ")");
  }
  if (!r.activations.empty() && r.activations.size() != graph.ops.size())
    throw std::invalid_argument("residence covers the activations of " +
                                std::to_string(r.activations.size()) + " ops, graph has " +
                                std::to_string(graph.ops.size()));
  for (size_t i = 0; i < r.activations.size(); ++i) {
    const ActivationResidence& a = r.activations[i];
    const std::string op = "op " + std::to_string(i) + " '" + graph.ops[i].name + "'";
    if (a.policy != ActivationPolicy::kOffload) {
      if (a.device != -1)
        throw std::invalid_argument(op + ": only an offloaded activation names a device");
      continue;
    }
    if (a.device < 0 || static_cast<size_t>(a.device) >= devices.size())
      throw std::invalid_argument(op + " offloads its outputs to device index " +
                                  std::to_string(a.device) + ", outside [0, " +
                                  std::to_string(devices.size()) + ")");
    if (a.device == placement.device_of_op[i])
      throw std::invalid_argument(op + " offloads its outputs to " + device_name(a.device) +
                                  ", the device it runs on");
  }
}

}  // namespace

void Placement::validate(const OpGraph& graph, const DeviceSet& devices) const {
  if (device_of_op.size() != graph.ops.size())
    throw std::invalid_argument("placement covers " + std::to_string(device_of_op.size()) +
                                " ops, graph has " + std::to_string(graph.ops.size()));
  for (size_t i = 0; i < device_of_op.size(); ++i) {
    const int d = device_of_op[i];
    const Op& op = graph.ops[i];
    if (d < 0 || static_cast<size_t>(d) >= devices.size())
      throw std::invalid_argument("op " + std::to_string(i) + " '" + op.name +
                                  "' is on device index " + std::to_string(d) + ", outside [0, " +
                                  std::to_string(devices.size()) + ")");
    if (op.pinned && devices.devices[d].kind != *op.pinned)
      throw std::invalid_argument("op " + std::to_string(i) + " '" + op.name + "' is pinned to " +
                                  to_string(*op.pinned) + " but placed on " +
                                  devices.devices[d].name());
  }
  validate_residence(residence, *this, graph, devices);
}

int Placement::home_of_parameter(const OpGraph& graph, size_t k) const {
  if (k < residence.parameters.size() && residence.parameters[k].home >= 0)
    return residence.parameters[k].home;
  const std::vector<int>& readers = graph.parameters.at(k).readers;
  return readers.empty() ? -1 : device_of_op.at(static_cast<size_t>(readers.front()));
}

int Placement::proxy_device_of_parameter(const OpGraph& graph, size_t k) const {
  const std::vector<int>& readers = graph.parameters.at(k).readers;
  if (readers.empty()) return -1;
  const int reader = device_of_op.at(static_cast<size_t>(readers.front()));
  for (const int op : readers)
    if (device_of_op.at(static_cast<size_t>(op)) != reader) return -1;
  return reader == home_of_parameter(graph, k) ? -1 : reader;
}

int Placement::enforce_pins(const OpGraph& graph, const DeviceSet& devices) {
  int moved = 0;
  for (size_t i = 0; i < graph.ops.size() && i < device_of_op.size(); ++i) {
    const Op& op = graph.ops[i];
    if (!op.pinned || devices.devices.at(device_of_op[i]).kind == *op.pinned) continue;
    int target = -1;
    for (size_t d = 0; d < devices.size() && target < 0; ++d)
      if (devices.devices[d].kind == *op.pinned) target = static_cast<int>(d);
    if (target < 0)
      throw std::invalid_argument("op " + std::to_string(i) + " '" + op.name + "' is pinned to " +
                                  to_string(*op.pinned) + " but the device set has no such device");
    device_of_op[i] = target;
    ++moved;
  }
  return moved;
}

std::vector<int> Placement::ops_per_device(size_t num_devices) const {
  std::vector<int> counts(num_devices, 0);
  for (int d : device_of_op)
    if (d >= 0 && static_cast<size_t>(d) < num_devices) ++counts[d];
  return counts;
}

std::string Placement::fingerprint() const {
  detail::Fnv1a h;
  for (int d : device_of_op) h.add(d);
  if (!residence.is_default()) {
    h.add(std::string("residence"));
    h.add(static_cast<uint64_t>(residence.parameters.size()));
    for (const ParameterResidence& p : residence.parameters)
      h.add(p.home).add(static_cast<int>(p.fetch));
    h.add(static_cast<uint64_t>(residence.activations.size()));
    for (const ActivationResidence& a : residence.activations)
      h.add(static_cast<int>(a.policy)).add(a.device);
  }
  return h.hex();
}

bool Placement::operator==(const Placement& o) const {
  return device_of_op == o.device_of_op && residence == o.residence;
}

}  // namespace placement
