#include "memory_tally.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>
#include <c10/core/Storage.h>
#include <c10/util/Exception.h>

namespace placement::detail {

struct TallyState : std::enable_shared_from_this<TallyState> {
  TallyState(std::vector<std::string> n, std::vector<uint64_t> l)
      : names(std::move(n)),
        limits(std::move(l)),
        live(new std::atomic<uint64_t>[names.size()]),
        peak(new std::atomic<uint64_t>[names.size()]) {
    limits.resize(names.size(), 0);
    for (size_t d = 0; d < names.size(); ++d) {
      live[d] = 0;
      peak[d] = 0;
    }
  }

  void add(int device, uint64_t bytes) {
    const uint64_t now = live[device].fetch_add(bytes) + bytes;
    uint64_t seen = peak[device].load();
    while (now > seen && !peak[device].compare_exchange_weak(seen, now)) {
    }
  }
  void remove(int device, uint64_t bytes) { live[device].fetch_sub(bytes); }
  bool valid(int device) const { return device >= 0 && static_cast<size_t>(device) < names.size(); }

  std::vector<std::string> names;
  std::vector<uint64_t> limits;
  std::unique_ptr<std::atomic<uint64_t>[]> live;
  std::unique_ptr<std::atomic<uint64_t>[]> peak;
  std::atomic<bool> enforcing{false};
};

namespace {

// Shared, so that a tally destroyed while a thread still has it current is not freed under it.
thread_local std::shared_ptr<TallyState> current_state;
thread_local int current_device = -1;

// An allocation a tally counts: whose, and how to give it back to the allocator that made it.
struct Record {
  std::shared_ptr<TallyState> state;
  int device = -1;
  uint64_t bytes = 0;
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<void*, Record>& registry() {
  static auto* r = new std::unordered_map<void*, Record>();  // outlives every static's destructor
  return *r;
}

c10::DeleterFnPtr base_deleter = nullptr;

void counted_delete(void* ptr) {
  Record record;
  bool counted = false;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto& r = registry();
    if (const auto it = r.find(ptr); it != r.end()) {
      record = std::move(it->second);
      r.erase(it);
      counted = true;
    }
  }
  if (counted) record.state->remove(record.device, record.bytes);
  base_deleter(ptr);
}

// The host allocator with the tallies' counting around it. Every allocation carries its deleter
// (so the raw interface stays whole); only those made while a tally is current are recorded.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) override {
    TallyState* state = current_state.get();
    const int device = current_device;
    const bool counting = state && state->valid(device) && n > 0;
    if (counting && state->enforcing.load()) {
      const uint64_t limit = state->limits[device];
      const uint64_t held = state->live[device].load();
      if (limit > 0 && held + n > limit)
        TORCH_CHECK_WITH(OutOfMemoryError, false, "out of memory on ", state->names[device],
                         " (its memory limit): ", n, " bytes more would bring what it holds to ",
                         held + n, " bytes, limit ", limit);
    }
    c10::DataPtr inner = base_->allocate(n);
    if (inner.get_deleter() != base_deleter || inner.get_context() != inner.get()) return inner;
    const c10::Device where = inner.device();
    void* ptr = inner.release_context();
    if (counting) {
      {
        std::lock_guard<std::mutex> lock(registry_mutex());
        registry()[ptr] = Record{state->shared_from_this(), device, n};
      }
      state->add(device, n);
    }
    return {ptr, ptr, &counted_delete, where};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* base_;
};

// Installs the counting allocator once; null where the host allocator cannot be wrapped (it has
// no raw deleter to free through) or the slot stays another's.
CountingAllocator* counting_allocator() {
  static CountingAllocator* installed = []() -> CountingAllocator* {
    c10::Allocator* base = c10::GetCPUAllocator();
    if (!base || !base->raw_deleter()) return nullptr;
    base_deleter = base->raw_deleter();
    auto* counting = new CountingAllocator(base);  // lives as long as the process's tensors
    c10::SetCPUAllocator(counting, /*priority=*/1);
    return c10::GetCPUAllocator() == counting ? counting : nullptr;
  }();
  return installed;
}

}  // namespace

MemoryTally::MemoryTally(std::vector<std::string> names, std::vector<uint64_t> limits)
    : state_(std::make_shared<TallyState>(std::move(names), std::move(limits))) {
  counting_allocator();
}

MemoryTally::~MemoryTally() {
  if (current_state == state_) {
    current_state.reset();
    current_device = -1;
  }
}

bool MemoryTally::available() { return counting_allocator() != nullptr; }

MemoryTally::Scope::Scope(MemoryTally* tally, int device)
    : previous_state_(current_state), previous_device_(current_device) {
  current_state = tally ? tally->state_ : nullptr;
  current_device = tally ? device : -1;
}

MemoryTally::Scope::~Scope() {
  current_state = std::move(previous_state_);
  current_device = previous_device_;
}

void MemoryTally::make_current(int device) {
  current_state = state_;
  current_device = device;
}

bool MemoryTally::adopt(const at::Tensor& tensor, int device) {
  if (!tensor.defined() || !tensor.has_storage() || !state_->valid(device) || !counting_allocator())
    return false;
  c10::StorageImpl& storage = *tensor.storage().unsafeGetStorageImpl();
  c10::DataPtr& data = storage._mutable_data_ptr_no_checks();
  void* ptr = data.get();
  if (!ptr) return true;  // nothing held
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry();
  if (data.get_deleter() != &counted_delete) {
    // Memory from before the counting allocator: it frees through us from now on.
    if (data.get_context() != ptr || !data.compare_exchange_deleter(base_deleter, &counted_delete))
      return false;
  }
  const auto it = r.find(ptr);
  if (it == r.end()) {
    const uint64_t bytes = storage.nbytes();
    r[ptr] = Record{state_, device, bytes};
    state_->add(device, bytes);
    return true;
  }
  Record& record = it->second;
  if (record.state == state_ && record.device == device) return true;
  record.state->remove(record.device, record.bytes);
  record.state = state_;
  record.device = device;
  state_->add(device, record.bytes);
  return true;
}

void MemoryTally::set_enforcing(bool on) { state_->enforcing = on; }

uint64_t MemoryTally::live(int device) const { return state_->live[device].load(); }

uint64_t MemoryTally::peak(int device) const { return state_->peak[device].load(); }

void MemoryTally::reset_peaks() {
  for (size_t d = 0; d < state_->names.size(); ++d) state_->peak[d] = state_->live[d].load();
}

size_t MemoryTally::size() const { return state_->names.size(); }

}  // namespace placement::detail
