#pragma once

#include <cstdint>

#include "torch_policy.h"

namespace placement::plugins {

/// Where the content-based attention sits relative to the decoder (EAGLE Fig. 4).
enum class AttentionPosition {
  kBefore,  // EAGLE: the context of the previous decoder state is an input of the decoder
  kAfter,   // Hierarchical Planner / ColocRL: the decoder output attends, [h; context] → logits
};

/// The seq2seq placer of ColocRL / HP / EAGLE: group embeddings through a bi-LSTM encoder, an LSTM
/// decoder that is fed the embedding of the device it chose for the previous group, and
/// content-based attention over the encoder states.
NetworkFactory seq2seq_network(int64_t hidden, int64_t device_embedding,
                               AttentionPosition attention);

}  // namespace placement::plugins
