#pragma once
// Test doubles of the plugin interfaces, for driving a live session without plugin libraries: a
// grouper that makes each op its own group, a stochastic placer over TabularPolicy, and an
// algorithm that records what it was told.

#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "placement/algorithm.h"
#include "placement/grouper.h"
#include "placement/placer.h"
#include "tabular_policy.h"

namespace placement::testing {

// A stochastic placer over the test double's independent per-group softmax; once `fail` is set,
// every sample throws, as a plugin's bug would.
class TabularPlacer : public Placer {
 public:
  void prepare(const OpGraph&, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64&) override {
    table = std::make_unique<TabularPolicy>(grouping.num_groups, static_cast<int>(devices.size()));
  }
  std::vector<int> place(std::mt19937_64& rng) override {
    if (fail) throw std::runtime_error("injected: the placer failed");
    return table->sample(rng);
  }
  TrainablePolicy* policy() override { return table.get(); }
  std::unique_ptr<TabularPolicy> table;
  bool fail = false;
};

// Every op its own group.
class OneGroupPerOp : public Grouper {
 public:
  Grouping group(const OpGraph& graph, const DeviceSet&, std::mt19937_64&) override {
    Grouping g;
    g.num_groups = static_cast<int>(graph.ops.size());
    for (int i = 0; i < g.num_groups; ++i) g.group_of_op.push_back(i);
    return g;
  }
};

// Remembers what the session told it.
class RecordingAlgorithm : public Algorithm {
 public:
  struct Observation {
    Action action;
    double reward;
    bool valid;
  };
  void reset(const AlgorithmContext&) override {}
  void observe(const Action& action, double reward, bool valid) override {
    observations.push_back({action, reward, valid});
  }
  AlgorithmStats stats() const override { return {observations.size(), 0, 0.0}; }
  std::vector<Observation> observations;
};

}  // namespace placement::testing
