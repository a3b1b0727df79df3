#include "placement/placement.h"

#include <stdexcept>

#include "hash.h"
#include "placement/devices.h"
#include "placement/graph.h"

namespace placement {

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
  return h.hex();
}

bool Placement::operator==(const Placement& o) const { return device_of_op == o.device_of_op; }

}  // namespace placement
