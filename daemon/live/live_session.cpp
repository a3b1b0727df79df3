#include "live/live_session.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "live/exploration.h"
#include "live/request_error.h"
#include "placement/protocol.h"

namespace placementd {

namespace error = placement::protocol::error;
namespace messages = placement::messages;

namespace {

// What a follower is refused, and why.
RequestError not_for_followers(const Session& session, const std::string& doing) {
  const placement::messages::ReplicaInfo& replica = *session.job().attach.replica;
  return RequestError(error::kUnexpected, "rank " + std::to_string(replica.rank) +
                                              " of replica group " + replica.group +
                                              " follows the placement rank 0's daemon decides: "
                                              "a follower does not " +
                                              doing);
}

}  // namespace

LiveSession::LiveSession(uint64_t id, JobIdentity job, EffectivePolicy policy,
                         const PluginRegistry& registry, Store& store)
    : registry_(registry), store_(store), s_(id, std::move(job), std::move(policy)) {
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
  const EffectivePolicy& policy = s_.policy();
  spdlog::error(
      "job {} '{}': {} failed ({} / {} / {}): {}; its exploration ends, it keeps its best "
      "placement",
      s_.id(), name(), entry, policy.grouper, policy.placer, policy.algorithm, what);
  return s_.policy_failed(std::string(entry) + ": " + what);
}

messages::GraphAccepted LiveSession::on_graph(placement::OpGraph graph,
                                              std::optional<placement::Placement> start,
                                              double memory_headroom) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.follower()) throw not_for_followers(s_, "upload a graph");
  if (s_.graph()) throw RequestError(error::kUnexpected, "the graph was already uploaded");
  const placement::DeviceSet& devices = s_.devices();
  for (const auto& op : graph.ops)
    if (op.pinned && std::none_of(devices.devices.begin(), devices.devices.end(),
                                  [&](const placement::Device& d) { return d.kind == *op.pinned; }))
      throw RequestError(error::kBadPayload, "op " + std::to_string(op.id) + " '" + op.name +
                                                 "' is pinned to " + to_string(*op.pinned) +
                                                 " but the job has no such device");
  // Plugin code runs from here on.
  std::string failure;
  try {
    const EffectivePolicy& policy = s_.policy();
    Session::Plugins plugins;
    plugins.grouper = registry_.create_grouper(policy.grouper, policy.grouper_params);
    plugins.placer = registry_.create_placer(policy.placer, policy.placer_params);
    plugins.algorithm = registry_.create_algorithm(policy.algorithm, policy.algorithm_params);
    sim::SimulatorOptions memory_options;
    memory_options.memory_headroom_fraction = memory_headroom;
    messages::GraphAccepted accepted = s_.take_graph(std::move(graph), std::move(start),
                                                     std::move(plugins), memory_options, store_);
    // The warm start may hold the session for seconds next: inspection meanwhile shows the graph.
    refresh_summary_locked();
    return accepted;
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "a plugin threw an exception that is not a std::exception";
  }
  // Whatever failed leaves the session as it was, without a graph.
  s_.drop_graph();
  spdlog::warn("job {} '{}': graph rejected: {}", s_.id(), name(), failure);
  throw RequestError(error::kBadPayload, failure);
}

messages::Directive LiveSession::next_directive() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.follower()) throw not_for_followers(s_, "request placements");
  if (!s_.graph())
    throw RequestError(error::kUnexpected, "upload the graph before requesting a placement");
  if (s_.candidates().empty()) return s_.start();
  // A later request gets the placement in force again.
  const CandidateRecord& c = s_.candidates().at(s_.current_candidate());
  return s_.directive(c.id, c.reason);
}

std::optional<messages::Directive> LiveSession::on_report(
    const placement::messages::StepReport& report) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!s_.record(report)) return std::nullopt;
  auto directive = guarded("policy step", [&]() -> std::optional<messages::Directive> {
    if (s_.warm_start_due(Session::WarmStartWhen::kBeforeFirstSample)) s_.run_warm_start(registry_);
    if (s_.refit_due()) s_.run_refit(registry_);
    return s_.advance(store_);
  });
  // A trial's window swaps are directives too, every few dozen steps for as long as it runs (a
  // long trial: a thousand of them): those wait for kRefreshEvery like reports do. The directive
  // that starts a trial is a decision, and refreshes it.
  refresh_after_report_locked(directive.has_value() &&
                              (!s_.trial() || s_.trial()->measured_steps() == 0));
  return directive;
}

void LiveSession::on_profiles(const placement::messages::ProfileReport& report) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.state() == SessionState::kDetached) return;
  if (s_.follower()) throw not_for_followers(s_, "send profiles");
  // Each report costs a pass over the whole graph: only those the session asked for are read.
  if (!s_.profile_asked(report.placement_id)) {
    if (s_.counters().profile_reports_dropped == 1)
      spdlog::warn(
          "job {} '{}': a profile report for placement {} that no directive asked for was "
          "dropped; later ones are counted (placementctl jobs show)",
          s_.id(), name(), report.placement_id);
    return;
  }
  try {
    s_.apply_profiles(report);
  } catch (const std::exception& e) {
    spdlog::warn("job {} '{}': profile report not used: {}", s_.id(), name(), e.what());
    throw RequestError(error::kBadPayload, e.what());
  }
  std::set<std::string> kinds;
  for (const auto& entry : report.ops) kinds.insert(entry.kind);
  std::string names;
  for (const auto& k : kinds) names += (names.empty() ? "" : ", ") + k;
  spdlog::info("job {} '{}': profiles of {} ops ({}) measured over {} steps under placement {}",
               s_.id(), name(), report.ops.size(), names, report.steps, report.placement_id);
}

bool LiveSession::has_deferred_work() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return s_.warm_start_due(Session::WarmStartWhen::kProfiled);
}

std::optional<messages::Directive> LiveSession::run_deferred_work() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!s_.warm_start_due(Session::WarmStartWhen::kProfiled)) return std::nullopt;
  return guarded("warm start", [&]() -> std::optional<messages::Directive> {
    s_.run_warm_start(registry_);
    return std::nullopt;
  });
}

bool LiveSession::persist_locked() {
  // A follower has nothing of its own to keep: rank 0's daemon stores the group's placement.
  if (s_.follower()) return false;
  const bool written = s_.persist_best(store_);
  guarded("saving the policy state", [&]() -> std::optional<messages::Directive> {
    s_.persist_policy(store_);
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
  s_.detach();
  auto last = full_view_locked();
  {
    std::lock_guard<std::mutex> guard(view_mutex_);
    view_ = std::move(last);
  }
  retired_ = true;
  s_.retire();
}

messages::Detached LiveSession::on_detach() {
  messages::Detached detached;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (s_.state() == SessionState::kDetached) return detached;
    detached.persisted = persist_locked();
    if (const CandidateRecord* b = s_.best()) {
      detached.best_step_time_s = *b->median();
      // Taken now or after an earlier candidate: what counts is that the store holds it.
      if (auto stored = store_.best(uid(), *s_.graph(), s_.devices()))
        detached.persisted =
            detached.persisted || stored->step_time_s <= *detached.best_step_time_s;
    }
    s_.detach();
  }
  // The reply says "persisted" once the file is on disk: wait for the store's writer (on the job's
  // strand, never the I/O thread), but not for a disk that hangs: the job waits for this answer.
  // The graph and devices of a detached session no longer change.
  if (detached.persisted) {
    if (store_.flush_within(kDetachFlushTimeout)) {
      detached.persisted = store_.on_disk(uid(), *s_.graph(), s_.devices());
    } else {
      detached.persisted = false;
      spdlog::warn(
          "job {} '{}': its best placement was not on disk {} ms after the detach (a slow disk?); "
          "the "
          "write goes on",
          s_.id(), name(), kDetachFlushTimeout.count());
    }
  }
  return detached;
}

void LiveSession::on_disconnect() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s_.state() == SessionState::kDetached) return;
  persist_locked();
  s_.detach();
}

bool LiveSession::detached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return s_.state() == SessionState::kDetached;
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
  refreshed_at_ = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard(view_mutex_);
  view_ = std::make_shared<const View>(View{std::move(summary), view_->detail});
}

// A summary sorts every candidate's measured steps for its medians; made after every report it
// would cost a long job more than its reports do. Inspection while the lock is free makes its own.
constexpr std::chrono::milliseconds kRefreshEvery{250};

void LiveSession::refresh_after_report_locked(bool changed) {
  if (changed || std::chrono::steady_clock::now() - refreshed_at_ >= kRefreshEvery)
    refresh_summary_locked();
}

std::shared_ptr<const LiveSession::View> LiveSession::view(bool with_detail) const {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || retired_) {
    std::lock_guard<std::mutex> guard(view_mutex_);
    if (!with_detail || !view_->detail) return view_;
    // The detail is made only when asked for with the lock free, the summary after every few
    // reports: the last detail, with the job's figures as they were last summed up (a detail of
    // the attach's time once said 0 steps of a job that had trained for seconds).
    auto detail = std::make_shared<placement::messages::JobInfo>(*view_->detail);
    detail->job = view_->summary;
    view_ = std::make_shared<const View>(View{view_->summary, std::move(detail)});
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
