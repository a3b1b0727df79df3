#pragma once
// One attached job's live placement, seen from outside: what happens to the job (its graph, its
// step and profile reports, its detach) and which placement it runs next. Its private part is the
// Session (session.h: the state machine, the profile requests, the warm start, the persistence
// policy); this class adds the lock, the plugin registry and the guard around plugin code.
//
// Socket-free: the server calls it on the job's strand, in the order the job's messages came, and
// sends what it returns; tests call it directly. Every call locks the session, so inspection
// (summary, detail) may come from any thread and never waits for it; a call may hold the lock for
// as long as the policy takes (seconds for big ones), so the I/O thread never calls it.
//
// Plugin code runs only inside these calls, behind one guard: whatever a plugin throws (a
// std::exception, a c10::Error, anything) is logged, and ends this job's exploration: it runs the
// best placement measured, or its start placement, for the rest of its session, and `jobs show`
// says why. The daemon and every other job go on.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "config/config.h"
#include "live/session.h"
#include "live/store.h"
#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/messages.h"
#include "placement/placement.h"
#include "plugins/plugin_registry.h"

namespace placementd {

class LiveSession {
 public:
  /// `registry` and `store` outlive the session; `id` also seeds its random numbers.
  LiveSession(uint64_t id, JobIdentity job, EffectivePolicy policy, const PluginRegistry& registry,
              Store& store);
  LiveSession(const LiveSession&) = delete;
  LiveSession& operator=(const LiveSession&) = delete;

  /// Set at attach and never changed: readable without the lock.
  uint64_t id() const { return s_.id(); }
  /// What the job said when it attached, whole, and who it is.
  const JobIdentity& job() const { return s_.job(); }
  uid_t uid() const { return s_.job().uid; }
  const std::string& name() const { return s_.job().name(); }
  const placement::DeviceSet& devices() const { return s_.devices(); }
  const EffectivePolicy& policy() const { return s_.policy(); }
  uint64_t expected_steps() const { return s_.job().attach.expected_steps; }
  /// A replica of rank > 0: rank 0's daemon places the group; this session counts its steps, for
  /// `placementctl jobs`, and refuses graphs, placement requests and profiles.
  bool follower() const { return s_.follower(); }
  const std::optional<placement::messages::ReplicaInfo>& replica() const {
    return s_.job().attach.replica;
  }

  /// The job's graph, and the placement it runs now if it said (else all on its first device):
  /// creates the policy's plugins, groups the graph, finds the stored best placement and policy
  /// state, and builds the memory model keeping `memory_headroom` of each device free. Throws
  /// RequestError naming what is wrong (a second upload, an op pinned to a device kind the job
  /// lacks, a plugin that refused the graph); the session is as before then.
  placement::messages::GraphAccepted on_graph(placement::OpGraph graph,
                                              std::optional<placement::Placement> start,
                                              double memory_headroom);

  /// The placement in force, with the session's state and whether to profile under it. The
  /// first call starts the session (the stored best, else the job's own placement). Throws
  /// RequestError before the graph.
  placement::messages::Directive next_directive();

  /// One step report. Returns the next directive when the job should change placement: its
  /// candidate is measured (or failed), or the best placement drifted. Reports of placements never
  /// issued are counted, not answered.
  std::optional<placement::messages::Directive> on_report(
      const placement::messages::StepReport& report);

  /// Per-op profiles the job measured (protocol 2). Throws RequestError naming the entry at fault;
  /// nothing changes then.
  void on_profiles(const placement::messages::ProfileReport& report);

  /// Work that waits until the job has its answer (the warm start, once the job trains and its
  /// profiles are in): whether some is due now, and doing it. The server runs it on the strand
  /// after sending a reply, so no directive waits for it. Returns a directive to push when the
  /// work failed and ended the job's exploration.
  bool has_deferred_work() const;
  std::optional<placement::messages::Directive> run_deferred_work();

  /// The job detached: persists the best placement and the policy state, waits until they are on
  /// disk, and ends the session.
  placement::messages::Detached on_detach();
  /// The job's connection closed without a detach: the same, with nobody to answer.
  void on_disconnect();
  /// Hands the best placement and the policy state to the store (SIGTERM; Store::after_writes
  /// says when they are on disk); the session goes on. Returns true if the best placement was new
  /// to the store.
  bool persist();

  /// Once the job has gone and only its record is kept (the server's last finished jobs): keeps
  /// what inspection shows and lets go of the rest (the graph, the plugins and their policy, the
  /// memory model, every candidate's placement: tens of MiB for a large graph).
  void retire();

  bool detached() const;
  /// For `placementctl jobs`, and `jobs show` (summary plus every candidate). Never waits for
  /// the session's lock: while policy work holds it, what the last look saw.
  placement::messages::JobSummary summary() const;
  placement::messages::JobInfo detail() const;

 private:
  /// The guard: runs `work` (which may call plugin code) and turns whatever it throws into the
  /// end of this job's exploration, logged and shown by `jobs show`. Returns what `work` returned,
  /// or the directive that moves the job to its best (or start) placement.
  template <class Work>
  std::optional<placement::messages::Directive> guarded(const char* entry, Work&& work);
  bool persist_locked();

  /// What inspection shows: the summary, and the detail as last asked for.
  struct View {
    placement::messages::JobSummary summary;
    std::shared_ptr<const placement::messages::JobInfo> detail;
  };
  std::shared_ptr<const View> view(bool with_detail) const;
  /// Summary and detail, made now (caller holds mutex_).
  std::shared_ptr<const View> full_view_locked() const;
  /// Makes the summary inspection shows anew, keeping the last detail (caller holds mutex_).
  void refresh_summary_locked() const;
  /// After a report: the summary anew when the job is sent a placement outside a trial (`changed`)
  /// or kRefreshEvery has passed since the last, so that inspection while policy work holds the
  /// lock shows the job as of its last decision and at most kRefreshEvery behind its reports
  /// (caller holds mutex_).
  void refresh_after_report_locked(bool changed);

  const PluginRegistry& registry_;
  Store& store_;
  mutable std::mutex mutex_;
  /// Guarded by mutex_, but for what is set at attach (Session's identity).
  Session s_;
  /// The last view, guarded by view_mutex_ (held only to read or replace it).
  mutable std::mutex view_mutex_;
  mutable std::shared_ptr<const View> view_;
  /// When refresh_summary_locked last ran. Guarded by mutex_.
  mutable std::chrono::steady_clock::time_point refreshed_at_{};
  /// retire() ran: the view is final. Guarded by mutex_.
  bool retired_ = false;
};

}  // namespace placementd
