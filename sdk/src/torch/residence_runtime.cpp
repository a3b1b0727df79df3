#include "residence_runtime.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <ATen/Context.h>
#include <ATen/SequenceNumber.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "copy_lane.h"
#include "pinned_pool.h"
#include "prefetch_order.h"
#include "tensor_bytes.h"
#include "transfer.h"

namespace placement::detail {

namespace residence {

// A copy of `t` on device `to`: a copy of its own also where the physical device is the same
// (logical devices of one host keep their bytes apart, as separate devices would). What a GPU
// sends to the host (a gradient going home, an offloaded activation) lands in the pinned pool,
// under its budget, and comes back in one DMA.
at::Tensor copy_to(const at::Tensor& t, c10::Device to) {
  at::NoGradGuard no_grad;
  if (t.is_cuda() && to.is_cpu()) return host_pool_copy(t);
  return t.device() == to ? t.clone() : t.to(to);
}

// The random state an op draws from: the host's generator, and its GPU's when it runs on one.
struct RngState {
  at::Tensor cpu;
  std::optional<c10::Device> cuda_device;
  at::Tensor cuda;

  bool same_as(const RngState& o) const {
    return at::equal(cpu, o.cpu) && cuda_device == o.cuda_device &&
           (!cuda_device || at::equal(cuda, o.cuda));
  }
};

RngState capture_rng(c10::Device device) {
  RngState s;
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    s.cpu = cpu.get_state();
  }
  if (device.is_cuda()) {
    at::Generator gpu = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gpu.mutex());
    s.cuda_device = device;
    s.cuda = gpu.get_state();
  }
  return s;
}

void restore_rng(const RngState& s) {
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(s.cpu);
  }
  if (s.cuda_device) {
    at::Generator gpu = at::globalContext().defaultGenerator(*s.cuda_device);
    std::lock_guard<std::mutex> lock(gpu.mutex());
    gpu.set_state(s.cuda);
  }
}

// Every tensor in a stack, in order (through lists, tuples and dicts).
std::vector<at::Tensor> tensors_of(const std::vector<c10::IValue>& values) {
  std::vector<at::Tensor> out;
  for (const c10::IValue& v : values) tensors_in(v, out);
  return out;
}

const c10::StorageImpl* storage_of(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  return t.storage().unsafeGetStorageImpl();
}

// Which shelf an entry is on: the plan's proxies', or one forward pass's activations'.
struct EntryRef {
  bool activation = false;
  StorageShelf::Id id = 0;
  bool operator==(const EntryRef& o) const { return activation == o.activation && id == o.id; }
};

void add_unique(std::vector<EntryRef>& to, EntryRef ref) {
  if (std::find(to.begin(), to.end(), ref) == to.end()) to.push_back(ref);
}

}  // namespace residence

// What the backward's hooks share with the runtime: they may outlive it (a graph kept past a
// placement change), so they hold it.
using namespace residence;

struct ResidenceShared {
  // What the hooks count their allocations in; null once the runtime is gone.
  std::atomic<MemoryTally*> tally{nullptr};
  StorageShelf proxies;
  std::vector<std::optional<StorageShelf::Id>> proxy_entry;  // per proxy (streamed only)
  std::atomic<uint64_t> parameter_fetches{0};
  std::atomic<uint64_t> parameter_bytes_fetched{0};
  std::atomic<uint64_t> gradient_bytes_sent_home{0};
  std::atomic<uint64_t> activations_evicted{0};
  std::atomic<uint64_t> activation_bytes_evicted{0};
  std::atomic<uint64_t> recompute_kept{0};
  std::atomic<uint64_t> parameter_prefetches{0};
  // Copies in flight (copy_lane.h). Taken after the proxies' shelf's lock where both are (a fill
  // records its landing), and nothing is locked while it is held.
  std::mutex copies_mutex;
  // What to fill ahead (prefetch_order.h). Its lock is taken before the shelf's (asking which
  // entries are filled), never after it, nor with copies_mutex held.
  std::mutex order_mutex;
  PrefetchOrder order;
  std::atomic<uint64_t> prefetch_window{0};  // bytes of streamed proxies filled ahead; 0: none
  std::vector<Landing> landing;              // per proxy: its value's copy, until a reader waits
  std::vector<size_t> proxy_of_entry;        // per entry of `proxies`: its proxy
  std::vector<uint64_t> entry_bytes;         // per entry of `proxies`: its parameter's bytes
  std::vector<int> device_of_entry;          // per entry of `proxies`: its readers' logical device
  // Per proxy: its gradient went home in this backward (GPUs' autograd threads set and read it).
  std::unique_ptr<std::atomic<bool>[]> backward_done;
  std::vector<Landing> gradients_landing;  // gradients on their way home, until settle()
  // Told of each parameter whose gradient has reached its home on the host (set by the job around
  // a step's forward and backward; autograd's threads read it).
  std::mutex gradient_home_mutex;
  std::function<void(const at::Tensor&, const std::function<void()>&)> gradient_home;

  bool listened() {
    const std::lock_guard<std::mutex> lock(gradient_home_mutex);
    return static_cast<bool>(gradient_home);
  }

  void notify_gradient_home(const at::Tensor& parameter, const Landing& landed) {
    std::function<void(const at::Tensor&, const std::function<void()>&)> tell;
    {
      const std::lock_guard<std::mutex> lock(gradient_home_mutex);
      tell = gradient_home;
    }
    if (tell) tell(parameter, [waiting = Landing(landed)]() mutable { waiting.synchronize(); });
  }

  // Copies `from` into `into`, proxy `i`'s bytes: aside where it can run beside the ops (a
  // parameter on the host to a GPU), and then its readers wait for its landing.
  void copy_into(size_t i, const at::Tensor& into, const at::Tensor& from) {
    Landing landed = copy_aside(
        into.device(), [&] { into.copy_(from, /*non_blocking=*/into.is_cuda() && from.is_cpu()); });
    if (!landed.pending()) return;
    const std::lock_guard<std::mutex> lock(copies_mutex);
    landing.at(i) = std::move(landed);
  }
  // The reader's stream (the calling thread's current one) waits for proxy `i`'s copy in flight.
  void await(size_t i) {
    Landing l;
    {
      const std::lock_guard<std::mutex> lock(copies_mutex);
      l = std::move(landing.at(i));
      landing[i] = Landing();
    }
    l.wait_on_current_stream();
  }
  // A streamed proxy's entry filled for a reader: filled if it was emptied, and waited for.
  void fill_for_reader(StorageShelf::Id entry) {
    if (proxies.evicted(entry)) {
      proxies.ensure(entry);
      ++parameter_fetches;
    }
    await(proxy_of_entry.at(entry));
  }
  // Emptied once every copy into it has landed (the stream that frees it waits for the copy).
  void evict_proxy(StorageShelf::Id entry) {
    await(proxy_of_entry.at(entry));
    proxies.evict(entry);
  }
  // Fills ahead: each of `entries` not filled yet, its copy left in flight.
  void prefetch(const std::vector<size_t>& entries) {
    for (const size_t e : entries)
      if (proxies.evicted(e)) {
        proxies.ensure(e);
        ++parameter_fetches;
        ++parameter_prefetches;
      }
  }
};

namespace residence {

// An op whose outputs are recomputed: how to run it again as the forward ran it.
struct Recompute {
  std::shared_ptr<const OpNode> node;
  std::vector<c10::IValue> inputs;  // as the op was called (moved, proxies in place)
  // The random state the op drew from, kept only if it drew (a state is 5 KB on a host).
  std::optional<RngState> rng;
  std::vector<EntryRef> reads;  // entries among its inputs: filled before it runs again
  // Its own outputs' entries, each with its position among the op's output tensors.
  std::vector<std::pair<size_t, StorageShelf::Id>> outputs;
};

// One forward pass's activations: the hooks of its backward nodes hold it.
struct ActivationShelf {
  StorageShelf shelf;
  std::vector<std::shared_ptr<Recompute>> recomputes;
};

// Runs before an autograd node: what the node saved is filled again (a streamed parameter's
// proxy, an offloaded or recomputed activation).
class EnsureFilled final : public torch::autograd::FunctionPreHook {
 public:
  EnsureFilled(std::shared_ptr<ResidenceShared> shared,
               std::shared_ptr<ActivationShelf> activations, std::vector<EntryRef> entries)
      : shared_(std::move(shared)),
        activations_(std::move(activations)),
        entries_(std::move(entries)) {}

  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    for (const EntryRef& e : entries_) {
      if (e.activation) {
        activations_->shelf.ensure(e.id);
        continue;
      }
      shared_->fill_for_reader(e.id);
      // The backward reads parameters in about the reverse of the forward's order: those the
      // forward read just before this one come next.
      // Only those on this node's device: each GPU's part of the backward runs on a thread of its
      // own, which alone fills and empties that device's proxies.
      std::vector<size_t> next;
      {
        const std::lock_guard<std::mutex> lock(shared_->order_mutex);
        if (shared_->prefetch_window > 0) {
          ResidenceShared* shared = shared_.get();
          const int device = shared->device_of_entry.at(e.id);
          next = shared->order.behind(
              e.id, shared->prefetch_window,
              [shared](size_t entry) { return !shared->proxies.evicted(entry); },
              [shared, device](size_t entry) {
                return shared->device_of_entry.at(entry) != device ||
                       shared->backward_done[shared->proxy_of_entry.at(entry)].load();
              });
        }
      }
      shared_->prefetch(next);
    }
    return grads;
  }

 private:
  std::shared_ptr<ResidenceShared> shared_;
  std::shared_ptr<ActivationShelf> activations_;
  std::vector<EntryRef> entries_;
};

}  // namespace residence

// Once autograd has summed a proxy's gradient: it goes to the parameter at home (summed into the
// gradient there as AccumulateGrad would), the proxy lets go of it, and a streamed proxy is
// emptied until its next use.
class ProxyGradientHook final : public torch::autograd::PostAccumulateGradHook {
 public:
  ProxyGradientHook(std::weak_ptr<ResidenceShared> shared, at::Tensor parameter, c10::Device home,
                    int home_index, size_t proxy, std::optional<StorageShelf::Id> entry)
      : shared_(std::move(shared)),
        parameter_(std::move(parameter)),
        home_(home),
        home_index_(home_index),
        proxy_(proxy),
        entry_(entry) {}

  void operator()(const torch::autograd::Variable& proxy) override {
    at::NoGradGuard no_grad;
    const auto shared = shared_.lock();
    const MemoryTally::Scope at_home(shared ? shared->tally.load() : nullptr, home_index_);
    const at::Tensor grad = proxy.grad();
    Landing landed;
    if (grad.defined()) {
      at::Tensor moved;
      if (grad.is_cuda() && home_.is_cpu() && shared && shared->listened()) {
        // Into the pinned pool on the GPU's copy stream, while the backward goes on; whoever
        // reads it on the host waits for it (the update told of it, or settle() at the
        // backward's end). Only where one is told: a caller of the engine alone reads the
        // gradient once the backward returns, which a synchronous copy guarantees.
        moved = host_pool_empty_like(grad);
        landed =
            copy_aside(grad.device(), [&] { moved.copy_(grad, /*non_blocking=*/true); }, {grad});
      } else {
        moved = copy_to(grad, home_);
      }
      if (shared) shared->gradient_bytes_sent_home += grad.nbytes();
      if (parameter_.grad().defined()) {
        landed.synchronize();
        parameter_.mutable_grad().add_(moved);
      } else {
        parameter_.mutable_grad() = std::move(moved);
      }
      torch::autograd::Variable(proxy).mutable_grad() = at::Tensor();
      if (shared && landed.pending()) {
        const std::lock_guard<std::mutex> lock(shared->copies_mutex);
        shared->gradients_landing.push_back(landed);
      }
    }
    if (shared) {
      shared->backward_done[proxy_] = true;
      if (entry_) shared->evict_proxy(*entry_);
    }
    // The backward reads the parameter no more (every node that used it has run, or its gradient
    // would not be whole): its update may begin, once the gradient has landed.
    if (grad.defined() && shared && home_.is_cpu())
      shared->notify_gradient_home(parameter_, landed);
  }

 private:
  std::weak_ptr<ResidenceShared> shared_;
  at::Tensor parameter_;
  c10::Device home_;
  int home_index_;
  size_t proxy_;
  std::optional<StorageShelf::Id> entry_;
};

ResidencePlan resolve_residence(const OpProgram& program, const OpGraph& graph,
                                const Placement& placement, const std::vector<int>& op_of_node,
                                const std::vector<c10::Device>& devices) {
  ResidencePlan plan;
  plan.devices = devices;
  const Residence& r = placement.residence;
  if (!r.parameters.empty()) {
    if (graph.parameters.size() != program.parameters.size())
      throw std::invalid_argument("the graph lists " + std::to_string(graph.parameters.size()) +
                                  " parameters, the model has " +
                                  std::to_string(program.parameters.size()) +
                                  "; capture the model again");
    std::vector<detail::CopyRequest> copies;
    for (size_t k = 0; k < graph.parameters.size(); ++k) {
      const int reader = placement.proxy_device_of_parameter(graph, k);
      if (reader < 0) continue;
      const int home = placement.home_of_parameter(graph, k);
      Proxy p;
      p.parameter = program.parameters[k];
      p.home = devices.at(static_cast<size_t>(home));
      p.home_index = home;
      p.device_index = reader;
      p.fetch = r.parameters[k].fetch;
      plan.proxies.push_back(std::move(p));
    }
    // The proxies' first values, in one batch: a failed copy (out of memory) throws before
    // anything changed. A streamed proxy starts empty and is filled at its first use.
    at::NoGradGuard no_grad;
    std::vector<size_t> persistent;
    for (size_t i = 0; i < plan.proxies.size(); ++i) {
      const Proxy& p = plan.proxies[i];
      const c10::Device where = devices.at(static_cast<size_t>(p.device_index));
      if (p.fetch == Fetch::kPersist) {
        persistent.push_back(i);
        copies.push_back({p.parameter.detach(), where});
      }
    }
    std::vector<at::Tensor> made = copy_all(copies);
    for (size_t i = 0; i < persistent.size(); ++i) {
      Proxy& p = plan.proxies[persistent[i]];
      // copy_all keeps the bytes apart only across physical devices: a proxy of its own on a
      // logical device of the parameter's host.
      at::Tensor proxy =
          made[i].is_same(p.parameter) || made[i].data_ptr() == p.parameter.data_ptr()
              ? made[i].clone()
              : made[i];
      plan.bytes += static_cast<uint64_t>(proxy.numel()) * proxy.element_size();
      p.proxy = proxy.detach().requires_grad_(p.parameter.requires_grad());
    }
    for (Proxy& p : plan.proxies)
      if (p.fetch == Fetch::kStream)
        p.proxy = at::empty_like(p.parameter, p.parameter.options().device(
                                                  devices.at(static_cast<size_t>(p.device_index))))
                      .requires_grad_(p.parameter.requires_grad());
  }
  if (!r.activations.empty() &&
      std::any_of(r.activations.begin(), r.activations.end(), [](const ActivationResidence& a) {
        return a.policy != ActivationPolicy::kKeep;
      })) {
    // Running an op again must neither change the model's state nor read state the forward has
    // changed since: the buffers a functional export updates (copied in once the forward ends)
    // and those an op writes in place (its schema's `(a!)` arguments: batch norm's statistics,
    // num_batches_tracked). An op that writes an activation in place makes no output of its own,
    // so it has nothing to recompute; the output it changed is kept (recompute_kept).
    std::unordered_set<const c10::TensorImpl*> updated;
    for (const auto& [position, buffer] : program.buffer_updates)
      updated.insert(buffer.unsafeGetTensorImpl());
    std::unordered_map<int, const c10::IValue*> module_slot;
    for (const auto& [slot, value] : program.bound) module_slot.emplace(slot, &value);
    std::vector<std::string> why(graph.ops.size());
    for (size_t i = 0; i < program.nodes.size(); ++i) {
      const OpNode& node = program.nodes[i];
      const int op = op_of_node[i];
      if (op < 0 || !node.handle) continue;
      const auto& arguments = node.handle->schema().arguments();
      for (size_t a = 0; a < arguments.size() && a < node.inputs.size(); ++a) {
        const auto slot = module_slot.find(node.inputs[a].value);
        if (!arguments[a].alias_info() || !arguments[a].alias_info()->isWrite() ||
            slot == module_slot.end())
          continue;
        why[static_cast<size_t>(op)] = "it updates the model's buffers in place";
        std::vector<at::Tensor> written;
        tensors_in(*slot->second, written);
        for (const at::Tensor& t : written) updated.insert(t.unsafeGetTensorImpl());
      }
    }
    for (size_t i = 0; i < program.nodes.size(); ++i) {
      const int op = op_of_node[i];
      if (op < 0 || !why[static_cast<size_t>(op)].empty()) continue;
      for (const at::Tensor& t : program.module_state_read_by(i))
        if (updated.count(t.unsafeGetTensorImpl()))
          why[static_cast<size_t>(op)] = "it reads buffers the forward updates";
    }
    for (size_t op = 0; op < r.activations.size(); ++op)
      if (r.activations[op].policy == ActivationPolicy::kRecompute && !why[op].empty())
        throw std::invalid_argument("op " + std::to_string(op) + " '" + graph.ops[op].name +
                                    "' cannot be recomputed: " + why[op] +
                                    " (running it again would not give the same outputs, or "
                                    "would change them twice); keep or offload its outputs");
    plan.activations = r.activations;
  }
  return plan;
}

namespace {

// An entry's last read in the forward under way: a node index, or one of these.
constexpr size_t kUnread = static_cast<size_t>(-2);  // a proxy not read yet in this pass
constexpr size_t kNever = OpProgram::kKeptToTheEnd;  // not emptied in this pass

}  // namespace

// The bookkeeping of the forward pass under way.
struct ResidenceRuntime::Pass {
  const OpProgram* program = nullptr;
  std::shared_ptr<ActivationShelf> activations = std::make_shared<ActivationShelf>();
  // The last node that reads each entry's storage (through any alias).
  std::vector<size_t> proxy_last_read;
  std::vector<size_t> activation_last_read;
  // Entries by the node after which they may be emptied (stale ones are skipped: a last read
  // only grows).
  std::vector<std::vector<EntryRef>> due;
  // Storages seen so far: an output's storage not among them is the op's own. Each is held by a
  // weak reference, which keeps the StorageImpl object (not its bytes) allocated for the pass: a
  // storage freed in the forward cannot hand its address to a later op's output, which would then
  // pass for one seen before and stay unshelved (as often as the heap reused the address).
  std::unordered_map<const c10::StorageImpl*, c10::weak_intrusive_ptr<c10::StorageImpl>> seen;

  // Notes `t`'s storage as seen; true when it was not before.
  bool see(const at::Tensor& t) {
    const c10::StorageImpl* s = storage_of(t);
    return s && seen.emplace(s, t.storage().getWeakStorageImpl()).second;
  }
  // The op running: entries among its inputs, and where its autograd nodes' numbers start.
  std::vector<EntryRef> reads;
  int device = -1;  // the op's
  uint64_t sequence_start = 0;
  std::shared_ptr<Recompute> recompute;

  size_t& last_read(EntryRef e) {
    return e.activation ? activation_last_read.at(e.id) : proxy_last_read.at(e.id);
  }
  // The entry is read up to node `last` (kNever: to the end of the pass, an output's alias).
  void read_until(EntryRef e, size_t last) {
    size_t& l = last_read(e);
    if (l == kNever) return;
    l = last == kNever ? kNever : (l == kUnread ? last : std::max(l, last));
    if (l != kNever) {
      if (due.size() <= l) due.resize(l + 1);
      due[l].push_back(e);
    }
  }
};

ResidenceRuntime::ResidenceRuntime(ResidencePlan plan)
    : plan_(std::move(plan)), shared_(std::make_shared<ResidenceShared>()) {
  shared_->proxy_entry.resize(plan_.proxies.size());
  shared_->landing.resize(plan_.proxies.size());
  shared_->backward_done = std::make_unique<std::atomic<bool>[]>(plan_.proxies.size());
  for (size_t i = 0; i < plan_.proxies.size(); ++i) shared_->backward_done[i] = false;
  shared_->prefetch_window = plan_.prefetch_bytes;
  for (size_t i = 0; i < plan_.proxies.size(); ++i) {
    Proxy& p = plan_.proxies[i];
    proxy_of_.emplace(p.parameter.unsafeGetTensorImpl(), i);
    if (p.fetch == Fetch::kStream) {
      at::Tensor parameter = p.parameter;
      at::Tensor proxy = p.proxy;
      ResidenceShared* shared = shared_.get();  // owns the shelf the fill is kept on
      const int device = p.device_index;
      shared_->proxy_entry[i] = shared_->proxies.add(
          p.proxy.storage(),
          [parameter, proxy, shared, device, i](c10::StorageImpl& storage, size_t nbytes) {
            const MemoryTally::Scope on_device(shared->tally.load(), device);
            allocate(storage, nbytes);  // from the reading stream's memory
            at::NoGradGuard no_grad;
            // variable_data(): the proxy's bytes under a version counter of their own, so the
            // fill is no in-place change autograd would refuse.
            shared->copy_into(i, proxy.variable_data(), parameter);
            shared->parameter_bytes_fetched += proxy.nbytes();
          });
      if (const auto entry = shared_->proxy_entry[i]) {
        shared_->proxies.evict(*entry);
        shared_->proxy_of_entry.resize(std::max(shared_->proxy_of_entry.size(), *entry + 1));
        shared_->entry_bytes.resize(shared_->proxy_of_entry.size());
        shared_->device_of_entry.resize(shared_->proxy_of_entry.size(), -1);
        shared_->proxy_of_entry[*entry] = i;
        shared_->entry_bytes[*entry] = p.parameter.nbytes();
        shared_->device_of_entry[*entry] = p.device_index;
      }
    }
    if (p.proxy.requires_grad())
      torch::autograd::impl::set_post_acc_grad_hooks(
          p.proxy, std::make_unique<ProxyGradientHook>(shared_, p.parameter, p.home, p.home_index,
                                                       i, shared_->proxy_entry[i]));
  }
}

void ResidenceRuntime::set_tally(MemoryTally* tally) { shared_->tally = tally; }

void ResidenceRuntime::on_gradient_home(
    std::function<void(const at::Tensor&, const std::function<void()>&)> tell) {
  const std::lock_guard<std::mutex> lock(shared_->gradient_home_mutex);
  shared_->gradient_home = std::move(tell);
}

bool ResidenceRuntime::sends_gradients_to_host() const {
  return std::any_of(plan_.proxies.begin(), plan_.proxies.end(),
                     [](const Proxy& p) { return p.home.is_cpu() && p.proxy.requires_grad(); });
}

ResidenceRuntime::~ResidenceRuntime() {
  // Nothing of the plan's is freed while a copy into or out of it is in flight.
  try {
    settle();
  } catch (...) {
    // A failed copy fails its step (settle() there); the runtime goes regardless.
  }
  shared_->tally = nullptr;
  for (Proxy& p : plan_.proxies)
    if (p.proxy.requires_grad()) torch::autograd::impl::set_post_acc_grad_hooks(p.proxy, nullptr);
}

const Proxy* ResidenceRuntime::proxy_for(const at::Tensor& parameter, int device) const {
  const auto it = proxy_of_.find(parameter.unsafeGetTensorImpl());
  if (it == proxy_of_.end()) return nullptr;
  const Proxy& p = plan_.proxies[it->second];
  return p.device_index == device ? &p : nullptr;
}

void ResidenceRuntime::begin_forward(const OpProgram& program) {
  pass_ = std::make_unique<Pass>();
  pass_->program = &program;
  pass_->proxy_last_read.assign(shared_->proxies.size(), kUnread);
  pass_->due.resize(program.nodes.size());
  for (size_t i = 0; i < plan_.proxies.size(); ++i) shared_->backward_done[i] = false;
  {
    const std::lock_guard<std::mutex> lock(shared_->order_mutex);
    shared_->order.begin_pass();
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < plan_.proxies.size(); ++i) {
    Proxy& p = plan_.proxies[i];
    if (p.fetch == Fetch::kPersist) {
      // What the optimizer made of it at home, on the copy stream (after the last backward's
      // reads of the old value) and waited for where an op first reads it.
      shared_->await(i);
      shared_->copy_into(i, p.proxy.variable_data(), p.parameter);
      shared_->parameter_bytes_fetched += p.proxy.nbytes();
    } else if (shared_->proxy_entry[i]) {
      shared_->evict_proxy(*shared_->proxy_entry[i]);  // filled afresh at its first use
    }
    pass_->see(p.proxy);
  }
  for (const auto& [slot, value] : program.bound) {
    std::vector<at::Tensor> tensors;
    tensors_in(value, tensors);
    for (const at::Tensor& t : tensors) pass_->see(t);
  }
}

void ResidenceRuntime::evict_due(size_t node) {
  Pass& pass = *pass_;
  if (node >= pass.due.size()) return;
  for (const EntryRef& e : pass.due[node]) {
    size_t& last = pass.last_read(e);
    if (last != node) continue;  // read later after all, or done
    last = kNever;
    if (!e.activation) {
      shared_->evict_proxy(e.id);
      continue;
    }
    const size_t freed = pass.activations->shelf.evict(e.id);
    if (freed > 0) {
      ++shared_->activations_evicted;
      shared_->activation_bytes_evicted += freed;
    }
  }
  pass.due[node].clear();
}

void ResidenceRuntime::prepare(size_t index, int op, int device,
                               const std::vector<c10::IValue>& stack) {
  Pass& pass = *pass_;
  // What the forward read for the last time at the node before: its slots are let go of by now,
  // so a storage still alive is one autograd saved.
  if (index > 0) evict_due(index - 1);
  pass.reads.clear();
  pass.recompute.reset();
  pass.device = device;
  // What the node reads is filled before anything reads it (the engine's copies to the op's
  // device included): a streamed proxy at its fetch, an activation emptied too early never.
  const auto read = [&](EntryRef e) {
    if (e.activation) {
      pass.activations->shelf.ensure(e.id);
    } else {
      shared_->fill_for_reader(e.id);
      if (pass.last_read(e) == kUnread) {
        const std::lock_guard<std::mutex> lock(shared_->order_mutex);
        shared_->order.first_read(e.id, index, shared_->entry_bytes.at(e.id));
      }
    }
    add_unique(pass.reads, e);
    pass.read_until(e, index);
  };
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& v : stack) tensors_in(v, tensors);
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (op >= 0)
      if (const Proxy* p = proxy_for(t, device)) {
        if (const auto pid = shared_->proxies.find(storage_of(p->proxy)))
          read({false, *pid});
        else
          shared_->await(static_cast<size_t>(p - plan_.proxies.data()));  // a persistent one
        continue;
      }
    const c10::StorageImpl* s = storage_of(t);
    if (!s) continue;
    if (const auto id = pass.activations->shelf.find(s))
      read({true, *id});
    else if (const auto pid = shared_->proxies.find(s))
      read({false, *pid});
  }
  // What the next nodes read, copied in while this one computes.
  std::vector<size_t> ahead;
  {
    const std::lock_guard<std::mutex> lock(shared_->order_mutex);
    if (shared_->prefetch_window > 0) {
      ResidenceShared* shared = shared_.get();
      ahead = shared->order.ahead_of(index, shared->prefetch_window, [shared](size_t entry) {
        return !shared->proxies.evicted(entry);
      });
    }
  }
  shared_->prefetch(ahead);
}

void ResidenceRuntime::before(size_t index, int op, int device,
                              const std::vector<c10::IValue>& stack) {
  Pass& pass = *pass_;
  for (const at::Tensor& t : tensors_of(stack)) pass.see(t);
  if (op >= 0 && static_cast<size_t>(op) < plan_.activations.size() &&
      plan_.activations[static_cast<size_t>(op)].policy == ActivationPolicy::kRecompute) {
    auto r = std::make_shared<Recompute>();
    r->node = std::make_shared<const OpNode>(pass.program->nodes[index]);
    // As the op is called (moved to its device, proxies in place), without their autograd
    // history: it runs again without grad, and the history would hold the graph whose hooks
    // hold this record.
    r->inputs.reserve(stack.size());
    for (const c10::IValue& v : stack)
      r->inputs.push_back(map_tensors(v, [](const at::Tensor& t) { return t.detach(); }));
    r->rng = capture_rng(plan_.devices.at(static_cast<size_t>(device)));
    r->reads = pass.reads;
    pass.recompute = std::move(r);
  }
  pass.sequence_start = at::sequence_number::peek();
}

std::optional<StorageShelf::Id> ResidenceRuntime::shelve(const at::Tensor& output,
                                                         ActivationResidence policy, int device,
                                                         size_t position) {
  Pass& pass = *pass_;
  const c10::Storage storage = output.storage();
  const std::shared_ptr<ResidenceShared> shared = shared_;
  if (policy.policy == ActivationPolicy::kOffload) {
    auto copy = std::make_shared<at::Tensor>();
    const c10::Device to = plan_.devices.at(static_cast<size_t>(policy.device));
    const int offload_device = policy.device;
    return pass.activations->shelf.add(
        storage,
        [copy, shared, device](c10::StorageImpl& impl, size_t nbytes) {
          const MemoryTally::Scope on_device(shared->tally.load(), device);
          allocate(impl, nbytes);
          at::NoGradGuard no_grad;
          storage_bytes(impl).copy_(*copy);
          *copy = at::Tensor();
        },
        [copy, to, shared, offload_device](c10::StorageImpl& impl) {
          const MemoryTally::Scope on_device(shared->tally.load(), offload_device);
          *copy = copy_to(storage_bytes(impl), to);
          return true;
        });
  }
  if (!pass.recompute) return std::nullopt;
  // Running the op again gives the output back only if nothing changed it in place since.
  const c10::VariableVersion version = torch::autograd::impl::version_counter(output);
  const uint32_t made_at = version.current_version();
  const std::shared_ptr<Recompute> r = pass.recompute;
  const std::weak_ptr<ActivationShelf> owner = pass.activations;
  const std::optional<StorageShelf::Id> id = pass.activations->shelf.add(
      storage,
      [r, owner, shared, device](c10::StorageImpl&, size_t) {
        const auto activations = owner.lock();
        if (!activations) throw std::logic_error("a recompute outlived its forward pass");
        const MemoryTally::Scope on_device(shared->tally.load(), device);
        // Its inputs first: activations emptied in turn, parameters streamed away since.
        for (const EntryRef& e : r->reads) {
          if (e.activation)
            activations->shelf.ensure(e.id);
          else
            shared->fill_for_reader(e.id);
        }
        std::vector<c10::IValue> stack = r->inputs;
        {
          at::NoGradGuard no_grad;
          if (!r->rng) {
            call(*r->node, stack);
          } else {
            const RngState now = capture_rng(r->rng->cuda_device.value_or(c10::Device(c10::kCPU)));
            restore_rng(*r->rng);
            try {
              call(*r->node, stack);
            } catch (...) {
              restore_rng(now);
              throw;
            }
            restore_rng(now);
          }
        }
        const std::vector<at::Tensor> made = tensors_of(stack);
        for (const auto& [at_position, entry] : r->outputs) {
          const at::Tensor& fresh = made.at(at_position);
          activations->shelf.give(entry, [&fresh](c10::StorageImpl& impl, size_t nbytes) {
            c10::StorageImpl& from = *fresh.storage().unsafeGetStorageImpl();
            if (from.nbytes() != nbytes)
              throw std::runtime_error("recomputing an op gave an output of " +
                                       std::to_string(from.nbytes()) +
                                       " bytes where the forward made " + std::to_string(nbytes));
            impl.set_data_ptr_noswap(from.set_data_ptr(c10::DataPtr(nullptr, from.device())));
            impl.set_nbytes(nbytes);
          });
        }
        // Every output it made is back: its inputs are no longer this record's to hold, and
        // autograd frees each once the backward is done with it.
        r->inputs.clear();
        r->rng.reset();
      },
      [version, made_at, shared](c10::StorageImpl&) {
        if (version.current_version() == made_at) return true;
        ++shared->recompute_kept;
        return false;
      });
  if (id) r->outputs.emplace_back(position, *id);
  return id;
}

void ResidenceRuntime::after(size_t index, int op, const std::vector<c10::IValue>& outputs) {
  Pass& pass = *pass_;
  const OpNode& node = pass.program->nodes[index];
  const ActivationResidence policy = op >= 0 && static_cast<size_t>(op) < plan_.activations.size()
                                         ? plan_.activations[static_cast<size_t>(op)]
                                         : ActivationResidence{};
  std::vector<EntryRef> touched = pass.reads;
  size_t position = 0;  // among the op's output tensors
  for (size_t k = 0; k < outputs.size() && k < node.outputs.size(); ++k) {
    const size_t last = pass.program->last_read(node.outputs[k]);
    std::vector<at::Tensor> tensors;
    tensors_in(outputs[k], tensors);
    for (const at::Tensor& t : tensors) {
      const size_t at_position = position++;
      const c10::StorageImpl* s = storage_of(t);
      if (!s) continue;
      // A storage read before (an alias of an input or of an earlier output): its entry, if it
      // has one, is read until this slot's last reader too.
      std::optional<EntryRef> known;
      if (const auto id = pass.activations->shelf.find(s))
        known = EntryRef{true, *id};
      else if (const auto pid = shared_->proxies.find(s))
        known = EntryRef{false, *pid};
      if (known) {
        pass.read_until(*known, last);
        add_unique(touched, *known);
        continue;
      }
      if (!pass.see(t)) continue;
      // The op's own output: offloaded or recomputed unless the program keeps it to the end.
      if (policy.policy == ActivationPolicy::kKeep || last == kNever) continue;
      const std::optional<StorageShelf::Id> id = shelve(t, policy, pass.device, at_position);
      if (!id) continue;
      if (pass.activation_last_read.size() <= *id)
        pass.activation_last_read.resize(*id + 1, kUnread);
      pass.read_until({true, *id}, last);
      add_unique(touched, {true, *id});
    }
  }
  if (pass.recompute) {
    const RngState now = capture_rng(plan_.devices.at(static_cast<size_t>(pass.device)));
    if (now.same_as(*pass.recompute->rng)) pass.recompute->rng.reset();  // it drew nothing
    pass.activations->recomputes.push_back(pass.recompute);
  }
  pass.recompute.reset();
  if (op < 0 || touched.empty()) return;
  // The op's autograd nodes: those reachable from its outputs whose sequence numbers it handed
  // out. Each fills what the op read or made before it runs.
  const uint64_t sequence_end = at::sequence_number::peek();
  std::unordered_set<torch::autograd::Node*> hooked;
  std::vector<torch::autograd::Node*> work;
  for (const at::Tensor& t : tensors_of(outputs))
    if (t.defined() && t.grad_fn()) work.push_back(t.grad_fn().get());
  while (!work.empty()) {
    torch::autograd::Node* n = work.back();
    work.pop_back();
    if (!n || n->sequence_nr() < pass.sequence_start || n->sequence_nr() >= sequence_end) continue;
    if (!hooked.insert(n).second) continue;
    n->add_pre_hook(std::make_unique<EnsureFilled>(shared_, pass.activations, touched));
    for (const auto& edge : n->next_edges()) work.push_back(edge.function.get());
  }
}

void ResidenceRuntime::end_forward() {
  if (!pass_) return;
  for (size_t node = 0; node < pass_->due.size(); ++node) evict_due(node);
  pass_.reset();
  const std::lock_guard<std::mutex> lock(shared_->order_mutex);
  shared_->order.end_pass();
}

void ResidenceRuntime::settle() {
  std::vector<Landing> pending;
  {
    const std::lock_guard<std::mutex> lock(shared_->copies_mutex);
    pending.swap(shared_->gradients_landing);
    for (Landing& l : shared_->landing)
      if (l.pending()) pending.push_back(std::exchange(l, Landing()));
  }
  for (Landing& l : pending) l.synchronize();
}

void ResidenceRuntime::set_prefetch_window(uint64_t bytes) {
  plan_.prefetch_bytes = bytes;
  shared_->prefetch_window = bytes;
}

void ResidenceRuntime::discard_gradients() {
  for (Proxy& p : plan_.proxies)
    if (p.proxy.grad().defined()) p.proxy.mutable_grad() = at::Tensor();
}

ResidenceStats ResidenceRuntime::stats() const {
  ResidenceStats s;
  s.parameter_fetches = shared_->parameter_fetches;
  s.parameter_bytes_fetched = shared_->parameter_bytes_fetched;
  s.gradient_bytes_sent_home = shared_->gradient_bytes_sent_home;
  s.activations_evicted = shared_->activations_evicted;
  s.activation_bytes_evicted = shared_->activation_bytes_evicted;
  s.recompute_kept = shared_->recompute_kept;
  s.parameter_prefetches = shared_->parameter_prefetches;
  return s;
}

}  // namespace placement::detail
