#pragma once
// Learning-curve plots as standalone SVG files (placementctl optimize --plot, jobs show --plot).

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace placementctl {

struct CurvePlot {
  std::string title;
  std::string x_label = "candidate";
  /// Step time of every candidate (nullopt: invalid/failed, drawn as a mark on the top edge).
  std::vector<std::optional<double>> samples;
  /// Best step time so far after every candidate.
  std::vector<std::optional<double>> best;
  /// Horizontal reference lines, e.g. baselines and the lower bound: (label, seconds).
  std::vector<std::pair<std::string, double>> references;
};

/// Writes the plot atomically; throws std::runtime_error naming the file if it cannot.
void write_curve_svg(const std::string& path, const CurvePlot& plot);

}  // namespace placementctl
