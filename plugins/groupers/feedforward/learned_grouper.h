#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "placement/grouper.h"
#include "torch_policy.h"

namespace placement::plugins {

/// The sizes are the Hierarchical Planner's (§2); plugin.cpp's table describes each one.
struct LearnedGrouperOptions {
  LearnedPolicyOptions policy;
  int64_t groups = 256;
  int64_t hidden = 64;
  int64_t embedding = 20;
};

/// The Hierarchical Planner's grouper (Mirhoseini et al., 2018, §2): every op's features — a
/// learned op-kind embedding, its output shapes and its BFS-indexed neighbours — through a
/// two-layer feed-forward network to a softmax over G groups; group() samples one group per op.
/// Trained jointly with the placer through the same reward (the session sums both
/// log-probabilities). The network is kept while the graph keeps its size.
class LearnedGrouper : public Grouper {
 public:
  explicit LearnedGrouper(const LearnedGrouperOptions& options);
  ~LearnedGrouper() override;

  Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) override;
  TrainablePolicy* policy() override;

 private:
  struct State;
  LearnedGrouperOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace placement::plugins
