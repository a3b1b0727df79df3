#pragma once
// [policy] max_groups: the most groups a placer is given, whatever the grouper's own rule leaves.
// The Hierarchical Planner places at most 256 groups; the policy's features grow with the square of
// the group count, so the colocation grouper's tens of thousands of groups on an unrolled 80k-op
// graph would need tens of GB where 256 need a few MB.

#include "placement/graph.h"
#include "placement/placement.h"

namespace placementd {

/// The Hierarchical Planner's group count, [policy] max_groups's default.
inline constexpr int kDefaultMaxGroups = 256;

/// `grouping` with its groups merged into at most `max_groups`: the groups, ordered by the
/// topological position of their first op, are cut into runs of consecutive groups holding about
/// equal numbers of ops, so each merged group is a stretch of the graph that mostly talks to its
/// neighbours. A grouping with no more than `max_groups` groups comes back unchanged. Pinned ops
/// need no care: pins are enforced per op after the placer's decision.
placement::Grouping cap_groups(const placement::OpGraph& graph, const placement::Grouping& grouping,
                               int max_groups);

}  // namespace placementd
