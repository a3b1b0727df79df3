#pragma once

#include <optional>
#include <vector>

namespace placementd {

/// The median of `values`; nullopt when there are none.
std::optional<double> median_of(std::vector<double> values);

}  // namespace placementd
