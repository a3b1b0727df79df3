#include "table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace placementctl {

namespace {

bool numeric(const std::string& cell) {
  return !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) || cell[0] == '-') &&
         cell.find_first_not_of("0123456789.-+e %msµx") == std::string::npos && cell != "-";
}

}  // namespace

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(header_.size(), 0);
  for (size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  // A "-" (no value) sits where the numbers of its column end.
  std::vector<bool> numbers(header_.size(), false);
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
      if (numeric(row[c])) numbers[c] = true;
    }
  auto line = [&](const std::vector<std::string>& cells, bool head) {
    std::string text;
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(width[c] - std::min(width[c], cell.size()), ' ');
      const bool right = !head && align_numbers_ && (numeric(cell) || (cell == "-" && numbers[c]));
      text += right ? pad + cell : cell + (c + 1 < width.size() ? pad : "");
      if (c + 1 < width.size()) text += "  ";
    }
    out << text << "\n";
  };
  line(header_, true);
  for (const auto& row : rows_) line(row, false);
}

std::string format_seconds(const double* seconds) {
  if (!seconds) return "-";
  char buf[32];
  const double s = *seconds;
  if (s < 1e-3)
    std::snprintf(buf, sizeof(buf), "%.1f us", s * 1e6);
  else if (s < 1.0)
    std::snprintf(buf, sizeof(buf), "%.2f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.2f s", s);
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buf;
}

std::string format_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", fraction * 100.0);
  return buf;
}

std::string progress_bar(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(std::lround(fraction * width));
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] " +
         std::to_string(static_cast<int>(std::lround(fraction * 100))) + "%";
}

}  // namespace placementctl
