#pragma once
// Positions in configuration files, and errors that carry them.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace placementd {

/// A place in a config file, for messages.
struct SourcePos {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  /// "FILE:LINE:COL" (or just FILE when no line is known).
  std::string str() const;
};

struct ConfigError {
  SourcePos where;
  std::string message;
  std::string str() const { return where.str() + ": " + message; }
};

/// An error about the file as a whole (no line), e.g. a missing section or an unreadable file.
ConfigError file_error(const std::string& file, std::string message);

/// Thrown by load_config(); what() lists every error, one per line.
class ConfigInvalid : public std::runtime_error {
 public:
  explicit ConfigInvalid(std::vector<ConfigError> errors);
  const std::vector<ConfigError>& errors() const { return errors_; }

 private:
  std::vector<ConfigError> errors_;
};

/// Orders errors[first..] by line and column (stable), as a person reads the file.
void sort_by_position(std::vector<ConfigError>& errors, size_t first = 0);

}  // namespace placementd
