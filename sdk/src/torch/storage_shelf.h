#pragma once
// Emptying a tensor's storage between its uses and filling it again before the next one: how the
// engine streams a parameter that lives away from its readers and offloads or recomputes a saved
// activation, with LibTorch alone (its saved-tensor hooks fire only under Python). What autograd
// saved shares the StorageImpl, so the backward finds the same bytes where it left them: no
// version counter moves and the autograd graph stays eager's.

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>
#include <c10/util/intrusive_ptr.h>

namespace placement::detail {

/// Storages the engine may empty and fill again. Each is held weakly: once nothing else holds it
/// (autograd released what it saved), its bytes are gone and its entry stays idle. Thread-safe:
/// backward hooks on a GPU's autograd thread call ensure(). The hooks hold the shelf of their
/// forward pass, so a pass's entries live as long as its autograd graph.
class StorageShelf {
 public:
  using Id = size_t;
  /// Gives a storage that was emptied its bytes back as they were, `nbytes` of them: allocated
  /// again and copied (allocate()), or a recomputed output's memory moved in.
  using Fill = std::function<void(c10::StorageImpl& storage, size_t nbytes)>;
  /// Runs just before a storage is emptied and keeps what Fill needs (an offload's copy). False:
  /// it cannot be given back as it is, and stays filled.
  using Keep = std::function<bool(c10::StorageImpl& storage)>;

  /// Registers a storage, unless it is registered already (then its entry). One without an
  /// allocator (memory from outside LibTorch) cannot be filled again: nullopt.
  std::optional<Id> add(const c10::Storage& storage, Fill fill, Keep keep = {});
  /// Empties the storage if it is alive and filled; returns the bytes freed.
  size_t evict(Id id);
  /// Fills it again if it was emptied.
  void ensure(Id id);
  /// Fills an emptied entry with `fill` instead of its own (a recompute that made several of an
  /// op's outputs at once).
  void give(Id id, const Fill& fill);
  bool evicted(Id id) const;
  /// The entry of a live registered storage.
  std::optional<Id> find(const c10::StorageImpl* storage) const;
  size_t size() const;
  /// Bytes emptied so far (an offload's or a recompute's evictions), for tests and statistics.
  size_t bytes_evicted() const;

 private:
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    const c10::StorageImpl* key = nullptr;
    size_t nbytes = 0;
    Fill fill;
    Keep keep;
    bool evicted = false;
  };
  // Recursive: filling a recomputed activation ensures the activations its op reads first.
  mutable std::recursive_mutex mutex_;
  std::vector<Entry> entries_{};
  std::unordered_map<const c10::StorageImpl*, Id> index_{};
  size_t bytes_evicted_ = 0;
};

/// The bytes of a whole storage, as a flat uint8 tensor over it (no copy, no autograd, a version
/// counter of its own).
at::Tensor storage_bytes(c10::StorageImpl& storage);

/// Gives an emptied storage `nbytes` of fresh memory from its own allocator.
void allocate(c10::StorageImpl& storage, size_t nbytes);

}  // namespace placement::detail
