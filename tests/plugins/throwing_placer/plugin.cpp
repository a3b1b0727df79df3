// A learned placer (the tabular test policy) that throws from the entry point its `entry` names:
// its own (prepare, place) or its policy's, which the algorithm, the warm start and the store call.
#include "placement/plugin_export.h"
#include "tabular_policy.h"
#include "throw_at.h"

namespace {

using placement::testing::ThrowAt;
using placement::testing::ThrowAtOptions;

class ThrowingPolicy : public placement::testing::TabularPolicy {
 public:
  ThrowingPolicy(int positions, int choices, ThrowAt& throw_at)
      : TabularPolicy(positions, choices), throw_at_(throw_at) {}
  double log_prob(const placement::Action& action) override {
    throw_at_("log_prob");
    return TabularPolicy::log_prob(action);
  }
  void accumulate_gradient(const std::vector<placement::Action>& actions,
                           const std::vector<double>& weights, double entropy_weight) override {
    throw_at_("accumulate_gradient");
    TabularPolicy::accumulate_gradient(actions, weights, entropy_weight);
  }
  void apply_gradient(const placement::OptimizerSettings& settings) override {
    throw_at_("apply_gradient");
    TabularPolicy::apply_gradient(settings);
  }
  std::string save_state() const override {
    throw_at_("save_state");
    return "tabular";
  }
  void load_state(const std::string& state) override {
    throw_at_("load_state");
    TabularPolicy::load_state(state);
  }

 private:
  ThrowAt& throw_at_;
};

class ThrowingPlacer : public placement::Placer {
 public:
  explicit ThrowingPlacer(const ThrowAtOptions& options) : throw_at_(options) {}
  void prepare(const placement::OpGraph&, const placement::Grouping& grouping,
               const placement::DeviceSet& devices, std::mt19937_64&) override {
    throw_at_("prepare");
    policy_ = std::make_unique<ThrowingPolicy>(grouping.num_groups,
                                               static_cast<int>(devices.size()), throw_at_);
  }
  std::vector<int> place(std::mt19937_64& rng) override {
    throw_at_("place");
    return policy_->sample(rng);
  }
  placement::TrainablePolicy* policy() override { return policy_.get(); }

 private:
  ThrowAt throw_at_;
  std::unique_ptr<ThrowingPolicy> policy_;
};

const placement::ParamTable<ThrowAtOptions>& params() {
  static const auto table = ThrowAt::params({"prepare", "place", "log_prob", "accumulate_gradient",
                                             "apply_gradient", "save_state", "load_state"});
  return table;
}

placement::PluginInfo info() {
  return ThrowAt::info(placement::PluginKind::kPlacer, "a tabular learned policy", params());
}

std::vector<placement::ParamError> validate(const placement::Params&) { return {}; }
std::unique_ptr<placement::Placer> create(const placement::Params& p) {
  return std::make_unique<ThrowingPlacer>(params().read(p));
}

}  // namespace

PLACEMENT_EXPORT_PLUGIN(placer, info, validate, create)
