#include "ppo.h"

namespace placement::plugins {

void Ppo::update(const SampleBatch& batch) {
  clipped_ += ppo_iteration(*context().policy, batch, options_);
}

}  // namespace placement::plugins
