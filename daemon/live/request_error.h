#pragma once
// The error a job's or an admin's request gets when it is well framed but wrong in content: a
// protocol error code and a message naming what is wrong. The connection stays open.

#include <stdexcept>
#include <string>

namespace placementd {

struct RequestError : std::runtime_error {
  /// `code` is one of placement::protocol::error's constants (static storage).
  RequestError(const char* code, const std::string& message)
      : std::runtime_error(message), code(code) {}
  const char* code;
};

}  // namespace placementd
