#pragma once
// What each logical CPU device holds, counted where memory is allocated: every allocation made on
// a thread while one of the tally's devices is current is that device's until it is freed,
// wherever that happens (a backward node's temporaries, autograd's saved tensors, gradients). GPUs
// have their caching allocator's statistics; logical devices share one host, and this is what lets
// a job emulate a GPU's capacity there and the memory model be scored against a measured peak.
//
// It works through a CPU allocator of its own, installed once per process (c10::SetCPUAllocator)
// over the one it finds: allocations pass through to that allocator, and only those made while a
// tally is current on the thread are recorded. Private to libplacement_torch.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace placement::detail {

struct TallyState;

class MemoryTally {
 public:
  /// `names[d]` names logical device d in errors; `limits[d]` is its capacity (0: none).
  MemoryTally(std::vector<std::string> names, std::vector<uint64_t> limits);
  ~MemoryTally();
  MemoryTally(const MemoryTally&) = delete;
  MemoryTally& operator=(const MemoryTally&) = delete;

  /// Whether this process's CPU allocator could be wrapped (another allocator of higher priority
  /// may hold the slot): without it nothing is counted.
  static bool available();

  /// Allocations on this thread are device `device`'s while it lives (-1: nobody's). Scopes nest.
  class Scope {
   public:
    Scope(MemoryTally* tally, int device);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::shared_ptr<TallyState> previous_state_;
    int previous_device_;
  };

  /// Makes `device` current on this thread from now on, for a backward node (autograd's threads
  /// run node after node; each sets its own device first). A Scope around the backward puts back
  /// what was current before it.
  void make_current(int device);

  /// Counts `tensor`'s storage as device `device`'s: memory allocated before the tally (the
  /// model's weights), or counted for another device (a gradient autograd made where its op ran,
  /// which lives with its parameter). False when its memory is not the host allocator's (a
  /// mapped file, another library's).
  bool adopt(const at::Tensor& tensor, int device);

  /// While enforcing, an allocation that would take a device past its limit throws
  /// c10::OutOfMemoryError naming the device, as a GPU's allocator would.
  void set_enforcing(bool on);

  uint64_t live(int device) const;
  uint64_t peak(int device) const;
  /// Peaks start again from what each device holds now.
  void reset_peaks();
  size_t size() const;

 private:
  std::shared_ptr<TallyState> state_;
};

}  // namespace placement::detail
