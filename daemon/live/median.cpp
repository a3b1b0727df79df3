#include "live/median.h"

#include <algorithm>

namespace placementd {

std::optional<double> median_of(std::vector<double> kept) {
  if (kept.empty()) return std::nullopt;
  const size_t mid = kept.size() / 2;
  std::nth_element(kept.begin(), kept.begin() + mid, kept.end());
  if (kept.size() % 2 == 1) return kept[mid];
  const double upper = kept[mid];
  std::nth_element(kept.begin(), kept.begin() + mid - 1, kept.end());
  return (kept[mid - 1] + upper) / 2.0;
}

}  // namespace placementd
