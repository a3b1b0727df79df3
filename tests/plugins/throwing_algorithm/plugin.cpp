// An algorithm (one policy-gradient step per observation) that throws from the entry point its
// `entry` names.
#include "placement/plugin_export.h"
#include "throw_at.h"

namespace {

using placement::testing::ThrowAt;
using placement::testing::ThrowAtOptions;

class ThrowingAlgorithm : public placement::Algorithm {
 public:
  explicit ThrowingAlgorithm(const ThrowAtOptions& options) : throw_at_(options) {}
  void reset(const placement::AlgorithmContext& context) override {
    throw_at_("reset");
    context_ = context;
  }
  void observe(const placement::Action& action, double reward, bool) override {
    throw_at_("observe");
    ++samples_;
    if (!context_.policy) return;
    context_.policy->accumulate_gradient({action}, {reward - context_.failing_reward}, 0.0);
    context_.policy->apply_gradient({0.1, 1.0});
  }
  placement::AlgorithmStats stats() const override { return {samples_, samples_, 0.0}; }

 private:
  ThrowAt throw_at_;
  placement::AlgorithmContext context_;
  uint64_t samples_ = 0;
};

const placement::ParamTable<ThrowAtOptions>& params() {
  static const auto table = ThrowAt::params({"reset", "observe"});
  return table;
}

placement::PluginInfo info() {
  return ThrowAt::info(placement::PluginKind::kAlgorithm, "a policy-gradient step per sample",
                       params());
}

std::vector<placement::ParamError> validate(const placement::Params&) { return {}; }
std::unique_ptr<placement::Algorithm> create(const placement::Params& p) {
  return std::make_unique<ThrowingAlgorithm>(params().read(p));
}

}  // namespace

PLACEMENT_EXPORT_PLUGIN(algorithm, info, validate, create)
