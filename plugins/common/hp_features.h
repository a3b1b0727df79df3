#pragma once
// Op and group features of the Hierarchical Planner (§2), Torch-free: the learned groupers and
// placers turn them into tensors.

#include <string>
#include <vector>

#include "placement/graph.h"
#include "placement/placement.h"

namespace placement::plugins {

/// Per-op features. Shapes and adjacency are −1-padded; dimensions are stored as log(1 + d) and
/// adjacency entries as BFS position / number of ops, so they stay in [0, ~15] whatever the model.
struct OpFeatures {
  static constexpr int kOutputs = 6;
  static constexpr int kDims = 4;
  static constexpr int kNeighbours = 6;
  /// Width of numeric() rows: output shapes, then 6 producers and 6 consumers.
  static constexpr int kNumericWidth = kOutputs * kDims + 2 * kNeighbours;

  /// The most frequent op kinds, most frequent first; every other kind maps to vocabulary.size().
  std::vector<std::string> vocabulary;
  /// Index into the vocabulary (or vocabulary.size() for "other"), per op.
  std::vector<int> kind;
  /// [ops × kNumericWidth], row-major.
  std::vector<float> numeric;
  /// Position of every op in the breadth-first order from the sources.
  std::vector<int> bfs_position;

  int vocabulary_size() const { return static_cast<int>(vocabulary.size()) + 1; }
  int num_ops() const { return static_cast<int>(kind.size()); }
};

/// Computes OpFeatures with a vocabulary of at most `vocabulary` kinds (plus "other").
OpFeatures op_features(const OpGraph& graph, int vocabulary);

/// Per-group embedding (HP §2): counts of each op kind, the summed output shapes of the first 4
/// outputs (16 values, log(1 + Σ d)), and one adjacency entry per group (bytes exchanged, as a
/// fraction of the group's total traffic). Beyond the paper, two cost figures: log(1 + compute µs)
/// and log(1 + parameter MiB), because a placer cannot balance load it cannot see.
struct GroupFeatures {
  static constexpr int kShapeWidth = 16;
  static constexpr int kCostWidth = 2;
  int num_groups = 0;
  int width = 0;
  /// [num_groups × width], row-major.
  std::vector<float> rows;
  /// [num_groups × num_groups]: row a holds the share of a's traffic exchanged with each group.
  std::vector<float> adjacency;
};

GroupFeatures group_features(const OpGraph& graph, const Grouping& grouping, const OpFeatures& ops);

}  // namespace placement::plugins
