#include "live/candidates.h"

#include <cmath>

namespace placementd {

using placement::Placement;

namespace {

// Policy samples drawn per proposal before giving up on finding one worth running: a converged
// policy keeps drawing placements it already measured, which is the signal to stop exploring.
constexpr int kSamplesPerProposal = 64;

}  // namespace

const CandidateRecord* measured(const Session& s, const std::string& fingerprint) {
  for (const auto& [id, c] : s.candidates)
    if (!c.stale && c.median() && c.placement.fingerprint() == fingerprint) return &c;
  return nullptr;
}

double reward_of(double step_time_s) { return -std::sqrt(step_time_s); }

std::optional<Placement> single_device_candidate(const Session& s) {
  int device = 0;
  for (size_t d = 0; d < s.devices.size(); ++d)
    if (s.devices.devices[d].kind == placement::DeviceKind::kCuda) {
      device = static_cast<int>(d);
      break;
    }
  Placement p = Placement::single(*s.graph, device);
  p.enforce_pins(*s.graph, s.devices);
  const std::string fingerprint = p.fingerprint();
  for (const auto& [id, c] : s.candidates)
    if (c.placement.fingerprint() == fingerprint) return std::nullopt;
  if (!s.memory_model->check_memory(p).valid) return std::nullopt;
  return p;
}

std::optional<Proposal> propose(Session& s) {
  const ExplorationConfig& e = s.policy.exploration;
  // What this user's earlier runs found comes first, but as a candidate like any other: it is kept
  // only if a trial shows it faster than this job's own start (the machine, the inputs or the
  // other tenants may have changed since it was stored).
  if (!s.cached_tried && s.cached) {
    s.cached_tried = true;
    if (!measured(s, s.cached->fingerprint()) && s.memory_model->check_memory(*s.cached).valid)
      return Proposal{*s.cached, Reason::kCached, std::nullopt};
  }
  if (!s.single_device_tried) {
    s.single_device_tried = true;
    if (std::optional<Placement> p = single_device_candidate(s))
      return Proposal{std::move(*p), Reason::kSingleDevice, std::nullopt};
  }
  // A warm-started policy's first candidate is what it imitated, not a sample around it.
  if (!s.warm_start_tried && s.warm_start && s.warm_start->skipped.empty()) {
    s.warm_start_tried = true;
    if (!measured(s, s.warm_start->placement.fingerprint()) &&
        s.memory_model->check_memory(s.warm_start->placement).valid)
      return Proposal{s.warm_start->placement, Reason::kWarmStart, s.warm_start->action};
  }

  for (int attempt = 0; attempt < kSamplesPerProposal; ++attempt) {
    PolicyPipeline::Sample sample = s.pipeline->sample(s.rng);
    placement::Action action = std::move(sample.action);
    Placement p = std::move(sample.placement);
    const sim::SimulationResult memory = s.memory_model->check_memory(p);
    if (!memory.valid) {
      ++s.rejected;
      for (size_t d : memory.over_capacity()) ++s.rejected_by_device[s.devices.devices[d].name()];
      s.algorithm->observe(action, e.failing_reward, false);
      continue;
    }
    if (const CandidateRecord* known = measured(s, p.fingerprint())) {
      ++s.repeats_scored;
      s.algorithm->observe(action, reward_of(*known->median()), true);
      if (!s.pipeline->policy()) break;  // a deterministic placer answers the same again
      continue;
    }
    return Proposal{std::move(p),
                    s.state == SessionState::kReexploring ? Reason::kReexplore : Reason::kPolicy,
                    std::move(action)};
  }
  return std::nullopt;
}

}  // namespace placementd
