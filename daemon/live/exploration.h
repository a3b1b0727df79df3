#pragma once
// The live session's state machine: which placement a job runs next, decided from its step
// reports. Socket-free and thread-agnostic (LiveSession holds the lock), so tests drive it
// directly with made-up step times.
//
//   profiling    the start placement (the stored best, else the job's own) runs k steps; it is
//                the incumbent, the placement in force
//   exploring    policy samples, pre-screened by the memory model, run k steps each (screening);
//                their reward (−√median, or the failing reward) trains the policy. A screening
//                not clearly slower than the incumbent puts the candidate on an A/B trial against
//                it (live/trial.h): only a "faster" verdict makes it the incumbent. When
//                exploration ends, an incumbent other than the start goes through one more trial
//                against the start (the final check); without that evidence the start stays.
//   exploiting   the incumbent runs for good; a drift of its step time starts...
//   re-exploring a few more samples after re-measuring the incumbent, then back to exploiting

#include <cstdint>
#include <optional>
#include <string>

#include "live/session.h"
#include "live/store.h"
#include "placement/placement.h"

namespace placementd {

using placement::messages::Directive;

/// After the graph is accepted: the first placement, the stored best if there is one, else the
/// job's own. Enters profiling.
Directive start_session(Session& session);

/// Records one step report (cheap; on the session's strand). Returns true when the policy has to
/// run advance_session() now: the current candidate's screening finished (k good steps) or failed,
/// a trial's window is full, or the best placement drifted. Reports of earlier placements still
/// count for their own candidate (outside any trial window).
bool record_report(Session& session, const placement::messages::StepReport& report);

/// Policy work (seconds for big policies: run it off the I/O thread): scores the screened
/// candidate and trains the policy on it, or closes a trial's window and looks; persists the
/// incumbent and the policy state in `store`, and picks what runs next. nullopt: the job keeps its
/// current placement.
std::optional<Directive> advance_session(Session& session, Store& store);

/// Ends exploration for good (plugin code failed: `why`): the incumbent runs from now on (a trial
/// in progress is dropped), or the start placement when none measured well. Returns the directive
/// that moves the job there; nullopt when it runs that placement already. No plugin code runs.
std::optional<Directive> stop_exploring(Session& session, const std::string& why);

/// Offers the incumbent to the store, once it is the start or passed the final check (as on detach,
/// disconnect and SIGTERM); a store that cannot write is logged. Returns true if it was written.
bool persist_best(Session& session, Store& store);

/// Saves the policy's state, unless the policy failed (policy_error: it may be half-updated). A
/// store that cannot write is logged; what the policy's save_state() throws is the caller's
/// (LiveSession's guard).
void persist_policy(Session& session, Store& store);

/// What a job of `expected_steps` steps should hear when it attaches: exploration under `e` takes
/// longer than that to run its course, so the job will end while exploring unless its budget ends
/// exploration sooner. nullopt when it fits or the job gave no length.
std::optional<std::string> short_job_notice(const ExplorationConfig& e, uint64_t expected_steps);

/// The store's key for a session's policy state: grouper/placer/algorithm names.
std::string policy_key(const Session& session);

}  // namespace placementd
