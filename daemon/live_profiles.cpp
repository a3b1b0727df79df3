#include "live_profiles.h"

#include <algorithm>
#include <stdexcept>

#include "placement/protocol.h"

namespace placementd {

bool wants_profile(const Session& s, const placement::Placement& p) {
  if (s.protocol_version < placement::protocol::kProfileReportVersion || s.job_profile_steps <= 0 || !s.graph)
    return false;
  const std::set<std::string> have = s.profiled_kinds();
  for (int d : p.device_of_op)
    if (d >= 0 && static_cast<size_t>(d) < s.devices.size() && !have.count(to_string(s.devices.devices[d].kind)))
      return true;
  return false;
}

bool fully_profiled(const Session& s) {
  const std::set<std::string> have = s.profiled_kinds();
  return std::all_of(s.devices.devices.begin(), s.devices.devices.end(),
                     [&](const placement::Device& d) { return have.count(to_string(d.kind)) > 0; });
}

void apply_profiles(Session& s, const placement::ProfileReport& report) {
  if (!s.graph) throw std::invalid_argument("upload the graph before its profiles");
  if (!s.candidates.count(report.placement_id))
    throw std::invalid_argument("placement_id " + std::to_string(report.placement_id) + " was never issued to this job");
  for (size_t i = 0; i < report.ops.size(); ++i)
    if (std::none_of(s.devices.devices.begin(), s.devices.devices.end(),
                     [&](const placement::Device& d) { return to_string(d.kind) == report.ops[i].kind; }))
      throw std::invalid_argument("ops[" + std::to_string(i) + "].kind: the job has no " + report.ops[i].kind + " device");
  report.apply(*s.graph);
  s.memory_model.emplace(*s.graph, s.devices, s.memory_model->options());
  ++s.profile_reports;
}

}  // namespace placementd
