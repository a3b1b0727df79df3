#include "live/candidates.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "planning/offline/baseline.h"
#include "planning/offline/warm_start.h"

namespace placementd {

using placement::Placement;

namespace {

// Policy samples drawn per proposal before giving up on finding one worth running: a converged
// policy keeps drawing placements it already measured, which is the signal to stop exploring.
constexpr int kSamplesPerProposal = 64;

}  // namespace

const CandidateRecord* measured(const Session& session, const std::string& fingerprint) {
  for (const auto& [id, c] : session.candidates())
    if (!c.stale && c.median() && c.placement.fingerprint() == fingerprint) return &c;
  return nullptr;
}

double reward_of(double step_time_s) { return -std::sqrt(step_time_s); }

bool issued(const Session& session, const std::string& fingerprint) {
  for (const auto& [id, c] : session.candidates())
    if (c.placement.fingerprint() == fingerprint) return true;
  return false;
}

std::optional<Placement> single_device_candidate(const Session& session) {
  int device = 0;
  for (size_t d = 0; d < session.devices().size(); ++d)
    if (session.devices().devices[d].kind == placement::DeviceKind::kCuda) {
      device = static_cast<int>(d);
      break;
    }
  Placement p = Placement::single(*session.graph(), device);
  p.enforce_pins(*session.graph(), session.devices());
  if (issued(session, p.fingerprint())) return std::nullopt;
  if (!session.memory_model()->check_memory(p).valid) return std::nullopt;
  return p;
}

void Session::plan_heuristic_candidates(const PluginRegistry& registry, uint64_t seed) {
  heuristics_.clear();
  if (!warm_start_ || !warm_start_->skipped.empty() ||
      policy_.warm_start != offline::kSimulatorWarmStart || !warm_start_->baseline_step_time_s)
    return;
  const double answer_s = *warm_start_->baseline_step_time_s;
  // (predicted time, placement, its entry in the report), offered fastest first.
  std::vector<std::tuple<double, Placement, size_t>> offered;
  for (const std::string& placer : offline::kSearchStarts) {
    if (placer == "single_device") continue;
    const auto not_offered = [&](const std::string& why) { heuristics_.refuse(placer, why); };
    if (!registry.has(placement::PluginKind::kPlacer, placer)) {
      not_offered("not loaded");
      continue;
    }
    offline::BaselinePlacement b;
    try {
      b = offline::place_baseline(placer, *memory_model_, registry, pipeline_->grouping(), seed);
    } catch (const std::exception& e) {
      not_offered(std::string("the placer failed: ") + e.what());
      continue;
    }
    if (!b.fits) {
      not_offered("does not fit: " + b.why);
      continue;
    }
    if (!b.step_time_s) {
      not_offered("the planning model cannot time it: " + b.why);
      continue;
    }
    const std::string fingerprint = b.placement.fingerprint();
    if (fingerprint == warm_start_->placement.fingerprint()) {
      not_offered("the same as the warm start's answer");
      continue;
    }
    if (issued(*this, fingerprint)) {
      not_offered("the same as a candidate that ran already");
      continue;
    }
    const auto same = std::find_if(offered.begin(), offered.end(), [&](const auto& o) {
      return std::get<1>(o).fingerprint() == fingerprint;
    });
    if (same != offered.end()) {
      not_offered("the same as " + heuristics_.placer(std::get<2>(*same)) + "'s placement");
      continue;
    }
    if (*b.step_time_s > kHeuristicWithin * answer_s) {
      not_offered(fmt::format("the planning model predicts {:.2f}x the warm start's answer",
                              *b.step_time_s / answer_s));
      continue;
    }
    offered.emplace_back(*b.step_time_s, std::move(b.placement),
                         heuristics_.predict(placer, *b.step_time_s, fingerprint));
  }
  std::stable_sort(offered.begin(), offered.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  for (auto& [time, p, entry] : offered) heuristics_.enqueue(std::move(p), entry);
  plan_relabelings();
  std::string said;
  for (const nlohmann::json& h : heuristics_.report()) {
    said += said.empty() ? "" : "; ";
    said += h["placer"].get<std::string>() + ": ";
    said += h.contains("not_offered")
                ? "not offered, " + h["not_offered"].get<std::string>()
                : fmt::format("predicted {:.3f}x the warm start's answer",
                              h["predicted_step_time_s"].get<double>() / answer_s);
  }
  if (!said.empty())
    spdlog::info("job {} '{}': heuristics' placements after the warm start's answer: {}", id_,
                 job_.name(), said);
}

void Session::plan_relabelings() {
  // Which devices share a card, a PCIe switch or a host's memory is what a planning model guesses
  // (it has two GPUs compute at once where they take turns): the warm start's answer with two
  // devices of one kind swapped is a placement it cannot tell from the answer, and only live steps
  // break that tie. The first few swaps (by device index) that move ops and that the model
  // predicts within kRelabelingTie of the answer are offered after the heuristics' placements.
  const Placement& answer = warm_start_->placement;
  double answer_s = 0.0;
  try {
    answer_s = memory_model_->simulate(answer).step_time_s;
  } catch (const std::exception& e) {
    spdlog::warn("job {} '{}': no swapped copies of the warm start's answer: {}", id_, job_.name(),
                 e.what());
    return;
  }
  const std::vector<placement::Device>& devices = this->devices().devices;
  // The answer and every placement queued: a swap that lands on one of them adds nothing.
  std::set<std::string> known = heuristics_.queued();
  known.insert(answer.fingerprint());
  size_t planned = 0;
  for (size_t i = 0; i < devices.size() && planned < kMaxRelabelings; ++i)
    for (size_t j = i + 1; j < devices.size() && planned < kMaxRelabelings; ++j) {
      if (devices[i].kind != devices[j].kind) continue;
      Placement p = answer;
      for (int& d : p.device_of_op)
        d = d == static_cast<int>(i)   ? static_cast<int>(j)
            : d == static_cast<int>(j) ? static_cast<int>(i)
                                       : d;
      p.enforce_pins(*graph(), this->devices());
      const std::string fingerprint = p.fingerprint();
      if (known.count(fingerprint) || issued(*this, fingerprint) ||
          !memory_model_->check_memory(p).valid)
        continue;
      double t = 0.0;
      try {
        t = memory_model_->simulate(p).step_time_s;
      } catch (const std::exception&) {
        continue;  // an op the model cannot time on the other device: no tie to break
      }
      if (t > (1.0 + kRelabelingTie) * answer_s) continue;
      const size_t entry =
          heuristics_.predict(fmt::format("the warm start's answer with {} and {} swapped",
                                          devices[i].name(), devices[j].name()),
                              t, fingerprint);
      known.insert(fingerprint);
      heuristics_.enqueue(std::move(p), entry);
      ++planned;
    }
}

const sim::Simulator* Session::ranking_model() const {
  if (policy_.warm_start != offline::kSimulatorWarmStart || policy_.screened_samples <= 1 ||
      ranking_failed_)
    return nullptr;
  if (refitted_model_) return &*refitted_model_;
  // A skipped warm start (say, a device kind without profiles) says the model cannot time the
  // samples; otherwise it is the model the warm start searched (or, for a resumed policy, would
  // have), with the profiles measured since.
  if (warm_start_ && !warm_start_->skipped.empty()) return nullptr;
  return &*memory_model_;
}

std::optional<Proposal> Session::propose() {
  const ExplorationConfig& e = policy_.exploration;
  // What this user's earlier runs found comes first, but as a candidate like any other: it is kept
  // only if a trial shows it faster than this job's own start (the machine, the inputs or the
  // other tenants may have changed since it was stored).
  if (!cached_tried_ && cached_) {
    cached_tried_ = true;
    if (!measured(*this, cached_->fingerprint()) && memory_model_->check_memory(*cached_).valid)
      return Proposal{*cached_, Reason::kCached, std::nullopt};
  }
  if (!single_device_tried_) {
    single_device_tried_ = true;
    if (std::optional<Placement> p = single_device_candidate(*this))
      return Proposal{std::move(*p), Reason::kSingleDevice, std::nullopt};
  }
  // A warm-started policy's first candidate is what it imitated, not a sample around it.
  if (!warm_start_tried_ && warm_start_ && warm_start_->skipped.empty()) {
    warm_start_tried_ = true;
    if (!measured(*this, warm_start_->placement.fingerprint()) &&
        memory_model_->check_memory(warm_start_->placement).valid)
      return Proposal{warm_start_->placement, Reason::kWarmStart, warm_start_->action};
  }
  // Then each heuristic's placement the planning model did not rule out, once.
  if (state_ == SessionState::kExploring) {
    std::optional<Placement> heuristic =
        heuristics_.next([&](const Placement& p) -> std::optional<std::string> {
          if (issued(*this, p.fingerprint())) return "the same as a candidate that ran already";
          if (!memory_model_->check_memory(p).valid)
            return "the memory model, with the job's profiles since, says it does not fit";
          return std::nullopt;
        });
    if (heuristic) return Proposal{std::move(*heuristic), Reason::kWarmStart, std::nullopt};
  }
  // Likewise what a refit of the planning model found, once per refit, in the exploration it was
  // fitted for.
  if (!refit_tried_ && refit_ && refit_->skipped.empty() && state_ == SessionState::kExploring) {
    refit_tried_ = true;
    if (!measured(*this, refit_->placement.fingerprint()) &&
        memory_model_->check_memory(refit_->placement).valid)
      return Proposal{refit_->placement, Reason::kWarmStart, refit_->action};
  }

  // With the "simulator" warm start, the planning model (refitted, once it is) ranks
  // [policy] screened_samples of the policy's samples, and the one it predicts fastest runs: a live
  // step is spent where the model, fitted to what the job measured, expects the most. The policy
  // still proposes every candidate and learns from its live step time alone.
  const sim::Simulator* planning = ranking_model();
  const int64_t screened = planning ? policy_.screened_samples : 1;
  std::optional<Proposal> pick;
  double pick_time = INFINITY;
  int64_t ranked = 0;
  const Reason reason = state_ == SessionState::kReexploring ? Reason::kReexplore : Reason::kPolicy;
  for (int attempt = 0; attempt < kSamplesPerProposal && ranked < screened; ++attempt) {
    PolicyPipeline::Sample sample = pipeline_->sample(rng_);
    placement::Action action = std::move(sample.action);
    Placement p = std::move(sample.placement);
    const sim::SimulationResult memory = memory_model_->check_memory(p);
    if (!memory.valid) {
      ++counters_.rejected;
      for (size_t d : memory.over_capacity())
        ++counters_.rejected_by_device[job_.attach.devices.devices[d].name()];
      algorithm_->observe(action, e.failing_reward, false);
      continue;
    }
    if (const CandidateRecord* known = measured(*this, p.fingerprint())) {
      ++counters_.repeats_scored;
      algorithm_->observe(action, reward_of(*known->median()), true);
      if (!pipeline_->policy()) break;  // a deterministic placer answers the same again
      continue;
    }
    ++ranked;
    // One sample alone needs no time.
    double t = 0.0;
    if (planning) {
      try {
        t = planning->step_time_s(p);
      } catch (const std::exception& error) {
        // A ranking is a choice among valid samples, never a reason to stop exploring: without
        // it, the samples run as drawn from here on.
        ranking_failed_ = true;
        spdlog::warn(
            "job {} '{}': the planning model cannot rank the policy's samples, which run as drawn "
            "from here on: {}",
            id_, job_.name(), error.what());
        if (!pick) pick = Proposal{std::move(p), reason, std::move(action)};
        break;
      }
    }
    if (!pick || t < pick_time) {
      pick_time = t;
      pick = Proposal{std::move(p), reason, std::move(action)};
    }
  }
  return pick;
}

}  // namespace placementd
