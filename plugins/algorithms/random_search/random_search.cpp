#include "random_search.h"

#include <algorithm>

namespace placement::plugins {

void RandomSearch::observe(const Action&, double reward, bool valid) {
  ++stats_.samples;
  if (!valid) return;
  // The "baseline" of random search is the best reward seen: what a new sample has to beat.
  stats_.baseline = any_valid_ ? std::max(stats_.baseline, reward) : reward;
  any_valid_ = true;
}

}  // namespace placement::plugins
