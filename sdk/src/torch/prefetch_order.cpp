#include "prefetch_order.h"

#include <algorithm>

namespace placement::detail {

void PrefetchOrder::first_read(size_t entry, size_t node, uint64_t bytes) {
  reading_.push_back({entry, node, bytes});
}

void PrefetchOrder::end_pass() {
  // A pass that read nothing (one that failed before its first op) leaves the last order.
  if (reading_.empty()) return;
  order_.swap(reading_);
  reading_.clear();
  position_.clear();
  for (size_t i = 0; i < order_.size(); ++i) position_[order_[i].entry] = i;
}

std::vector<size_t> PrefetchOrder::ahead_of(size_t node, uint64_t window,
                                            const std::function<bool(size_t)>& filled) const {
  std::vector<size_t> out;
  auto next = std::upper_bound(order_.begin(), order_.end(), node,
                               [](size_t n, const Read& r) { return n < r.node; });
  uint64_t held = 0;
  for (bool first = true; next != order_.end(); ++next, first = false) {
    held += next->bytes;
    if (held > window && !first) break;
    if (!filled(next->entry)) out.push_back(next->entry);
  }
  return out;
}

std::vector<size_t> PrefetchOrder::behind(size_t entry, uint64_t window,
                                          const std::function<bool(size_t)>& filled,
                                          const std::function<bool(size_t)>& done) const {
  std::vector<size_t> out;
  const auto at = position_.find(entry);
  if (at == position_.end()) return out;
  uint64_t held = 0;
  bool first = true;
  for (size_t i = at->second; i-- > 0;) {
    const Read& r = order_[i];
    if (done(r.entry)) continue;
    held += r.bytes;
    if (held > window && !first) break;
    first = false;
    if (!filled(r.entry)) out.push_back(r.entry);
  }
  return out;
}

}  // namespace placement::detail
