#include "spotlight.h"

namespace placement::plugins {

void Spotlight::update(const SampleBatch& batch) {
  for (int64_t step = 0; step < options_.ascent_steps; ++step)
    last_kl_ =
        kl_penalized_step(*context().policy, batch, options_.kl_weight, options_.entropy_weight,
                          {options_.learning_rate, options_.clip_norm});
}

}  // namespace placement::plugins
