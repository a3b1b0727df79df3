#pragma once
// The grouper → placer chain as a learning algorithm sees it: one policy, one action per sample.
//
// With a fixed grouper (colocation, METIS, ...) the graph is grouped once, and an action is the
// placer's device per group. With a learned grouper (the Hierarchical Planner's), every sample
// draws a new grouping, the placer is prepared on it, and the action is the grouping followed by
// the placement; the policy the algorithm trains is the joint one, log π(g, p) = log π_G(g) + log
// π_P(p | g), so both networks learn from the same reward.

#include <memory>
#include <random>
#include <vector>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/grouper.h"
#include "placement/placement.h"
#include "placement/placer.h"
#include "placement/policy.h"
#include "planning/group_cap.h"

namespace placementd {

class PolicyPipeline {
 public:
  /// Groups `graph` once (and, for a learned grouper, draws the first grouping) and prepares the
  /// placer on it. A fixed grouper's groups are merged into at most `max_groups` (cap_groups()); a
  /// learned grouper that makes more throws std::invalid_argument, since its groupings are the
  /// actions it learns from. The grouper, placer, graph and devices must outlive the pipeline.
  PolicyPipeline(placement::Grouper& grouper, placement::Placer& placer,
                 const placement::OpGraph& graph, const placement::DeviceSet& devices,
                 std::mt19937_64& rng, int max_groups = kDefaultMaxGroups);
  ~PolicyPipeline();

  struct Sample {
    /// What the algorithm observes (device per group, preceded by the grouping when it is learned).
    placement::Action action;
    /// Device per op, pins enforced, checked against the graph and devices.
    placement::Placement placement;
  };
  /// Draws one candidate.
  Sample sample(std::mt19937_64& rng);

  /// The trainable policy: the joint one with a learned grouper, the placer's otherwise, nullptr
  /// when neither learns.
  placement::TrainablePolicy* policy();
  /// The grouping of the last sample (the only one with a fixed grouper).
  const placement::Grouping& grouping() const { return grouping_; }
  bool learned_grouping() const;
  /// The action a placer-level decision (device per group of grouping()) is under this pipeline.
  placement::Action action_for(const std::vector<int>& device_of_group) const;

 private:
  class JointPolicy;
  /// The grouper's grouping, checked and capped.
  placement::Grouping group(std::mt19937_64& rng);
  placement::Grouper& grouper_;
  placement::Placer& placer_;
  const placement::OpGraph& graph_;
  const placement::DeviceSet& devices_;
  int max_groups_;
  placement::Grouping grouping_;
  std::unique_ptr<JointPolicy> joint_;
};

}  // namespace placementd
