#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "placement/grouper.h"
#include "placement/params.h"
#include "torch_policy.h"

namespace placement::plugins {

/// The Hierarchical Planner's grouper (Mirhoseini et al., 2018, §2): every op's features — a
/// learned op-kind embedding, its output shapes and its BFS-indexed neighbours — through a two-layer
/// feed-forward network to a softmax over G groups; group() samples one group per op. Trained
/// jointly with the placer through the same reward (the session sums both log-probabilities).
/// The network is kept while the graph keeps its size.
class LearnedGrouper : public Grouper {
 public:
  LearnedGrouper(int64_t groups, int64_t hidden, int64_t embedding, int vocabulary, LogitShaping shaping);
  ~LearnedGrouper() override;

  Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) override;
  TrainablePolicy* policy() override;

 private:
  struct State;
  int64_t groups_, hidden_, embedding_;
  int vocabulary_;
  LogitShaping shaping_;
  std::unique_ptr<State> state_;
};

}  // namespace placement::plugins
