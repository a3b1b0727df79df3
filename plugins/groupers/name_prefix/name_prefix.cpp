#include "name_prefix.h"

#include <unordered_map>

namespace placement::plugins {

std::vector<std::string> NamePrefixGrouper::levels_of(const std::string& name) {
  std::vector<std::string> levels;
  std::string part;
  auto flush = [&] {
    if (part.empty()) return;
    const bool index = part.find_first_not_of("0123456789") == std::string::npos;
    if (index && !levels.empty())
      levels.back() += "." + part;
    else
      levels.push_back(part);
    part.clear();
  };
  for (char c : name) {
    if (c == '.' || c == '/')
      flush();
    else
      part += c;
  }
  flush();
  return levels;
}

Grouping NamePrefixGrouper::group(const OpGraph& graph, const DeviceSet&, std::mt19937_64&) {
  Grouping grouping;
  grouping.group_of_op.reserve(graph.ops.size());
  std::unordered_map<std::string, int> group_of_prefix;
  for (const Op& op : graph.ops) {
    const auto levels = levels_of(op.name);
    std::string prefix;
    for (size_t i = 0; i < levels.size() && static_cast<int64_t>(i) < levels_; ++i)
      prefix += (i ? "/" : "") + levels[i];
    // Ops pinned to a device kind never share a group with ops that are not.
    if (op.pinned) prefix += std::string("@") + to_string(*op.pinned);
    const auto [it, fresh] = group_of_prefix.emplace(prefix, grouping.num_groups);
    if (fresh) ++grouping.num_groups;
    grouping.group_of_op.push_back(it->second);
  }
  return grouping;
}

}  // namespace placement::plugins
