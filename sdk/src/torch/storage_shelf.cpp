#include "storage_shelf.h"

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

namespace placement::detail {

at::Tensor storage_bytes(c10::StorageImpl& storage) {
  const int64_t n = static_cast<int64_t>(storage.nbytes());
  at::Tensor bytes = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(storage.device()));
  bytes.set_(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(&storage)), 0, {n},
             {1});
  return bytes;
}

void allocate(c10::StorageImpl& storage, size_t nbytes) {
  // A GPU's allocator takes the current device: the storage's, whichever thread fills it.
  const c10::DeviceGuard on_its_device(storage.device());
  storage.set_data_ptr_noswap(storage.allocator()->allocate(nbytes));
  storage.set_nbytes(nbytes);
}

std::optional<StorageShelf::Id> StorageShelf::add(const c10::Storage& storage, Fill fill,
                                                  Keep keep) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  if (!impl || !impl->allocator()) return std::nullopt;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (const auto it = index_.find(impl); it != index_.end()) return it->second;
  const Id id = entries_.size();
  // A weak reference keeps the StorageImpl object (not its bytes) allocated, so its address, the
  // key, is not reused while the entry exists.
  entries_.push_back({storage.getWeakStorageImpl(), impl, impl->nbytes(), std::move(fill),
                      std::move(keep), false});
  index_.emplace(impl, id);
  return id;
}

size_t StorageShelf::evict(Id id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Entry& e = entries_.at(id);
  if (e.evicted) return 0;
  const c10::intrusive_ptr<c10::StorageImpl> impl = e.storage.lock();
  if (!impl || impl->nbytes() == 0) return 0;
  if (e.keep && !e.keep(*impl)) return 0;
  e.nbytes = impl->nbytes();
  impl->set_data_ptr_noswap(c10::DataPtr(nullptr, impl->device()));
  impl->set_nbytes(0);
  e.evicted = true;
  bytes_evicted_ += e.nbytes;
  return e.nbytes;
}

void StorageShelf::ensure(Id id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (!entries_.at(id).evicted) return;
  const Fill fill = entries_[id].fill;  // a copy: filling may add to or fill other entries
  give(id, fill);
}

void StorageShelf::give(Id id, const Fill& fill) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (!entries_.at(id).evicted) return;
  const c10::intrusive_ptr<c10::StorageImpl> impl = entries_[id].storage.lock();
  if (!impl) {  // nothing holds it any more: nothing to give back
    entries_[id].evicted = false;
    return;
  }
  try {
    fill(*impl, entries_[id].nbytes);
  } catch (...) {
    impl->set_data_ptr_noswap(c10::DataPtr(nullptr, impl->device()));
    impl->set_nbytes(0);
    throw;
  }
  entries_[id].evicted = false;
}

bool StorageShelf::evicted(Id id) const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return entries_.at(id).evicted;
}

std::optional<StorageShelf::Id> StorageShelf::find(const c10::StorageImpl* storage) const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  const auto it = index_.find(storage);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

size_t StorageShelf::size() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return entries_.size();
}

size_t StorageShelf::bytes_evicted() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return bytes_evicted_;
}

}  // namespace placement::detail
