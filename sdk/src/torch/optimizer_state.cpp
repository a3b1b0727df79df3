#include "optimizer_state.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <stdexcept>
#include <typeinfo>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "transfer.h"
#include "update_guard.h"

namespace placement {

namespace {

// One state tensor to replace: the getter's value and how to install the copy.
struct StateTensor {
  at::Tensor value;
  std::function<void(at::Tensor)> install;
};

// The tensors of one parameter's state; throws for a state type this does not know.
std::vector<StateTensor> tensors_of_state(torch::optim::OptimizerParamState& state) {
  namespace o = torch::optim;
  std::vector<StateTensor> out;
  auto add = [&out](const at::Tensor& t, std::function<void(at::Tensor)> install) {
    if (t.defined()) out.push_back({t, std::move(install)});
  };
  // Adam and AdamW keep the same moments under different types.
  auto add_moments = [&add](auto* a) {
    add(a->exp_avg(), [a](at::Tensor t) { a->exp_avg(t); });
    add(a->exp_avg_sq(), [a](at::Tensor t) { a->exp_avg_sq(t); });
    add(a->max_exp_avg_sq(), [a](at::Tensor t) { a->max_exp_avg_sq(t); });
  };
  if (auto* a = dynamic_cast<o::AdamParamState*>(&state)) {
    add_moments(a);
  } else if (auto* w = dynamic_cast<o::AdamWParamState*>(&state)) {
    add_moments(w);
  } else if (auto* sgd = dynamic_cast<o::SGDParamState*>(&state)) {
    add(sgd->momentum_buffer(), [sgd](at::Tensor t) { sgd->momentum_buffer(t); });
  } else if (auto* r = dynamic_cast<o::RMSpropParamState*>(&state)) {
    add(r->square_avg(), [r](at::Tensor t) { r->square_avg(t); });
    add(r->momentum_buffer(), [r](at::Tensor t) { r->momentum_buffer(t); });
    add(r->grad_avg(), [r](at::Tensor t) { r->grad_avg(t); });
  } else if (auto* g = dynamic_cast<o::AdagradParamState*>(&state)) {
    add(g->sum(), [g](at::Tensor t) { g->sum(t); });
  } else {
    throw std::invalid_argument(std::string("cannot move optimizer state of type ") +
                                typeid(state).name() +
                                " (Adam, AdamW, SGD, RMSprop and Adagrad are supported)");
  }
  return out;
}

}  // namespace

std::vector<std::vector<at::Tensor>> StepOptimizer::state_tensors(
    const std::vector<at::Tensor>& parameters) {
  return std::vector<std::vector<at::Tensor>>(parameters.size());
}

void StepOptimizer::step_parameters(const std::vector<at::Tensor>& parameters) {
  (void)parameters;
  throw std::logic_error("this optimizer cannot step some parameters apart from the rest");
}

bool TorchStepOptimizer::steps_parameters_apart() const {
  // The exact classes, whose step() reads each parameter's value, gradient and state alone: a
  // subclass may override step() with something over all of them (a norm, a closure).
  namespace o = torch::optim;
  const std::type_info& type = typeid(optimizer_);
  return type == typeid(o::Adam) || type == typeid(o::AdamW) || type == typeid(o::SGD) ||
         type == typeid(o::RMSprop) || type == typeid(o::Adagrad);
}

void TorchStepOptimizer::step_parameters(const std::vector<at::Tensor>& parameters) {
  if (!steps_parameters_apart()) StepOptimizer::step_parameters(parameters);
  // Each group's step() runs over its params(): for the call, each group holds only those of
  // `parameters` it holds, in its own order, and gets all of its own back however step() ends.
  std::unordered_set<const c10::TensorImpl*> wanted;
  for (const at::Tensor& p : parameters) wanted.insert(p.unsafeGetTensorImpl());
  std::vector<torch::optim::OptimizerParamGroup>& groups = optimizer_.param_groups();
  std::vector<std::vector<at::Tensor>> all(groups.size());
  struct PutBack {
    std::vector<torch::optim::OptimizerParamGroup>& groups;
    std::vector<std::vector<at::Tensor>>& all;
    size_t taken = 0;
    ~PutBack() {
      for (size_t g = 0; g < taken; ++g) groups[g].params() = std::move(all[g]);
    }
  } put_back{groups, all};
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<at::Tensor> some;
    for (const at::Tensor& p : groups[g].params())
      if (wanted.count(p.unsafeGetTensorImpl())) some.push_back(p);
    all[g] = std::exchange(groups[g].params(), std::move(some));
    put_back.taken = g + 1;
  }
  optimizer_.step();
}

std::vector<std::vector<at::Tensor>> TorchStepOptimizer::state_tensors(
    const std::vector<at::Tensor>& parameters) {
  std::vector<std::vector<at::Tensor>> out(parameters.size());
  auto& states = optimizer_.state();
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto it = states.find(parameters[i].unsafeGetTensorImpl());
    if (it == states.end() || !it->second) continue;
    try {
      for (StateTensor& s : tensors_of_state(*it->second)) out[i].push_back(s.value);
    } catch (const std::invalid_argument&) {
      // A state type it cannot read is not counted; moving it is refused where it matters.
    }
  }
  return out;
}

std::optional<uint64_t> TorchStepOptimizer::expected_state_bytes(const at::Tensor& parameter) {
  namespace o = torch::optim;
  for (const o::OptimizerParamGroup& group : optimizer_.param_groups()) {
    const bool in_group =
        std::any_of(group.params().begin(), group.params().end(), [&](const at::Tensor& p) {
          return p.unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl();
        });
    if (!in_group) continue;
    if (!group.has_options()) return std::nullopt;
    const o::OptimizerOptions& options = group.options();
    // Each state tensor is a zeros_like of the parameter.
    uint64_t tensors = 0;
    if (const auto* a = dynamic_cast<const o::AdamOptions*>(&options))
      tensors = a->amsgrad() ? 3 : 2;
    else if (const auto* w = dynamic_cast<const o::AdamWOptions*>(&options))
      tensors = w->amsgrad() ? 3 : 2;
    else if (const auto* sgd = dynamic_cast<const o::SGDOptions*>(&options))
      tensors = sgd->momentum() != 0 ? 1 : 0;
    else if (const auto* r = dynamic_cast<const o::RMSpropOptions*>(&options))
      tensors = 1 + (r->momentum() > 0 ? 1 : 0) + (r->centered() ? 1 : 0);
    else if (dynamic_cast<const o::AdagradOptions*>(&options))
      tensors = 1;
    else
      return std::nullopt;
    return tensors * parameter.nbytes();
  }
  return 0;  // not among its parameters: it keeps nothing for it
}

std::optional<StepOptimizer::SavedState> TorchStepOptimizer::save_state(
    const std::vector<at::Tensor>& parameters) {
  // Per parameter with state: a copy of its state object, whose tensors are the same tensors (the
  // step updates those in place) and whose counts are values, and a host copy of each tensor's
  // data. Parameters without state get theirs in the step: dropped again on restore.
  struct Saved {
    void* key;
    std::unique_ptr<torch::optim::OptimizerParamState> object;
    std::vector<at::Tensor> tensors;
    std::vector<at::Tensor> copies;
  };
  auto saved = std::make_shared<std::vector<Saved>>();
  auto created = std::make_shared<std::vector<void*>>();
  SavedState out;
  auto& states = optimizer_.state();
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters) {
    void* key = p.unsafeGetTensorImpl();
    const auto it = states.find(key);
    if (it == states.end() || !it->second) {
      created->push_back(key);
      continue;
    }
    std::vector<StateTensor> tensors;
    try {
      tensors = tensors_of_state(*it->second);
    } catch (const std::invalid_argument&) {
      return std::nullopt;  // a state type it cannot copy: the update runs unguarded
    }
    Saved s{key, it->second->clone(), {}, {}};
    for (const StateTensor& t : tensors) {
      s.tensors.push_back(t.value);
      s.copies.push_back(detail::host_copy(t.value));
      out.bytes += static_cast<uint64_t>(t.value.numel()) * t.value.element_size();
    }
    saved->push_back(std::move(s));
  }
  out.restore = [&states, saved, created] {
    at::NoGradGuard no_grad;
    for (void* key : *created) states.erase(key);
    for (Saved& s : *saved) {
      for (size_t i = 0; i < s.tensors.size(); ++i) s.tensors[i].copy_(s.copies[i]);
      states[s.key] = s.object->clone();
    }
  };
  return out;
}

void TorchStepOptimizer::step() { optimizer_.step(); }

void TorchStepOptimizer::zero_grad() { optimizer_.zero_grad(); }

uint64_t TorchStepOptimizer::move_state(const std::vector<at::Tensor>& parameters,
                                        const std::vector<c10::Device>& devices) {
  StagedState staged = *stage_state(parameters, devices);
  staged.install();
  return staged.bytes;
}

std::optional<StepOptimizer::StagedState> TorchStepOptimizer::stage_state(
    const std::vector<at::Tensor>& parameters, const std::vector<c10::Device>& devices) {
  auto& states = optimizer_.state();
  std::vector<std::function<void(at::Tensor)>> installs;
  std::vector<detail::CopyRequest> copies;
  StagedState out;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters.size(); ++i) {
    // torch::optim files state under the TensorImpl address.
    auto it = states.find(parameters[i].unsafeGetTensorImpl());
    if (it == states.end() || !it->second)
      continue;  // no step yet (or not this optimizer's): no state
    for (StateTensor& s : tensors_of_state(*it->second)) {
      out.bytes += static_cast<uint64_t>(s.value.numel()) * s.value.element_size();
      installs.push_back(std::move(s.install));
      copies.push_back({s.value, devices[i]});
    }
  }
  // One batch, copies before installs: a failed copy leaves the state as it was.
  auto copied = std::make_shared<std::vector<at::Tensor>>(detail::copy_all(copies));
  out.install = [installs = std::move(installs), copied] {
    for (size_t i = 0; i < installs.size(); ++i) installs[i](std::move((*copied)[i]));
  };
  return out;
}

StagedMove stage_with_state(PlacedModule& module, StepOptimizer& optimizer,
                            const Placement& placement) {
  StagedMove out{module.stage(placement), {}, {}, std::nullopt};
  for (const at::Tensor& p : module.parameters()) {
    const auto now = module.device_of(p);
    const auto next = out.module.device_of(p);
    if (!now || !next || *now == *next) continue;
    out.moving.push_back(p);
    out.devices.push_back(module.physical_device(*next));
  }
  out.state = optimizer.stage_state(out.moving, out.devices);
  return out;
}

PlacementMove commit(PlacedModule& module, StepOptimizer& optimizer, StagedMove staged) {
  PlacementMove out;
  if (staged.state) {
    staged.state->install();
    out.state_bytes = staged.state->bytes;
  } else {
    out.state_bytes = optimizer.move_state(staged.moving, staged.devices);
  }
  out.module = module.commit(std::move(staged.module));
  for (at::Tensor& p : staged.moving) p.mutable_grad() = at::Tensor();
  return out;
}

PlacementMove move_with_state(PlacedModule& module, StepOptimizer& optimizer,
                              const Placement& placement) {
  return commit(module, optimizer, stage_with_state(module, optimizer, placement));
}

PlacementMove move_with_state(PlacedModule& module, torch::optim::Optimizer& optimizer,
                              const Placement& placement) {
  TorchStepOptimizer adapted(optimizer);
  return move_with_state(module, adapted, placement);
}

}  // namespace placement
