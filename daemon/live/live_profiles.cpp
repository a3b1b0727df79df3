// Per-op profiles a job measures on its own steps (protocol 2): when to ask for them, and taking
// them into the session, so the simulator (warm start, memory model) works without a capture file.

#include "live/session.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "live/candidates.h"
#include "live/profile_gaps.h"
#include "placement/protocol.h"

namespace placementd {

bool Session::can_profile() const {
  return job_.protocol_version >= placement::protocol::kProfileReportVersion &&
         job_.profile_steps() > 0;
}

namespace {

// Whether `op` still needs a measured profile on `kind`: it may run there, has none measured there,
// and the job's profiler times it at all (an op no report ever named would be asked for forever).
bool lacks_profile(const placement::Op& op, const std::string& kind) {
  if (!may_run_on(op, kind) || measured_profile(op, kind)) return false;
  return std::any_of(op.profile.begin(), op.profile.end(),
                     [](const auto& p) { return !p.second.predicted; });
}

}  // namespace

bool Session::wants_profile(const placement::Placement& p) const {
  if (!can_profile() || !graph_) return false;
  // Per op: a start spread over a CPU and a GPU times each op on one kind only.
  const bool none_yet = profiled_kinds().empty();
  std::map<std::string, std::set<int>> unprofiled;  // kind → the devices of that kind `p` uses
  for (size_t u = 0; u < p.device_of_op.size() && u < graph_->ops.size(); ++u) {
    const int d = p.device_of_op[u];
    if (d < 0 || static_cast<size_t>(d) >= job_.attach.devices.size()) continue;
    const std::string kind = to_string(job_.attach.devices.devices[d].kind);
    if (none_yet || lacks_profile(graph_->ops[u], kind)) unprofiled[kind].insert(d);
  }
  if (unprofiled.empty()) return false;
  // Ops timed where a split sends their inputs between devices include those copies, which the
  // simulator adds itself: when the placement splits a kind, wait for the all-on-one-device
  // candidate that follows the start, if there will be one on that kind.
  if (!single_device_tried_)
    if (const std::optional<placement::Placement> single = single_device_candidate(*this)) {
      const std::vector<int> counts = single->ops_per_device(job_.attach.devices.size());
      const auto device = std::max_element(counts.begin(), counts.end()) - counts.begin();
      for (const auto& [kind, on] : unprofiled)
        if (on.size() > 1 &&
            to_string(job_.attach.devices.devices[static_cast<size_t>(device)].kind) == kind)
          return false;
    }
  return true;
}

bool Session::fully_profiled() const {
  if (!graph_ || profiled_kinds().empty()) return false;
  return std::none_of(graph_->ops.begin(), graph_->ops.end(), [&](const placement::Op& op) {
    return std::any_of(
        job_.attach.devices.devices.begin(), job_.attach.devices.devices.end(),
        [&](const placement::Device& d) { return lacks_profile(op, to_string(d.kind)); });
  });
}

bool Session::profile_asked(uint64_t placement_id) {
  if (!candidates_.count(placement_id) || profiles_asked_.count(placement_id)) return true;
  ++counters_.profile_reports_dropped;
  return false;
}

void Session::apply_profiles(const placement::messages::ProfileReport& report) {
  if (!graph_) throw std::invalid_argument("upload the graph before its profiles");
  if (!candidates_.count(report.placement_id))
    throw std::invalid_argument("placement_id " + std::to_string(report.placement_id) +
                                " was never issued to this job");
  for (size_t i = 0; i < report.ops.size(); ++i)
    if (std::none_of(
            job_.attach.devices.devices.begin(), job_.attach.devices.devices.end(),
            [&](const placement::Device& d) { return to_string(d.kind) == report.ops[i].kind; }))
      throw std::invalid_argument("ops[" + std::to_string(i) + "].kind: the job has no " +
                                  report.ops[i].kind + " device");
  if (report.peak_bytes.size() > job_.attach.devices.size())
    throw std::invalid_argument("peak_bytes: " + std::to_string(report.peak_bytes.size()) +
                                " entries for the job's " +
                                std::to_string(job_.attach.devices.size()) + " devices");
  if (report.held_bytes.size() > job_.attach.devices.size())
    throw std::invalid_argument("held_bytes: " + std::to_string(report.held_bytes.size()) +
                                " entries for the job's " +
                                std::to_string(job_.attach.devices.size()) + " devices");
  report.apply(*graph_);
  if (!report.peak_bytes.empty())
    candidates_.at(report.placement_id).peak_bytes = report.peak_bytes;
  if (!report.held_bytes.empty())
    candidates_.at(report.placement_id).held_bytes = report.held_bytes;
  std::vector<std::string> kinds;
  for (const placement::Device& d : job_.attach.devices.devices)
    if (std::find(kinds.begin(), kinds.end(), to_string(d.kind)) == kinds.end())
      kinds.push_back(to_string(d.kind));
  if (const size_t filled = fill_profile_gaps(*graph_, kinds))
    spdlog::info(
        "job {} '{}': {} op profiles on kinds the ops have not run on yet, scaled from their "
        "measured ones by ops measured on both (until a candidate measures them)",
        id_, job_.name(), filled);
  memory_model_.emplace(*graph_, job_.attach.devices, memory_model_->options());
  ++counters_.profile_reports;
  profiles_asked_.erase(report.placement_id);
}

}  // namespace placementd
