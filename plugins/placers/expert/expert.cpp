#include "expert.h"

#include "placement_helpers.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace placement::plugins {

std::optional<int> ExpertPlacer::layer_of(const std::string& name) {
  // The module path before '/'; a top-level op ("cat.1") has none, its suffix only numbers repeats.
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const std::string path = name.substr(0, slash);
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = path.find('.', start);
    const std::string part =
        path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!part.empty() && part.size() < 9 &&
        part.find_first_not_of("0123456789") == std::string::npos)
      return std::stoi(part);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return std::nullopt;
}

void ExpertPlacer::prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
                           std::mt19937_64&) {
  const std::vector<int> usable = usable_devices(devices, gpus_only_);
  if (usable.empty()) throw std::invalid_argument("expert: the device set is empty");

  // Layer of every op: its own, else inherited as documented.
  const size_t n = graph.ops.size();
  std::vector<std::optional<int>> layer(n);
  int max_layer = -1;
  for (size_t i = 0; i < n; ++i)
    if ((layer[i] = layer_of(graph.ops[i].name))) max_layer = std::max(max_layer, *layer[i]);
  const auto order = graph.topological_order();
  const auto producers = graph.producers();
  size_t first_layered = order.size(), last_layered = 0;
  for (size_t k = 0; k < order.size(); ++k)
    if (layer[order[k]]) {
      first_layered = std::min(first_layered, k);
      last_layered = k;
    }
  for (size_t k = 0; k < order.size(); ++k) {
    const int u = order[k];
    if (layer[u]) continue;
    if (max_layer < 0 || k < first_layered)
      layer[u] = 0;
    else if (k > last_layered)
      layer[u] = max_layer;
    else {
      for (int p : producers[u])
        if (layer[p]) {
          layer[u] = layer[p];
          break;
        }
      if (!layer[u]) layer[u] = 0;
    }
  }
  // Layers to devices: layer i on device i, consecutive layers sharing when there are more.
  const int layers = std::max(max_layer + 1, 1);
  const int D = static_cast<int>(usable.size());
  auto device_of_layer = [&](int l) {
    return usable[layers <= D ? l : static_cast<int>(static_cast<int64_t>(l) * D / layers)];
  };

  // A group goes where most of its ops' layers say (ties: the lower device index).
  device_of_group_.assign(static_cast<size_t>(grouping.num_groups), usable[0]);
  std::vector<std::map<int, int>> votes(static_cast<size_t>(grouping.num_groups));
  for (size_t i = 0; i < n; ++i) ++votes[grouping.group_of_op[i]][device_of_layer(*layer[i])];
  for (size_t g = 0; g < votes.size(); ++g) {
    int best = -1;
    for (const auto& [device, count] : votes[g])
      if (best < 0 || count > votes[g][best]) best = device;
    if (best >= 0) device_of_group_[g] = best;
  }
}

std::vector<int> ExpertPlacer::place(std::mt19937_64&) { return device_of_group_; }

}  // namespace placement::plugins
