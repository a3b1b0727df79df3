#pragma once

#include <optional>
#include <string>
#include <vector>

#include "placement/placer.h"

namespace placement::plugins {

struct ExpertOptions {
  /// Use only CUDA devices when the job has any (the papers' setting).
  bool gpus_only = true;
};

/// The "human expert" baseline of ColocRL and the Hierarchical Planner: layer i of a recurrent or
/// transformer stack on device i (GNMT-style: encoder and decoder layer i together), the embedding
/// with the first layer, attention and the softmax with the last. Ops outside any layer follow: the
/// ones before the first layer go with it, the ones after the last layer go with it, the ones in
/// between go with the layer of their first producer. With more layers than devices, consecutive
/// layers share a device. Deterministic.
class ExpertPlacer : public Placer {
 public:
  explicit ExpertPlacer(const ExpertOptions& options) : gpus_only_(options.gpus_only) {}

  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
  std::vector<int> place(std::mt19937_64& rng) override;

  /// The layer index in an op name: the first purely numeric component of its module path
  /// ("encoder.layers.3.self_attn/linear" -> 3, "decoder.2/lstm" -> 2), or nothing.
  static std::optional<int> layer_of(const std::string& name);

 private:
  bool gpus_only_;
  std::vector<int> device_of_group_;
};

}  // namespace placement::plugins
