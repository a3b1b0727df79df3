#pragma once
// The error a request handler throws for a well-framed request whose content is wrong.

#include <stdexcept>
#include <string>

namespace placementd {

// A request that is well framed but wrong in content; answered with an error frame, the
// connection stays open.
struct RequestError : std::runtime_error {
  RequestError(const char* code, const std::string& message) : std::runtime_error(message), code(code) {}
  const char* code;
};

}  // namespace placementd
