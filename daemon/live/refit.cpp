// The planning model refitted to the job's own steps (issue #45): the simulator warm start planned
// on a model that is wrong in ways its profiles cannot show (a kind of kernel slower on a kind of
// device than profiled, a link slower than its figure). Each measured placement says how wrong the
// model was there; the refit scales the model to agree, its search plans again on it, and the
// policy imitates the answer. The reward stays the live step time: the refit's answer is a
// candidate like any other and is kept only if a trial shows it faster.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "live/candidates.h"
#include "live/session.h"
#include "planning/sim/refit.h"

namespace placementd {

namespace {

// How uncertain a median of `times` is in log: their spread over √n, and at least what the
// model cannot express (the truth is not a scaled simulator): a few percent.
double log_sd_of_median(const std::vector<double>& times) {
  constexpr double kModelFloor = 0.03;
  const auto n = static_cast<double>(times.size());
  double mean = 0, sq = 0;
  for (double t : times) mean += std::log(t) / n;
  for (double t : times) sq += (std::log(t) - mean) * (std::log(t) - mean);
  const double variance = times.size() > 1 ? sq / (n - 1) : 0.0;
  // The median of n is about 1.25x as uncertain as their mean.
  return std::sqrt(1.57 * variance / n + kModelFloor * kModelFloor);
}

// Candidates whose screening finished, as the refit's measurements.
std::vector<sim::MeasuredPlacement> measurements(
    const std::map<uint64_t, CandidateRecord>& candidates) {
  std::vector<sim::MeasuredPlacement> out;
  for (const auto& [id, c] : candidates) {
    if (c.stale || !c.measured_at_step) continue;
    const std::optional<double> median = c.median();
    if (!median || !(*median > 0) || !std::isfinite(*median)) continue;
    out.push_back({c.placement, *median, log_sd_of_median(c.step_times)});
  }
  return out;
}

// The device most of each group's ops are on in `p`.
std::vector<int> device_of_group(const placement::Grouping& grouping, const placement::Placement& p,
                                 size_t devices) {
  std::vector<std::vector<int>> count(static_cast<size_t>(grouping.num_groups),
                                      std::vector<int>(devices, 0));
  for (size_t op = 0; op < p.device_of_op.size(); ++op)
    ++count[static_cast<size_t>(grouping.group_of_op[op])][static_cast<size_t>(p.device_of_op[op])];
  std::vector<int> out;
  for (const std::vector<int>& c : count)
    out.push_back(static_cast<int>(std::max_element(c.begin(), c.end()) - c.begin()));
  return out;
}

}  // namespace

bool Session::refit_due() const {
  if (!warm_start_ || !warm_start_->skipped.empty() ||
      policy_.warm_start != offline::kSimulatorWarmStart || !policy_error_.empty() ||
      counters_.refits >= static_cast<uint64_t>(policy_.refits) || !refit_tried_)
    return false;
  // Not in a re-exploration: what was measured before the drift is stale, and the refits were
  // for the job's first exploration.
  if (state_ != SessionState::kExploring) return false;
  // Checked on every report: a count, without copying placements or sorting step times.
  size_t screened = 0;
  for (const auto& [id, c] : candidates_)
    screened += !c.stale && c.measured_at_step && !c.step_times.empty();
  return screened >= next_refit_at_;
}

void Session::run_refit(const PluginRegistry& registry) {
  const std::vector<sim::MeasuredPlacement> observations = measurements(candidates_);
  // The last refit's model goes before this one is built: a session holds one refitted model at a
  // time, as its refits always did at their peak (server/graph_limits.h weighs that). Until this
  // fit is done, the planning model ranks the policy's samples.
  refitted_model_.reset();
  next_refit_at_ *= 2;
  ++counters_.refits;
  // The fit and the search share [policy] warm_start_seconds.
  sim::RefitOptions fit;
  fit.max_seconds = policy_.warm_start_seconds / 2;
  std::optional<sim::RefitResult> fitted;
  nlohmann::json record = nlohmann::json::object();
  try {
    fitted.emplace(sim::refit(*memory_model_, observations, fit));
  } catch (const std::exception& e) {
    // The model's own failure, not a plugin's: exploration goes on without this refit.
    record["skipped"] = std::string("the fit failed: ") + e.what();
  }
  if (fitted && fitted->timed_out && !fitted->moved)
    record["skipped"] =
        "the fit ran out of time before its first step ([policy] warm_start_seconds / 2)";
  if (record.contains("skipped")) {
    record["measured"] = observations.size();
    refits_.push_back(std::move(record));
    spdlog::warn("job {} '{}': planning model not refitted: {}", id_, job_.name(),
                 refits_.back()["skipped"].get<std::string>());
    return;
  }
  offline::ImitationOptions imitation;
  imitation.baseline = offline::kSimulatorWarmStart;
  imitation.search.max_seconds = policy_.warm_start_seconds / 2;
  // Near what is known to run well, a quarter of the warm start's search, each placement timed
  // on one perturbed copy of the model instead of four: the refitted model is off mostly where
  // nothing was measured. On online_learning_bench's kind-bias and overlap scenarios (5 seeds)
  // this ends where the full search does (1.049x against 1.051x, 1.0033x against 1.0037x over the
  // warm start's answer) in 40% less time.
  imitation.search.evaluations /= 4;
  imitation.search_ensemble = 1;
  if (const CandidateRecord* best_so_far = best())
    imitation.search_from.emplace(
        "the best measured placement",
        device_of_group(pipeline_->grouping(), best_so_far->placement, job_.attach.devices.size()));
  // An answer that ran already teaches the policy nothing its reward did not.
  imitation.skip_target = [this](const placement::Placement& p) {
    return placementd::measured(*this, p.fingerprint()) != nullptr;
  };
  imitation.why_skipped = "its answer ran already";
  refit_ =
      offline::imitate_baseline(pipeline_->policy(), fitted->model, registry, pipeline_->grouping(),
                                imitation, rng_(), pipeline_->action_for({}));
  refitted_model_.emplace(std::move(fitted->model));
  refit_tried_ = !refit_->skipped.empty();
  nlohmann::json moved = nlohmann::json::array();
  for (const sim::RefitFactor& f : fitted->factors)
    moved.push_back({{"what", f.what}, {"scale", f.scale}});
  record = offline::to_json(*refit_);
  record["measured"] = fitted->used;
  record["log_error_before"] = fitted->rms_log_error_before;
  record["log_error_after"] = fitted->rms_log_error_after;
  record["factors"] = std::move(moved);
  record["shared"] = fitted->shared;
  record["fit_timed_out"] = fitted->timed_out;
  refits_.push_back(std::move(record));
  std::string factors;
  for (size_t i = 0; i < fitted->factors.size() && i < 3; ++i)
    factors += fmt::format("{}{} x{:.2f}", i ? ", " : "", fitted->factors[i].what,
                           fitted->factors[i].scale);
  if (fitted->factors.size() > 3)
    factors += fmt::format(" and {} more", fitted->factors.size() - 3);
  for (const std::string& pair : fitted->shared)
    factors += (factors.empty() ? "" : ", ") + pair + " take turns";
  spdlog::info(
      "job {} '{}': planning model refitted to {} measured placements (log error {:.3f} -> "
      "{:.3f}{}; {}){}",
      id_, job_.name(), fitted->used, fitted->rms_log_error_before, fitted->rms_log_error_after,
      fitted->timed_out ? ", out of time" : "", factors.empty() ? "no factor moved" : factors,
      refit_->skipped.empty() ? "" : "; its search's answer not offered: " + refit_->skipped);
}

}  // namespace placementd
