#include "placement/profiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <unordered_set>

#include <ATen/SequenceNumber.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/cuda.h>

#include "device_sync.h"
#include "step_profiler.h"
#include "stopwatch.h"

namespace placement {
namespace detail {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

// Accumulates one step's times per op; backward hooks may run on autograd's device threads.
class Recorder : public OpObserver {
 public:
  Recorder(size_t ops, const PlacedModule& module, OpObserver* also)
      : forward_(ops, 0.0), backward_(ops, 0.0), module_(module), also_(also) {}

  // Each op is charged from the end of the previous op to its own end, so the interpreter's work
  // in between (plumbing, dispatch) is counted and the ops' times add up to the real step.
  void before(int op) override {
    if (also_) also_->before(op);
    sync(op);
    sequence_start_ = at::sequence_number::peek();
    if (!forward_started_) {
      last_forward_end_ = Clock::now();
      forward_started_ = true;
    }
  }

  void after(int op, const std::vector<c10::IValue>& outputs) override {
    if (also_) also_->after(op, outputs);
    sync(op);
    const auto now = Clock::now();
    forward_[op] += std::chrono::duration<double>(now - last_forward_end_).count();
    last_forward_end_ = now;
    const uint64_t sequence_end = at::sequence_number::peek();
    if (activation_bytes_.size() < forward_.size()) activation_bytes_.assign(forward_.size(), 0);
    uint64_t kept = 0;
    for (const c10::IValue& v : outputs) {
      if (!v.isTensor()) continue;
      const at::Tensor& t = v.toTensor();
      if (t.requires_grad()) kept += static_cast<uint64_t>(t.numel()) * t.element_size();
      if (t.grad_fn()) hook(t.grad_fn(), op, sequence_end);
    }
    activation_bytes_[op] = kept;
  }

  // Times every autograd node this op created: those reachable from its outputs whose sequence
  // number was handed out while the op ran.
  void hook(const std::shared_ptr<torch::autograd::Node>& root, int op, uint64_t sequence_end) {
    std::vector<torch::autograd::Node*> work{root.get()};
    while (!work.empty()) {
      torch::autograd::Node* node = work.back();
      work.pop_back();
      if (!node || node->sequence_nr() < sequence_start_ || node->sequence_nr() >= sequence_end)
        continue;
      if (!hooked_.insert(node).second) continue;
      auto started = std::make_shared<Clock::time_point>();
      const int device = cuda_index(op);
      node->add_pre_hook(std::make_unique<PreHook>(started, device));
      node->add_post_hook(std::make_unique<PostHook>(started, this, op, device));
      for (const auto& edge : node->next_edges()) work.push_back(edge.function.get());
    }
  }

  // Backward nodes of one device run one after another: LibTorch's autograd runs CPU nodes on the
  // thread that called backward() and each GPU's nodes on a worker thread of that GPU's own, so
  // devices proceed side by side. Each node is charged from the end of the previous timed node of
  // its device (covering untimed ones in between, such as gradient accumulation) or from its own
  // start. On a GPU the hooks synchronise it first, so a node's time is its kernels' and not
  // their launch (this makes profiled steps slower, never the others).
  void add_backward(int op, int device, Clock::time_point started) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = Clock::now();
    auto last = last_backward_end_.find(device);
    const auto from =
        last != last_backward_end_.end() && last->second < started ? last->second : started;
    backward_[op] += std::chrono::duration<double>(now - from).count();
    last_backward_end_[device] = now;
  }

  /// Ends a step: returns its per-op times and clears the accumulators.
  void take(std::vector<double>& forward, std::vector<double>& backward) {
    std::lock_guard<std::mutex> lock(mutex_);
    forward.swap(forward_);
    backward.swap(backward_);
    forward_.assign(forward.size(), 0.0);
    backward_.assign(backward.size(), 0.0);
    hooked_.clear();
    last_backward_end_.clear();
    forward_started_ = false;
  }

  const std::vector<uint64_t>& activation_bytes() const { return activation_bytes_; }

 private:
  static void sync_cuda(int device) {
    if (device >= 0) torch::cuda::synchronize(device);
  }

  struct PreHook : torch::autograd::FunctionPreHook {
    PreHook(std::shared_ptr<Clock::time_point> s, int d) : started(std::move(s)), device(d) {}
    torch::autograd::variable_list operator()(
        const torch::autograd::variable_list& grads) override {
      sync_cuda(device);  // work queued before this node is not its own
      *started = Clock::now();
      return grads;
    }
    std::shared_ptr<Clock::time_point> started;
    int device;
  };
  struct PostHook : torch::autograd::FunctionPostHook {
    PostHook(std::shared_ptr<Clock::time_point> s, Recorder* r, int o, int d)
        : started(std::move(s)), recorder(r), op(o), device(d) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list&) override {
      sync_cuda(device);
      recorder->add_backward(op, device, *started);
      return outputs;
    }
    std::shared_ptr<Clock::time_point> started;
    Recorder* recorder;
    int op;
    int device;
  };

  // The CUDA device index the op is placed on; -1 for a CPU.
  int cuda_index(int op) const {
    const Device& d = module_.devices().devices[module_.placement().device_of_op[op]];
    return d.kind == DeviceKind::kCuda ? d.index : -1;
  }

  // GPU work is asynchronous: wait for it so the op's time is its own.
  void sync(int op) { sync_cuda(cuda_index(op)); }

  std::vector<double> forward_, backward_;
  std::vector<uint64_t> activation_bytes_;
  const PlacedModule& module_;
  OpObserver* also_;
  std::unordered_set<const torch::autograd::Node*> hooked_;
  std::mutex mutex_;
  uint64_t sequence_start_ = 0;
  bool forward_started_ = false;
  Clock::time_point last_forward_end_;
  std::map<int, Clock::time_point>
      last_backward_end_;  // per device: -1 the CPU, else the CUDA index
};

StepProfiler::StepProfiler(PlacedModule& module, OpObserver* also)
    : module_(module),
      also_(also),
      recorder_(std::make_unique<Recorder>(module.graph().ops.size(), module, also)),
      forward_(module.graph().ops.size()),
      backward_(module.graph().ops.size()) {
  module_.set_observer(recorder_.get());
}

StepProfiler::~StepProfiler() { module_.set_observer(also_); }

void StepProfiler::end_forward_backward() {
  std::vector<double> f, b;
  recorder_->take(f, b);
  for (size_t i = 0; i < forward_.size(); ++i) {
    forward_[i].push_back(f[i]);
    backward_[i].push_back(b[i]);
  }
}

void StepProfiler::add_update(double seconds) { updates_.push_back(seconds); }

std::vector<OpProfile> StepProfiler::profiles() const {
  const size_t n = forward_.size();
  uint64_t total_parameter_bytes = 0;
  for (const auto& op : module_.graph().ops) total_parameter_bytes += op.parameter_bytes;
  const double update_s = median(updates_);
  std::vector<OpProfile> profiles(n);
  for (size_t i = 0; i < n; ++i) {
    profiles[i].forward_s = median(forward_[i]);
    profiles[i].backward_s = median(backward_[i]);
    profiles[i].update_s = total_parameter_bytes == 0
                               ? 0.0
                               : update_s *
                                     static_cast<double>(module_.graph().ops[i].parameter_bytes) /
                                     static_cast<double>(total_parameter_bytes);
    profiles[i].activation_bytes =
        i < recorder_->activation_bytes().size() ? recorder_->activation_bytes()[i] : 0;
  }
  return profiles;
}

}  // namespace detail

std::vector<OpProfile> profile_steps(PlacedModule& module,
                                     const std::function<void()>& forward_backward,
                                     const std::function<void()>& update,
                                     const ProfileOptions& options) {
  for (int i = 0; i < options.warmup_steps; ++i) {
    forward_backward();
    update();
  }
  detail::StepProfiler profiler(module);
  for (int step = 0; step < options.steps; ++step) {
    forward_backward();
    profiler.end_forward_backward();
    const auto start = detail::Clock::now();
    update();
    detail::synchronize_cuda_devices(module.devices());  // the update's kernels are its time
    profiler.add_update(detail::seconds_since(start));
  }
  return profiler.profiles();
}

void record_profiles(OpGraph& graph, const PlacedModule& module,
                     const std::vector<OpProfile>& profiles) {
  for (size_t i = 0; i < graph.ops.size() && i < profiles.size(); ++i) {
    const Device& d = module.devices().devices[module.placement().device_of_op[i]];
    graph.ops[i].profile[to_string(d.kind)] = profiles[i];
  }
}

}  // namespace placement
