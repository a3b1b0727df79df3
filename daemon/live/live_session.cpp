#include "live/live_session.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "live/directive.h"
#include "live/exploration.h"
#include "live/live_profiles.h"
#include "live/request_error.h"
#include "placement/protocol.h"

namespace placementd {

namespace error = placement::protocol::error;
namespace messages = placement::messages;

namespace {

// What a follower is refused, and why.
RequestError not_for_followers(const Session& s, const std::string& doing) {
  return RequestError(error::kUnexpected, "rank " + std::to_string(s.replica->rank) +
                                              " of replica group " + s.replica->group +
                                              " follows the placement rank 0's daemon decides: "
                                              "a follower does not " +
                                              doing);
}

}  // namespace

LiveSession::LiveSession(uint64_t id, JobIdentity job, EffectivePolicy policy,
                         const PluginRegistry& registry, Store& store)
    : registry_(registry), store_(store) {
  s_.id = id;
  s_.job = std::move(job.name);
  s_.uid = job.uid;
  s_.pid = job.pid;
  s_.sdk_version = std::move(job.sdk_version);
  s_.torch_version = std::move(job.torch_version);
  s_.protocol_version = job.protocol_version;
  s_.job_profile_steps = job.profile_steps;
  s_.expected_steps = job.expected_steps;
  s_.devices = std::move(job.devices);
  s_.replica = std::move(job.replica);
  if (s_.follower()) s_.state = SessionState::kFollowing;
  s_.policy = std::move(policy);
  s_.rng.seed(id);
  s_.attached_at = std::chrono::system_clock::now();
  s_.attached_steady = std::chrono::steady_clock::now();
  view_ = full_view_locked();
}

// How long a detach waits for its best placement to reach the disk: the job's detach request
// waits for the answer, 5 s at most (ClientOptions::timeout_ms), and should get it.
constexpr std::chrono::milliseconds kDetachFlushTimeout{3000};

template <class Work>
std::optional<messages::Directive> LiveSession::guarded(const char* entry, Work&& work) {
  std::string what;
  try {
    return work();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  s_.policy_error = std::string(entry) + ": " + what;
  spdlog::error(
      "job {} '{}': {} failed ({} / {} / {}): {}; its exploration ends, it keeps its best "
      "placement",
      s_.id, s_.job, entry, s_.policy.grouper, s_.policy.placer, s_.policy.algorithm, what);
  return stop_exploring(s_, s_.policy_error);
}

messages::GraphAccepted LiveSession::on_graph(placement::OpGraph graph,
                                              std::optional<placement::Placement> start,
                                              double memory_headroom) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.follower()) throw not_for_followers(s_, "upload a graph");
  if (s_.graph) throw RequestError(error::kUnexpected, "the graph was already uploaded");
  for (const auto& op : graph.ops)
    if (op.pinned && std::none_of(s_.devices.devices.begin(), s_.devices.devices.end(),
                                  [&](const placement::Device& d) { return d.kind == *op.pinned; }))
      throw RequestError(error::kBadPayload, "op " + std::to_string(op.id) + " '" + op.name +
                                                 "' is pinned to " + to_string(*op.pinned) +
                                                 " but the job has no such device");
  // Plugin code runs from here on.
  std::string failure;
  try {
    s_.grouper = registry_.create_grouper(s_.policy.grouper, s_.policy.grouper_params);
    s_.placer = registry_.create_placer(s_.policy.placer, s_.policy.placer_params);
    s_.algorithm = registry_.create_algorithm(s_.policy.algorithm, s_.policy.algorithm_params);
    s_.graph = std::move(graph);
    const placement::OpGraph& g = *s_.graph;
    s_.pipeline = std::make_unique<PolicyPipeline>(*s_.grouper, *s_.placer, g, s_.devices, s_.rng,
                                                   static_cast<int>(s_.policy.max_groups));
    placement::TrainablePolicy* policy = s_.pipeline->policy();
    s_.algorithm->reset({policy, s_.policy.exploration.failing_reward});
    s_.fingerprint = g.fingerprint();
    if (auto stored = store_.best(s_.uid, g, s_.devices)) s_.cached = stored->placement;
    bool resumed = false;
    if (policy)
      if (auto state = store_.policy_state(s_.uid, g, s_.devices, policy_key(s_))) {
        // A state from another version of the plugin, or one it cannot read: learning starts
        // afresh, the job goes on.
        try {
          policy->load_state(*state);
          resumed = true;
        } catch (const std::exception& e) {
          spdlog::warn("job {} '{}': stored policy state not used: {}", s_.id, s_.job, e.what());
        } catch (...) {
          spdlog::warn(
              "job {} '{}': stored policy state not used: load_state threw an exception that is "
              "not a "
              "std::exception",
              s_.id, s_.job);
        }
      }
    sim::SimulatorOptions memory_options;
    memory_options.memory_headroom_fraction = memory_headroom;
    s_.memory_model.emplace(g, s_.devices, memory_options);
    // A fresh policy first imitates the configured baseline, so its first live candidates are a
    // heuristic's rather than uniform noise; a resumed one has learned more than that already.
    // It runs once the job trains (run_deferred_work()), so the first directive does not wait.
    s_.warm_start_pending = !resumed && !s_.policy.warm_start.empty();
    s_.job_start = std::move(start);
    const placement::Grouping& grouping = s_.pipeline->grouping();
    spdlog::info(
        "job {} '{}': graph {} with {} ops in {} groups{}{}{}", s_.id, s_.job, s_.fingerprint,
        g.ops.size(), grouping.num_groups,
        s_.pipeline->learned_grouping() ? " (learned grouping, regrouped every sample)" : "",
        s_.cached ? ", stored best placement found" : "", resumed ? ", policy state resumed" : "");
    // The warm start may hold the session for seconds next: inspection meanwhile shows the graph.
    refresh_summary_locked();
    return {s_.fingerprint,      g.ops.size(),          g.edges.size(),
            grouping.num_groups, s_.cached.has_value(), resumed};
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "a plugin threw an exception that is not a std::exception";
  }
  // Whatever failed leaves the session as it was, without a graph.
  drop_graph_locked();
  spdlog::warn("job {} '{}': graph rejected: {}", s_.id, s_.job, failure);
  throw RequestError(error::kBadPayload, failure);
}

messages::Directive LiveSession::next_directive() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.follower()) throw not_for_followers(s_, "request placements");
  if (!s_.graph)
    throw RequestError(error::kUnexpected, "upload the graph before requesting a placement");
  if (s_.candidates.empty()) return start_session(s_);
  // A later request gets the placement in force again.
  const CandidateRecord& c = s_.candidates.at(s_.current_candidate);
  return make_directive(s_, c.id, c.reason);
}

std::optional<messages::Directive> LiveSession::on_report(
    const placement::messages::StepReport& report) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.state == SessionState::kDetached) return std::nullopt;
  if (s_.follower()) {
    ++s_.steps;
    s_.measured_seconds += report.step_time_s;
    if (!report.ok) {
      ++s_.failed_steps;
    } else if (!report.profiled) {
      s_.follower_step_times.push_back(report.step_time_s);
      if (s_.follower_step_times.size() > Session::kFollowerWindow)
        s_.follower_step_times.pop_front();
    }
    return std::nullopt;
  }
  if (!record_report(s_, report)) return std::nullopt;
  return guarded("policy step", [&]() -> std::optional<messages::Directive> {
    if (warm_start_due(WarmStartWhen::kBeforeFirstSample)) warm_start();
    return advance_session(s_, store_);
  });
}

void LiveSession::on_profiles(const placement::messages::ProfileReport& report) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.state == SessionState::kDetached) return;
  if (s_.follower()) throw not_for_followers(s_, "send profiles");
  try {
    apply_profiles(s_, report);
  } catch (const std::exception& e) {
    spdlog::warn("job {} '{}': profile report not used: {}", s_.id, s_.job, e.what());
    throw RequestError(error::kBadPayload, e.what());
  }
  std::set<std::string> kinds;
  for (const auto& entry : report.ops) kinds.insert(entry.kind);
  std::string names;
  for (const auto& k : kinds) names += (names.empty() ? "" : ", ") + k;
  spdlog::info("job {} '{}': profiles of {} ops ({}) measured over {} steps under placement {}",
               s_.id, s_.job, report.ops.size(), names, report.steps, report.placement_id);
}

bool LiveSession::warm_start_due(WarmStartWhen when) const {
  // Not before the job trains on its first placement, and never after a plugin failed.
  if (!s_.warm_start_pending || s_.state == SessionState::kDetached || s_.candidates.empty() ||
      !s_.policy_error.empty())
    return false;
  // The simulator imitates best with profiles of every device kind; a job that does not profile
  // sends none, and before the first sample it runs on what there is (some kind's profiles never
  // came: its candidate failed).
  if (!can_profile(s_) || fully_profiled(s_)) return true;
  return when == WarmStartWhen::kBeforeFirstSample && s_.single_device_tried;
}

bool LiveSession::has_deferred_work() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return warm_start_due(WarmStartWhen::kProfiled);
}

std::optional<messages::Directive> LiveSession::run_deferred_work() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!warm_start_due(WarmStartWhen::kProfiled)) return std::nullopt;
  return guarded("warm start", [&]() -> std::optional<messages::Directive> {
    warm_start();
    return std::nullopt;
  });
}

void LiveSession::warm_start() {
  s_.warm_start_pending = false;
  offline::ImitationOptions imitation;
  imitation.baseline = s_.policy.warm_start;
  // The search runs on the session's strand while the job trains on its start placement and
  // holds up only this job's next candidate; [policy] warm_start_seconds bounds it.
  imitation.search.max_seconds = s_.policy.warm_start_seconds;
  s_.warm_start = offline::imitate_baseline(s_.pipeline->policy(), *s_.memory_model, registry_,
                                            s_.pipeline->grouping(), imitation, s_.rng(),
                                            s_.pipeline->action_for({}));
  if (s_.warm_start->skipped.empty())
    spdlog::info(
        "job {} '{}': policy warm-started from {} in {} steps (per-group probability {:.2f} -> "
        "{:.2f})",
        s_.id, s_.job, imitation.baseline, s_.warm_start->steps, s_.warm_start->probability_before,
        s_.warm_start->probability_after);
  else
    spdlog::warn("job {} '{}': no warm start: {}", s_.id, s_.job, s_.warm_start->skipped);
}

bool LiveSession::persist_locked() {
  // A follower has nothing of its own to keep: rank 0's daemon stores the group's placement.
  if (s_.follower()) return false;
  const bool written = persist_best(s_, store_);
  guarded("saving the policy state", [&]() -> std::optional<messages::Directive> {
    persist_policy(s_, store_);
    return std::nullopt;
  });
  return written;
}

bool LiveSession::persist() {
  std::lock_guard<std::mutex> lock(mutex_);
  return persist_locked();
}

void LiveSession::retire() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (retired_) return;
  if (s_.state != SessionState::kDetached) finish();
  auto last = full_view_locked();
  {
    std::lock_guard<std::mutex> guard(view_mutex_);
    view_ = std::move(last);
  }
  retired_ = true;
  drop_graph_locked();
  s_.candidates.clear();
}

void LiveSession::drop_graph_locked() {
  // The algorithm points into the pipeline's policy, the pipeline at the plugins and the graph.
  s_.algorithm.reset();
  s_.pipeline.reset();
  s_.placer.reset();
  s_.grouper.reset();
  s_.warm_start.reset();
  s_.memory_model.reset();
  s_.graph.reset();
  s_.cached.reset();
  s_.job_start.reset();
}

void LiveSession::finish() {
  s_.state_at_detach = s_.state;
  s_.state = SessionState::kDetached;
  s_.detached_steady = std::chrono::steady_clock::now();
}

messages::Detached LiveSession::on_detach() {
  messages::Detached detached;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (s_.state == SessionState::kDetached) return detached;
    detached.persisted = persist_locked();
    if (const CandidateRecord* b = s_.best()) {
      detached.best_step_time_s = *b->median();
      // Taken now or after an earlier candidate: what counts is that the store holds it.
      if (auto stored = store_.best(s_.uid, *s_.graph, s_.devices))
        detached.persisted =
            detached.persisted || stored->step_time_s <= *detached.best_step_time_s;
    }
    finish();
  }
  // The reply says "persisted" once the file is on disk: wait for the store's writer (on the job's
  // strand, never the I/O thread), but not for a disk that hangs: the job waits for this answer.
  // The graph and devices of a detached session no longer change.
  if (detached.persisted) {
    if (store_.flush_within(kDetachFlushTimeout)) {
      detached.persisted = store_.on_disk(s_.uid, *s_.graph, s_.devices);
    } else {
      detached.persisted = false;
      spdlog::warn(
          "job {} '{}': its best placement was not on disk {} ms after the detach (a slow disk?); "
          "the "
          "write goes on",
          s_.id, s_.job, kDetachFlushTimeout.count());
    }
  }
  return detached;
}

void LiveSession::on_disconnect() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.state == SessionState::kDetached) return;
  persist_locked();
  finish();
}

bool LiveSession::detached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return s_.state == SessionState::kDetached;
}

// Inspection never waits for the session's lock, which policy work may hold for seconds (and
// with it a policy thread other jobs need): when the lock is free the view is made afresh, when it
// is taken the one made last is shown.
std::shared_ptr<const LiveSession::View> LiveSession::full_view_locked() const {
  return std::make_shared<const View>(
      View{s_.summary(), std::make_shared<const placement::messages::JobInfo>(s_.detail())});
}

void LiveSession::refresh_summary_locked() const {
  auto summary = s_.summary();
  std::lock_guard<std::mutex> guard(view_mutex_);
  view_ = std::make_shared<const View>(View{std::move(summary), view_->detail});
}

std::shared_ptr<const LiveSession::View> LiveSession::view(bool with_detail) const {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || retired_) {
    std::lock_guard<std::mutex> guard(view_mutex_);
    return view_;
  }
  // Every candidate of a long session is more than `placementctl jobs` asks for: the detail is
  // made afresh only when asked for (`jobs show`); a summary keeps the last one made.
  if (with_detail) {
    auto fresh = full_view_locked();
    std::lock_guard<std::mutex> guard(view_mutex_);
    view_ = std::move(fresh);
  } else {
    refresh_summary_locked();
  }
  std::lock_guard<std::mutex> guard(view_mutex_);
  return view_;
}

placement::messages::JobSummary LiveSession::summary() const { return view(false)->summary; }

placement::messages::JobInfo LiveSession::detail() const { return *view(true)->detail; }

}  // namespace placementd
