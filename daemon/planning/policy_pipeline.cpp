#include "planning/policy_pipeline.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace placementd {

using placement::Action;

/// log π_G(g) + log π_P(p | g). Scoring an action re-prepares the placer on its grouping (the
/// placer's inputs are that grouping's group features), so a batch of actions with different
/// groupings is scored one by one.
class PolicyPipeline::JointPolicy : public placement::TrainablePolicy {
 public:
  JointPolicy(PolicyPipeline& pipeline, placement::TrainablePolicy& grouper,
              placement::TrainablePolicy* placer)
      : p_(pipeline), grouper_(grouper), placer_(placer) {}

  double log_prob(const Action& action) override {
    const auto [g, d] = split(action);
    double lp = grouper_.log_prob(g);
    if (placer_) {
      prepare_on(g);
      lp += placer_->log_prob(d);
    }
    return lp;
  }

  void accumulate_gradient(const std::vector<Action>& actions, const std::vector<double>& weights,
                           double entropy_weight) override {
    if (actions.size() != weights.size())
      throw std::invalid_argument("actions and weights differ in length");
    // Each call adds its own entropy term; spread the weight so the total matches one batched call.
    const double entropy_share =
        actions.empty() ? 0.0 : entropy_weight / static_cast<double>(actions.size());
    for (size_t i = 0; i < actions.size(); ++i) {
      const auto [g, d] = split(actions[i]);
      grouper_.accumulate_gradient({g}, {weights[i]}, entropy_share);
      if (placer_) {
        prepare_on(g);
        placer_->accumulate_gradient({d}, {weights[i]}, entropy_share);
      }
    }
  }

  void apply_gradient(const placement::OptimizerSettings& settings) override {
    grouper_.apply_gradient(settings);
    if (placer_) placer_->apply_gradient(settings);
  }

  // "joint:" <grouper state length> ":" <grouper state> <placer state>
  std::string save_state() const override {
    const std::string g = grouper_.save_state();
    return "joint:" + std::to_string(g.size()) + ":" + g +
           (placer_ ? placer_->save_state() : std::string());
  }

  void load_state(const std::string& state) override {
    const size_t colon = state.find(':', 6);
    if (state.compare(0, 6, "joint:") != 0 || colon == std::string::npos)
      throw std::invalid_argument("not the state of a learned grouper and placer");
    size_t length = 0;
    try {
      length = std::stoull(state.substr(6, colon - 6));
    } catch (const std::exception&) {
      throw std::invalid_argument("corrupt joint policy state");
    }
    if (colon + 1 + length > state.size())
      throw std::invalid_argument("truncated joint policy state");
    // All or nothing across the two: a grouper's state read and the placer's refused would leave
    // a mix.
    const std::string grouper_before = grouper_.save_state();
    grouper_.load_state(state.substr(colon + 1, length));
    try {
      if (placer_) placer_->load_state(state.substr(colon + 1 + length));
    } catch (...) {
      grouper_.load_state(grouper_before);
      throw;
    }
  }

 private:
  std::pair<std::vector<int>, std::vector<int>> split(const Action& action) const {
    const size_t ops = p_.graph_.ops.size();
    if (action.size() < ops) throw std::invalid_argument("joint action shorter than the op count");
    return {std::vector<int>(action.begin(), action.begin() + static_cast<std::ptrdiff_t>(ops)),
            std::vector<int>(action.begin() + static_cast<std::ptrdiff_t>(ops), action.end())};
  }

  void prepare_on(const std::vector<int>& group_of_op) {
    placement::Grouping g{group_of_op, p_.grouping_.num_groups};
    // Sizes are unchanged, so the placer keeps its network and does not draw from this generator.
    std::mt19937_64 unused(0);
    p_.placer_.prepare(p_.graph_, g, p_.devices_, unused);
  }

  PolicyPipeline& p_;
  placement::TrainablePolicy& grouper_;
  placement::TrainablePolicy* placer_;
};

PolicyPipeline::PolicyPipeline(placement::Grouper& grouper, placement::Placer& placer,
                               const placement::OpGraph& graph, const placement::DeviceSet& devices,
                               std::mt19937_64& rng, int max_groups)
    : grouper_(grouper),
      placer_(placer),
      graph_(graph),
      devices_(devices),
      max_groups_(max_groups) {
  grouping_ = group(rng);
  placer_.prepare(graph_, grouping_, devices_, rng);
  if (placement::TrainablePolicy* g = grouper_.policy())
    joint_ = std::make_unique<JointPolicy>(*this, *g, placer_.policy());
}

PolicyPipeline::~PolicyPipeline() = default;

placement::Grouping PolicyPipeline::group(std::mt19937_64& rng) {
  placement::Grouping g = grouper_.group(graph_, devices_, rng);
  g.validate(graph_);
  if (g.num_groups <= max_groups_) return g;
  // Merging a learned grouping would make the placer act on groups the grouper's action does not
  // name.
  if (grouper_.policy())
    throw std::invalid_argument("the learned grouper made " + std::to_string(g.num_groups) +
                                " groups, more than [policy] max_groups = " +
                                std::to_string(max_groups_) + ": lower its groups hyperparameter");
  return cap_groups(graph_, g, max_groups_);
}

bool PolicyPipeline::learned_grouping() const { return joint_ != nullptr; }

placement::TrainablePolicy* PolicyPipeline::policy() {
  if (joint_) return joint_.get();
  return placer_.policy();
}

PolicyPipeline::Sample PolicyPipeline::sample(std::mt19937_64& rng) {
  if (joint_) {
    grouping_ = group(rng);
    placer_.prepare(graph_, grouping_, devices_, rng);
  }
  const std::vector<int> devices = placer_.place(rng);
  placement::Placement p = placement::Placement::from_groups(grouping_, devices);
  p.enforce_pins(graph_, devices_);
  p.validate(graph_, devices_);
  return {action_for(devices), std::move(p)};
}

Action PolicyPipeline::action_for(const std::vector<int>& device_of_group) const {
  if (!joint_) return device_of_group;
  Action a = grouping_.group_of_op;
  a.insert(a.end(), device_of_group.begin(), device_of_group.end());
  return a;
}

}  // namespace placementd
