// Per-op profiles a job measures on its own steps (protocol 2): when to ask for them, and taking
// them into the session, so the simulator (warm start, memory model) works without a capture file.

#include "live/session.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "live/candidates.h"
#include "placement/protocol.h"

namespace placementd {

bool Session::can_profile() const {
  return job_.protocol_version >= placement::protocol::kProfileReportVersion &&
         job_.profile_steps > 0;
}

bool Session::wants_profile(const placement::Placement& p) const {
  if (!can_profile() || !graph_) return false;
  const std::set<std::string> have = profiled_kinds();
  std::map<std::string, std::set<int>> unprofiled;  // kind → the devices of that kind `p` uses
  for (int d : p.device_of_op)
    if (d >= 0 && static_cast<size_t>(d) < job_.devices.size())
      if (const std::string kind = to_string(job_.devices.devices[d].kind); !have.count(kind))
        unprofiled[kind].insert(d);
  if (unprofiled.empty()) return false;
  // Ops timed where a split sends their inputs between devices include those copies, which the
  // simulator adds itself: when the placement splits a kind, wait for the all-on-one-device
  // candidate that follows the start, if there will be one on that kind.
  if (!single_device_tried_)
    if (const std::optional<placement::Placement> single = single_device_candidate(*this)) {
      const std::vector<int> counts = single->ops_per_device(job_.devices.size());
      const auto device = std::max_element(counts.begin(), counts.end()) - counts.begin();
      for (const auto& [kind, on] : unprofiled)
        if (on.size() > 1 &&
            to_string(job_.devices.devices[static_cast<size_t>(device)].kind) == kind)
          return false;
    }
  return true;
}

bool Session::fully_profiled() const {
  const std::set<std::string> have = profiled_kinds();
  return std::all_of(job_.devices.devices.begin(), job_.devices.devices.end(),
                     [&](const placement::Device& d) { return have.count(to_string(d.kind)) > 0; });
}

void Session::apply_profiles(const placement::messages::ProfileReport& report) {
  if (!graph_) throw std::invalid_argument("upload the graph before its profiles");
  if (!candidates_.count(report.placement_id))
    throw std::invalid_argument("placement_id " + std::to_string(report.placement_id) +
                                " was never issued to this job");
  for (size_t i = 0; i < report.ops.size(); ++i)
    if (std::none_of(
            job_.devices.devices.begin(), job_.devices.devices.end(),
            [&](const placement::Device& d) { return to_string(d.kind) == report.ops[i].kind; }))
      throw std::invalid_argument("ops[" + std::to_string(i) + "].kind: the job has no " +
                                  report.ops[i].kind + " device");
  report.apply(*graph_);
  memory_model_.emplace(*graph_, job_.devices, memory_model_->options());
  ++counters_.profile_reports;
}

}  // namespace placementd
