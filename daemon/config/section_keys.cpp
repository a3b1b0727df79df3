#include "config/section_keys.h"

namespace placementd {

const std::vector<PolicyKey>& policy_keys() {
  using P = PolicyChoice;
  static const std::vector<PolicyKey> keys = {
      {"grouper", &P::grouper, 1, 0, true, &P::grouper_pos,
       "the grouper plugin jobs use unless a rule picks another"},
      {"placer", &P::placer, 1, 0, true, &P::placer_pos,
       "the placer plugin jobs use unless a rule picks another"},
      {"algorithm", &P::algorithm, 1, 0, true, &P::algorithm_pos,
       "the algorithm plugin jobs use unless a rule picks another"},
      {"warm_start", &P::warm_start, 0, 0, false, &P::warm_start_pos,
       "a baseline placer a fresh learned policy imitates before its first live candidate, or "
       "\"simulator\" for the best placement a search of the simulator finds; empty: off "
       "(docs/learning.md)"},
      {"warm_start_seconds", &P::warm_start_seconds, 0.01, 600.0, false, nullptr,
       "how long the \"simulator\" warm start's search may take, and each refit's fit and "
       "search together"},
      {"refits", &P::refits, 0, 8, false, nullptr,
       "times the \"simulator\" warm start's planning model is refitted to the job's measured "
       "steps and searched again, at 3, 6, 12 ... measured placements; 0: never (docs/live.md)"},
      {"screened_samples", &P::screened_samples, 1, 64, false, nullptr,
       "policy samples per candidate that the \"simulator\" warm start's planning model "
       "(refitted, once it is) ranks; the one it predicts fastest runs; 1: each runs as drawn "
       "(docs/live.md)"},
      // The policy's features hold max_groups² floats: 4096 is 64 MiB of them.
      {"max_groups", &P::max_groups, 1, 4096, false, &P::max_groups_pos,
       "the most groups a placer is given; a grouper that leaves more has them merged "
       "(docs/learning.md)"},
  };
  return keys;
}

const std::vector<ExplorationKey>& exploration_keys() {
  using E = ExplorationConfig;
  static const std::vector<ExplorationKey> keys = {
      {"steps_per_candidate", &E::steps_per_candidate, 2, 100000, true, nullptr,
       "real training steps each candidate placement runs for"},
      {"warmup_steps", &E::warmup_steps, 0, 100000, true, nullptr,
       "of those, the first ones after a swap, discarded as warm-up"},
      {"max_candidates", &E::max_candidates, 0, 10000000, true, nullptr,
       "candidate placements tried before the best one is kept for good"},
      {"max_overhead_fraction", &E::max_overhead_fraction, 0.0, 1.0, true, nullptr,
       "the largest fraction of the job's time exploration may cost"},
      {"failing_reward", &E::failing_reward, -1e9, 0.0, true, nullptr,
       "the reward of a placement predicted out of memory or that fails"},
      {"drift_threshold", &E::drift_threshold, 0.0, 100.0, true, nullptr,
       "re-explore when steps run this fraction slower than the best placement's..."},
      {"drift_steps", &E::drift_steps, 1, 10000000, true, nullptr,
       "...for this many consecutive steps"},
      {"converge_candidates", &E::converge_candidates, 0, 10000000, true, nullptr,
       "stop exploring once this many candidates in a row were not shown faster (0: never)"},
      {"trial_window_steps", &E::trial_window_steps, 1, 100000, true, nullptr,
       "measured steps per window of an A/B trial (docs/live.md)"},
      {"max_trial_steps", &E::max_trial_steps, 16, 100000000, true, nullptr,
       "the most measured steps one trial may take, both arms together"},
      {"confidence", &E::confidence, 0.5, 0.9999, true, nullptr,
       "the one-sided confidence a \"faster\" verdict needs"},
      {"min_gain", &E::min_gain, 0.0, 1.0, true, nullptr,
       "the smallest gain worth a trial's steps"},
      {"refine_contenders", &E::refine_contenders, 0, 100, true, nullptr,
       "when exploration ends, contenders that get one long trial each, in equal shares of "
       "refine_fraction (0: none)"},
      {"refine_fraction", &E::refine_fraction, 0.0, 1.0, true, nullptr,
       "the share of the job's expected steps those long trials may take"},
      {"refine_min_gain", &E::refine_min_gain, 0.0, 1.0, true, nullptr,
       "the smallest gain a long trial looks for"},
  };
  return keys;
}

}  // namespace placementd
