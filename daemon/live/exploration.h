#pragma once
// The live session's state machine: which placement a job runs next, decided from its step
// reports. Socket-free and thread-agnostic (LiveSession holds the lock), so tests drive it
// directly with made-up step times. Its steps are Session::Machine's (exploration.cpp).
//
//   profiling    the start placement (the stored best, else the job's own) runs k steps; it is
//                the incumbent, the placement in force
//   exploring    policy samples, pre-screened by the memory model, run k steps each (screening);
//                their reward (−√median, or the failing reward) trains the policy. A screening
//                not clearly slower than the incumbent puts the candidate on an A/B trial against
//                it (live/trial.h): only a "faster" verdict makes it the incumbent. When
//                exploration ends, a job that said how long it runs gives its closest contenders
//                (trials left unclear or not faster while they looked faster) one long trial each,
//                in equal shares of its steps (refinement; one still unclear at its end goes by
//                its estimate's side); then an incumbent other than the start goes through one
//                more trial against the start (the final check); without that evidence the start
//                stays.
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

// Session::start(), record(), advance() and stop_exploring() (session.h) run it.

/// What a job of `expected_steps` steps should hear when it attaches: exploration under `e` takes
/// longer than that to run its course, so the job will end while exploring unless its budget ends
/// exploration sooner. nullopt when it fits or the job gave no length.
std::optional<std::string> short_job_notice(const ExplorationConfig& e, uint64_t expected_steps);

}  // namespace placementd
