#include "live/live_profiles.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "live/candidates.h"
#include "placement/protocol.h"

namespace placementd {

bool can_profile(const Session& s) {
  return s.protocol_version >= placement::protocol::kProfileReportVersion &&
         s.job_profile_steps > 0;
}

bool wants_profile(const Session& s, const placement::Placement& p) {
  if (!can_profile(s) || !s.graph) return false;
  const std::set<std::string> have = s.profiled_kinds();
  std::map<std::string, std::set<int>> unprofiled;  // kind → the devices of that kind `p` uses
  for (int d : p.device_of_op)
    if (d >= 0 && static_cast<size_t>(d) < s.devices.size())
      if (const std::string kind = to_string(s.devices.devices[d].kind); !have.count(kind))
        unprofiled[kind].insert(d);
  if (unprofiled.empty()) return false;
  // Ops timed where a split sends their inputs between devices include those copies, which the
  // simulator adds itself: when the placement splits a kind, wait for the all-on-one-device
  // candidate that follows the start, if there will be one on that kind.
  if (!s.single_device_tried)
    if (const std::optional<placement::Placement> single = single_device_candidate(s)) {
      const std::vector<int> counts = single->ops_per_device(s.devices.size());
      const auto device = std::max_element(counts.begin(), counts.end()) - counts.begin();
      for (const auto& [kind, on] : unprofiled)
        if (on.size() > 1 && to_string(s.devices.devices[static_cast<size_t>(device)].kind) == kind)
          return false;
    }
  return true;
}

bool fully_profiled(const Session& s) {
  const std::set<std::string> have = s.profiled_kinds();
  return std::all_of(s.devices.devices.begin(), s.devices.devices.end(),
                     [&](const placement::Device& d) { return have.count(to_string(d.kind)) > 0; });
}

void apply_profiles(Session& s, const placement::messages::ProfileReport& report) {
  if (!s.graph) throw std::invalid_argument("upload the graph before its profiles");
  if (!s.candidates.count(report.placement_id))
    throw std::invalid_argument("placement_id " + std::to_string(report.placement_id) +
                                " was never issued to this job");
  for (size_t i = 0; i < report.ops.size(); ++i)
    if (std::none_of(
            s.devices.devices.begin(), s.devices.devices.end(),
            [&](const placement::Device& d) { return to_string(d.kind) == report.ops[i].kind; }))
      throw std::invalid_argument("ops[" + std::to_string(i) + "].kind: the job has no " +
                                  report.ops[i].kind + " device");
  report.apply(*s.graph);
  s.memory_model.emplace(*s.graph, s.devices, s.memory_model->options());
  ++s.profile_reports;
}

}  // namespace placementd
