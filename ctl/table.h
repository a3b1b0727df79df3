#pragma once
// Aligned plain-text tables for placementctl's human output.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace placementctl {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  /// Key/value listings read better with every cell left-aligned.
  void align_numbers(bool on) { align_numbers_ = on; }
  /// Columns padded to their widest cell, two spaces apart; numeric-looking cells right-aligned.
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  bool align_numbers_ = true;
};

/// "1.23 ms", "45.6 s"; "-" for a missing value.
std::string format_seconds(const double* seconds);
inline std::string format_seconds(const std::optional<double>& seconds) {
  return format_seconds(seconds ? &*seconds : nullptr);
}
/// "512 B", "1.5 KiB", "3.2 GiB".
std::string format_bytes(uint64_t bytes);
/// "12.5%".
std::string format_percent(double fraction);
/// "[#####.....] 50%" progress bar of `width` cells.
std::string progress_bar(double fraction, int width = 20);

}  // namespace placementctl
