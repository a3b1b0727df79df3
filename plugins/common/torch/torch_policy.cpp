#include "torch_policy.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/types.h>  // before clip_grad.h, which is not self-contained
#include <torch/utils.h>
#include <torch/version.h>

#include "hp_features.h"
#include "policy_network.h"
#include "tensor_archive.h"

namespace placement::plugins {

const char* linked_torch_version() { return TORCH_VERSION; }

const ParamTable<LearnedPolicyOptions>& learned_policy_params() {
  using S = LogitShaping;
  static const auto shaping =
      ParamTable<S>()
          .add("tanh_constant", &S::tanh_constant, "C in logits = C·tanh(l / T) (HP)", {0.0, 100.0})
          .add("temperature", &S::temperature, "T in logits = C·tanh(l / T) (HP)", {1e-3, 1000.0})
          .add("logit_noise", &S::noise_std,
               "std. dev. of Gaussian noise added to the logits of the first samples", {0.0, 100.0})
          .add("noise_samples", &S::noise_samples, "how many first samples get logit noise",
               {0, std::nullopt});
  using O = LearnedPolicyOptions;
  static const auto table =
      ParamTable<O>()
          .include(shaping, &O::shaping)
          .add("vocabulary", &O::vocabulary,
               "op kinds with their own type entry (the rest share 'other')", {1, 4096});
  return table;
}

ParamTable<LearnedPlacerOptions> learned_placer_params(std::string hidden_summary) {
  using O = LearnedPlacerOptions;
  return ParamTable<O>()
      .include(learned_policy_params(), &O::policy)
      .add("hidden", &O::hidden, std::move(hidden_summary), {1, 8192});
}

std::mutex& torch_init_mutex() {
  static std::mutex mutex;
  return mutex;
}

Action PolicyNetwork::sample(const PolicyInputs& inputs, const Chooser& choose) {
  const torch::Tensor raw = logits(inputs, {})[0].to(torch::kFloat32).contiguous();
  const float* rows = raw.data_ptr<float>();
  Action action;
  action.reserve(static_cast<size_t>(raw.size(0)));
  for (int64_t i = 0; i < raw.size(0); ++i) action.push_back(choose(rows + i * raw.size(1), i));
  return action;
}

// ---------------------------------------------------------------------------------------------
// TorchPolicy

TorchPolicy::TorchPolicy(std::shared_ptr<PolicyNetwork> network, LogitShaping shaping)
    : shaping_(shaping) {
  reset(std::move(network));
}

void TorchPolicy::reset(std::shared_ptr<PolicyNetwork> network) {
  network_ = std::move(network);
  optimizer_ =
      std::make_unique<torch::optim::Adam>(network_->parameters(), torch::optim::AdamOptions(0.01));
  samples_drawn_ = 0;
}

TorchPolicy::~TorchPolicy() = default;

void TorchPolicy::set_inputs(PolicyInputs inputs, torch::Tensor allowed) {
  inputs_ = std::move(inputs);
  allowed_ = std::move(allowed);
  allowed_flat_.clear();
  if (allowed_.defined()) {
    const torch::Tensor flat = allowed_.to(torch::kUInt8).contiguous();
    allowed_flat_.assign(flat.data_ptr<uint8_t>(), flat.data_ptr<uint8_t>() + flat.numel());
  }
}

Action TorchPolicy::sample(std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  const bool noisy = samples_drawn_ < shaping_.noise_samples && shaping_.noise_std > 0;
  ++samples_drawn_;
  std::normal_distribution<double> noise(0.0, shaping_.noise_std);
  const int64_t choices = inputs_.choices;
  std::vector<double> weights(static_cast<size_t>(choices));
  auto choose = [&](const float* raw, int64_t position) {
    double max = -INFINITY;
    for (int64_t c = 0; c < choices; ++c) {
      const bool ok =
          allowed_flat_.empty() || allowed_flat_[static_cast<size_t>(position * choices + c)];
      double l =
          shaping_.tanh_constant * std::tanh(static_cast<double>(raw[c]) / shaping_.temperature);
      if (noisy) l += noise(rng);
      weights[static_cast<size_t>(c)] = ok ? l : -INFINITY;
      max = std::max(max, weights[static_cast<size_t>(c)]);
    }
    for (double& w : weights) w = std::isinf(w) ? 0.0 : std::exp(w - max);
    std::discrete_distribution<int> pick(weights.begin(), weights.end());
    return pick(rng);
  };
  return network_->sample(inputs_, choose);
}

void TorchPolicy::check_action(const Action& action) const {
  const int64_t positions = inputs_.features.size(0);
  if (static_cast<int64_t>(action.size()) != positions)
    throw std::invalid_argument("action has " + std::to_string(action.size()) +
                                " entries, the policy has " + std::to_string(positions) +
                                " positions");
  for (int a : action)
    if (a < 0 || a >= inputs_.choices)
      throw std::invalid_argument("action entry " + std::to_string(a) + " is outside [0, " +
                                  std::to_string(inputs_.choices) + ")");
}

torch::Tensor TorchPolicy::log_distribution(const std::vector<Action>& actions) {
  for (const Action& a : actions) check_action(a);
  torch::Tensor shaped = shaping_.tanh_constant *
                         torch::tanh(network_->logits(inputs_, actions) / shaping_.temperature);
  if (allowed_.defined()) shaped = shaped.masked_fill(allowed_.logical_not().unsqueeze(0), -1e9);
  return torch::log_softmax(shaped, -1);
}

namespace {

torch::Tensor action_tensor(const std::vector<Action>& actions) {
  std::vector<int64_t> flat;
  for (const Action& a : actions) flat.insert(flat.end(), a.begin(), a.end());
  return torch::tensor(flat, torch::kInt64).view({static_cast<int64_t>(actions.size()), -1});
}

}  // namespace

double TorchPolicy::log_prob(const Action& action) { return log_probs({action})[0]; }

std::vector<double> TorchPolicy::log_probs(const std::vector<Action>& actions) {
  if (actions.empty()) return {};
  torch::NoGradGuard no_grad;
  const torch::Tensor logp = log_distribution(actions);
  const int64_t S = static_cast<int64_t>(actions.size());
  const torch::Tensor sums = logp.expand({S, logp.size(1), logp.size(2)})
                                 .gather(2, action_tensor(actions).unsqueeze(-1))
                                 .sum({1, 2})
                                 .to(torch::kFloat64)
                                 .contiguous();
  return std::vector<double>(sums.data_ptr<double>(), sums.data_ptr<double>() + S);
}

void TorchPolicy::accumulate_gradient(const std::vector<Action>& actions,
                                      const std::vector<double>& weights, double entropy_weight) {
  if (actions.size() != weights.size())
    throw std::invalid_argument("actions and weights differ in length");
  if (actions.empty()) return;
  const torch::Tensor logp = log_distribution(actions);
  const int64_t S = static_cast<int64_t>(actions.size());
  const torch::Tensor per_sample = logp.expand({S, logp.size(1), logp.size(2)})
                                       .gather(2, action_tensor(actions).unsqueeze(-1))
                                       .sum({1, 2});
  torch::Tensor objective =
      (per_sample * torch::tensor(weights, torch::kFloat64).to(per_sample.dtype())).sum();
  if (entropy_weight != 0.0) {
    // Masked entries have p = 0; their p·log p is 0, not NaN.
    const torch::Tensor entropy = -(logp.exp() * logp).nan_to_num(0.0).sum({1, 2}).mean();
    objective = objective + entropy_weight * entropy;
  }
  (-objective).backward();
}

void TorchPolicy::apply_gradient(const OptimizerSettings& settings) {
  if (settings.clip_norm > 0)
    torch::nn::utils::clip_grad_norm_(network_->parameters(), settings.clip_norm);
  for (auto& group : optimizer_->param_groups())
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(settings.learning_rate);
  optimizer_->step();
  optimizer_->zero_grad();
}

// The network's parameters and buffers under their module paths, and Adam's moments of the
// parameters it has stepped under the same paths (their step counts in the extra facts).
namespace {

std::string adam_name(const std::string& param, const char* moment) {
  return "adam." + param + "." + moment;
}

// Past 2^53 a step count is no longer a count (and Adam's next one would overflow).
constexpr int64_t kMaxAdamStep = int64_t{1} << 53;

// Parameters, then buffers, as "network.<module path>": views of the module's own tensors.
NamedTensors network_tensors(const torch::nn::Module& network) {
  NamedTensors out;
  for (const auto& p : network.named_parameters())
    out.emplace_back("network." + p.key(), p.value());
  for (const auto& b : network.named_buffers()) out.emplace_back("network." + b.key(), b.value());
  return out;
}

}  // namespace

std::string TorchPolicy::save_state() const {
  NamedTensors tensors = network_tensors(*network_);
  nlohmann::json steps = nlohmann::json::object();
  for (const auto& p : network_->named_parameters()) {
    const auto it = optimizer_->state().find(p.value().unsafeGetTensorImpl());
    if (it == optimizer_->state().end()) continue;
    const auto& adam = static_cast<const torch::optim::AdamParamState&>(*it->second);
    steps[p.key()] = adam.step();
    tensors.emplace_back(adam_name(p.key(), "exp_avg"), adam.exp_avg());
    tensors.emplace_back(adam_name(p.key(), "exp_avg_sq"), adam.exp_avg_sq());
    if (adam.max_exp_avg_sq().defined())
      tensors.emplace_back(adam_name(p.key(), "max_exp_avg_sq"), adam.max_exp_avg_sq());
  }
  return write_tensor_archive(tensors, {{"adam_steps", steps}});
}

// Everything is read, checked and made before anything changes: a state refused part way leaves
// the network and the optimiser as they were.
void TorchPolicy::load_state(const std::string& state) {
  const bool amsgrad =
      static_cast<const torch::optim::AdamOptions&>(optimizer_->defaults()).amsgrad();
  std::map<std::string, torch::Tensor> params;
  for (const auto& p : network_->named_parameters()) params.emplace(p.key(), p.value());
  std::map<std::string, int64_t> steps;
  const ReadArchive read = read_tensor_archive(state, [&](const nlohmann::json& extra) {
    const NamedTensors own = network_tensors(*network_);
    std::map<std::string, torch::Tensor> expected(own.begin(), own.end());
    if (!extra.is_object())
      throw std::invalid_argument("policy state refused: its extra facts are not an object");
    const auto listed = extra.find("adam_steps");
    if (listed == extra.end()) return expected;
    if (!listed->is_object())
      throw std::invalid_argument("policy state refused: adam_steps is not an object");
    for (const auto& [name, step] : listed->items()) {
      const auto param = params.find(name);
      if (param == params.end() || !step.is_number_integer() || step.get<int64_t>() < 0 ||
          step.get<int64_t>() > kMaxAdamStep)
        throw std::invalid_argument(
            "policy state refused: an adam_steps entry that is not a "
            "parameter's step count");
      steps[name] = step.get<int64_t>();
      expected.emplace(adam_name(name, "exp_avg"), param->second);
      expected.emplace(adam_name(name, "exp_avg_sq"), param->second);
      if (amsgrad) expected.emplace(adam_name(name, "max_exp_avg_sq"), param->second);
    }
    return expected;
  });
  std::map<void*, std::unique_ptr<torch::optim::OptimizerParamState>> moments;
  for (const auto& [name, step] : steps) {
    const torch::Tensor& p = params.at(name);
    auto adam = std::make_unique<torch::optim::AdamParamState>();
    adam->step(step);
    adam->exp_avg(read.tensors.at(adam_name(name, "exp_avg")).to(p.device()));
    adam->exp_avg_sq(read.tensors.at(adam_name(name, "exp_avg_sq")).to(p.device()));
    if (amsgrad)
      adam->max_exp_avg_sq(read.tensors.at(adam_name(name, "max_exp_avg_sq")).to(p.device()));
    moments.emplace(p.unsafeGetTensorImpl(), std::move(adam));
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : network_tensors(*network_)) tensor.copy_(read.tensors.at(name));
  // The optimiser's state becomes the saved one, moments the state does not have included.
  optimizer_->state().clear();
  for (auto& [key, adam] : moments) optimizer_->state()[key] = std::move(adam);
}

// ---------------------------------------------------------------------------------------------
// LearnedPlacer

struct LearnedPlacer::State {
  int64_t width = 0, positions = 0, choices = 0;
  std::unique_ptr<TorchPolicy> policy;
};

LearnedPlacer::LearnedPlacer(std::string name, NetworkFactory factory,
                             const LearnedPolicyOptions& options)
    : name_(std::move(name)),
      factory_(std::move(factory)),
      options_(options),
      state_(std::make_unique<State>()) {
  // Policy networks are small; more intra-op threads than one only contend with the daemon's own.
  static std::once_flag once;
  std::call_once(once, [] { torch::set_num_threads(1); });
}

LearnedPlacer::~LearnedPlacer() = default;

void LearnedPlacer::prepare(const OpGraph& graph, const Grouping& grouping,
                            const DeviceSet& devices, std::mt19937_64& rng) {
  if (devices.size() == 0) throw std::invalid_argument(name_ + ": the device set is empty");
  const OpFeatures ops = op_features(graph, static_cast<int>(options_.vocabulary));
  const GroupFeatures groups = group_features(graph, grouping, ops);
  const int64_t G = groups.num_groups, D = static_cast<int64_t>(devices.size());

  // A group with an op pinned to a device kind may only go to devices of that kind, and a profiled
  // op only to device kinds it was profiled on (elsewhere its cost is unknown).
  torch::Tensor allowed = torch::ones({G, D}, torch::kBool);
  auto a = allowed.accessor<bool, 2>();
  for (const Op& op : graph.ops)
    for (int64_t d = 0; d < D; ++d) {
      const DeviceKind kind = devices.devices[static_cast<size_t>(d)].kind;
      if ((op.pinned && kind != *op.pinned) ||
          (!op.profile.empty() && !op.profile.count(to_string(kind))))
        a[grouping.group_of_op[op.id]][d] = false;
    }
  for (int64_t g = 0; g < G; ++g) {
    bool any = false;
    for (int64_t d = 0; d < D; ++d) any = any || a[g][d];
    if (!any)  // conflicting pins: enforce_pins decides
      for (int64_t d = 0; d < D; ++d) a[g][d] = true;
  }

  PolicyInputs inputs;
  inputs.features =
      torch::from_blob(const_cast<float*>(groups.rows.data()), {G, groups.width}, torch::kFloat32)
          .clone();
  inputs.adjacency =
      torch::from_blob(const_cast<float*>(groups.adjacency.data()), {G, G}, torch::kFloat32)
          .clone();
  inputs.choices = D;

  if (!state_->policy || state_->width != groups.width || state_->positions != G ||
      state_->choices != D) {
    std::shared_ptr<PolicyNetwork> network;
    {
      std::lock_guard<std::mutex> lock(torch_init_mutex());
      torch::manual_seed(rng());
      network = factory_(groups.width, G, D);
    }
    if (state_->policy)
      state_->policy->reset(std::move(network));
    else
      state_->policy = std::make_unique<TorchPolicy>(std::move(network), options_.shaping);
    state_->width = groups.width;
    state_->positions = G;
    state_->choices = D;
  }
  state_->policy->set_inputs(std::move(inputs), allowed);
}

std::vector<int> LearnedPlacer::place(std::mt19937_64& rng) {
  if (!state_->policy) throw std::logic_error(name_ + ": place() before prepare()");
  return state_->policy->sample(rng);
}

TrainablePolicy* LearnedPlacer::policy() { return state_->policy.get(); }

}  // namespace placement::plugins
