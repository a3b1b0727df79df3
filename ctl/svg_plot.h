#pragma once
// Learning-curve plots as standalone SVG files (placementctl optimize --plot).

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

/// For the plots' SVG text: `text` with XML's special characters escaped, a coordinate ("12.5"),
/// a step time ("1.23 ms").
std::string svg_escape(const std::string& text);
std::string svg_number(double v);
std::string svg_ms(double seconds);

}  // namespace placementctl
