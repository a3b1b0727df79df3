#include "toml/source_pos.h"

#include <algorithm>
#include <tuple>

namespace placementd {

std::string SourcePos::str() const {
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

ConfigError file_error(const std::string& file, std::string message) {
  ConfigError error;
  error.where.file = file;
  error.message = std::move(message);
  return error;
}

namespace {

std::string join_errors(const std::vector<ConfigError>& errors) {
  std::string text;
  for (const ConfigError& e : errors) text += (text.empty() ? "" : "\n") + e.str();
  return text;
}

}  // namespace

ConfigInvalid::ConfigInvalid(std::vector<ConfigError> errors)
    : std::runtime_error(join_errors(errors)), errors_(std::move(errors)) {}

void sort_by_position(std::vector<ConfigError>& errors, size_t first) {
  std::stable_sort(errors.begin() + static_cast<long>(first), errors.end(),
                   [](const ConfigError& a, const ConfigError& b) {
                     return std::tie(a.where.line, a.where.column) <
                            std::tie(b.where.line, b.where.column);
                   });
}

}  // namespace placementd
