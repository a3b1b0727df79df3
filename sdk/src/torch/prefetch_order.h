#pragma once
// Which streamed parameters to copy in ahead of their use. A model's forward reads its parameters
// in the same order every step and its backward in about the reverse: the order the last forward
// first read them in says what comes next. Each fill ahead holds its bytes on the readers' device
// until the parameter's use, so the fills ahead are bounded by a window of bytes (what a plan's
// memory on that device must leave room for). Pure bookkeeping, no tensors; the residence runtime
// (residence_runtime.cpp) fills what it names.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace placement::detail {

class PrefetchOrder {
 public:
  /// A pass begins: what a pass that did not end (one that failed part way) read is dropped.
  void begin_pass() { reading_.clear(); }
  /// A pass under way read `entry` (`bytes` when filled) for the first time at node `node`;
  /// nodes come in increasing order, an entry once per pass.
  void first_read(size_t entry, size_t node, uint64_t bytes);
  /// The pass ended: the order it read in is the one the next passes prefetch by.
  void end_pass();
  /// Forward, once node `node` has what it reads: the entries the last pass read first after
  /// `node`, in that order, that are not `filled` yet, as long as all of them from the first
  /// (filled ones too: they hold their bytes already) fit in `window` bytes. The next one is
  /// named even when it alone is larger.
  std::vector<size_t> ahead_of(size_t node, uint64_t window,
                               const std::function<bool(size_t)>& filled) const;
  /// Backward, once `entry` is filled for the node that reads it: the entries the last forward
  /// read before it, nearest first, that are not `filled`, within `window` as above; `done`
  /// entries (the backward has no more use for them) are passed over and count nothing.
  std::vector<size_t> behind(size_t entry, uint64_t window,
                             const std::function<bool(size_t)>& filled,
                             const std::function<bool(size_t)>& done) const;
  /// Entries in the order the next pass prefetches by.
  size_t size() const { return order_.size(); }

 private:
  struct Read {
    size_t entry;
    size_t node;
    uint64_t bytes;
  };
  std::vector<Read> order_;                      // the last complete pass's
  std::vector<Read> reading_;                    // the pass under way
  std::unordered_map<size_t, size_t> position_;  // entry → index in order_
};

}  // namespace placement::detail
