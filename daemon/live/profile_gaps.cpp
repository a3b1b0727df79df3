#include "live/profile_gaps.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

namespace placementd {

const placement::OpProfile* measured_profile(const placement::Op& op, const std::string& kind) {
  const auto it = op.profile.find(kind);
  return it != op.profile.end() && !it->second.predicted ? &it->second : nullptr;
}

bool may_run_on(const placement::Op& op, const std::string& kind) {
  return !op.pinned || placement::to_string(*op.pinned) == kind;
}

namespace {

double step_s(const placement::OpProfile& p) { return p.forward_s + p.backward_s; }

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

size_t fill_profile_gaps(placement::OpGraph& graph, const std::vector<std::string>& kinds) {
  for (placement::Op& op : graph.ops)
    for (auto it = op.profile.begin(); it != op.profile.end();)
      it = it->second.predicted ? op.profile.erase(it) : std::next(it);
  size_t filled = 0;
  for (const std::string& to : kinds)
    for (const std::string& from : kinds) {
      if (to == from) continue;
      // time on `to` / time on `from`, of the ops measured on both: by op kind, and all together.
      std::map<std::string, std::vector<double>> by_kind;
      std::vector<double> all;
      for (const placement::Op& op : graph.ops) {
        const placement::OpProfile* a = measured_profile(op, to);
        const placement::OpProfile* b = measured_profile(op, from);
        if (!a || !b || step_s(*a) <= 0 || step_s(*b) <= 0) continue;
        by_kind[op.kind].push_back(step_s(*a) / step_s(*b));
        all.push_back(step_s(*a) / step_s(*b));
      }
      const std::optional<double> overall = median(all);
      if (!overall) continue;
      std::map<std::string, double> ratio;
      for (auto& [kind, ratios] : by_kind) ratio[kind] = *median(std::move(ratios));
      for (placement::Op& op : graph.ops) {
        if (op.profile.count(to) || !may_run_on(op, to)) continue;  // measured, or filled already
        const placement::OpProfile* b = measured_profile(op, from);
        if (!b) continue;
        const auto own = ratio.find(op.kind);
        const double r = own != ratio.end() ? own->second : *overall;
        op.profile[to] = {b->forward_s * r, b->backward_s * r, b->update_s * r, b->activation_bytes,
                          true};
        ++filled;
      }
    }
  return filled;
}

}  // namespace placementd
