#pragma once
// The error capture and the model front ends throw, in a header of its own so that the code which
// reads and runs models need not include the capture API above it.

#include <stdexcept>

namespace placement {

/// A model cannot be captured; what() names the file, op or input at fault and what to do.
class CaptureError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace placement
